"""Measuring a piece of a run (a pytest test, a notebook cell) inside the workload: tracking started from inside
the process when no launcher started it, and per-piece figures with the top lines at the piece's peak.

Note [Tracking from inside]: `pytest -p gpumem` and `%load_ext gpumem` may run in a process no launcher
started (no GPUMEM_SESSION_DIR). They start tracking the way `gpumem run` would, with the same machinery and
no second path: a session folder as _launch.create_session_folder makes it, the environment as
_launch.workload_env writes it (every recording setting the user's environment gives is kept: GPUMEM_BACKEND=sim,
GPUMEM_ALLOCATOR=lens, …), then _bootstrap.arm(), which is what sitecustomize does at start-up. Child processes
inherit the environment, so they are tracked as under `gpumem run`. Where torch is already imported the import
hook runs at once (_hook.watch); where CUDA is already initialised, the lens allocator cannot be swapped in any
more, so the mode is PyTorch's allocator, observed from that moment on, and the one line says so (what was
allocated before is seeded from PyTorch's snapshot: Note [Observing PyTorch's allocator]).

Note [Piece figures]: a piece's peak is its own: the most bytes the blocks it allocated held at once, above what
was live when it began (what fixtures, earlier tests or earlier cells left). Counted from the piece's start, a
test's verdict does not depend on which tests ran before it, as pytest-memray's limit_memory counts what the test
itself allocated. Two ways to count it, and which one wins:
- from the capture (Note [Windows] in _window.py): the blocks allocated inside the piece's window and live at once,
  whatever happens meanwhile to blocks that were live at its start. A piece that frees an earlier piece's
  leftovers and then allocates (a model rebuilt, gradients set to None and made again) has the same peak in every
  order. Taken wherever the window is whole and its source records every allocation in order: the lens
  allocator, and PyTorch's allocator observed through the trace tracker;
- from PyTorch's counters: `torch.cuda.max_memory_allocated()` after a reset at the piece's start, minus
  `torch.cuda.memory_allocated()` at its start (the shims in the lens mode, PyTorch's own in the observed mode).
  Taken where the capture cannot say: tracking off, a window whose end never showed or that lost events, the
  observed mode's history or stats sources (events late or absent), allocations no longer recorded after the
  recorded steps. Equal to the first wherever the piece frees nothing that was live at its start, which the CPU
  tests and test/gpu/conformance/pytest_order_check.py hold in both modes; lower where it does.
`peak_from` says which ("capture" or "counters"). The other figures are the counters': `max_memory_allocated`
(PyTorch's figure inside the piece, what was live at the start included), allocated and reserved before and after
it, and `added_allocated` (after minus before: what the piece left allocated, freed leftovers subtracted). The
reserved figures are the process's: the allocator's cache is shared by every piece. Nothing is read, and CUDA is
never initialised by us, while the process has not used CUDA (no figures then are zeros, as PyTorch's would be).
The lines at the peak come from the capture: the piece's own blocks live at its own peak.
"""
import os
import sys

from . import _window
from ._state import STATE
from ._where import warn


def _torch_cuda_ready():
    torch = sys.modules.get("torch")
    try:
        return torch if torch is not None and torch.cuda.is_initialized() else None
    except Exception:
        return None


def start_tracking(out_dir, name, quiet=False):
    """Start tracking this process unless it already is (under `gpumem run`, or started before). Returns one line
    saying what happened (None when a launcher had started it)."""
    from . import _bootstrap, _launch, _settings

    if STATE.settings is not None:  # armed already (sitecustomize under a launcher, or an earlier call)
        return None
    if os.environ.get("GPUMEM_SESSION_DIR"):
        return None  # a launcher set it up; sitecustomize arms (or said why not)
    so = os.environ.get("GPUMEM_ALLOCATOR_SO") or _launch.default_allocator_so()
    given = {}
    for decl in _settings.TABLE:
        text = os.environ.get(decl["env"])
        if text:
            try:
                given[decl["py"]] = _settings.parse_text(decl, text, decl["env"])
            except _settings.SettingsError as exc:
                return "gpumem: memory tracking is off: %s" % exc
    if not os.path.exists(so):
        return "gpumem: memory tracking is off: the lens allocator is not built: %s is missing (make -C native/allocator)" % so
    torch = _torch_cuda_ready()
    late = torch is not None
    if late:
        given["allocator_mode"] = "pytorch"
    try:
        folder = _launch.create_session_folder(out_dir, name, [sys.executable] + list(sys.argv))
        env = _launch.workload_env(folder, os.path.abspath(so), user_roots=[os.getcwd()], **given)
    except (OSError, RuntimeError, _settings.SettingsError) as exc:
        return "gpumem: memory tracking is off: %s" % exc
    if late:
        env["GPUMEM_ALLOCATOR_REASON"] = "CUDA was initialised before tracking started: PyTorch's allocator is observed from now on"
    os.environ.update(env)
    if sys.path[:1] != [_launch.PYTHON_DIR] and _launch.PYTHON_DIR not in sys.path:
        sys.path.insert(0, _launch.PYTHON_DIR)
    _bootstrap.arm()
    line = "gpumem: session folder %s" % folder
    if late:
        line += "; CUDA was already initialised, so PyTorch's allocator is observed from now on (what was allocated before counts, without its lines)"
    return line


