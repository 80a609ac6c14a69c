"""What the observer of PyTorch's allocator holds while it runs (one per process), shared by its parts: the start
(_observe.py), its sources (_observer_history.py, _observer_figures.py) and the stop after the recorded steps
(_recorded_steps.py). A module of its own so each part reads the same objects without importing another part."""
import threading

LOCK = threading.Lock()  # the start and the stop after the recorded steps, one at a time


class _Live:
    obs = None  # the Observer (_observer_api.py) once started
    tracker = None  # the tracker extension, when it is the source
    figures_ext = None  # the extension whose figures are read: the tracker's, or loaded for figures only (no tracker)
    fallback = None  # the history drain, when no tracker could be built
    events_off = False  # Note [Recorded steps]: nothing is recorded per allocation any more
    figures_by = None  # who reads PyTorch's figures once they are the source: "sampler", "poll" (start_figures)


LIVE = _Live()
