// The snapshot panel's time-axis labels (webview/snapshot/timeFormat.ts): the precision follows the
// visible span, a tick a hair before the start does not read "-0.0 s", and a span of a few µs has distinct ticks.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatSeconds } from '../../webview/snapshot/timeFormat.ts';

test('precision follows the visible span', () => {
  assert.equal(formatSeconds(4_567_000, 22.9e6), '4.6 s');
  assert.equal(formatSeconds(4_567_000, 5e6), '4.567 s');
  assert.equal(formatSeconds(850_000, 1e6), '850.0 ms');
  assert.equal(formatSeconds(120, 1000), '120 µs');
});

test('a tick just before the trace starts reads as zero, not minus zero', () => {
  // the first tick of a 22.9 s capture's axis sat 20 µs before its first event
  assert.equal(formatSeconds(-20, 22.9e6), '0.0 s');
  assert.equal(formatSeconds(-20, 5e6), '0.000 s');
  assert.equal(formatSeconds(-0.3, 1e4), '0.0 ms');
  assert.equal(formatSeconds(-0.02, 1), '0.0 µs');
  assert.equal(formatSeconds(-400_000, 22.9e6), '-0.4 s', 'a real negative time keeps its sign');
});

test('a span of a few µs gets tenths, so its ticks differ', () => {
  const ticks = [0, 0.2, 0.4, 0.6, 0.8, 1].map((t) => formatSeconds(t, 1));
  assert.equal(new Set(ticks).size, ticks.length, ticks.join(', '));
});
