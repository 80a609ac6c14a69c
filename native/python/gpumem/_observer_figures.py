"""PyTorch's own figures (allocated, reserved, peaks, OOMs, requested) in the PyTorch-allocator mode: read through
the tracker extension without the stats dict where it is loaded, and carried into the capture by the library's
sampler thread, else by a poll of ours, once they are the source (figures only, after the recorded steps)."""
import ctypes
import threading

from . import _probe_off
from ._observer_live import LIVE
from ._state import STATE


# Note [Figures without the dict]: PyTorch's own counters are read at every step end (the leak keeper's requested
# bytes, Note [Keeper reads requested bytes] in _keeper.py) and at the sampling rate once they carry the figures
# (figures only, and after the recorded steps: now on the library's sampler thread where the extension is loaded, Note
# [Figures on the sampler's thread]; else _StatsPoll, on a thread that holds the GIL the user's steps need).
# torch.cuda.memory_stats_as_nested_dict() builds a dict of ~150 entries for the few we read: 17-30 µs a call on an
# H100 host with torch 2.11 (memory_stats(), which flattens it in Python, 150-170 µs; test/gpu/probes/
# recorded_steps_parts.py). Where the tracker extension is built, its figures() reads the same counters under the same
# lock and returns six numbers; elsewhere (the history fallback, cudaMallocAsync, a stand-in tracker) the nested
# dict is read as before.
def extension_figures(device):
    """The tracker extension's six numbers for one device (as figures_now), or None where it is not loaded or cannot
    read this torch's stats."""
    read = getattr(LIVE.figures_ext, "figures", None)
    if read is None:
        return None
    try:
        return tuple(int(x) for x in read(int(device)))
    except Exception:  # a torch whose stats this build cannot read: callers read the dict, as before
        return None


def figures_now(torch, device):
    """(allocated, reserved, peak allocated, peak reserved, OOMs, requested or None) of one device, now."""
    f = extension_figures(device)
    if f is not None:
        return f
    st = torch.cuda.memory_stats_as_nested_dict(device)
    a, r = st.get("allocated_bytes", {}).get("all", {}), st.get("reserved_bytes", {}).get("all", {})
    return (a.get("current", 0), r.get("current", 0), a.get("peak", 0), r.get("peak", 0), st.get("num_ooms", 0),
            (st.get("requested_bytes") or {}).get("all", {}).get("current"))


def _poll_period_s():
    """How often PyTorch's stats are read where they carry the figures: the sampling period (200 ms when off)."""
    return (STATE.settings.sample_ms or 200) / 1000.0 if STATE.settings is not None else 0.2


# Note [Figures on the sampler's thread] (native/allocator/src/observer.h): where PyTorch's figures are the source
# (figures only, after the recorded steps), the library's sampler thread reads them through the extension's C reader
# (gpumem_tracker_figures), just before it writes each REC_STATS. It used to be _StatsPoll alone: a Python thread
# waking at the sampling rate (5 Hz by default) to take the GIL from the user's steps, for a read of 17-30 µs, and a
# REC_STATS then carried figures up to one period old. The probe switches (Note [Probe switches off]; ResNet-50
# on an H200, figures only, 5 lockstep rounds) put the poll at about half of what figures only added to a step's host
# time (+0.69 ms a step with it, +0.34 without; all parts off −0.50, native against native −0.29): within the host's
# spread, but the one part of ours that took the GIL on a timer. Under figures only the extension is loaded for its
# reader alone (nothing attached; CCA::get() is whichever backend serves, cudaMallocAsync included). The poll stays
# where there is no reader: no built extension (no compiler), the cudaMallocAsync backend with recording on (no
# extension is loaded there), a stand-in without the symbol, or sampling off (GPUMEM_SAMPLE_MS=0: nothing would call
# the reader).
def _figures_reader_on():
    """True once the library's sampler reads PyTorch's figures itself (the extension in LIVE.figures_ext has the C
    reader and the sampler runs)."""
    path = getattr(LIVE.figures_ext, "__file__", None)
    if not path or LIVE.obs is None:
        return False
    try:
        ext = ctypes.CDLL(path)  # already loaded by Python's import: the same handle
        reader = ext.gpumem_tracker_figures
    except (OSError, AttributeError):
        return False
    if not LIVE.obs.figures_reader(ctypes.cast(reader, ctypes.c_void_p).value):
        return False
    LIVE.obs._keep.append(ext)
    import atexit

    # Before the capture's own end (atexit: last in, first out): the sampler stops reading PyTorch's allocator before
    # the interpreter goes away; the call releases the GIL and returns once a read in progress has ended.
    atexit.register(LIVE.obs.figures_reader, None)
    return True


def start_figures(torch):
    """PyTorch's figures into the capture from now on: "sampler" (the library's sampler thread reads them), "poll" (a
    thread of ours, _StatsPoll) or None (Note [Probe switches off]: a benchmark child pricing this part)."""
    if _probe_off.off("poll"):  # Note [Probe switches off]: a benchmark child pricing the figures' source
        return None
    if _figures_reader_on():
        LIVE.figures_by = "sampler"
    else:
        _StatsPoll(torch, _poll_period_s())
        LIVE.figures_by = "poll"
    return LIVE.figures_by


class _StatsPoll:
    """The last source, for allocators with neither trace trackers nor history (backend:cudaMallocAsync):
    PyTorch's stats API read at the sampling rate (≥ 5 Hz); figures and samples, no per-line data."""

    def __init__(self, torch, period_s):
        import atexit

        self.torch = torch
        self.period_s = max(0.02, min(period_s, 0.2))
        self.lock = threading.Lock()  # a read and its figures, whole: the last one is never overwritten by an older
        self.done = False
        threading.Thread(target=self._loop, name="gpumem-stats-poll", daemon=True).start()
        # Note [Last figures] (native/allocator/src/recorder.cc): once more as the process ends, before the capture's
        # end (atexit: last in, first out), for its last pass
        atexit.register(self.last_poll)

    def poll(self):
        # On this thread, but holding the GIL the user's steps need: figures_now reads them without a dict where it
        # can (Note [Figures without the dict]).
        for d in range(self.torch.cuda.device_count()):
            f = figures_now(self.torch, d)
            LIVE.obs.figures(d, *f[:5])

    def last_poll(self):
        with self.lock:
            self.done = True
            try:
                self.poll()
            except Exception:  # an interpreter going away: the capture keeps the last periodic figures
                pass

    def _loop(self):
        import time

        while True:
            with self.lock:
                if self.done:
                    return
                try:
                    self.poll()
                except Exception:
                    return
            time.sleep(self.period_s)
