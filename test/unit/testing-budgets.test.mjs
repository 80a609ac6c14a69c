// The Testing view's pure half (src/core/views/testing): the budgeted tests a file marks, and the verdicts and
// messages from the pytest plugin's rows of real runs (test/fixtures/pytest-budgets/make.py: `pytest -p gpumem`
// on the stand-in torch, the real lens allocator on the simulated device; its temporary folder written as ROOT):
// the budget tests, the order tests (a test leaves 32 MiB live for the tests after it), and rows the plugin wrote
// before a test's peak became its own (no allocated_before), which still read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { findBudgetTests, isRunOf, parseRows, verdictLine, verdictMarkdown, verdicts, fmtBytes } from '../../src/core/views/testing/index.ts';

const DIR = new URL('../fixtures/pytest-budgets/', import.meta.url);
const rowsOf = (name) => parseRows(fs.readFileSync(new URL(name, DIR), 'utf8'));
const rows = rowsOf('rows.jsonl');
const source = fs.readFileSync(new URL('test_budgets.py.txt', DIR), 'utf8');
const lineOf = (mark, text = source) => text.split('\n').findIndex((l) => l.includes(mark)) + 1;
const byName = (rs) => Object.fromEntries(verdicts(rs).map((x) => [x.nodeid.split('::')[1], x]));

test('the budgeted tests of the real test file: the four with the marker, at their def lines', () => {
  assert.deepEqual(findBudgetTests(source), [
    { name: 'test_fits', line: lineOf('def test_fits') },
    { name: 'test_first_matmul', line: lineOf('def test_first_matmul') },
    { name: 'test_over_budget', line: lineOf('def test_over_budget') },
    { name: 'test_leaks', line: lineOf('def test_leaks') },
  ]);
});

test('classes: a marked class budgets its tests; a marked method in a class is Class::method; nested defs are not tests', () => {
  const text = [
    'import pytest',
    '@pytest.mark.gpu_memory(peak="1GiB")',
    'class TestAll:',
    '    def test_a(self):',
    '        def test_inner(): pass',
    '    def helper(self): pass',
    'class TestSome:',
    '    @pytest.mark.gpu_memory(leak="0")',
    '    @pytest.mark.slow',
    '    async def test_b(self): pass',
    '    def test_c(self): pass',
    'def test_free(): pass',
  ].join('\n');
  assert.deepEqual(findBudgetTests(text), [
    { name: 'TestAll::test_a', line: 4 },
    { name: 'TestSome::test_b', line: 10 },
  ]);
});

test('verdicts from the real rows: pytest outcome, figures, lines and capture per test', () => {
  const v = byName(rows);
  assert.deepEqual(Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x.outcome])), {
    test_fits: 'passed', test_first_matmul: 'passed', test_over_budget: 'failed', test_leaks: 'failed', test_no_budget: 'passed',
  });
  const over = v.test_over_budget;
  assert.equal(over.peakAllocated, 4 << 20);
  assert.deepEqual(over.lines, [
    { file: 'ROOT/test_budgets.py', line: lineOf('BIG-A'), fn: 'test_over_budget', bytes: 3 << 20 },
    { file: 'ROOT/test_budgets.py', line: lineOf('BIG-B'), fn: 'test_over_budget', bytes: 1 << 20 },
  ]);
  assert.match(over.capture, /^ROOT\/\.gpumem\/[^/]+\/capture-\d+\.gpumem$/);
  assert.ok(over.message.startsWith('gpu_memory: peak allocated 4.00 MiB exceeds the budget peak=1.00 MiB by 3.00 MiB\n'));
  assert.equal(v.test_leaks.leftAllocated, 4096);
  assert.equal(v.test_fits.peakAllocated, 300032 + 200192);
  assert.equal(v.test_fits.message, '');
  // test_leaks leaves 4 KiB for test_no_budget: live at its start, not in its own peak
  assert.deepEqual([v.test_no_budget.peakAllocated, v.test_no_budget.allocatedBefore], [5 << 20, 4096]);
  assert.deepEqual([v.test_over_budget.allocatedBefore, v.test_fits.allocatedBefore], [0, 0]);
});

