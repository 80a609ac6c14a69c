// Shared helpers for the reader's tests: the built addon, fixtures, and the Python reference scripts.
// Note [Tests need the built addon]: the model is native; tests import the TypeScript sources (ts-loader)
// and point them at dist/native/gpumem_addon.node. Build it first (`npm run build`, or
// `npx node-gyp rebuild && cp build/Release/gpumem_addon.node dist/native/`).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const addon = path.join(root, 'dist/native/gpumem_addon.node');
if (!process.env.GPUMEM_ADDON) process.env.GPUMEM_ADDON = addon;
if (!fs.existsSync(process.env.GPUMEM_ADDON)) {
  throw new Error(`the reader's tests need the built addon at ${process.env.GPUMEM_ADDON}: run \`npm run build\` first`);
}

export const { openModel } = await import('../../src/core/base/model/open.ts');

/** Opens a model, runs fn, closes the model (whatever fn does). */
export function withModel(file, fn) {
  const m = openModel(file);
  try {
    return fn(m);
  } finally {
    m.close();
  }
}

/** A string as a literal inside a RegExp. */
export function escape(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Runs one CLI command function, capturing what it writes to stdout and stderr, and its exit code. */
export async function captureStdout(fn) {
  const out = [];
  const err = [];
  const ow = process.stdout.write.bind(process.stdout);
  const ew = process.stderr.write.bind(process.stderr);
  process.stdout.write = (s) => (out.push(String(s)), true);
  process.stderr.write = (s) => (err.push(String(s)), true);
  try {
    const code = await fn();
    return { code, out: out.join(''), err: err.join('') };
  } finally {
    process.stdout.write = ow;
    process.stderr.write = ew;
  }
}

export const fixturesDir = path.join(root, 'test/fixtures/pytorch-snapshots');
export const FIXTURES = ['mlp-expandable', 'mlp-oom', 'mlp-record-stream-pending', 'resnet50-bf16-train-python-stacks'].map(
  (n) => path.join(fixturesDir, `${n}.pickle`),
);
const refDir = path.join(root, 'test/unit/reference');

/** The lens allocator, for tests that write real captures on its simulated device (skip reason when not built). */
export const ALLOCATOR_LIB = path.join(root, 'dist/native/libgpumem_allocator.so');
export const needsAllocator = fs.existsSync(ALLOCATOR_LIB) ? false : `needs ${ALLOCATOR_LIB} (make -C native/allocator)`;

/**
 * A training loop's capture (reference/sim_training.py: the lens allocator on the simulated device, with the
 * bootstrap's step facts, tags and phases); `capture` defaults to a new temp file, `env` adds e.g. RANK.
 */
export function simTraining(steps, flags = [], { capture = path.join(tmpDir(), 'train.gpumem'), env } = {}) {
  const r = spawnSync('python3', [path.join(refDir, 'sim_training.py'), ALLOCATOR_LIB, capture, String(steps), ...flags], {
    encoding: 'utf8',
    env: env ? { ...process.env, ...env } : process.env,
  });
  if (r.status !== 0) throw new Error(`sim_training.py failed:\n${r.stderr}`);
  return { cap: capture, info: JSON.parse(r.stdout) };
}

/** Runs one reference script with python3 and parses its JSON output. */
export function python(script, ...args) {
  const r = spawnSync('python3', [path.join(refDir, script), ...args.map(String)], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`python3 ${script} ${args.join(' ')} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** Runs inline Python (for building test inputs); returns stdout. */
export function pythonInline(code, ...args) {
  const r = spawnSync('python3', ['-c', code, ...args.map(String)], { encoding: 'utf8', maxBuffer: 1 << 28, cwd: refDir });
  if (r.status !== 0) throw new Error(`python3 -c failed:\n${r.stderr}`);
  return r.stdout;
}

/**
 * A capture written record by record with the format's own layouts (native/python/gpumem/_format.py), for the readers
 * of Note [Figures after the events]: `events` [[kind, t_ns, device, addr, size], …] (kind 'seg' | 'alloc' | 'free'),
 * `stats` [[t_ns, device, allocated, reserved, peak_allocated, peak_reserved], …] and MARK_EVENTS_OFF at `off`
 * (null: none), written in time order, the marker after what shares its time; the header's clock anchors 0.
 */
export function eventsOffCapture(file, { events = [], off = null, stats = [] }) {
  pythonInline(
    `import json, sys
sys.path.insert(0, sys.argv[3])
from gpumem import _format as F
spec = json.loads(sys.argv[2])
head = json.dumps({"events": bool(spec["events"]), "mono_anchor_ns": 0, "wall_anchor_ns": 0}).encode()
out = F.FileHeader.pack(F.kMagic, F.kMajor, F.kMinor, len(head)) + head
name = b"recordSteps 5"
out += F.record(F.REC_STRING, F.StringRec.pack(1, len(name)) + name)
rows = [(e[1], 0, e) for e in spec["events"]] + [(s[0], 1, s) for s in spec["stats"]]
if spec["off"] is not None:
    rows.append((spec["off"], 2, None))
last = 0
for t, what, r in sorted(rows, key=lambda x: (x[0], x[1])):
    last = max(last, t)
    if what == 0:
        kind, t, dev, addr, size = r
        if kind == "seg":
            out += F.record(F.REC_SEGMENT_ALLOC, F.SegmentEvent.pack(t, addr, size, 0, 0, 0, 0, 0), dev)
        else:
            rt = F.REC_ALLOC if kind == "alloc" else F.REC_FREE_REQUESTED
            out += F.record(rt, F.BlockEvent.pack(t, addr, size, size, 0, 0, 0), dev)
    elif what == 1:
        t, dev, a, res, pa, pr = r
        out += F.record(F.REC_STATS, F.StatsRec.pack(t, a, res, a, a, pa, pr, 0, 0), dev)
    else:
        out += F.record(F.REC_MARKER, F.MarkerRec.pack(t, 1, F.MARK_EVENTS_OFF), 0)
out += F.record(F.REC_END, F.EndRec.pack(last + 1000, 0, 0, 0, 0))
open(sys.argv[1], "wb").write(out)
`,
    file,
    JSON.stringify({ events, off, stats }),
    path.join(root, 'native/python'),
  );
  return file;
}

/**
 * The events of the Note [Figures after the events] tests, `ms(x)` giving x ms as ns: device 0 a 64 MiB segment,
 * A 10 MiB, B 20 MiB (the events' peak, 30 MiB at 20 ms), B freed, C 5 MiB at 120 ms: 15 MiB when the events stop at
 * 150 ms; device 1 8 MiB of a 32 MiB segment.
 */
export function eventsBeforeOff(ms) {
  const MiB = 2 ** 20;
  return [
    ['seg', ms(0), 0, 2 ** 30, 64 * MiB],
    ['seg', ms(5), 1, 2 ** 31, 32 * MiB],
    ['alloc', ms(6), 1, 2 ** 31, 8 * MiB],
    ['alloc', ms(10), 0, 2 ** 30, 10 * MiB],
    ['alloc', ms(20), 0, 2 ** 30 + 10 * MiB, 20 * MiB],
    ['free', ms(30), 0, 2 ** 30 + 10 * MiB, 20 * MiB],
    ['alloc', ms(120), 0, 2 ** 30 + 30 * MiB, 5 * MiB],
  ];
}

export function tmpDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-reader-'));
}

/** A capture and its twin pickle from make_capture.py. */
export function makeCapture(dir, name, ...flags) {
  const cap = path.join(dir, `${name}.gpumem`);
  const twin = path.join(dir, `${name}.pickle`);
  const r = spawnSync('python3', [path.join(refDir, 'make_capture.py'), cap, twin, ...flags.map(String)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`make_capture.py failed:\n${r.stderr}`);
  return { cap, twin };
}

/**
 * The records of a capture after the 16-byte header and its JSON (FORMAT.md §2): [{offset (= at), type, device, end,
 * payload}], a torn last record left out.
 */
export function captureRecords(buf) {
  const out = [];
  let pos = 16 + buf.readUInt32LE(12);
  while (pos + 8 <= buf.length) {
    const end = pos + 8 + buf.readUInt32LE(pos + 4);
    if (end > buf.length) break;
    out.push({ offset: pos, at: pos, type: buf[pos], device: buf[pos + 1], end, payload: buf.subarray(pos + 8, end) });
    pos = end;
  }
  return out;
}

/** A device sample (REC_DEVICE_SAMPLE 40) or the allocator's stats (REC_STATS 43): the records poll does not count (Note [Poll counts records]). */
export const isPeriodicRecord = (r) => r.type === 40 || r.type === 43;
