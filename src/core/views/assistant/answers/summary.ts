// gpumem_summary: `gpumem summary --json` for one device, cut to what answers "why so much memory / why the OOM".
import { summaryDocument } from '../../../analyses/summary';
import { summaryWhatIf } from '../../../analyses/summary/whatIf';
import { timeBaseOf } from '../../../analyses/steps/timebase';
import { categoryView, beyondAllocated } from '../../../analyses/categories';
import { stepReport } from '../../../analyses/steps';
import { SOURCE_TEXT } from '../../../analyses/summary/steps';
import { categoryFields, commandLine, pickDevice, percent, when } from './common';
import type { Recording } from './subject';
import type { BackwardPeak } from '../../../base/model/types';
import type { TimeBase } from '../../../analyses/steps/timebase';
import { forwardBackwardSplit } from '../../annotations/annotate';

const TOP_LINES = 5;
const TOP_MODULES = 3;
const OOMS_SHOWN = 3;

export function summaryAnswer(rec: Recording, asked: { device?: number }): object {
  const { model, file } = rec;
  const device = pickDevice(model, file, asked.device);
  const time = timeBaseOf(model);
  const doc = summaryDocument(model, time);
  const dev = doc.devices.find((d) => d.device === device);
  const figures = model.current(device);
  // the what-if at the end is one part of the answer: when the engine cannot restore this state, the rest still
  // answers and the reason is said (`gpumem summary` fails as a whole instead)
  let whatIf: ReturnType<typeof summaryWhatIf>;
  let whatIfError: string | undefined;
  try {
    whatIf = summaryWhatIf(model, device);
  } catch (e) {
    whatIfError = e instanceof Error ? e.message : String(e);
  }
  const id = doc.identity;
  const name = id.devices.find((d) => d.index === device);
  const view = categoryView(model, device, time.steps);
  const peak = view.report.peak;
  const report = stepReport(model, device, time.steps);
  const ooms = doc.ooms.filter((o) => o.device === device);
  const lines = model.lineStats(device).slice(0, TOP_LINES);
  const backwardPeak = model.backwardPeak(device);
  const peakAllocated = dev?.peak_allocated_bytes ?? figures.peakAllocatedBytes;
  const frag = peak ? model.stateAt(device, peak.timeUs, peak.events).fragmentation : undefined;
  const beyond = peak ? beyondAllocated(peak, frag) : undefined;
  const highest = report.table.steps.reduce<{ i: number; bytes: number } | undefined>(
    (best, s, i) =>
      s.peakAllocatedBytes !== null && (!best || s.peakAllocatedBytes > best.bytes) ? { i, bytes: s.peakAllocatedBytes } : best,
    undefined,
  );
  return {
    file,
    ...(rec.note ? { about: rec.note } : {}),
    format: doc.format,
    run: compact({
      ...(id.argv ? { command: commandLine(id.argv) } : {}),
      ...(id.host !== undefined ? { host: id.host } : {}),
      ...(id.pid !== undefined ? { pid: id.pid } : {}),
      ...(id.world_size !== undefined && id.world_size > 1 ? { rank: id.rank, world_size: id.world_size } : {}),
      ...(model.header().torchVersion ? { torch: model.header().torchVersion } : {}),
      ...(id.allocator ? { allocator: id.allocator.mode === 'lens' ? 'GPU Memory Lens allocator' : "PyTorch's caching allocator, observed" } : {}),
      ...(id.not_recorded ? { not_recorded: id.not_recorded } : {}),
    }),
    device: {
      index: device,
      ...(name ? { name: name.name, total_bytes: name.total_bytes } : {}),
      ...(model.devices().length > 1 ? { others: model.devices().filter((d) => d !== device) } : {}),
    },
    peak: {
      allocated_bytes: peakAllocated,
      reserved_bytes: figures.peakReservedBytes,
      ...(dev && dev.events > 0 ? when(time, dev.peak_at_time_us) : {}),
      ...(peak
        ? {
            what: {
              ...categoryFields(peak.bytes),
              ...(peak.untracedBytes ? { before_the_trace_bytes: peak.untracedBytes } : {}),
              ...(peak.keptBytes ? { activations_kept_by_a_container_bytes: peak.keptBytes } : {}),
            },
            ...(view.report.hasTags ? {} : { no_optimizer_step_seen: 'parameters, gradients and optimizer state count as other' }),
            ...(view.report.hasPhases ? {} : { no_backward_seen: 'activations and temporaries count as other' }),
            ...(peak.modules.length ? { top_modules: peak.modules.slice(0, TOP_MODULES).map((m) => ({ module: m.module, bytes: m.bytes })) } : {}),
            cache_bytes: beyond?.cacheBytes ?? 0,
            ...(beyond?.notFromAllocatorBytes !== undefined ? { outside_the_allocator_bytes: beyond.notFromAllocatorBytes } : {}),
          }
        : {}),
    },
    at_end: {
      allocated_bytes: dev?.allocated_bytes ?? figures.allocatedBytes,
      reserved_bytes: dev?.reserved_bytes ?? figures.reservedBytes,
      ...(whatIf ? { empty_cache_would_release_bytes: whatIf.empty_cache_releases_bytes } : {}),
      ...(whatIfError ? { what_if_unavailable: whatIfError } : {}),
    },
    // Note [Forward and backward on one line]: a line's bytes include what its ops' backward made, said apart
    top_lines_at_peak: lines.map((l) => ({
      file: l.file,
      line: l.line,
      bytes: l.selfBytesAtPeak,
      percent_of_peak: percent(l.selfBytesAtPeak, peakAllocated),
      ...(l.backwardBytesAtPeak > 0 ? { of_it_made_by_backward_bytes: forwardBackwardSplit(l).backward } : {}),
    })),
    ...(backwardPeak ? { backward_peak: backwardPeakFields(backwardPeak, time) } : {}),
    ooms: {
      count: ooms.length,
      ...(ooms.length
        ? {
            first: ooms.slice(0, OOMS_SHOWN).map((o) => ({
              at_s: o.t_s,
              ...(o.step !== null ? { step: o.step } : {}),
              requested_bytes: o.requested_bytes,
              where: o.line > 0 ? `${o.file}:${o.line}` : o.file,
              verdict: o.verdict,
              sentence: o.sentence,
            })),
          }
        : {}),
    },
    steps: report.steps.source === 'none'
      ? { count: 0, why: 'no optimizer.step(), backward() or step marks were recorded' }
      : {
          count: report.table.steps.length,
          from: SOURCE_TEXT[report.steps.source],
          ...(highest ? { highest_peak_step: report.steps.steps[highest.i].index } : {}),
          leak_findings: report.leaks.length,
          ...(report.leaks.some((l) => l.keeper) ? { leaks_with_keeper: report.leaks.filter((l) => l.keeper).length } : {}),
        },
    complete: doc.integrity.ended === 'clean' && doc.integrity.sentences.length === 0,
    ...(doc.integrity.sentences.length ? { integrity: doc.integrity.sentences } : {}),
    more: nextTools(report.leaks.length, ooms.length),
  };
}

