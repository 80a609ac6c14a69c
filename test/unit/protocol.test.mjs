// The live panel's message contract: the host acts only on well-formed webview messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseLiveHostMessage, parseLiveWebviewMessage } from '../../src/core/base/protocol/index.ts';

test('webview → host: accepted messages', () => {
  assert.deepEqual(parseLiveWebviewMessage({ type: 'ready', widthPx: 640.4 }), { type: 'ready', widthPx: 640 });
  assert.deepEqual(parseLiveWebviewMessage({ type: 'resize', widthPx: 100000 }), { type: 'resize', widthPx: 8192 });
  assert.deepEqual(parseLiveWebviewMessage({ type: 'action', action: 'emptyCache' }), { type: 'action', action: 'emptyCache' });
  assert.deepEqual(parseLiveWebviewMessage({ type: 'action', action: 'captureSnapshot', extra: 1 }), { type: 'action', action: 'captureSnapshot' });
});

test('webview → host: anything else is dropped', () => {
  for (const bad of [
    null,
    'emptyCache',
    42,
    {},
    { type: 'action' },
    { type: 'action', action: 'rm -rf' },
    { type: 'action', action: ['emptyCache'] },
    { type: 'ready' },
    { type: 'ready', widthPx: -1 },
    { type: 'ready', widthPx: NaN },
    { type: 'ready', widthPx: '600' },
    { type: 'run', command: 'x' },
  ]) {
    assert.equal(parseLiveWebviewMessage(bad), undefined, JSON.stringify(bad));
  }
});

test('host → webview', () => {
  const run = { name: 's', running: true, tracks: [], problems: [] };
  assert.deepEqual(parseLiveHostMessage({ type: 'update', run }), { type: 'update', run });
  assert.deepEqual(parseLiveHostMessage({ type: 'noRun' }), { type: 'noRun' });
  assert.deepEqual(parseLiveHostMessage({ type: 'busy', action: 'emptyCache', busy: true }), { type: 'busy', action: 'emptyCache', busy: true });
  assert.equal(parseLiveHostMessage({ type: 'busy', action: 'emptyCache' }), undefined);
  assert.equal(parseLiveHostMessage({ type: 'update', run: { name: 1, tracks: [] } }), undefined);
  assert.equal(parseLiveHostMessage({ type: 'update' }), undefined);
});

// ---- one declaration per message: the schema tables (src/core/base/protocol/schema.ts, Note [Message schemas]) ----

import { liveHostMessages, liveWebviewMessages, parseSnapshotWebviewMessage, snapshotHostMessages, snapshotWebviewMessages } from '../../src/core/base/protocol/index.ts';
import { receiveMessages } from '../../src/glue/webview/receive.ts';

test('rejections name the panel, the direction, the message type and the field', () => {
  const reason = (p, raw) => {
    const c = p.check(raw);
    assert.equal(c.ok, false, JSON.stringify(raw));
    return c.reason;
  };
  assert.equal(reason(liveWebviewMessages, { type: 'ready', widthPx: -1 }), 'live panel, webview → host: ready.widthPx must not be negative');
  assert.equal(reason(liveWebviewMessages, { type: 'ready', widthPx: '600' }), 'live panel, webview → host: ready.widthPx must be a finite number, got "600"');
  assert.equal(reason(liveWebviewMessages, { type: 'action', action: 'rm -rf' }), 'live panel, webview → host: action.action must be one of "emptyCache", "captureSnapshot", got "rm -rf"');
  assert.equal(reason(liveWebviewMessages, { type: 'run' }), 'live panel, webview → host: unknown message type "run" (expected one of ready, resize, action)');
  assert.equal(reason(liveWebviewMessages, null), 'live panel, webview → host: a message must be an object, got null');
  assert.equal(reason(liveWebviewMessages, [{ type: 'ready', widthPx: 1 }]), 'live panel, webview → host: a message must be an object, got an array');
  // Inherited names are not message types.
  assert.match(reason(liveWebviewMessages, { type: 'toString' }), /unknown message type "toString"/);
  assert.match(reason(liveWebviewMessages, { type: '__proto__' }), /unknown message type "__proto__"/);
  assert.equal(reason(liveHostMessages, { type: 'busy', action: 'emptyCache' }), 'live panel, host → webview: busy.busy must be true or false, got undefined');
  assert.equal(reason(snapshotHostMessages, { type: 'timeline', view: { requestId: 1.5, device: 0 } }), 'snapshot panel, host → webview: timeline.view.requestId must be an integer, got 1.5');
  assert.equal(
    reason(snapshotWebviewMessages, { type: 'requestTimeline', requestId: 1, device: 0, t0Us: 5, t1Us: 5, buckets: 10, maxSpans: 10 }),
    'snapshot panel, webview → host: requestTimeline t1Us must be after t0Us',
  );
  assert.equal(reason(snapshotWebviewMessages, { type: 'goToSource', file: 'x'.repeat(5000), line: 1 }), 'snapshot panel, webview → host: goToSource.file is longer than 4096 characters (5000)');
  assert.equal(reason(snapshotWebviewMessages, { type: 'exportPng', dataUrl: 'data:text/html,<script>', suggestedName: 'a.png' }), 'snapshot panel, webview → host: exportPng.dataUrl must start with data:image/png;base64,');
});

