#!/usr/bin/env node
// The step table of a capture (Note [Step table] in native/addon/src/aggregate.cpp): per line, its blocks' bytes and
// its requested bytes at each step end. test/gpu/no_false_leaks_check.py applies the leak rule to both.
//
//   node test/gpu/step_lines.mjs CAPTURE DEVICE END_US...
import { createRequire } from 'node:module';
import path from 'node:path';

const [capture, device, ...ends] = process.argv.slice(2);
if (!capture || device === undefined) {
  console.error('usage: node test/gpu/step_lines.mjs CAPTURE DEVICE END_US...');
  process.exit(2);
}
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const addon = createRequire(import.meta.url)(process.env.GPUMEM_ADDON ?? path.join(root, 'dist/native/gpumem_addon.node'));
const h = new addon.ModelHandle(capture);
console.log(h.stepTable(Number(device), ends.map(Number)));
