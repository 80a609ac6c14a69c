#!/usr/bin/env node
// Which allocations are live at a moment, from a capture's raw allocation and free events (the allocator's own
// record, no categories involved): test/gpu/categories_check.py uses it to keep, of the storages autograd saved,
// those still alive at the peak.
//
//   node test/gpu/saved_alive.mjs CAPTURE DEVICE TIME_US
//
// Prints one JSON line: [[address, size, startUs, endUs, backward], ...] of every allocation whose life overlaps
// TIME_US (endUs null when it was live at the end of the trace; backward: made by autograd's backward, by its
// stack — such a block at a saved storage's address is a later allocation that reused it, not the storage).
import { createRequire } from 'node:module';
import path from 'node:path';

const [capture, device, timeUs] = process.argv.slice(2);
if (!capture || device === undefined || timeUs === undefined) {
  console.error('usage: node test/gpu/saved_alive.mjs CAPTURE DEVICE TIME_US');
  process.exit(2);
}
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const addon = createRequire(import.meta.url)(process.env.GPUMEM_ADDON ?? path.join(root, 'dist/native/gpumem_addon.node'));
const h = new addon.ModelHandle(capture);
const t = Number(timeUs);
const spans = JSON.parse(h.spans(Number(device), t, t, 1 << 30, -1));
const backward = new Map();
const inBackward = (id) => {
  if (!backward.has(id)) backward.set(id, JSON.parse(h.stack(id)).backward === true);
  return backward.get(id);
};
console.log(JSON.stringify(spans.map((s) => [s.address, s.size, s.startUs, s.endUs ?? null, inBackward(s.stackId)])));
