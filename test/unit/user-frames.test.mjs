// Note [User frames] (native/format/README.md): TypeScript has no user-frame rule of its own; the reader
// marks each frame (`user`) by its one rule. These tests put every case of the one table,
// native/format/user_frames_cases.json, through the real reader (a capture whose header names the table's
// internal dir as bootstrap_dir) and check what TypeScript sees, then userFrame's choice over such frames.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'node:test';
import { root, withModel } from './reader-support.mjs';

const table = JSON.parse(fs.readFileSync(path.join(root, 'native/format/user_frames_cases.json'), 'utf8'));

/** A capture (gpumem_format.h) with one single-frame stack per path, ids 1..n, then one stack of all `extra`. */
function writeCapture(file, paths, extra, bootstrapDir) {
  const parts = [];
  const rec = (type, payload) => {
    const h = Buffer.alloc(8);
    h.writeUInt8(type, 0);
    h.writeUInt32LE(payload.length, 4);
    parts.push(h, payload);
  };
  const u32 = (...v) => {
    const b = Buffer.alloc(4 * v.length);
    v.forEach((x, i) => b.writeUInt32LE(x, 4 * i));
    return b;
  };
  const header = Buffer.from(JSON.stringify({ pid: 1, bootstrap_dir: bootstrapDir, mono_anchor_ns: 1e9, wall_anchor_ns: 1.7e18 }));
  const fh = Buffer.alloc(16);
  fh.write('GPUMEM\r\n', 0, 'latin1');
  fh.writeUInt16LE(1, 8);
  fh.writeUInt16LE(1, 10);
  fh.writeUInt32LE(header.length, 12);
  parts.push(fh, header);
  const strings = new Map();
  const sid = (s) => {
    if (!strings.has(s)) {
      const id = strings.size + 1;
      strings.set(s, id);
      const b = Buffer.from(s, 'utf8');
      rec(1, Buffer.concat([u32(id, b.length), b])); // REC_STRING
    }
    return strings.get(s);
  };
  const all = [...paths, ...extra];
  all.forEach((p, i) => rec(2, u32(i + 1, sid(p), sid('f'), i + 1))); // REC_FRAME id, file, name, line
  paths.forEach((_, i) => rec(3, u32(i + 1, 0, 1, i + 1))); // REC_STACK id, backward, n, frames
  rec(3, u32(paths.length + 1, 0, extra.length, ...extra.map((_, k) => paths.length + k + 1)));
  fs.writeFileSync(file, Buffer.concat(parts));
}

test('every case of the user-frame table reaches TypeScript as the reader classifies it', () => {
  assert.ok(table.cases.length >= 20);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-user-frames-'));
  const file = path.join(dir, 'cases.gpumem');
  const paths = table.cases.map((c) => c.path);
  writeCapture(file, paths, [], table.internalDirs[0]);
  withModel(file, (m) => {
    table.cases.forEach((c, i) => {
      const frames = m.stack(i + 1)?.frames ?? [];
      assert.equal(frames.length, 1, `stack ${i + 1} (${c.path}) has its frame`);
      assert.equal(frames[0].file, c.path);
      assert.equal(frames[0].user, c.user, `${JSON.stringify(c.path)}: ${c.why}`);
    });
  });
  fs.rmSync(dir, { recursive: true, force: true });
});

test("userFrame picks the innermost frame the reader marks as the user's (<string> and the tool's own are not)", async () => {
  const { userFrame } = await import('../../src/core/base/model/frames.ts');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-user-frames-'));
  const file = path.join(dir, 'stack.gpumem');
  const inner = [
    '/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py',
    '<string>',
    `${table.internalDirs[0]}/gpumem/_markers.py`,
    '/usr/lib/python3.12/contextlib.py',
    '/home/user/proj/model.py',
    '/home/user/proj/train.py',
  ];
  writeCapture(file, [], inner, table.internalDirs[0]);
  withModel(file, (m) => {
    const frames = m.stack(1)?.frames ?? [];
    assert.deepEqual(frames.map((f) => f.user), [false, false, false, false, true, true]);
    assert.equal(userFrame(frames)?.file, '/home/user/proj/model.py');
    assert.equal(userFrame(frames.slice(0, 4))?.file, inner[0], 'no user frame: the innermost one');
  });
  fs.rmSync(dir, { recursive: true, force: true });
});
