#!/usr/bin/env node
// The replay validation, on the results of run_all.sh's `varlen` stage (no GPU needed here):
//
//   node test/gpu/replay_validate.mjs OUT/varlen [--tolerance 0.03]
//
// OUT/varlen holds native.txt (GPT-2 with varying lengths under PyTorch's default allocator),
// native-expandable.txt (expandable_segments:True) and session/ (the same script under `gpumem run`,
// the lens allocator). The lens capture's allocation stream is replayed on the simulated device under
// `pytorch` and `pytorch-expandable` (native/addon/src/policy_replay.cpp); each predicted peak reserved
// must be within the tolerance of the one PyTorch measured. Also prints the lens policies' replays and
// the capture's own peak, and the 16 GiB replay that once failed under lens (Note [Expandable
// reservation]). Prints PASS/FAIL lines and "N passed, N failed"; writes replay_validate.json beside.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const dir = process.argv[2];
const tolArg = process.argv.indexOf('--tolerance');
const tolerance = tolArg > 0 ? Number(process.argv[tolArg + 1]) : 0.03;
if (!dir || !fs.existsSync(dir)) {
  console.error('usage: node test/gpu/replay_validate.mjs OUT/varlen [--tolerance 0.03]');
  process.exit(2);
}
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const addon = createRequire(import.meta.url)(process.env.GPUMEM_ADDON ?? path.join(root, 'dist/native/gpumem_addon.node'));

const result = (file) => {
  const line = fs.readFileSync(path.join(dir, file), 'utf8').split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) throw new Error(`${file} has no RESULT line`);
  return JSON.parse(line.slice(7));
};
const findCapture = (d) => {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) {
      const c = findCapture(p);
      if (c) return c;
    } else if (/^capture-.*\.gpumem$/.test(e.name)) return p;
  }
  return null;
};
const capture = findCapture(path.join(dir, 'session'));
if (!capture) throw new Error(`no capture-*.gpumem under ${dir}/session`);
const h = new addon.ModelHandle(capture);
const device = JSON.parse(h.devices())[0];
const GiB = 2 ** 30;
const fmt = (b) => `${(b / GiB).toFixed(3)} GiB`;

const out = { capture, checks: {}, replays: {} };
let passed = 0;
let failed = 0;
for (const [policy, file] of [
  ['pytorch', 'native.txt'],
  ['pytorch-expandable', 'native-expandable.txt'],
]) {
  const measured = result(file).peak_reserved;
  const r = JSON.parse(h.replay(device, policy));
  const err = (r.peakReservedBytes - measured) / measured;
  const ok = Math.abs(err) <= tolerance && r.oom === null;
  if (ok) passed++;
  else failed++;
  out.checks[policy] = { predicted: r.peakReservedBytes, measured, error: err, ok };
  console.log(`${ok ? 'PASS' : 'FAIL'} ${policy}: replay predicts peak reserved ${fmt(r.peakReservedBytes)}, ${file} measured ${fmt(measured)} (${(err * 100).toFixed(2)} %)`);
}
for (const policy of ['lens', 'lens-no-trim']) {
  const r = JSON.parse(h.replay(device, policy));
  out.replays[policy] = r;
  console.log(`info ${policy}: replay peak reserved ${fmt(r.peakReservedBytes)} (x${r.ratio.toFixed(3)} of peak allocated)`);
}
const lens = result('lens.txt');
console.log(`info lens run measured: peak reserved ${fmt(lens.peak_reserved)}, peak allocated ${fmt(lens.peak_allocated)}`);
const small = JSON.parse(h.replay(device, 'lens', 16 * GiB));
out.replays['lens@16GiB'] = small;
console.log(`info lens at 16 GiB: ${small.oom ? small.oom.sentence : `no OOM, peak reserved ${fmt(small.peakReservedBytes)}`}`);
fs.writeFileSync(path.join(dir, 'replay_validate.json'), JSON.stringify(out, null, 1));
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
