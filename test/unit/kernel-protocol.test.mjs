// The notebook kernel: its line protocol (src/core/base/kernel/protocol.ts, Note [Kernel protocol] in
// native/python/gpumem/_kernel.py), the cell figures' text (src/core/views/notebook/cellFigures.ts), and the real
// kernel process driven by KernelProcess on the stand-in torch with the real allocator on the simulated device:
// each cell's figures equal its own window of the capture, read back by the reader (markers, states, timeline).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { encodeRequest, LineSplitter, parseReply } from '../../src/core/base/kernel/protocol.ts';
import { KernelProcess } from '../../src/core/base/kernel/process.ts';
import { CellFiles, cellStatusText, cellTooltip, lineLabel } from '../../src/core/views/notebook/cellFigures.ts';
import { ALLOCATOR_LIB, needsAllocator, openModel, root } from './reader-support.mjs';

const KiB = 1024;
const MiB = 1024 * KiB;

const FIG = {
  peak_allocated: 4 * MiB, peak_from: 'capture', max_memory_allocated: 4 * MiB, peak_reserved: 22 * MiB, allocated_before: 0, allocated_after: 1 * MiB, reserved_before: 0,
  reserved_after: 22 * MiB, added_allocated: 1 * MiB, added_reserved: 22 * MiB, device: 0, capture: '/s/capture-1.gpumem',
  capture_peak: 4 * MiB, lines: [{ file: '/s/cells/cell-2.py', line: 1, function: '<module>', bytes: 3 * MiB }, { file: '/w/model.py', line: 14, function: 'forward', bytes: 1536 * KiB }],
};

test('requests are one JSON line each', () => {
  assert.equal(encodeRequest({ op: 'execute', id: 'x1', code: 'a = 1\nb = 2', file: '/s/cells/cell-1.py' }),
    '{"op":"execute","id":"x1","code":"a = 1\\nb = 2","file":"/s/cells/cell-1.py"}\n');
  assert.equal(encodeRequest({ op: 'shutdown' }), '{"op":"shutdown"}\n');
});

test('replies are checked against the contract; malformed ones are refused with a reason', () => {
  const done = parseReply(JSON.stringify({ type: 'done', id: 'x2', ok: true, execution_count: 2, file: '/s/cells/cell-2.py', figures: FIG }));
  assert.equal(done.type, 'done');
  assert.equal(done.figures.peak_allocated, 4 * MiB);
  assert.deepEqual(done.figures.lines[1], { file: '/w/model.py', line: 14, function: 'forward', bytes: 1536 * KiB });
  assert.deepEqual(parseReply('{"type":"stream","id":"x1","name":"stdout","text":"hi\\n"}'), { type: 'stream', id: 'x1', name: 'stdout', text: 'hi\n' });
  assert.equal(parseReply('{"type":"done","id":"x1","ok":true,"execution_count":1,"file":null,"figures":null}').figures, null);
  assert.match(parseReply('{"type":"stream","id":"x1","name":"stdin","text":""}').invalid, /malformed stream/);
  assert.match(parseReply(JSON.stringify({ type: 'done', id: 'x', ok: true, execution_count: 1, file: null, figures: { ...FIG, peak_allocated: '4' } })).invalid, /malformed done/);
  assert.match(parseReply(JSON.stringify({ type: 'done', id: 'x', ok: true, execution_count: 1, file: null, figures: { ...FIG, peak_from: 'guess' } })).invalid, /malformed done/);
  // figures without max_memory_allocated and peak_from (a kernel of an earlier version) are still figures
  const { max_memory_allocated: _m, peak_from: _p, ...older } = FIG;
  assert.equal(parseReply(JSON.stringify({ type: 'done', id: 'x', ok: true, execution_count: 1, file: null, figures: older })).figures.peak_allocated, 4 * MiB);
  assert.match(parseReply('{"type":"nope"}').invalid, /unknown reply type "nope"/);
  assert.match(parseReply('Out[1]: 3').invalid, /^not JSON/);
});

