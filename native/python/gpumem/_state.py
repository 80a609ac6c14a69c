"""Process-wide bootstrap state (one lens allocator per process)."""


class State:
    def __init__(self):
        self.settings = None        # _settings.Settings
        self.native = None          # _native.Allocator once the .so is loaded
        self.swapped = False        # change_current_allocator succeeded
        self.lens_oom_glue = None   # the observer module whose glue raises torch.OutOfMemoryError (Note [Lens OOM type])
        self.configured = False     # gpumem_configure succeeded (capture + socket exist)
        self.owner_pid = None       # the process that configured (forked children do not own it)
        self.first_cuda_init = None  # "file:line in func" of the first torch.cuda._lazy_init caller
        self.capture = None
        self.socket = None
        self.exit_code = 0
        self.pending_notices = []   # (text, level) raised before the capture existed
        self.fractions = {}         # device → last set_per_process_memory_fraction
        self.mode_choice = None     # _mode.Choice: which allocator mode and why
        self.observer_source = None  # "tracker" | "history" | "stats" (PyTorch-allocator mode)


STATE = State()
