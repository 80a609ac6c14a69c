// The assistant's tool table (src/core/views/assistant/tools.ts) and the rules every answer follows: package.json
// declares exactly the table's tools, inputs are checked against each tool's schema before anything is read, and
// every size comes in bytes and in binary units (Note [Sizes twice]). The answers themselves are checked against the
// reader through the MCP server (mcp.test.mjs) and in VS Code (test/e2e/assistant.test.mjs).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { outputs } from '../../.dev/gen-tools.mjs';
import { TOOLS } from '../../src/core/views/assistant/tools.ts';
import { checkInput } from '../../src/core/views/assistant/input.ts';
import { withSizes } from '../../src/core/views/assistant/sizes.ts';
import { formatBytes } from '../../src/core/base/units/bytes.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const tool = (name) => TOOLS.find((t) => t.name === name);

test("package.json's languageModelTools are the table's (npm run gen-tools rewrites them)", async () => {
  for (const [file, [now, want]] of Object.entries(await outputs())) {
    assert.ok(now === want, `${file} is stale: run \`npm run gen-tools\` and commit the result`);
  }
  const declared = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).contributes.languageModelTools;
  assert.deepEqual(declared.map((t) => t.name), TOOLS.map((t) => t.name));
  for (const d of declared) {
    const t = tool(d.name);
    assert.deepEqual(d.inputSchema, t.inputSchema);
    assert.equal(d.modelDescription, t.modelDescription);
  }
});

test('every tool is named as VS Code and MCP accept, says what it answers, and only the actions ask to confirm', () => {
  const names = new Set();
  for (const t of TOOLS) {
    assert.match(t.name, /^gpumem_[a-z_]+$/);
    assert.ok(!names.has(t.name), `${t.name} twice`);
    names.add(t.name);
    assert.equal(t.inputSchema.type, 'object');
    assert.equal(t.inputSchema.additionalProperties, false, t.name);
    assert.ok(t.modelDescription.length > 200 && t.modelDescription.length < 1200, `${t.name}: ${t.modelDescription.length} characters`);
    assert.equal(Boolean(t.confirm), t.changesRun, t.name);
    // a tool over a recording takes its path; the actions act on the running workload and take nothing
    assert.equal('path' in (t.inputSchema.properties ?? {}), !t.changesRun, t.name);
  }
  assert.deepEqual(TOOLS.filter((t) => t.changesRun).map((t) => t.name), ['gpumem_empty_cache', 'gpumem_capture_snapshot']);
});

test('inputs are checked against the schema, each wrong one named in a sentence', () => {
  const replay = tool('gpumem_replay');
  assert.deepEqual(checkInput(replay, { path: 'a.gpumem', device: 1, policy: 'lens', capacity: '80GiB' }), { path: 'a.gpumem', device: 1, policy: 'lens', capacity: '80GiB' });
  assert.deepEqual(checkInput(replay, undefined), {});
  assert.deepEqual(checkInput(replay, { path: 'a.gpumem', device: null }), { path: 'a.gpumem' });
  const wrong = [
    [{ device: -1 }, 'device must be at least 0 (got -1)'],
    [{ device: 1.5 }, 'device must be a whole number, not number 1.5'],
    [{ path: 3 }, 'path must be a string, not number 3'],
    [{ policy: 'fast' }, 'policy must be one of all, pytorch, pytorch-expandable, lens, lens-no-trim, not "fast"'],
    [{ pth: 'a' }, 'unknown input "pth"; this tool takes path, device, policy, capacity'],
    [[1], 'input must be an object, not an array'],
  ];
  for (const [input, message] of wrong) assert.throws(() => checkInput(replay, input), { name: 'ToolError', message });
  const advice = tool('gpumem_advice');
  assert.throws(() => checkInput(advice, { batches: [8] }), { message: 'batches needs at least 2 items (got 1)' });
  assert.throws(() => checkInput(advice, { batches: [8, 0] }), { message: 'batches[1] must be at least 1 (got 0)' });
  assert.throws(() => checkInput(tool('gpumem_compare'), { path: 'a' }), { message: 'other_path is required' });
  assert.throws(() => checkInput(tool('gpumem_empty_cache'), { path: 'a' }), { message: 'unknown input "path"; this tool takes no input' });
});

test('every size field gets its binary-unit text beside it, at any depth, and nothing else changes', () => {
  const GiB = 1024 ** 3;
  const got = withSizes({
    peak_allocated_bytes: 1.5 * GiB,
    step: 3,
    lines: [{ file: 'a.py', line: 2, bytes: 20480, by_category: { activation_bytes: 512 } }],
    change: { peak_reserved_bytes: -18 * 1024 ** 2 },
    name_bytes: 'not a number',
  });
  assert.deepEqual(got, {
    peak_allocated_bytes: 1.5 * GiB,
    peak_allocated: '1.50 GiB',
    step: 3,
    lines: [{ file: 'a.py', line: 2, bytes: 20480, size: '20.0 KiB', by_category: { activation_bytes: 512, activation: '512 B' } }],
    change: { peak_reserved_bytes: -18 * 1024 ** 2, peak_reserved: formatBytes(-18 * 1024 ** 2) },
    name_bytes: 'not a number',
  });
  assert.equal(got.change.peak_reserved, '-18.0 MiB');
  // the text never replaces a field the answer already has
  assert.deepEqual(withSizes({ total_bytes: 1024, total: 'kept' }), { total_bytes: 1024, total: 'kept' });
});
