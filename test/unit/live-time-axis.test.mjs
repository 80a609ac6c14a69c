// The live chart's time axis labels (webview/live/timeAxis.ts): seconds elapsed since the session's first
// event, in one style per axis chosen by the span (Note [Elapsed time axis]): under a minute "2.5 s", under an
// hour m:ss, beyond h:mm:ss; the cursor's moment to the millisecond. Never a calendar date.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ELAPSED_INCRS, elapsedText, elapsedTickLabels } from '../../webview/live/timeAxis.ts';

test('under a minute: seconds with as many decimals as the tick step needs', () => {
  assert.deepEqual(elapsedTickLabels([0, 1, 2, 3], 1, 3.87), ['0 s', '1 s', '2 s', '3 s']);
  assert.deepEqual(elapsedTickLabels([0, 0.5, 1, 1.5], 0.5, 1.9), ['0.0 s', '0.5 s', '1.0 s', '1.5 s']);
  assert.deepEqual(elapsedTickLabels([0, 0.25, 0.5], 0.25, 0.6), ['0.00 s', '0.25 s', '0.50 s']);
  assert.deepEqual(elapsedTickLabels([0.002, 0.004], 0.002, 0.005), ['0.002 s', '0.004 s']);
  assert.deepEqual(elapsedTickLabels([15, 30, 45], 15, 59.9), ['15 s', '30 s', '45 s']);
});

test('from a minute: m:ss; from an hour: h:mm:ss', () => {
  assert.deepEqual(elapsedTickLabels([0, 30, 60, 90, 120], 30, 130), ['0:00', '0:30', '1:00', '1:30', '2:00']);
  assert.deepEqual(elapsedTickLabels([600, 1200, 3000], 600, 3599), ['10:00', '20:00', '50:00']);
  assert.deepEqual(elapsedTickLabels([0, 1800, 3600, 5400], 1800, 6000), ['0:00:00', '0:30:00', '1:00:00', '1:30:00']);
  assert.deepEqual(elapsedTickLabels([86400 + 61], 1, 90000), ['24:01:01']);
  // sub-second steps on a long axis keep their decimals (a zoomed view)
  assert.deepEqual(elapsedTickLabels([61.5, 62], 0.5, 100), ['1:01.5', '1:02.0']);
});

test('a tick before the origin (a track that started before the session\'s origin moved) is signed', () => {
  assert.deepEqual(elapsedTickLabels([-1, 0, 1], 1, 5), ['−1 s', '0 s', '1 s']);
});

test('the cursor\'s moment, to the millisecond', () => {
  assert.equal(elapsedText(3.14159), '3.142 s');
  assert.equal(elapsedText(0), '0.000 s');
  assert.equal(elapsedText(62.5), '1:02.500');
  assert.equal(elapsedText(3723), '1:02:03.000');
  assert.equal(elapsedText(59.9996), '1:00.000'); // rounding carries into the minute
  assert.equal(elapsedText(Number.NaN), '—');
});

test('tick steps grow monotonically and divide the minute and the hour once past a second', () => {
  for (let i = 1; i < ELAPSED_INCRS.length; i++) assert.ok(ELAPSED_INCRS[i] > ELAPSED_INCRS[i - 1]);
  for (const incr of ELAPSED_INCRS.filter((x) => x >= 1 && x < 60)) assert.equal(60 % incr, 0, `${incr} s divides a minute`);
  for (const incr of ELAPSED_INCRS.filter((x) => x >= 60 && x < 3600)) assert.equal(3600 % incr, 0, `${incr} s divides an hour`);
});
