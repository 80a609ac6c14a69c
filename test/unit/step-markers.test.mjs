// The snapshot panel's markers on a long run: step ends are numbered, then thinned with the other
// markers to the answer's limit (buildMarkers). Numbering after thinning gave a marker back for every step: an
// hour's budgeted capture sent 23,006 markers (1.5 MB) in the panel's first answer instead of 5,000.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { captureRecords, needsAllocator, openModel, simTraining, withModel } from './reader-support.mjs';

const { buildMarkers } = await import('../../src/core/views/snapshot/summaryView.ts');
const { timeBaseOf } = await import('../../src/core/analyses/steps/timebase.ts');
const { OpenedCapture } = await import('../../src/core/views/snapshot/openedCapture.ts');

const STEPS = 40;

test('step ends are numbered, then thinned with the rest to the limit; key markers are always kept', { skip: needsAllocator }, () => {
  const { cap } = simTraining(STEPS);
  withModel(cap, (real) => {
    // one empty_cache in the middle of the run (the simulated loop has none): a key marker
    const mid = timeBaseOf(real).steps.steps[STEPS / 2].endUs + 1;
    const m = Object.create(real);
    m.markers = (d) => [...real.markers(d), ...(d === 0 ? [{ device: 0, timeUs: mid, kind: 'empty_cache', label: 'empty_cache' }] : [])];
    m.markersShared = undefined; // the wrapper's markers() are the ones to read (Model.markersShared: absent, markers())
    const steps = timeBaseOf(m).steps;
    assert.equal(steps.steps.length, STEPS);
    const whole = buildMarkers(m, 0, 100_000, steps);
    assert.equal(whole.truncated, false);
    const numbered = whole.markers.filter((k) => /^step \d+( ·|$)/.test(k.label));
    assert.deepEqual(numbered.map((k) => Number(k.label.match(/^step (\d+)/)[1])), steps.steps.map((s) => s.index), 'every step end, numbered');
    const limit = 12;
    const thin = buildMarkers(m, 0, limit, steps);
    assert.equal(thin.truncated, true);
    assert.equal(thin.markers.length, limit, `${whole.markers.length} markers thinned to the limit`);
    for (const k of thin.markers) assert.ok(whole.markers.some((w) => w.timeUs === k.timeUs && w.label === k.label), `${k.label} is one of the whole list`);
    const keys = whole.markers.filter((k) => k.kind === 'empty_cache');
    assert.equal(keys.length, 1);
    for (const k of keys) assert.ok(thin.markers.some((t) => t.kind === 'empty_cache' && t.timeUs === k.timeUs), 'key markers stay');
    assert.deepEqual(thin.markers.map((k) => k.timeUs), [...thin.markers.map((k) => k.timeUs)].sort((a, b) => a - b), 'in time order');
  });
});

test('a growing capture: the snapshot session numbers the steps that arrived after the open once it polls', { skip: needsAllocator }, () => {
  const { cap } = simTraining(STEPS);
  const full = fs.readFileSync(cap);
  const recs = captureRecords(full);
  const half = recs[Math.floor(recs.length / 2)].offset;
  const growing = path.join(path.dirname(cap), 'growing.gpumem');
  fs.writeFileSync(growing, full.subarray(0, half));
  const m = openModel(growing);
  try {
    const session = new OpenedCapture(m, { fileName: 'growing.gpumem' });
    const before = session.time.steps.steps.length;
    assert.ok(before > 0 && before < STEPS, `${before} steps in the first half`);
    fs.appendFileSync(growing, full.subarray(half));
    assert.ok(session.poll() > 0);
    assert.equal(session.time.steps.steps.length, STEPS, 'every step, after the poll');
    const labels = session.deviceMessages(0)[0].markers.filter((k) => /^step \d+/.test(k.label));
    assert.equal(labels.length, STEPS, 'and the panel\'s markers number them all');
  } finally {
    m.close();
  }
});