test('snapshot webview → host: accepted messages keep only their declared fields', () => {
  const tl = { type: 'requestTimeline', requestId: 3, device: 1, t0Us: 10, t1Us: 20.5, buckets: 600, maxSpans: 3000, owner: 2, extra: 'x' };
  assert.deepEqual(parseSnapshotWebviewMessage(tl), { type: 'requestTimeline', requestId: 3, device: 1, t0Us: 10, t1Us: 20.5, buckets: 600, maxSpans: 3000, owner: 2 });
  // owner is optional: absent stays absent (all owners)
  const { owner: _o, extra: _e, ...all } = tl;
  assert.deepEqual(parseSnapshotWebviewMessage(all), all);
  assert.equal(parseSnapshotWebviewMessage({ ...all, owner: 0.5 }), undefined);
  assert.deepEqual(parseSnapshotWebviewMessage({ type: 'ready', junk: 1 }), { type: 'ready' });
  assert.deepEqual(parseSnapshotWebviewMessage({ type: 'compareMoments', requestId: 1, device: 0, aUs: -1, bUs: 1.5e15 }), { type: 'compareMoments', requestId: 1, device: 0, aUs: -1, bUs: 1.5e15 });
  // Note [Sites by forward line]: the sites table again, grouped as the toggle says
  assert.deepEqual(parseSnapshotWebviewMessage({ type: 'requestSites', device: 0, backwardGrouping: 'caller', junk: 1 }), { type: 'requestSites', device: 0, backwardGrouping: 'caller' });
  const bytes = new Uint8Array([1, 2, 3]);
  assert.equal(parseSnapshotWebviewMessage({ type: 'openDroppedBytes', name: 'a.pickle', bytes }).bytes, bytes);
  assert.deepEqual(parseSnapshotWebviewMessage({ type: 'openDroppedBytes', name: 'a.pickle', bytes: [128, 2] }), { type: 'openDroppedBytes', name: 'a.pickle', bytes: [128, 2] });
  assert.deepEqual(parseSnapshotWebviewMessage({ type: 'exportPng', dataUrl: 'data:image/png;base64,AAAA', suggestedName: 'x.png' }), { type: 'exportPng', dataUrl: 'data:image/png;base64,AAAA', suggestedName: 'x.png' });
});

test('snapshot webview → host: anything else is dropped', () => {
  for (const bad of [
    { type: 'selectDevice', device: '0' },
    { type: 'selectDevice', device: 0.5 },
    { type: 'requestTimeline', requestId: 1, device: 0, t0Us: 0, t1Us: Infinity, buckets: 1, maxSpans: 1 },
    { type: 'requestTimeline', requestId: 1, device: 0, t0Us: NaN, t1Us: 1, buckets: 1, maxSpans: 1 },
    { type: 'requestSegments', requestId: 1, device: 0 },
    { type: 'requestReplay', requestId: 1, device: -1 },
    { type: 'goToSource', file: 42, line: 1 },
    { type: 'exportPng', dataUrl: 'data:image/png;base64,AA', suggestedName: 'x'.repeat(201) },
    { type: 'openDroppedBytes', name: 'a.pickle', bytes: 'AAAA' },
    { type: 'openDroppedUri' },
    { type: 'deleteFile', path: '/' },
    { type: 'requestSites', device: 0, backwardGrouping: 'module' },
    { type: 'requestSites', device: 0 },
  ]) {
    assert.equal(parseSnapshotWebviewMessage(bad), undefined, JSON.stringify(bad));
  }
});

