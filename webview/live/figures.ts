// The figures shown above each chart, in reading order. Pure (no DOM) so the webview test can compare
// against it and the wording stays in one place.
import type { LiveFigures } from '../../src/core/base/protocol/live';

export interface FigureRow {
  key: 'allocated' | 'reserved' | 'device-used' | 'unattributed' | 'peak-allocated' | 'peak-reserved';
  label: string;
  /** null: shown as "—" (device used while no sample of now has come) */
  bytes: number | null;
  help: string;
}

export function figureRows(f: LiveFigures): FigureRow[] {
  const rows: FigureRow[] = [
    { key: 'allocated', label: 'Allocated', bytes: f.allocatedBytes, help: 'Bytes held by live tensors (allocated_bytes.all.current).' },
    { key: 'reserved', label: 'Reserved', bytes: f.reservedBytes, help: 'Bytes the allocator holds from the driver (reserved_bytes.all.current); reserved − allocated is cache and fragmentation.' },
  ];
  if (f.deviceUsedBytes !== undefined) {
    rows.push({ key: 'device-used', label: 'Device used', bytes: f.deviceUsedBytes, help: 'What the driver reports as used on the whole device (nvidia-smi), all processes included.' });
  } else if (f.deviceUsedPending) {
    rows.push({
      key: 'device-used',
      label: 'Device used',
      bytes: null,
      help: 'Reserved changed since the last device sample: the next sample (every 200 ms by default) tells device used with the reserved shown here.',
    });
  }
  if (f.unattributedBytes !== undefined) {
    rows.push({
      key: 'unattributed',
      label: 'Not from the allocator',
      bytes: f.unattributedBytes,
      help: 'Device used − reserved: the CUDA context, cuBLAS/cuDNN workspaces, NCCL buffers and other processes. Not visible to any PyTorch memory API.',
    });
  }
  rows.push(
    { key: 'peak-allocated', label: 'Peak allocated', bytes: f.peakAllocatedBytes, help: 'Highest allocated so far (max_memory_allocated).' },
    { key: 'peak-reserved', label: 'Peak reserved', bytes: f.peakReservedBytes, help: 'Highest reserved so far (max_memory_reserved).' },
  );
  return rows;
}
