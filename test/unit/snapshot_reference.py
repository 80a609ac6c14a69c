#!/usr/bin/env python3
"""Reference figures for the snapshot panel, computed from a PyTorch snapshot pickle with plain `pickle`.

    python3 test/unit/snapshot_reference.py FILE.pickle  ->  JSON on stdout

Independent of the TypeScript and native code under test: the definitions are written out here from
Note [Breakdown] (src/core/analyses/breakdown/breakdown.ts) and reference/snapshot_summary.py (summary figures), using only the pickle.
"""
import json
import pickle
import sys


MiB = 1 << 20


def whole_pages(seg, offset, size):
    """Bytes of whole pages (2 MiB small pool, 20 MiB large: kSmallBuffer/kLargeBuffer) inside a free block
    at `offset` from the segment's start: PyTorch's unmap_block rounds the block inward to page boundaries."""
    page = 2 * MiB if seg.get('segment_type') == 'small' else 20 * MiB
    first = -(-offset // page) * page
    last = (offset + size) // page * page
    return max(0, last - first)


def breakdown(segments):
    out = dict(reservedBytes=0, allocatedBytes=0, requestedBytes=0, cachedFreeBytes=0, releasablePageBytes=0,
               subPageRemainderBytes=0, splitRemainderBytes=0, pendingFreeBytes=0, roundingWasteBytes=0, freeBlocks=0,
               largestFreeBlockBytes=0, expandableSegments=0, fixedSegments=0)
    for seg in segments:
        out['reservedBytes'] += seg['total_size']
        expandable = bool(seg.get('is_expandable', False))
        out['expandableSegments' if expandable else 'fixedSegments'] += 1
        blocks = seg.get('blocks', [])
        active = [b for b in blocks if b['state'] in ('active_allocated', 'active_pending_free')]
        inactive = [b for b in blocks if b['state'] == 'inactive']
        for b in blocks:
            if b['state'] == 'active_allocated':
                out['allocatedBytes'] += b['size']
                out['requestedBytes'] += b.get('requested_size', b['size'])
                out['roundingWasteBytes'] += b['size'] - b.get('requested_size', b['size'])
            elif b['state'] == 'active_pending_free':
                out['pendingFreeBytes'] += b['size']
        free = sum(b['size'] for b in inactive)
        if not active:
            out['cachedFreeBytes'] += free
        elif expandable:
            offsets = [sum(x['size'] for x in blocks[:i]) for i in range(len(blocks))]
            pages = sum(whole_pages(seg, off, b['size']) for off, b in zip(offsets, blocks) if b['state'] == 'inactive')
            out['releasablePageBytes'] += pages
            out['subPageRemainderBytes'] += free - pages
        else:
            out['splitRemainderBytes'] += free
        out['freeBlocks'] += len(inactive)
        out['largestFreeBlockBytes'] = max([out['largestFreeBlockBytes']] + [b['size'] for b in inactive])
    return out


def peak_allocated(allocated_now, trace):
    """Replay +size at alloc, -size at free_requested from the implied starting point."""
    start = allocated_now - sum(e['size'] for e in trace if e['action'] == 'alloc') + sum(e['size'] for e in trace if e['action'] == 'free_requested')
    cur = peak = start
    peak_t = trace[0]['time_us'] if trace else 0
    for e in trace:
        if e['action'] == 'alloc':
            cur += e['size']
        elif e['action'] == 'free_requested':
            cur -= e['size']
        else:
            continue
        if cur > peak:
            peak, peak_t = cur, e['time_us']
    return peak, peak_t


def main(path):
    with open(path, 'rb') as f:
        snap = pickle.load(f)
    devices = {}
    traces = snap.get('device_traces', [])
    for device in sorted({s['device'] for s in snap['segments']} | set(i for i, t in enumerate(traces) if t)):
        segs = [s for s in snap['segments'] if s['device'] == device]
        trace = traces[device] if device < len(traces) else []
        b = breakdown(segs)
        peak, peak_t = peak_allocated(b['allocatedBytes'], trace)
        devices[device] = dict(
            breakdown=b,
            segments=len(segs),
            blocks=sum(len(s['blocks']) for s in segs),
            allocatedBlocks=sum(1 for s in segs for b2 in s['blocks'] if b2['state'] == 'active_allocated'),
            activeBytes=b['allocatedBytes'] + b['pendingFreeBytes'],
            events=len(trace),
            oomCount=sum(1 for e in trace if e['action'] == 'oom'),
            peakAllocatedBytes=peak,
            peakAtTimeUs=peak_t,
            t0Us=min((e['time_us'] for e in trace), default=0),
            t1Us=max((e['time_us'] for e in trace), default=0),
            # The Model's SegmentInfo shape, so core functions can be tested without the native reader.
            segmentInfos=[dict(device=s['device'], address=s['address'], totalSize=s['total_size'], stream=s['stream'],
                               pool=s.get('segment_type', 'large'), expandable=bool(s.get('is_expandable', False)), stackId=0,
                               blocks=[dict(address=s['address'] + sum(x['size'] for x in s['blocks'][:i]), size=blk['size'],
                                            requestedSize=blk.get('requested_size', blk['size']), state=blk['state'], stackId=0)
                                       for i, blk in enumerate(s['blocks'])])
                          for s in segs],
        )
    json.dump({'devices': devices}, sys.stdout)


if __name__ == '__main__':
    main(sys.argv[1])