test('snapshot host → webview: every message the opened capture sends passes; views pass through whole', () => {
  const info = { fileName: 'a.pickle', format: 'pytorch-pickle', devices: [0, 1], timeRanges: [{ t0Us: 0, t1Us: 1 }], problems: [], originUs: 0, deviceNames: {}, integrity: { ended: 'clean', lostEvents: 0, lostFromS: null, message: null, sentences: [] }, ooms: [] };
  const c = snapshotHostMessages.check({ type: 'opened', info });
  assert.equal(c.ok, true);
  assert.equal(c.message.info, info, 'the payload object itself, not a copy');
  assert.deepEqual(snapshotHostMessages.parse({ type: 'notice', message: 'Saved x.png.' }), { type: 'notice', message: 'Saved x.png.' });
  assert.deepEqual(snapshotHostMessages.parse({ type: 'requestFailed', requestId: -1, message: 'No file chosen.' }), { type: 'requestFailed', requestId: -1, message: 'No file chosen.' });
  assert.equal(snapshotHostMessages.parse({ type: 'opened', info: { ...info, devices: [0, '1'] } }), undefined);
  assert.equal(snapshotHostMessages.parse({ type: 'sites', device: 0, rows: {}, backwardGrouping: 'forward' }), undefined);
  assert.equal(snapshotHostMessages.parse({ type: 'sites', device: 0, rows: [] }), undefined, 'the rows say how backward is grouped');
  assert.equal(snapshotHostMessages.parse({ type: 'summary', summary: { device: 0 }, markers: [] }), undefined, 'markersTruncated missing');
  assert.deepEqual([...snapshotHostMessages.types].sort(), ['advice', 'categories', 'chooseRange', 'diff', 'grew', 'loadFailed', 'loading', 'markers', 'notice', 'opened', 'overview', 'ranks', 'replay', 'requestFailed', 'segments', 'showTab', 'sites', 'stack', 'summary', 'timeline']);
  assert.equal(snapshotHostMessages.parse({ type: 'categories', view: { requestId: 1, device: 0, steps: {}, leaks: [] } }), undefined, 'steps must be a list');
  assert.equal(snapshotHostMessages.parse({ type: 'markers', view: { requestId: 1, device: 0, markers: 'all' } }), undefined, 'markers must be a list');
  // Note [First view]: the overview of a big pickle, before `opened`
  const overview = { fileName: 'big.pickle', devices: [] };
  assert.equal(snapshotHostMessages.check({ type: 'overview', view: overview }).message.view, overview);
  assert.equal(snapshotHostMessages.parse({ type: 'overview', view: { fileName: 'big.pickle', devices: {} } }), undefined, 'devices must be a list');
  // Note [Range-first open]: the overview with a window picker, and the window in `opened`
  const choice = { fileName: 'huge.pickle', devices: [], fileBytes: 3 * 2 ** 30, bySize: true };
  assert.equal(snapshotHostMessages.check({ type: 'chooseRange', view: choice }).message.view, choice);
  assert.equal(snapshotHostMessages.parse({ type: 'chooseRange', view: { ...choice, fileBytes: 'big' } }), undefined, 'fileBytes is a number');
  assert.equal(snapshotHostMessages.check({ type: 'opened', info: { ...info, window: { fromUs: 1, toUs: 2 } } }).ok, true);
});

test('loadRange / loadWhole (Note [Range-first open]): a window that ends after it starts, finite', () => {
  const parse = snapshotWebviewMessages.parse;
  assert.deepEqual(parse({ type: 'loadRange', fromUs: 10, toUs: 20 }), { type: 'loadRange', fromUs: 10, toUs: 20 });
  assert.equal(parse({ type: 'loadRange', fromUs: 20, toUs: 20 }), undefined);
  assert.equal(parse({ type: 'loadRange', fromUs: 0, toUs: Infinity }), undefined);
  assert.equal(parse({ type: 'loadRange', fromUs: 0 }), undefined);
  assert.deepEqual(parse({ type: 'loadWhole' }), { type: 'loadWhole' });
  assert.deepEqual(parse({ type: 'overviewPainted' }), { type: 'overviewPainted' });
});

