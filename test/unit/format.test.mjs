// formatBytes against its specification (src/core/base/units/bytes.ts, Note [Byte formatting]): binary units
// like PyTorch's memory_summary (1 KiB = 1024 B), three significant digits, plain bytes below 1 KiB.
// Expected strings are derived from the spec by hand arithmetic in each case's comment, not copied from output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatBytes, formatBytesDelta } from '../../src/core/base/units/bytes.ts';

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

test('below 1 KiB: whole bytes', () => {
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(1023), '1023 B'); // still below 1024
});

test('binary units with three significant digits', () => {
  assert.equal(formatBytes(KiB), '1.00 KiB');
  assert.equal(formatBytes(1.5 * GiB), '1.50 GiB'); // the example annotation
  assert.equal(formatBytes(312 * MiB), '312 MiB'); // ≥100: no decimals
  assert.equal(formatBytes(20 * KiB), '20.0 KiB'); // 10..99: one decimal
  assert.equal(formatBytes(2 * MiB + 512 * KiB), '2.50 MiB'); // 2.5 MiB, PyTorch's small-pool rounding size class
  assert.equal(formatBytes(80 * GiB), '80.0 GiB');
  assert.equal(formatBytes(3 * 1024 * GiB), '3.00 TiB');
});

test('1000 is not a unit boundary (binary, not decimal)', () => {
  assert.equal(formatBytes(1000), '1000 B');
  assert.equal(formatBytes(1000 * KiB), '1000 KiB'); // 1000 KiB < 1 MiB
});

test('rounding that reaches 1024 moves to the next unit', () => {
  // 1 MiB − 1 B = 1023.999 KiB would print "1024 KiB"; the spec forbids four digits of a unit.
  assert.equal(formatBytes(MiB - 1), '1.00 MiB');
  assert.equal(formatBytes(GiB - 1), '1.00 GiB');
});

test('signs and non-finite values', () => {
  assert.equal(formatBytes(-1.5 * GiB), '-1.50 GiB');
  assert.equal(formatBytes(NaN), 'NaN');
  assert.equal(formatBytes(Infinity), 'Infinity');
  assert.equal(formatBytesDelta(2 * MiB), '+2.00 MiB');
  assert.equal(formatBytesDelta(-2 * MiB), '-2.00 MiB');
  assert.equal(formatBytesDelta(0), '0 B');
});
