// The live panel's message contract: the host acts only on well-formed webview messages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseLiveHostMessage, parseLiveWebviewMessage } from '../../src/core/protocol/index.ts';

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
  const session = { name: 's', running: true, tracks: [], problems: [] };
  assert.deepEqual(parseLiveHostMessage({ type: 'update', session }), { type: 'update', session });
  assert.deepEqual(parseLiveHostMessage({ type: 'noSession' }), { type: 'noSession' });
  assert.deepEqual(parseLiveHostMessage({ type: 'busy', action: 'emptyCache', busy: true }), { type: 'busy', action: 'emptyCache', busy: true });
  assert.equal(parseLiveHostMessage({ type: 'busy', action: 'emptyCache' }), undefined);
  assert.equal(parseLiveHostMessage({ type: 'update', session: { name: 1, tracks: [] } }), undefined);
  assert.equal(parseLiveHostMessage({ type: 'update' }), undefined);
});
