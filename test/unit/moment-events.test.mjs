// Note [Moment events] (native/addon/src/categories.cpp): a category moment is exactly after a number of events, and
// several events can share one microsecond. A capture whose peak allocation is freed in the same µs
// (reference/same_microsecond.py, explicit times through the observer's C API): the layout at the peak has the
// peak's blocks, so what lies beyond allocated adds up to reserved − allocated. Asked by time alone, the state would
// include the free (a budget test compared two captures of one run and failed one time in four on this).
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { ALLOCATOR_LIB, needsAllocator, openModel, python, tmpDir } from './reader-support.mjs';
import { summarizeFile } from '../../src/core/analyses/summary/index.ts';

const MiB = 1 << 20;

test('the peak of a capture whose peak block is freed in the same microsecond has its own layout', { skip: needsAllocator }, () => {
  const { capture } = python('same_microsecond.py', ALLOCATOR_LIB, path.join(tmpDir(), 'same-us.gpumem'));
  const m = openModel(capture);
  try {
    const p = m.categories(0, [], false).peak;
    assert.equal(p.allocatedBytes, 12 * MiB);
    assert.equal(p.reservedBytes, 20 * MiB);
    assert.equal(p.events, 3, 'after the segment and the two allocations');
    assert.equal(m.stateAt(0, p.timeUs, p.events).fragmentation.allocatedBytes, 12 * MiB);
    assert.equal(m.stateAt(0, p.timeUs).fragmentation.allocatedBytes, 8 * MiB, 'by time alone: the free of the same µs too');
  } finally {
    m.close();
  }
  const [c] = summarizeFile(capture).summary.categories;
  assert.equal(c.peak.allocated_bytes, 12 * MiB);
  const beyond = c.peak.beyond_allocated;
  assert.equal(beyond.cacheBytes, 8 * MiB);
  assert.equal(beyond.splitRemainderBytes + beyond.cachedFreeBytes + beyond.pendingFreeBytes, 8 * MiB,
    `what lies beyond allocated adds up: ${JSON.stringify(beyond)}`);
});