test('the line splitter keeps a line (and a UTF-8 character) cut between chunks', () => {
  const s = new LineSplitter();
  const bytes = Buffer.from('{"a":"é"}\n{"b":1}\n{"c"', 'utf8');
  const cut = bytes.indexOf(0xc3) + 1; // inside "é"
  assert.deepEqual(s.push(bytes.subarray(0, cut)), []);
  assert.deepEqual(s.push(bytes.subarray(cut)), ['{"a":"é"}', '{"b":1}']);
  assert.deepEqual(s.push(':2}\n'), ['{"c":2}']);
});

test('a cell status item and its tooltip: the figures in binary units, lines named by cell', () => {
  const files = new CellFiles();
  files.add('/s/cells/cell-2.py', 'cell-uri-b');
  files.setCount('/s/cells/cell-2.py', 7);
  assert.equal(cellStatusText(FIG), 'GPU peak 4.00 MiB above 0 B · allocated +1.00 MiB · reserved +22.0 MiB');
  // a cell that ran with 1 MiB live from earlier cells: its own peak, above what was live at its start
  const later = { ...FIG, peak_allocated: 6 * MiB, max_memory_allocated: 7 * MiB, allocated_before: 1 * MiB, allocated_after: 6 * MiB, added_allocated: 5 * MiB };
  assert.equal(cellStatusText(later), 'GPU peak 6.00 MiB above 1.00 MiB · allocated +5.00 MiB · reserved +22.0 MiB');
  assert.equal(cellTooltip(later, files).split('\n')[0], 'peak allocated 6.00 MiB above the 1.00 MiB live at the cell’s start (7.00 MiB in all, reserved 22.0 MiB)');
  assert.equal(cellStatusText({ ...FIG, added_allocated: -512 * KiB, added_reserved: 0 }), 'GPU peak 4.00 MiB above 0 B · allocated -512 KiB · reserved +0 B');
  assert.equal(cellStatusText({ ...FIG, device: null }), 'GPU: no memory used');
  assert.equal(lineLabel(FIG.lines[0], files), 'cell [7] line 1');
  assert.equal(lineLabel(FIG.lines[1], files), 'model.py:14');
  assert.equal(cellTooltip(FIG, files), [
    'peak allocated 4.00 MiB above the 0 B live at the cell’s start (4.00 MiB in all, reserved 22.0 MiB)',
    'allocated 0 B → 1.00 MiB (+1.00 MiB)',
    'reserved 0 B → 22.0 MiB (+22.0 MiB)',
    'top lines at the cell’s peak, its own allocations (click to go to one):',
    '  3.00 MiB  cell [7] line 1',
    '  1.50 MiB  model.py:14 in forward',
  ].join('\n'));
  assert.equal(files.latestFile('cell-uri-b'), '/s/cells/cell-2.py');
  assert.equal(files.cellOf('/s/cells/cell-2.py').cell, 'cell-uri-b');
});

/** allocated and reserved at a time, and the peak between two times, as the reader has them */
function windowOf(model, device, beginUs, endUs) {
  const at = (t) => model.stateAt(device, t).fragmentation;
  const tl = model.timeline(device, beginUs, endUs, 1);
  return { before: at(beginUs), after: at(endUs), peak: tl.allocatedMax[0] };
}