def _records_every_allocation():
    """The capture gets every allocation in order with the markers: the lens allocator, or PyTorch's observed through
    the trace tracker (the history source writes its events a second late, the stats source none)."""
    return STATE.swapped or STATE.observer_source == "tracker"


class Figures(dict):
    """Note [Piece figures], bytes: peak_allocated (the piece's own peak) and peak_from ("capture" | "counters");
    max_memory_allocated (PyTorch's figure inside the piece), peak_reserved, allocated_before/after,
    reserved_before/after, added_allocated, added_reserved; lines [(file, line, function, bytes)]: the piece's own
    blocks live at its own peak; capture (path or None); capture_peak (max_memory_allocated replayed from the
    capture, or None); device (None while CUDA was never used)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Meter:
    """Begin/end of pieces; one per process."""

    def __init__(self):
        self.tail = None
        self.n = 0
        self.slow = False   # an end marker never showed (the writer stopped): wait briefly from then on

    def _tail(self):
        if self.tail is None or self.tail.path != STATE.capture:
            self.tail = _window.CaptureTail(STATE.capture)
        return self.tail

    def begin(self, label):
        from . import _native

        self.n += 1
        piece = {"label": label, "name": "%s #%d" % (label, self.n), "marked": False, "device": None,
                 "allocated": 0, "reserved": 0}
        torch = _torch_cuda_ready()
        if torch is not None:
            try:
                dev = torch.cuda.current_device()
                torch.cuda.reset_peak_memory_stats(dev)
                piece.update(device=dev, allocated=torch.cuda.memory_allocated(dev), reserved=torch.cuda.memory_reserved(dev))
            except Exception as exc:  # never break the user's test or cell
                warn("cannot read the memory figures: %s: %s" % (type(exc).__name__, exc))
        if STATE.configured and STATE.capture:
            try:
                self._tail().want(piece["name"])
                piece["marked"] = STATE.native.mark(piece["name"], _native.MARK_BEGIN)
            except Exception:
                pass
        return piece

    def end(self, piece, top=5, is_line=None, wait=3.0):
        from . import _native

        fig = Figures(peak_allocated=0, peak_from="counters", max_memory_allocated=0, peak_reserved=0,
                      allocated_before=piece["allocated"], reserved_before=piece["reserved"], allocated_after=0,
                      reserved_after=0, lines=[], capture=STATE.capture if STATE.configured else None,
                      capture_peak=None, device=piece["device"])
        torch = _torch_cuda_ready()
        if torch is not None:
            try:
                dev = torch.cuda.current_device() if piece["device"] is None else piece["device"]
                fig.update(device=dev, max_memory_allocated=torch.cuda.max_memory_allocated(dev),
                           peak_reserved=torch.cuda.max_memory_reserved(dev),
                           allocated_after=torch.cuda.memory_allocated(dev), reserved_after=torch.cuda.memory_reserved(dev))
            except Exception as exc:
                warn("cannot read the memory figures: %s: %s" % (type(exc).__name__, exc))
        fig["peak_allocated"] = max(0, fig.max_memory_allocated - fig.allocated_before)
        fig["added_allocated"] = fig.allocated_after - fig.allocated_before
        fig["added_reserved"] = fig.reserved_after - fig.reserved_before
        if STATE.configured and STATE.capture and fig.device is not None:
            try:
                tail = self._tail()
                if not piece["marked"]:
                    # CUDA (and so the capture) started inside this piece: the window is the capture's start.
                    tail.want(piece["name"], from_start=True)
                STATE.native.mark(piece["name"], _native.MARK_END)
                window = tail.wait(piece["name"], timeout=0.2 if self.slow else wait)
                self.slow = window is None
                if window is not None:
                    got = _window.analyse(tail, window, fig.device, is_line=is_line, top=top)
                    fig.update(lines=got["lines"], capture_peak=got["peak"])
                    if got["whole"] and _records_every_allocation():
                        fig.update(peak_allocated=got["own_peak"], peak_from="capture")
            except Exception as exc:
                warn("cannot read the lines at the peak: %s: %s" % (type(exc).__name__, exc))
        return fig


def fmt(n):
    """Binary units, like PyTorch and the panels: 512 B, 1.5 KiB, 2.00 GiB."""
    sign = "-" if n < 0 else ""
    n = abs(int(n))
    if n < 1024:
        return "%s%d B" % (sign, n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if n < 1024 or unit == "TiB":
            return "%s%s %s" % (sign, ("%.2f" % n) if n < 10 else ("%.1f" % n) if n < 100 else ("%.0f" % n), unit)


def fmt_lines(lines, show=None, indent="  "):
    show = show or (lambda f, ln: "%s:%d" % (f, ln))
    return ["%s%s  %s%s" % (indent, fmt(b).rjust(10), show(f, ln), " in %s" % fn if fn else "") for f, ln, fn, b in lines]
