"""The PyTorch-allocator mode: PyTorch's own caching allocator stays, with every setting the user gave
it, and is observed into the same capture format (Note [Observer] in native/allocator/src/observer.h;
Note [Observing PyTorch's allocator] in native/python/README.md).

Sources:
- a trace tracker (c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker) in a tiny extension
  (_observer_ext.cpp) built at first use with torch.utils.cpp_extension.load against the user's torch (cached per
  torch version; _observer_build.py); it hands each TraceEntry to gpumem_observe_event with the stack that PyTorch's
  context recorder gathered for the same malloc before the allocator lock (Note [Observer stacks]);
- torch._C._cuda_attach_out_of_memory_observer: a state record (and the verdict's data) after an OOM;
- torch.cuda.memory._snapshot(): state records (snapshots, OOM, exit) and the control channel's pickle;
- torch.cuda.empty_cache() for the control channel's Empty Cache.
Without a compiler (or if the build fails) the fallback is PyTorch's history: _record_memory_history
(stacks="python") drained into the capture by feed_trace every second and at snapshots, OOM and exit.

Its parts: the C API (_observer_api.py), the build (_observer_build.py), the shared live objects (_observer_live.py),
PyTorch's history (_observer_history.py), its figures (_observer_figures.py) and the stop after the recorded steps
(_recorded_steps.py). This module starts them at the first CUDA use.
"""
import os
import pickle

from . import _backward_links, _native, _probe_off
from ._observer_api import ACTIONS, Observer
from ._observer_build import build_tracker
from ._observer_figures import start_figures
from ._observer_history import VIEW, HistoryDrain, raw_snapshot
from ._observer_live import LIVE, LOCK
from ._state import STATE
from ._where import warn


def _segments_of(snap):
    out = []
    for s in snap.get("segments", []):
        out.append({k: s.get(k) for k in ("device", "address", "total_size", "stream", "segment_type", "segment_pool_id", "is_expandable")}
                   | {"blocks": [{k: b.get(k) for k in ("address", "size", "requested_size", "state")} for b in s.get("blocks", [])]})
    return out


def _write_states(torch, device, reason, pickle_path):
    """REC_STATE from PyTorch's own snapshot (and its pickle, byte for byte what _dump_snapshot writes)."""
    try:
        snap = raw_snapshot(torch)
    except Exception:  # backends without snapshots (cudaMallocAsync): no state, not an error
        if STATE.observer_source == "stats":
            return -1
        raise
    if LIVE.fallback is not None:
        LIVE.fallback.drain(snap)
    segs = _segments_of(snap)
    first = -1
    devices = range(torch.cuda.device_count()) if device < 0 else [device]
    for d in devices:
        off = LIVE.obs.state(d, reason, [s for s in segs if s.get("device", 0) == d])
        if first < 0:
            first = off
    if pickle_path:
        tmp = pickle_path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(snap, f)
        os.replace(tmp, pickle_path)
    return first


def _host_callbacks(torch):
    def empty_cache(before, after):
        try:
            n = torch.cuda.device_count()
            before[0] = sum(torch.cuda.memory_reserved(d) for d in range(n))
            torch.cuda.empty_cache()
            after[0] = sum(torch.cuda.memory_reserved(d) for d in range(n))
            return 0
        except Exception as exc:
            warn("empty_cache from the control channel failed: %s: %s" % (type(exc).__name__, exc))
            return -1

    def state(device, reason, pickle_path):
        try:
            return _write_states(torch, device, reason, pickle_path.decode() if pickle_path else "")
        except Exception as exc:
            warn("snapshot failed: %s: %s" % (type(exc).__name__, exc))
            return -1

    return empty_cache, state


def pci_bus_id(props):
    """The device's PCI bus id as NVML takes it (nvmlDeviceGetHandleByPciBusId), from torch's device properties; ""
    where torch does not say. The device sampler finds its NVML handle by it (device_sampler.cc)."""
    if not hasattr(props, "pci_bus_id"):
        return ""
    return "%04X:%02X:%02X.0" % (getattr(props, "pci_domain_id", 0), props.pci_bus_id, getattr(props, "pci_device_id", 0))


def _announce_devices(torch):
    for d in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(d)
        LIVE.obs.device(d, p.name, int(p.total_memory), pci_bus_id(p))


def _seed(torch):
    """What PyTorch's allocator already holds (normally nothing at first CUDA use): segments and live
    blocks as events, so later frees pair up."""
    snap = raw_snapshot(torch)
    for s in snap.get("segments", []):
        d = s.get("device", 0)
        LIVE.obs.event(d, ACTIONS["segment_alloc"], s["address"], s["total_size"], s.get("stream", 0) or 0)
        for b in s.get("blocks", []):
            if b.get("state") in ("active_allocated", "active_pending_free"):
                LIVE.obs.event(d, ACTIONS["alloc"], b["address"], b.get("requested_size") or b["size"], s.get("stream", 0) or 0)
    return snap