test('a test after one that left 32 MiB live: its own peak, its own lines, and what was live at its start', () => {
  const text = fs.readFileSync(new URL('test_order.py.txt', DIR), 'utf8');
  const v = byName(rowsOf('order-rows.jsonl'));
  assert.deepEqual(Object.fromEntries(Object.entries(v).map(([k, x]) => [k, [x.outcome, x.peakAllocated, x.allocatedBefore]])), {
    test_leaves_32mib: ['passed', 32 << 20, 0],
    test_small: ['passed', 4096, 32 << 20],
    test_over: ['failed', 2 << 20, 32 << 20],
    test_rebuilds: ['passed', 16 << 20, 32 << 20],
  });
  assert.deepEqual(v.test_small.lines, [{ file: 'ROOT/test_order.py', line: lineOf('SMALL', text), fn: 'test_small', bytes: 4096 }]);
  const md = verdictMarkdown(v.test_over, (f) => f.replace('ROOT/', ''));
  const [fence, head, lines] = md.split('\n\n');
  assert.ok(fence.includes("\nlive at the test's start: 32.0 MiB, not counted (what fixtures and earlier tests hold)\n"), fence);
  assert.equal(head, "Lines at the test's peak, its own allocations (2.00 MiB above the 32.0 MiB live at its start):");
  assert.ok(lines.startsWith(`- 2\\.00 MiB [test\\_order\\.py:${lineOf('OVER', text)}](`), lines);
  assert.equal(verdictLine(v.test_small), 'test_order.py::test_small: peak allocated 4.00 KiB above the 32.0 MiB live at its start, left allocated 0 B');
  assert.equal(verdictLine(v.test_rebuilds), 'test_order.py::test_rebuilds: peak allocated 16.0 MiB above the 32.0 MiB live at its start, left allocated -32.0 MiB');
});

test('rows written before a test\'s peak became its own still read, as what they said then', () => {
  const old = rowsOf('rows-without-allocated-before.jsonl');
  const v = byName(old);
  assert.deepEqual(Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x.outcome])), Object.fromEntries(Object.entries(byName(rows)).map(([k, x]) => [k, x.outcome])));
  // PyTorch's peak then: test_no_budget's counted the 4 KiB test_leaks left
  assert.deepEqual([v.test_no_budget.peakAllocated, v.test_no_budget.allocatedBefore], [4096 + (5 << 20), undefined]);
  assert.equal(verdictMarkdown(v.test_over_budget).split('\n\n')[1], 'Lines at the peak (4.00 MiB allocated):');
  assert.equal(verdictLine(v.test_no_budget), 'test_budgets.py::test_no_budget: peak allocated 5.00 MiB, left allocated 0 B');
  assert.equal(verdictLine(verdicts(old.slice(0, 4))[1]), undefined, 'a test with no figures (it crashed) has no line');
});

test('a test the process died in is "crashed"; a torn last line is skipped', () => {
  const text = fs.readFileSync(new URL('rows.jsonl', DIR), 'utf8').split('\n').slice(0, 4).join('\n') + '\n{"test": "test_budgets.py::te';
  const v = verdicts(parseRows(text));
  assert.deepEqual(v.map((x) => [x.nodeid, x.outcome]), [['test_budgets.py::test_fits', 'passed'], ['test_budgets.py::test_first_matmul', 'crashed']]);
  assert.match(verdictMarkdown(v[1]), /The test process died during this test/);
  assert.match(verdictMarkdown(v[1]), /\[Open capture\]\(command:gpuMemoryLens\.openTestCapture\?/);
});

test('the message: pytest text, file:line links to the lines at the peak, and the Open capture link', () => {
  const over = verdicts(rows).find((x) => x.nodeid.endsWith('::test_over_budget'));
  const md = verdictMarkdown(over, (f) => f.replace('ROOT/', ''));
  const [fence, head, lines, open] = md.split('\n\n');
  assert.equal(fence, '```\n' + over.message + '\n```');
  assert.equal(head, "Lines at the test's peak, its own allocations (4.00 MiB above the 0 B live at its start):");
  const link = (n) => `command:gpuMemoryLens.openFrame?${encodeURIComponent(JSON.stringify(['ROOT/test_budgets.py', n]))}`;
  assert.ok(lines.includes(`- 3\\.00 MiB [test\\_budgets\\.py:${lineOf('BIG-A')}](${link(lineOf('BIG-A'))}) in test\\_over\\_budget`), lines);
  assert.ok(lines.includes(`- 1\\.00 MiB [test\\_budgets\\.py:${lineOf('BIG-B')}](${link(lineOf('BIG-B'))})`), lines);
  assert.equal(open, `[Open capture](command:gpuMemoryLens.openTestCapture?${encodeURIComponent(JSON.stringify([over.capture]))})`);
});

test('a row is a run of a test when its file is a path suffix and the name matches, parameters aside', () => {
  assert.ok(isRunOf('test_budgets.py::test_fits', 'test_budgets.py', 'test_fits'));
  assert.ok(isRunOf('test_budgets.py::test_fits[2]', 'sub/test_budgets.py', 'test_fits'));
  assert.ok(isRunOf('t/test_a.py::TestA::test_x', 'pkg/t/test_a.py', 'TestA::test_x'));
  assert.ok(!isRunOf('test_budgets.py::test_fits', 'other_budgets.py', 'test_fits'));
  assert.ok(!isRunOf('test_budgets.py::test_fits_more', 'test_budgets.py', 'test_fits'));
});

test('sizes read as the plugin writes them', () => {
  assert.deepEqual([0, 512, 4096, 500224, 4 << 20, 5246976].map(fmtBytes), ['0 B', '512 B', '4.00 KiB', '488 KiB', '4.00 MiB', '5.00 MiB']);
});
