// A capture cut short by its writer (FORMAT.md minor 2, Note [Writer failure] in native/allocator/src/writer.cc):
// written by the real lens allocator under a file size limit, read by the real reader, and followed by a
// LiveRun as the live panel does. The reader exposes the end record's reason and message; the live run
// reports the failure once and lists it under the panel's problems.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { openModel, root, tmpDir } from './reader-support.mjs';

const { LiveRun } = await import('../../src/core/views/live/index.ts');

const LIB = path.join(root, 'dist/native/libgpumem_allocator.so');
const skip = fs.existsSync(LIB) ? false : `needs ${LIB} (make -C native/allocator)`;
const LIMIT = 48 * 1024;

function failedCapture() {
  const dir = tmpDir();
  const cap = path.join(dir, 'capture-4242.gpumem');
  const r = spawnSync('python3', [path.join(root, 'test/unit/reference/writer_failure_workload.py'), LIB, cap, String(LIMIT)], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /workload continued/);
  const lines = r.stderr.split('\n').filter((l) => l.startsWith('gpumem:'));
  assert.equal(lines.length, 1, r.stderr);
  return { dir, cap, line: lines[0] };
}

test('a capture stopped by its writer ends with reason 1 and the writer\'s message; a clean one with reason 0', { skip }, () => {
  const { cap, line } = failedCapture();
  const m = openModel(cap);
  try {
    assert.deepEqual(m.problems(), [], 'cut at a whole record: nothing damaged');
    assert.equal(m.ended(), true);
    const end = m.endRecord();
    assert.equal(end.reason, 1);
    assert.equal(end.exitCode, -1);
    assert.equal(`gpumem: ${end.message}`, line);
    assert.match(end.message, new RegExp(`^capture stopped at ${cap.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: File too large \\(\\d+ bytes written\\)`));
    assert.ok(fs.statSync(cap).size <= LIMIT);
    assert.ok(m.spans(0, -Infinity, Infinity, 100000).length > 50, 'the records before the cut are all there');
  } finally {
    m.close();
  }
  // A capture from a clean shutdown: reason 0 with the exit code, no message.
  const clean = path.join(tmpDir(), 'clean.gpumem');
  const r = spawnSync('python3', ['-c', `
import sys; sys.path.insert(0, sys.argv[1]); import common
lib = common.load(sys.argv[2]); common.configure(lib, capture_path=sys.argv[3]); lib.gpumem_shutdown(3)`,
    path.join(root, 'test/native/recorder'), LIB, clean], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const c = openModel(clean);
  try {
    assert.deepEqual(c.endRecord(), { reason: 0, exitCode: 3, message: '' });
  } finally {
    c.close();
  }
});

test('the live run reports a writer failure once and keeps it among the panel\'s problems', { skip }, () => {
  const { dir, line } = failedCapture();
  const run = new LiveRun(dir, (p) => openModel(p));
  try {
    const first = run.refresh();
    assert.equal(first.newWriterFailures.length, 1);
    assert.equal(first.newWriterFailures[0].process.entry.pid, 4242);
    assert.equal(`gpumem: ${first.newWriterFailures[0].message}`, line);
    assert.equal(run.refresh().newWriterFailures.length, 0, 'told once');
    assert.deepEqual(run.view(10).problems, [`pid 4242: ${line.slice('gpumem: '.length)}`]);
  } finally {
    run.close();
  }
});