def _start_source(torch):
    """Tracker, else history, else stats (each tried in turn); (name, one line to say, or None).

    Note [Figures only]: GPUMEM_EVENTS=0 (`--figures-only`, gpuMemoryLens.recordAllocations = false) takes the stats
    source at once, whatever the allocator offers. Per-allocation recording is the one part of the PyTorch-allocator
    mode that no other switch turns off, and on a step near host-bound it costs more than the 1 % the rest of the tool
    is held to (ResNet-50 ×1.03–1.06 on an H100, test/gpu/README.md). With it off nothing of ours runs per
    allocation (no trace tracker, context recorder, tag walk or module marks: _markers.py), only PyTorch's stats read
    at the sampling rate by the library's sampler thread (Note [Figures on the sampler's thread]; where it cannot,
    by a thread of ours, the nested dict; the observer's own thread ends at once, having no event to order), and
    the graphs keep allocated, reserved and device memory (Note [Figures from stats] in native/addon/src/model.h); an
    out-of-memory error is still written (_attach_oom_observer). The header says `"events": false` and every panel
    says what is missing (Note [Not recorded]). `auto` takes PyTorch's allocator for it (_mode.decide); the lens mode
    records every allocation by its nature, so there the switch is refused in one line (_capture.configure)."""
    if not STATE.settings.events:
        # The extension only for its figures (Note [Figures on the sampler's thread]): nothing is attached. Where it
        # cannot be built, the poll reads PyTorch's stats, as before.
        LIVE.figures_ext, _ = build_tracker(torch)
        start_figures(torch)
        return "stats", None
    backend = ""
    try:
        backend = torch.cuda.memory.get_allocator_backend()
    except Exception:
        pass
    if backend and backend != "native":
        # cudaMallocAsync: neither trace trackers nor history nor snapshots; its stats API works.
        start_figures(torch)
        return "stats", ("the %s backend offers PyTorch's stats only (no trace trackers, no history): recording "
                         "allocated/reserved figures, no per-line data" % backend)
    mod, why = build_tracker(torch)
    if mod is not None:
        try:
            # queued: applied off the allocating thread, in order (Note [Deferred observation] in sequencer.h)
            mod.attach(LIVE.obs.address("gpumem_observe_event_queued"), LIVE.obs.address("gpumem_observe_take_stack"),
                       LIVE.obs.address("gpumem_observe_gather"), LIVE.obs.address("gpumem_user_metadata"))
            LIVE.tracker = LIVE.figures_ext = mod
            VIEW.apply_ours()
            _backward_links.start(getattr(mod, "__file__", None))
            _seed(torch)
            return "tracker", None
        except Exception as exc:
            LIVE.tracker = LIVE.figures_ext = None
            why = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
    try:
        LIVE.fallback = HistoryDrain(torch)
        return "history", ("the observer cannot stream (%s); recording from PyTorch's memory history instead "
                           "(updates every second, higher overhead)" % why)
    except Exception as exc:
        LIVE.fallback = None
        start_figures(torch)
        return "stats", ("the observer cannot stream (%s) and PyTorch's history is unavailable (%s: %s); recording "
                         "allocated/reserved figures only, no per-line data" % (why, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ""))


def start(torch):
    """At the first CUDA use, PyTorch's allocator initialised and the capture configured (_startup.py):
    the observer, its source, the OOM observer and the markers. True when observing."""
    with LOCK:
        if LIVE.obs is not None:
            return True
        from . import _markers

        LIVE.obs = Observer(STATE.native)
        empty_cache, state = _host_callbacks(torch)
        LIVE.obs.start(empty_cache, state)
        LIVE.obs.rounding(torch)
        _announce_devices(torch)
        VIEW.install(torch)
        source, line = _start_source(torch)
        STATE.observer_source = source
        if source == "stats":  # no event to order: the observer's thread ends (Note [Figures only])
            LIVE.obs.unqueued()
        if line:
            warn(line)
            STATE.native.notice(line, _native.NOTICE_WARNING)
        _attach_oom_observer(torch)
        off = _probe_off.parts_off()  # Note [Probe switches off]: benchmark children only
        if "hooks" not in off:
            _markers.apply(torch)
        if "writer" in off:
            _probe_off.applied["writer"] = STATE.native.probe_set()(b"flush_ms", 10000)  # 0: the library took it
        return True


def _attach_oom_observer(torch):
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        return

    def on_oom(device, alloc, device_allocated, device_free):
        # The tracker already wrote REC_OOM (its TraceEntry); the state that explains it follows, as
        # in lens mode (reason 1). The fallback has no tracker: the history holds the oom entry. Figures only has
        # neither (Note [Figures only]), nor has the tracker once the recorded steps are over (Note [Recorded steps]: it
        # returns at once): the OOM itself is written here, as a trace entry would give it (addr: the driver's free
        # bytes, size: the request), so the panels still tell it, without a line.
        try:
            if STATE.observer_source == "stats" or LIVE.events_off:
                LIVE.obs.event(int(device), ACTIONS["oom"], int(device_free), int(alloc))
            _write_states(torch, int(device), 1, "")
        except Exception as exc:
            warn("state after the out-of-memory error not recorded: %s: %s" % (type(exc).__name__, exc))

    try:
        attach(on_oom)
    except Exception:  # backends without OOM observers (cudaMallocAsync)
        pass
