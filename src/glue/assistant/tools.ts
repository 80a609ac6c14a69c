// The assistant's tools (src/core/views/assistant) as VS Code language-model tools: Copilot's agent mode, or any chat
// participant, calls them through vscode.lm. package.json's `contributes.languageModelTools` declares the same table
// (written by `npm run gen-tools`); this registers what answers each one.
//
// Note [Tool confirmation]: tools that act on the running workload (empty the cache, write a snapshot) return
// confirmationMessages from prepareInvocation, so VS Code asks the user before each call (in a chat, the Continue /
// Cancel buttons; called outside one, a dialog); the read-only tools ask nothing. A failed call throws an Error whose
// message is the ToolError's sentence: VS Code hands it to the model as the tool's result, and the model can try again.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { AssistantTools, answerText, TOOLS, type LiveLookup, type LiveTarget, type ToolDeclaration } from '../../core/views/assistant';
import type { LiveRuns, TrackedRun } from '../runs/liveRuns';

/** The run the tools answer about without a path: the focused one, or the only one running when the focused has ended. */
export function followedRun(runs: LiveRuns): TrackedRun | undefined {
  const focused = runs.focused;
  if (focused?.run.isLive()) return focused;
  const running = runs.running();
  return running.length === 1 ? running[0] : focused;
}

function liveLookup(runs: LiveRuns): LiveLookup {
  const tracked = followedRun(runs);
  if (!tracked) {
    return {
      none:
        'no workload is followed in VS Code: run one with "GPU Memory: Run Python File with Memory Tracking", or pass path, ' +
        'a capture (.gpumem, e.g. under .gpumem/ in the workspace) or a PyTorch snapshot (.pickle)',
    };
  }
  const run = tracked.run;
  const controllable = new Set(run.controllable());
  const target: LiveTarget = {
    name: `${tracked.label} (${run.name})`,
    running: run.isLive(),
    processes: run.processes.map((p) => ({
      pid: p.entry.pid,
      ...(p.entry.rank !== undefined ? { rank: p.entry.rank } : {}),
      capture: p.entry.capture,
      ...(controllable.has(p) && p.entry.socket ? { socket: p.entry.socket } : {}),
      ...(p.model ? { model: p.model } : {}),
    })),
  };
  return target;
}

/** "summary of train.gpumem" / "summary of the running workload": what the chat shows while a tool runs. */
function invocationMessage(t: ToolDeclaration, input: Record<string, unknown>): string {
  const files = [input.path, input.other_path].filter((p): p is string => typeof p === 'string').map((p) => path.basename(p));
  const subject = files.length ? files.join(' and ') : 'the running workload';
  return `${t.title} (${subject})`;
}

export function registerAssistantTools(runs: LiveRuns): vscode.Disposable {
  const tools = new AssistantTools({
    // relative paths start at the first workspace folder (a model names files as the user sees them in the explorer)
    baseDir: () => vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? process.cwd(),
    live: () => liveLookup(runs),
  });
  const registrations = TOOLS.map((t) =>
    vscode.lm.registerTool<Record<string, unknown>>(t.name, {
      prepareInvocation(options) {
        const input = (options.input ?? {}) as Record<string, unknown>;
        const prepared: vscode.PreparedToolInvocation = { invocationMessage: invocationMessage(t, input) };
        if (t.confirm) {
          // Note [Tool confirmation]: name the run the action goes to, so the user confirms knowing which
          const found = liveLookup(runs);
          const which = 'none' in found ? 'No workload is followed now.' : `Run: ${found.name}, ${found.processes.length} process${found.processes.length === 1 ? '' : 'es'}.`;
          prepared.confirmationMessages = { title: t.confirm.title, message: new vscode.MarkdownString(`${t.confirm.message}\n\n${which}`) };
        }
        return prepared;
      },
      async invoke(options) {
        try {
          const answer = await tools.call(t.name, options.input);
          return new vscode.LanguageModelToolResult([new vscode.LanguageModelTextPart(answerText(answer))]);
        } catch (e) {
          throw new Error(e instanceof Error ? e.message : String(e));
        }
      },
    }),
  );
  return vscode.Disposable.from(...registrations, { dispose: () => tools.dispose() });
}
