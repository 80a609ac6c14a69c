"""The stop after the recorded steps (Note [Recorded steps]): from the N-th step end on, nothing of ours runs per
allocation in the PyTorch-allocator mode. _markers.py counts the steps and calls events_off."""
import sys

from . import _backward_links
from ._observer_figures import start_figures
from ._observer_history import VIEW
from ._observer_live import LIVE, LOCK
from ._state import STATE
from ._where import warn

# Note [Recorded steps]: GPUMEM_RECORD_STEPS=N (`--record-steps N`, gpuMemoryLens.recordSteps) records every
# allocation for the first N steps only (Optimizer.step() ends, or the user's gpumem.step() marks once there is one, as
# Note [Steps] counts them: _markers.count_recorded_step). What the lines, categories, activations by module and leak
# findings need is in a training loop's first steps, which then repeat: recording them costs a step near host-bound
# 3–6 % (ResNet-50 on an H100), figures only about nothing (×0.994–1.014), so after step N nothing of ours
# runs per allocation while the graphs go on. Measured (H100, 2026-11-27 and 28, test/gpu/README.md): settled
# steps after the stop ×0.999–1.012 on GPT-2 small and ×0.985–1.051 on ResNet-50 (native against native up to
# ×1.020 in the same runs). What stays per allocation is the tracker we cannot detach: by a profile of ResNet-50 steps
# after the stop, PyTorch's record_trace 0.13 ms a step and, until Note [Observer build flags], our -O0 callback 0.16.
# At the N-th step end:
#  - the tracker extension's flag and the library's (gpumem_observe_events_off) make the trace tracker and our
#    context recorder return at once (PyTorch has no way to detach a tracker); the library applies what was queued,
#    writes MARK_EVENTS_OFF after the last event (FORMAT.md, marker kind 8) and ends the observer's thread;
#  - our recorder leaves PyTorch's recordHistory (the user's own history, if on, is kept as they set it), so PyTorch
#    stops gathering contexts for us;
#  - the tag walk stops (tags only name recorded allocations); the step facts, phases and the leak keeper stay, and
#    an out-of-memory error is still written (by the OOM observer, as under figures only);
#  - PyTorch's stats are read at the sampling rate (start_figures, as figures only does), so the REC_STATS samples, the
#    live view and the control channel carry PyTorch's own figures; the reader takes the figures after the marker
#    from them (Note [Figures after the events] in native/addon/src/model.h).
# The header says `record_steps`; the panels say from which step on allocations were not recorded (Note [Not
# recorded]). Only the tracker source can stop: the history fallback says once that it cannot, the stats source
# records nothing per allocation anyway. And only PyTorch's allocator: `auto` takes it (_mode.decide), the lens mode
# refuses the setting in one line.
#
# Note [Why the recorded steps keep the tracker]: the one source that PyTorch lets us switch off for good is its
# history ring (recordHistory(false): record_trace then returns at its first line, as natively), so recording the
# first steps into the ring, with our context recorder returning a context that carries our stack id, would leave
# nothing attached after the stop. Decided against (2026-11-28), for three reasons:
#  - order: the capture's order is what readers rely on (Note [Deferred observation] in sequencer.h). Module marks are
#    written as our recorder walks each malloc's frames, phase and step marks and tags from Python, all live into the
#    sequencer's queue; ring entries would reach the queue only when drained. Frees carry no context, so nothing would
#    say where a free falls among the marks between two mallocs; every mark and tag would need a drain first (a
#    module's forward is one), and each drain copies the whole ring (CCA::snapshot(): every entry, every block);
#  - the user's own history shares the ring: their _record_memory_history and _snapshot() would see our entries, and
#    PyTorch's snapshot converts every entry's context as its own CapturedTraceback;
#  - the gain: the tracker left attached costs PyTorch's trace entry, about 0.13 ms a ResNet-50 step (2,300 entries,
#    record_trace in a profile, H100), and a history switched on and off left +0.19 µs a pair in
#    probes/tracker_entry_cost.py (H100); the recording process's larger and varying excess after the stop (+0.1 to +1.8 ms a
#    step against native, A/A up to +1.6 in the same rounds, test/gpu/README.md) has shown in no part of ours.

def events_off(why):
    """Note [Recorded steps]: from now on nothing is recorded per allocation (the tracker returns at once); True if it
    took effect here."""
    with LOCK:
        if LIVE.events_off or LIVE.obs is None or LIVE.tracker is None or STATE.observer_source != "tracker":
            return False
        LIVE.events_off = True
        torch = sys.modules.get("torch")
        try:
            LIVE.tracker.events_off()
        except Exception:  # a tracker without the flag (a stand-in): the library's flag alone does it
            pass
        LIVE.obs.lib.gpumem_observe_events_off(why.encode("utf-8", "replace"))
        _backward_links.turn_off()
        try:
            VIEW.apply_ours()  # our recorder out of PyTorch's history; the user's history as they set it
        except Exception as exc:
            warn("recordHistory not restored after the recorded steps: %s: %s" % (type(exc).__name__, exc))
        if torch is not None:
            start_figures(torch)
        return True