test('the kernel runs cells under the tool; each cell’s figures equal its window of the capture', { skip: needsAllocator, timeout: 120_000 }, async () => {
  const session = fs.mkdtempSync(path.join(os.tmpdir(), 'gpumem-kernel-'));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GPUMEM_') && k !== 'PYTHONPATH'));
  Object.assign(env, {
    PYTHONPATH: [path.join(root, 'native/python'), path.join(root, 'test/python/fake_torch')].join(path.delimiter),
    GPUMEM_SESSION_DIR: session, GPUMEM_ALLOCATOR_SO: ALLOCATOR_LIB, GPUMEM_BACKEND: 'sim', GPUMEM_ALLOCATOR: 'lens', GPUMEM_SAMPLE_MS: '0',
  });
  let log = '';
  let exited = false;
  const kp = new KernelProcess({ file: 'python3', args: ['-m', 'gpumem._kernel'], cwd: session, env }, { log: (t) => (log += t), exit: () => (exited = true) });
  try {
    const ready = await kp.ready;
    assert.equal(ready.session, session);
    assert.equal(ready.shell, 'ipython');
    const cells = [
      'import torch\nkeep = []\nprint("hello")',
      'a = torch.empty(3 << 20, device="cuda")\nb = torch.empty(1 << 20, device="cuda")\ndel a\nkeep.append(b)\ntorch.cuda.max_memory_allocated()',
      'c = torch.empty(6 << 20, device="cuda")\nkeep.clear()\ndel b\n1 / 0',
    ];
    const outs = [];
    const dones = [];
    for (const [i, code] of cells.entries()) {
      const out = [];
      const file = path.join(session, 'cells', `cell-${i + 1}.py`);
      dones.push(await kp.execute(code, file, { stream: (n, t) => out.push([n, t]), result: (t) => out.push(['result', t]), error: (n, v) => out.push(['error', `${n}: ${v}`]) }));
      outs.push(out);
      assert.equal(fs.readFileSync(file, 'utf8'), code, 'the cell file holds the cell');
    }
    assert.equal(outs[0].map(([, t]) => t).join(''), 'hello\n');
    assert.deepEqual(outs[1], [['result', String(4 * MiB)]]);
    assert.deepEqual(outs[2], [['error', 'ZeroDivisionError: division by zero']]);
    assert.deepEqual(dones.map((d) => [d.ok, d.execution_count]), [[true, 1], [true, 2], [false, 3]]);
    assert.equal(dones[0].figures.device, null, 'no CUDA yet: no figures');
    const [, f2, f3] = dones.map((d) => d.figures);
    assert.deepEqual([f2.peak_allocated, f2.added_allocated, f2.added_reserved], [4 * MiB, 1 * MiB, 22 * MiB]);
    assert.deepEqual(f2.lines.map((l) => [path.basename(l.file), l.line, l.bytes]), [['cell-2.py', 1, 3 * MiB], ['cell-2.py', 2, 1 * MiB]]);
    // cell 3 ran with cell 2's 1 MiB live: its own peak is the 6 MiB it allocated; PyTorch's figure counts both
    assert.deepEqual([f3.peak_allocated, f3.peak_from, f3.max_memory_allocated, f3.allocated_before, f3.added_allocated], [6 * MiB, 'capture', 7 * MiB, 1 * MiB, 5 * MiB]);
    assert.deepEqual(f3.lines.map((l) => [path.basename(l.file), l.line, l.bytes]), [['cell-3.py', 1, 6 * MiB]]);
    await kp.shutdown();
    assert.ok(exited);

    // The capture, read by the reader: each cell's begin/end markers bound a window whose figures are the cell's.
    const capture = f2.capture;
    assert.equal(path.dirname(capture), session);
    const model = openModel(capture);
    try {
      model.poll();
      assert.ok(model.ended(), 'the kernel closed its capture at shutdown');
      const marks = model.markers(0).filter((m) => m.kind === 'range_begin' || m.kind === 'range_end');
      for (const [n, f] of [[2, f2], [3, f3]]) {
        // A cell that first used CUDA has no begin marker (CUDA, so the capture, started inside it): its window
        // is the capture's start, where nothing was allocated or reserved.
        const end = marks.find((m) => m.kind === 'range_end' && m.label.startsWith(`cell [${n}] `));
        const begin = marks.find((m) => m.kind === 'range_begin' && m.label === end?.label);
        assert.ok(end, `cell ${n}'s end marker in ${JSON.stringify(marks)}`);
        assert.equal(begin === undefined, n === 2, 'only the cell that started CUDA has no begin marker');
        const w = windowOf(model, 0, begin?.timeUs ?? model.timeRange(0).t0Us, end.timeUs);
        if (!begin) w.before = { allocatedBytes: 0, reservedBytes: 0 };
        assert.equal(w.peak, f.max_memory_allocated, `cell ${n} peak`);
        // no cell frees what was live at its start before its peak: its own peak is the window's above its start
        assert.equal(w.peak - w.before.allocatedBytes, f.peak_allocated, `cell ${n} own peak`);
        assert.equal(w.after.allocatedBytes - w.before.allocatedBytes, f.added_allocated, `cell ${n} added allocated`);
        assert.equal(w.after.reservedBytes - w.before.reservedBytes, f.added_reserved, `cell ${n} added reserved`);
      }
    } finally {
      model.close();
    }
  } finally {
    if (kp.alive) await kp.shutdown(500);
    if (!exited) console.log(log);
    fs.rmSync(session, { recursive: true, force: true });
  }
});