/** The highest point reached while a backward ran, and the forward lines whose ops' backward made most of it. */
function backwardPeakFields(p: BackwardPeak, time: TimeBase): object {
  return {
    allocated_bytes: p.peakBytes,
    ...when(time, p.timeUs),
    made_during_backward_bytes: p.madeInBackwardBytes,
    linked_to_forward_lines_bytes: p.linkedBytes,
    ...(p.recomputedBytes ? { recomputed_bytes: p.recomputedBytes } : {}),
    by_forward_line: p.lines.slice(0, TOP_LINES).map((l) => ({
      file: l.file,
      line: l.line,
      ...(l.module ? { module: l.module } : {}),
      bytes: l.bytes,
      ...(l.recomputedBytes ? { recomputed_bytes: l.recomputedBytes } : {}),
    })),
  };
}

/** undefined for an object with no field (a pickle says nothing of its run), so the field is left out. */
function compact<T extends object>(o: T): T | undefined {
  return Object.keys(o).length ? o : undefined;
}

function nextTools(leaks: number, ooms: number): string[] {
  const out = ['gpumem_peak_lines: the lines at the peak with their call stacks', 'gpumem_categories: what the memory is at a step or a time'];
  if (leaks) out.unshift(`gpumem_leaks: the ${leaks} leak finding${leaks === 1 ? '' : 's'} and what keeps ${leaks === 1 ? 'it' : 'them'} alive`);
  out.push(`gpumem_advice: what to change${ooms ? ' to avoid the OOM' : ''}, with predicted peaks`);
  return out;
}
