#!/usr/bin/env node
// Which allocations are live at a moment, from a capture's raw allocation and free events (the allocator's own
// record, no categories involved): test/gpu/categories_check.py uses it to keep, of the storages autograd saved,
// those still alive at the peak.
//
//   node test/gpu/saved_alive.mjs CAPTURE DEVICE TIME_US
//
// Prints one JSON line: [[address, size, startUs, endUs], ...] of every allocation whose life overlaps TIME_US
// (endUs null when it was live at the end of the trace).
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
console.log(JSON.stringify(spans.map((s) => [s.address, s.size, s.startUs, s.endUs ?? null])));
