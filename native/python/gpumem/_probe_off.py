"""Note [Probe switches off]: GPUMEM_PROBE_OFF=part[+part…] (or comma-separated) keeps whole parts of the
PyTorch-allocator mode from running, so that the lockstep step benchmark (test/gpu/bench_allocator.py) can price each
part in a process of its own against native. Why: after the recorded steps, and under figures only, which never
records, a process of ours still issued a ResNet-50 step in 0.1–1.5 ms more host time than native (mean of a run's
rounds, seven H200 runs), while a profile shows no symbol of ours on the step's threads, and in one process the lent
hosts resolve no better than ±2.5 % of host time between blocks (probes/recorded_steps_parts.py switched parts off
there, H100, 2026-11-28).

Like Note [Probe switches] in native/allocator/src/c_api.cc, not a setting: nothing of the product sets it, and a
capture taken with a part off is not complete, so it is for benchmark children only. Parts:
- "poll": PyTorch's figures at the sampling rate, whichever reads them (the library's sampler through the extension,
  Note [Figures on the sampler's thread] in _observer_figures.py, or the stats poll thread); no figures without it under
  figures only or after the recorded steps;
- "hooks": everything _markers.apply installs (record_function marks, the backward() brackets, the optimizer hooks
  with their tag walk, leak keeper read and step count): no steps, phases or categories, and the recorded steps never
  stop, so pair it with figures only (GPUMEM_EVENTS=0);
- "writer": the writer thread's tick, 10 s instead of 50 ms (gpumem_probe_set("flush_ms")); records still arrive
  whenever a batch fills and at exit;
- "all": the three.
The device sampler has a switch of its own, GPUMEM_SAMPLE_MS=0."""
import os

PARTS = ("poll", "hooks", "writer")
_said = []
applied = {}  # part → what the library answered, where a part is switched off through it (for tests and the bench)


def parts_off(environ=None):
    """The parts GPUMEM_PROBE_OFF names, in PARTS' order. An unknown name is said once on stderr and switches nothing
    off (the workload goes on; the benchmark shows the line in the child's error output)."""
    text = (os.environ if environ is None else environ).get("GPUMEM_PROBE_OFF", "")
    named = [p.strip() for p in text.replace("+", ",").split(",") if p.strip()]
    unknown = [p for p in named if p not in PARTS + ("all",)]
    if unknown and not _said:
        _said.append(True)
        from ._where import warn

        warn("GPUMEM_PROBE_OFF: unknown part %s, ignored (parts: %s, all)" % (", ".join(unknown), ", ".join(PARTS)))
    return [p for p in PARTS if p in named or "all" in named]


def off(part):
    return part in parts_off()
