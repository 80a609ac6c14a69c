#!/usr/bin/env python3
"""module_graph.py — the module graph of native/allocator, and a check that it has no cycle.

A module is a source stem: foo.h and foo.cc are module "foo"; headers outside src/ are named by their
path (format/gpumem_format, include/gpumem_allocator). Two kinds of edge:
  include  foo's .h or .cc includes bar's header;
  link     foo.o leaves a symbol undefined that bar.o defines (strong definitions only), which catches a
           call into a function declared by hand or in another module's header (the kind of loop that
           only link-time fakes could break).
Prints every module with what it depends on, then either "no cycle" or each cycle; exits 1 on a cycle.

  python3 tools/module_graph.py --src src --objs build/lib
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(path, src):
    rel = os.path.relpath(os.path.normpath(path), src)
    stem = os.path.splitext(rel)[0]
    if stem.startswith('..'):  # ../include/x.h, ../../format/x.h
        parts = [p for p in stem.split(os.sep) if p != '..']
        return '/'.join(parts)
    return stem


def include_edges(src):
    edges = defaultdict(set)
    modules = set()
    for name in sorted(os.listdir(src)):
        if not name.endswith(('.h', '.cc')):
            continue
        path = os.path.join(src, name)
        m = module_of(path, src)
        modules.add(m)
        with open(path, encoding='utf-8') as f:
            for inc in INCLUDE.findall(f.read()):
                target = module_of(os.path.join(src, inc), src)
                if target != m:
                    edges[m].add(target)
    return modules, edges


def nm(obj):
    out = subprocess.run(['nm', '--defined-only', obj], capture_output=True, text=True, check=True).stdout
    defined = {line.split()[-1] for line in out.splitlines() if len(line.split()) == 3 and line.split()[1] in 'TDBR'}
    out = subprocess.run(['nm', '--undefined-only', obj], capture_output=True, text=True, check=True).stdout
    undefined = {line.split()[-1] for line in out.splitlines() if line.split()}
    return defined, undefined


def link_edges(objs, src):
    owner = {}
    needs = {}
    for name in sorted(os.listdir(objs)):
        if not name.endswith('.o') or not os.path.exists(os.path.join(src, name[:-2] + '.cc')):
            continue  # core.o (the combined core) and objects of sources since removed
        m = module_of(os.path.join(src, name[:-2] + '.cc'), src)
        defined, undefined = nm(os.path.join(objs, name))
        for s in defined:
            owner[s] = m
        needs[m] = undefined
    edges = defaultdict(set)
    for m, undefined in needs.items():
        for s in undefined:
            if s in owner and owner[s] != m:
                edges[m].add(owner[s])
    return edges


def cycles(modules, edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--src', required=True)
    ap.add_argument('--objs', help='folder of one .o per src/*.cc (adds link edges)')
    a = ap.parse_args()
    modules, inc = include_edges(a.src)
    link = link_edges(a.objs, a.src) if a.objs else {}
    edges = defaultdict(set)
    for e in (inc, link):
        for m, ts in e.items():
            edges[m] |= ts
            modules |= ts
            modules.add(m)
    n_edges = sum(len(ts) for ts in edges.values())
    print(f'{len(modules)} modules, {n_edges} edges (include + link)')
    for m in sorted(modules):
        deps = []
        for t in sorted(edges.get(m, ())):
            kinds = [k for k, e in (('include', inc), ('link', link)) if t in e.get(m, ())]
            deps.append(t + ('' if kinds == ['include'] else ' [' + '+'.join(kinds) + ']'))
        print(f'  {m} -> {", ".join(deps) if deps else "(nothing)"}')
    found = cycles(modules, edges)
    if found:
        for c in found:
            print('CYCLE: ' + ' <-> '.join(c))
        print(f'{len(found)} cycle(s) in the module graph')
        return 1
    print('no cycle')
    return 0


if __name__ == '__main__':
    sys.exit(main())
