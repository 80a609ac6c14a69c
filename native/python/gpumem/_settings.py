"""The environment contract (native/python/README.md), parsed once per process."""
import os


class SettingsError(ValueError):
    pass


class Settings:
    __slots__ = (
        "session_dir", "allocator_so", "segments", "trim", "stacks", "sample_ms", "backend", "sim_capacity",
        "user_roots", "strict_compile", "budget", "allocator_mode",
    )

    def __init__(self, env=None):
        env = os.environ if env is None else env
        self.session_dir = env.get("GPUMEM_SESSION_DIR", "")
        if not self.session_dir:
            raise SettingsError("GPUMEM_SESSION_DIR is not set")
        if not os.path.isabs(self.session_dir):
            raise SettingsError("GPUMEM_SESSION_DIR must be an absolute path, got %r" % self.session_dir)
        self.allocator_so = env.get("GPUMEM_ALLOCATOR_SO", "")
        if not self.allocator_so:
            raise SettingsError("GPUMEM_ALLOCATOR_SO is not set (the path of libgpumem_allocator.so)")
        self.segments = env.get("GPUMEM_SEGMENTS", "expandable")
        if self.segments not in ("expandable", "fixed"):
            raise SettingsError("GPUMEM_SEGMENTS must be 'expandable' or 'fixed', got %r" % self.segments)
        trim = env.get("GPUMEM_TRIM", "1")
        if trim not in ("0", "1"):
            raise SettingsError("GPUMEM_TRIM must be '1' (trim on growth) or '0', got %r" % trim)
        self.trim = trim == "1"
        self.stacks = env.get("GPUMEM_STACKS", "1") not in ("0", "false", "no", "off")
        self.sample_ms = _int(env, "GPUMEM_SAMPLE_MS", 200)
        self.backend = env.get("GPUMEM_BACKEND", "cuda")
        if self.backend not in ("cuda", "sim"):
            raise SettingsError("GPUMEM_BACKEND must be 'cuda' or 'sim', got %r" % self.backend)
        self.sim_capacity = _int(env, "GPUMEM_SIM_CAPACITY", 0)
        # Note [Capture budget] (native/allocator/src/compactor.cc): bytes, 0 = unbounded; default 1 GiB.
        self.budget = _int(env, "GPUMEM_BUDGET", 1 << 30)
        if self.budget < 0 or 0 < self.budget < (1 << 20):
            raise SettingsError("GPUMEM_BUDGET must be 0 (unbounded) or at least 1048576 bytes (1 MiB), got %r"
                                % env.get("GPUMEM_BUDGET"))
        roots = env.get("GPUMEM_USER_ROOTS", "")
        self.user_roots = [r for r in roots.split(os.pathsep) if r] or [os.getcwd()]
        self.strict_compile = env.get("GPUMEM_STRICT_COMPILE", "0") not in ("0", "", "false", "no")
        # Note [Choosing the mode] in _mode.py; the first tracked process resolves `auto` and exports
        # the answer, so its children (ranks, workers) never decide differently.
        self.allocator_mode = env.get("GPUMEM_ALLOCATOR", "auto") or "auto"  # Note [Default allocator mode]
        if self.allocator_mode not in ("auto", "lens", "pytorch"):
            raise SettingsError("GPUMEM_ALLOCATOR must be 'auto', 'lens' or 'pytorch', got %r" % self.allocator_mode)


def _int(env, key, default):
    raw = env.get(key, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError("%s must be a whole number, got %r" % (key, raw)) from None
    if value < 0:
        raise SettingsError("%s must be >= 0, got %r" % (key, raw))
    return value


def rank_info(env=None):
    """(rank, local_rank, world_size) from the usual launcher variables; rank 0 of 1 if absent."""
    env = os.environ if env is None else env

    def get(key, default):
        try:
            return int(env.get(key, default))
        except ValueError:
            return default

    return get("RANK", 0), get("LOCAL_RANK", 0), get("WORLD_SIZE", 1)