test('requestMarkers (Note [Markers by range]): a window of the run; an empty or reversed one is dropped', () => {
  const parse = snapshotWebviewMessages.parse;
  assert.deepEqual(parse({ type: 'requestMarkers', requestId: 4, device: 0, t0Us: 10, t1Us: 20 }), { type: 'requestMarkers', requestId: 4, device: 0, t0Us: 10, t1Us: 20 });
  assert.equal(parse({ type: 'requestMarkers', requestId: 4, device: 0, t0Us: 20, t1Us: 20 }), undefined);
  assert.equal(parse({ type: 'requestMarkers', requestId: 4, device: 0, t0Us: 0, t1Us: Infinity }), undefined);
});

test('advice (the What to do tab): showTab names a real tab, requestAdvice a device that is not negative', () => {
  assert.deepEqual(snapshotHostMessages.parse({ type: 'showTab', tab: 'advice' }), { type: 'showTab', tab: 'advice' });
  assert.equal(snapshotHostMessages.parse({ type: 'showTab', tab: 'settings' }), undefined);
  assert.deepEqual(snapshotWebviewMessages.parse({ type: 'requestAdvice', requestId: 2, device: 0 }), { type: 'requestAdvice', requestId: 2, device: 0 });
  assert.equal(snapshotWebviewMessages.parse({ type: 'requestAdvice', requestId: 2, device: -1 }), undefined);
});

test('requestCategories (the Categories tab): the peak alone, or a moment beside it; a bad device or time is dropped', () => {
  const parse = snapshotWebviewMessages.parse;
  assert.deepEqual(parse({ type: 'requestCategories', requestId: 3, device: 0 }), { type: 'requestCategories', requestId: 3, device: 0 });
  assert.deepEqual(parse({ type: 'requestCategories', requestId: 3, device: 1, timeUs: -1 }), { type: 'requestCategories', requestId: 3, device: 1, timeUs: -1 });
  assert.equal(parse({ type: 'requestCategories', requestId: 3, device: -2 }), undefined);
  assert.equal(parse({ type: 'requestCategories', requestId: 3, device: 0, timeUs: Infinity }), undefined);
  assert.equal(parse({ type: 'requestCategories', requestId: 3, device: 0, timeUs: '5' }), undefined);
});

test('host side: a rejected webview message is dropped with its reason logged, a valid one is handled', () => {
  let listener;
  const webview = { onDidReceiveMessage: (l) => ((listener = l), { dispose() {} }) };
  const handled = [];
  const logged = [];
  receiveMessages(webview, liveWebviewMessages, (m) => handled.push(m), (line) => logged.push(line));
  listener({ type: 'action', action: 'emptyCache', extra: true });
  listener({ type: 'action', action: 'format-disk' });
  listener({ type: 'resize', widthPx: 1e9 });
  assert.deepEqual(handled, [
    { type: 'action', action: 'emptyCache' },
    { type: 'resize', widthPx: 8192 },
  ]);
  assert.deepEqual(logged, ['GPU Memory Lens: dropped a message: live panel, webview → host: action.action must be one of "emptyCache", "captureSnapshot", got "format-disk"']);
});

test('ranks side by side: openRank names a rank by its non-negative index; the ranks view needs its rows', () => {
  assert.deepEqual(snapshotWebviewMessages.parse({ type: 'openRank', index: 1, extra: 'dropped' }), { type: 'openRank', index: 1 });
  assert.equal(snapshotWebviewMessages.parse({ type: 'openRank', index: -1 }), undefined);
  assert.equal(snapshotWebviewMessages.parse({ type: 'openRank', index: 0.5 }), undefined);
  assert.equal(snapshotWebviewMessages.parse({ type: 'openRank' }), undefined);
  const view = { title: 'job', medianPeakAllocatedBytes: 1, t0Us: 0, t1Us: 1, buckets: 2, ranks: [], sentences: [] };
  assert.equal(snapshotHostMessages.check({ type: 'ranks', view }).message.view, view, 'the payload object itself');
  assert.equal(snapshotHostMessages.parse({ type: 'ranks', view: { ...view, ranks: {} } }), undefined, 'ranks must be a list');
});
