// Note [Product speech] (.dev/product-speech.mjs): lines that speak of tracker issues, work sessions or lettered
// benchmark runs fail, and the product's own words pass. The forbidden lines are built from their words here, so
// that this file, tracked like any other, passes the lint it tests (the lint layer runs it over the tree).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findings, verdict } from '../../.dev/product-speech.mjs';

const say = (...words) => words.join(' ');

const MUST_FAIL = [
  [say('issue', '18\'s', 'GPU check validates it within 3 %'), 'an issue number'],
  [say('advice from', 'issues', '13 and 18'), 'an issue number'],
  [say('(issue', '27, item 2)'), 'an issue number'],
  [say('the summary of', 'issue', '#4'), 'an issue number'],
  [say('// Issue', '29: every snapshot PyTorch writes'), 'an issue number'],
  ['test/webview/snapshot-' + 'issue' + '29.test.mjs', 'an issue number'],
  [say('measured in the', 'tenth', 'session'), 'a work session'],
  [say('left for', 'this', 'session'), 'a work session'],
  [say('as the', 'last', 'session', 'found'), 'a work session'],
  [say('Next', 'session:', 'run the probe'), 'a work session'],
  [say('the', 'nineteenth', 'session\'s', 'runs'), 'a work session'],
  [say('the', 'tenth', 'to', 'twelfth', 'sessions'), 'a work session'],
  [say('the', 'session', 'of', '2026-11-28'), 'a work session'],
  [say('### The', 'session', 'after (2026-11-27)'), 'a work session'],
  [say('in', 'run', 'T', 'the host was quiet'), 'a lettered run'],
  [say('Runs', 'V/X/Y', 'meet both targets'), 'a lettered run'],
  [say('runs', 'T, U and X are both models'), 'a lettered run'],
  [say('(the', 'fifteenth', 'session\'s', 'run', 'J\'s', 'tracker)'), 'a work session'],
];

const MUST_PASS = [
  'the session folder a launch creates',
  say('this', 'session', 'folder holds one capture per rank'),
  'the session\'s folder and its proc files',
  'const folder = new SessionFolder(root);',
  'GPUMEM_SESSION_DIR must be an absolute path',
  'the live session sees a sample by the capture\'s time',
  'the newest live session\'s processes',
  'bench_allocator.py runs 4 rounds of 100 steps',
  'GPU Memory: Run Python File with Memory Tracking',
  say('Runs', 'a', 'command quietly; true when it exits 0.'),
  say('run', 'a', 'workload with GPU memory tracking'),
  say('native against native: a second native process makes a', 'run', 'A/A'),
  'measured on an H200, 2026-11-28: `bash test/gpu/run_all.sh categories-cost`',
  'a pytest session of a thousand tests reads its capture once',
  'the GitHub issues page of PyTorch',
  'the first step of the session is recorded',
];

test('lines that name an issue, a work session or a lettered run fail, saying which', () => {
  for (const [line, what] of MUST_FAIL) {
    const v = verdict(line);
    assert.ok(v, `should fail: ${line}`);
    assert.equal(v.what, what, line);
  }
});

test('the product\'s own words pass: session folders, runs of rounds, Run Python File', () => {
  for (const line of MUST_PASS) assert.equal(verdict(line), null, `should pass: ${line}`);
});

test('findings give the line numbers of a file, line 0 for its name', () => {
  const text = ['fine', say('see', 'issue', '16'), 'fine', say('after', 'run', 'W')].join('\n');
  assert.deepEqual(findings('src/x.ts', text).map((f) => [f.line, f.what]), [[2, 'an issue number'], [4, 'a lettered run']]);
  assert.deepEqual(findings('test/bench/' + 'issue' + '28/README.md', 'fine\n').map((f) => f.line), [0]);
});
