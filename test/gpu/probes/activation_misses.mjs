#!/usr/bin/env node
// Diagnostic for categories_check.py: for saved storages whose module the tool counts differently,
// what the capture says of each allocation: its life, its stack (innermost frames) and the tool's categories on
// its user line at the moment. A probe, not a test.
//
//   node test/gpu/probes/activation_misses.mjs CAPTURE DEVICE TIME_US < addresses.json
//
// addresses.json: [[address, module], ...]. Prints one JSON line: [{address, module, span, frames, line}, ...].
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const [capture, device, timeUs] = process.argv.slice(2);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const addon = createRequire(import.meta.url)(process.env.GPUMEM_ADDON ?? path.join(root, 'dist/native/gpumem_addon.node'));
const h = new addon.ModelHandle(capture);
const t = Number(timeUs);
const want = JSON.parse(readFileSync(0, 'utf8'));
const spans = JSON.parse(h.spans(Number(device), t, t, 1 << 30, -1));
const byAddr = new Map(spans.map((s) => [s.address, s]));
const atT = JSON.parse(h.categories(Number(device), [], true)).peak ?? {}; // TIME_US is the peak's
const lines = new Map((atT.lines ?? []).map((l) => [`${l.file}:${l.line}`, l.bytes]));
const out = want.map(([address, module]) => {
  const s = byAddr.get(address);
  if (!s) return { address, module, span: null };
  const st = JSON.parse(h.stack(s.stackId));
  const frames = st.frames.slice(0, 10).map((f) => `${path.basename(f.file)}:${f.line} ${f.name}${f.user ? ' [user]' : ''}`);
  const user = st.frames.find((f) => f.user);
  return { address, module, span: { size: s.size, startUs: s.startUs, endUs: s.endUs }, backward: st.backward, frames,
    line: user ? { at: `${path.basename(user.file)}:${user.line}`, bytes: lines.get(`${user.file}:${user.line}`) } : null };
});
console.log(JSON.stringify(out));
