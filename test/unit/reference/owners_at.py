#!/usr/bin/env python3
"""Allocated bytes, and live bytes and allocations per owner line, at given times of a snapshot pickle.

Usage: owners_at.py SNAPSHOT.pickle '[t_us, ...]'   (times ascending; device 0)

The owner of an allocation is its innermost user frame (Note [User frames]: the one rule, through its Python
implementation gpumem._where.is_user_file, which passes native/format/user_frames_cases.json like the
reader's), "<no user frame>:0" without one.
The start is the summary's (snapshot_summary.py): blocks allocated at the end, less the trace's allocations, plus its frees; at
time t every event with time_us <= t has happened. Prints JSON: [{allocated, owners: {"file:line":
{bytes, count}}}, ...] — what the timeline's owner groups must show (Note [Owner bands]).
"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "native", "python"))
from gpumem._where import is_user_file  # noqa: E402  (Note [User frames]: the one rule)


def is_user(path, internal_dirs=()):
    return is_user_file(path, internal_dirs)


def owner(entry):
    for f in entry.get('frames') or []:
        if is_user(f['filename']):
            return '%s:%d' % (f['filename'], f['line'])
    return '<no user frame>:0'


def main():
    d = pickle.load(open(sys.argv[1], 'rb'))
    times = json.loads(sys.argv[2])
    trace = d['device_traces'][0]
    alloc = sum(b['size'] for s in d['segments'] for b in s['blocks'] if b['state'] == 'active_allocated')
    for e in trace:
        if e['action'] == 'alloc':
            alloc -= e['size']
        elif e['action'] == 'free_requested':
            alloc += e['size']
    live, out, i = {}, [], 0
    for t in times:
        while i < len(trace) and trace[i]['time_us'] <= t:
            e = trace[i]
            i += 1
            if e['action'] == 'alloc':
                alloc += e['size']
                live[e['addr']] = (owner(e), e['size'])
            elif e['action'] == 'free_requested':
                alloc -= e['size']
                live.pop(e['addr'], None)
        by = {}
        for o, z in live.values():
            b, n = by.get(o, (0, 0))
            by[o] = (b + z, n + 1)
        out.append({'allocated': alloc, 'owners': {o: {'bytes': b, 'count': n} for o, (b, n) in by.items()}})
    print(json.dumps(out))


if __name__ == '__main__':
    main()
