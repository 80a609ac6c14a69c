// `gpumem mcp [--out DIR]`: the assistant's tools (src/core/views/assistant) as a Model Context Protocol server over
// stdio, through the official SDK. One process serves one client: it reads JSON-RPC on stdin, answers on stdout, and
// ends when stdin closes. Nothing else may write to stdout (it is the protocol's); notes go to stderr.
//
// Note [MCP errors]: a wrong input, a missing or damaged file, or no running workload is the tool's error result
// (isError: true, with the sentence that says what to pass instead), never a protocol error or an exit: the model reads
// it and tries again, and the server keeps serving the next call.
import path from 'node:path';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js';
import { AssistantTools, answerText, liveOfSessionRoot, TOOLS, type ToolDeclaration } from '../../core/views/assistant';
import { parseArgs, str, UsageError } from './args';
import { VERSION } from './version';

/** What the client is told about the server as a whole (MCP's `instructions`), for its model. */
const INSTRUCTIONS =
  'GPU Memory Lens reads recordings of PyTorch GPU memory: captures (.gpumem) written by `gpumem run` and PyTorch ' +
  'memory snapshots (.pickle). Start with gpumem_summary on the file (or with no path, on the workload running now), ' +
  'then ask the tool for the question: gpumem_peak_lines (which line), gpumem_leaks (growth per step and its keeper), ' +
  'gpumem_categories (what the memory is at a moment), gpumem_advice (what to change, with predicted peaks), ' +
  'gpumem_replay (another allocator policy), gpumem_compare (two recordings). Quote sizes in binary units as given.';

export function mcpTool(t: ToolDeclaration): Tool {
  return {
    name: t.name,
    title: t.title,
    description: t.modelDescription,
    inputSchema: t.inputSchema as Tool['inputSchema'],
    annotations: {
      title: t.title,
      readOnlyHint: !t.changesRun,
      destructiveHint: false,
      idempotentHint: !t.changesRun,
      openWorldHint: false,
    },
  };
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseArgs('mcp', argv, { out: { value: true } });
  if (parsed.positionals.length) throw new UsageError(`unexpected argument "${parsed.positionals[0]}"`, 'mcp');
  const root = path.resolve(str(parsed, 'out') ?? '.gpumem');
  const tools = new AssistantTools({ baseDir: () => process.cwd(), live: () => liveOfSessionRoot(root) });
  const server = new Server({ name: 'gpumem', title: 'GPU Memory Lens', version: VERSION }, { capabilities: { tools: {} }, instructions: INSTRUCTIONS });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS.map(mcpTool) }));
  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    try {
      const answer = await tools.call(request.params.name, request.params.arguments ?? {});
      return { content: [{ type: 'text', text: answerText(answer) }] };
    } catch (e) {
      // Note [MCP errors]: every failure is the call's result; ToolError's message is already a sentence for the model
      return { content: [{ type: 'text', text: e instanceof Error ? e.message : String(e) }], isError: true };
    }
  });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
    process.stdin.once('end', () => void server.close());
    process.stdin.once('close', () => void server.close());
  });
  server.onerror = (e) => process.stderr.write(`gpumem mcp: ${e.message}\n`);
  await server.connect(transport);
  process.stderr.write(`gpumem mcp: serving ${TOOLS.length} tools on stdio (session folders under ${root})\n`);
  await closed;
  tools.dispose();
  return 0;
}
