// How big the assistant's answers are on a large capture (not a timed test): every tool called through the MCP server
// (`node dist/cli.js mcp`, the SDK's client over stdio), its answer's size in characters and tokens, and the wall time
// of the call. Note [Tool contract] (src/core/views/assistant/tools.ts) promises answers of a few thousand tokens
// however long the run; this measures it on a 10 M-event capture.
//
//   npm run build
//   node test/bench/assistant/run.mjs [--events N] [--dir DIR] [--tokenizer MODULE]
//
// The captures, written by the real lens allocator on the simulated device, N events each (default 10 M), kept in DIR
// (default /tmp/gpumem-assistant-bench) and reused: test/bench/budget/gen_stream.py's GPT-2-size loop (~4,350 events a
// step, a slow leak, a late peak, an empty_cache and a snapshot; and a tenth of N of it for the comparison), and
// ./gen_many_lines.py's loop over 400 source lines of which 40 leak at every step (what answers could grow with:
// lines at the peak, leak findings, advice items, steps). Tokens: with
// --tokenizer, the module's encode() (e.g. gpt-tokenizer's o200k_base); without, characters / 4 (JSON of numbers and
// short keys runs 3–4 characters a token, so characters / 3 bounds it from above).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const events = Number(opt('events', 10_000_000));
const dir = opt('dir', '/tmp/gpumem-assistant-bench');
const tokenizerPath = opt('tokenizer');
fs.mkdirSync(dir, { recursive: true });

const lib = path.join(root, 'dist/native/libgpumem_allocator.so');
const cli = path.join(root, 'dist/cli.js');
for (const f of [lib, cli, path.join(root, 'dist/native/gpumem_addon.node')]) if (!fs.existsSync(f)) throw new Error(`${f} is missing: run \`npm run build\` first`);

function capture(kind, n) {
  const file = path.join(dir, `${kind}-${n}.gpumem`);
  const script = kind === 'stream' ? path.join(root, 'test/bench/budget/gen_stream.py') : path.join(root, 'test/bench/assistant/gen_many_lines.py');
  if (!fs.existsSync(file)) {
    console.log(`recording ${n} events into ${file} (${path.basename(script)}; a few minutes for 10 M)…`);
    const r = spawnSync('python3', [script, lib, file, String(n)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    if (r.status !== 0) throw new Error(`${path.basename(script)} failed (exit ${r.status})`);
    console.log(`  ${r.stdout.trim()}`);
  }
  return file;
}

const big = capture('stream', events);
const small = capture('stream', Math.round(events / 10));
const many = capture('many', events);

let countTokens = (text) => Math.round(text.length / 4);
let tokenizer = 'characters / 4';
if (tokenizerPath) {
  const mod = await import(pathToFileURL(path.resolve(tokenizerPath)).href);
  const encode = mod.encode ?? mod.default?.encode;
  countTokens = (text) => encode(text).length;
  tokenizer = path.basename(path.dirname(path.resolve(tokenizerPath))) + '/' + path.basename(tokenizerPath);
}

const transport = new StdioClientTransport({ command: process.execPath, args: [cli, 'mcp'], cwd: dir, stderr: 'ignore' });
const client = new Client({ name: 'gpumem-assistant-bench', version: '1' });
await client.connect(transport);

// the summary first: it is the call that opens the file (later calls find it open, Note [Recordings kept open])
const calls = [];
for (const file of [big, many]) {
  calls.push(
    ['gpumem_summary', { path: file }],
    ['gpumem_summary', { path: file }],
    ['gpumem_peak_lines', { path: file }],
    ['gpumem_peak_lines', { path: file, top: 25 }],
    ['gpumem_leaks', { path: file }],
    ['gpumem_categories', { path: file }],
    ['gpumem_categories', { path: file, step: 1000 }],
    ['gpumem_advice', { path: file }],
    ['gpumem_replay', { path: file }],
  );
}
calls.push(['gpumem_compare', { path: small, other_path: big }], ['gpumem_compare', { path: big, other_path: many }]);

const rows = [];
for (const [name, input] of calls) {
  const t0 = performance.now();
  const r = await client.callTool({ name, arguments: input }, undefined, { timeout: 600_000 });
  const ms = performance.now() - t0;
  const text = r.content[0].text;
  if (r.isError) throw new Error(`${name}: ${text}`);
  const shown = Object.fromEntries(Object.entries(input).map(([k, v]) => [k, typeof v === 'string' ? path.basename(v) : v]));
  rows.push({ tool: name, input: JSON.stringify(shown), chars: text.length, tokens: countTokens(text), seconds: Number((ms / 1000).toFixed(2)) });
}
await client.close();

const st = (f) => `${path.basename(f)} (${(fs.statSync(f).size / 2 ** 20).toFixed(0)} MiB)`;
console.log(`\n${new Date().toISOString()}  ${os.hostname()}  ${os.cpus().length} cores  Node ${process.version}  load ${os.loadavg()[0].toFixed(1)}`);
console.log(`captures: ${st(big)}, ${st(small)}, ${st(many)}; tokens: ${tokenizer}\n`);
console.log(`| tool | input | characters | tokens | seconds |`);
console.log(`|---|---|---:|---:|---:|`);
for (const r of rows) console.log(`| ${r.tool} | ${r.input.replace(/\|/g, '\\|')} | ${r.chars} | ${r.tokens} | ${r.seconds} |`);
const worst = rows.reduce((a, b) => (b.tokens > a.tokens ? b : a));
console.log(`\nlargest answer: ${worst.tool} ${worst.input}, ${worst.chars} characters, ${worst.tokens} tokens`);
