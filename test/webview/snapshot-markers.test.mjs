// Markers by range (Note [Markers by range] in src/core/views/snapshot/openedCapture.ts): an hour's run holds tens of
// thousands of step markers, the first answer carries a thinned set, and the zoomed timeline asks for its window's
// own. The real page in Chromium over a real capture (the lens allocator on the simulated device, 40 training
// steps: 80 step markers) with the session's limit set to 30, so the first answer is thinned; the expected counts
// are the reader's markers, numbered over the whole run (buildMarkers without a limit).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { needsAllocator, openModel, simTraining } from '../unit/reader-support.mjs';
import { openSnapshotPanel } from './snapshot-host.mjs';

const { OpenedCapture } = await import('../../src/core/views/snapshot/openedCapture.ts');
const { buildMarkers } = await import('../../src/core/views/snapshot/summaryView.ts');
const { timeBaseOf } = await import('../../src/core/analyses/steps/timebase.ts');

const STEPS = 40;
const LIMIT = 30;

describe('snapshot timeline markers by range', { skip: needsAllocator }, () => {
  let model;
  let all; // every marker of the run, step ends numbered
  let steps;
  const opened = [];
  before(() => {
    model = openModel(simTraining(STEPS).cap);
    steps = timeBaseOf(model).steps;
    all = buildMarkers(model, 0, Infinity, steps).markers;
  });
  after(async () => {
    for (const wv of opened) await wv.close();
    model?.close();
  });

  /**
   * late: the summary (with the markers and whether they were thinned) comes after the page's first timeline
   * request, as on a slow machine (the CI failure): the session answers `ready` with `opened` alone and sends the
   * device's messages with the first timeline answer.
   */
  const open = async (window, { late = false } = {}) => {
    const real = new OpenedCapture(model, { fileName: 'train.gpumem', maxMarkers: LIMIT });
    let held = late;
    const session = {
      handle(msg) {
        const answer = real.handle(msg);
        if (late && msg.type === 'ready') return answer.filter((m) => m.type === 'opened');
        if (held && msg.type === 'requestTimeline') {
          held = false;
          return [...answer, ...real.deviceMessages(0)];
        }
        return answer;
      },
    };
    const wv = await openSnapshotPanel(model, { fileName: 'train.gpumem', session, state: { tab: 'timeline', device: 0, ...(window ? { window } : {}) } });
    opened.push(wv);
    return wv;
  };
  /** Waits until the canvas says it drew `want` markers; fails with what it drew. */
  const drawn = async (wv, want) => {
    const canvas = wv.page.locator('[data-testid=timeline-canvas]');
    await wv.page.waitForFunction((n) => document.querySelector('[data-testid=timeline-canvas]')?.dataset.markers === String(n), want, { timeout: 15_000 }).catch(() => {});
    return Number(await canvas.getAttribute('data-markers'));
  };

  test('the whole run draws the thinned first answer and asks for no window', async () => {
    assert.ok(all.length > LIMIT, `${all.length} markers, more than the limit`);
    const wv = await open();
    assert.equal(await drawn(wv, LIMIT), LIMIT);
    const asked = await wv.page.evaluate(() => window.__posted.filter((m) => m.type === 'requestMarkers').length);
    assert.equal(asked, 0);
  });

  for (const late of [false, true]) {
  test(`a zoomed window draws every marker inside it, numbered as over the whole run${late ? ' (the summary after the first timeline request)' : ''}`, async () => {
    const v0 = steps.steps[19].endUs - 1;
    const v1 = steps.steps[22].endUs + 1;
    const inside = all.filter((m) => m.timeUs >= v0 && m.timeUs <= v1);
    const thinnedInside = buildMarkers(model, 0, LIMIT, steps).markers.filter((m) => m.timeUs >= v0 && m.timeUs <= v1);
    assert.ok(inside.length > thinnedInside.length, `the window holds ${inside.length} markers, the thinned set ${thinnedInside.length}`);
    const wv = await open({ v0, v1 }, { late });
    assert.equal(await drawn(wv, inside.length), inside.length);
    const asked = await wv.page.evaluate(() => window.__posted.filter((m) => m.type === 'requestMarkers'));
    assert.equal(asked.length, 1);
    assert.ok(asked[0].t0Us <= v0 && asked[0].t1Us >= v1, 'the request covers the view');
    assert.deepEqual(
      inside.filter((m) => /^step \d+/.test(m.label)).map((m) => Number(m.label.match(/^step (\d+)/)[1])),
      [20, 21, 22, 23],
      'the window\'s step ends carry their run-wide numbers',
    );
  });
  }
});
