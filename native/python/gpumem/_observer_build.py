"""The build of the observer's tracker extension (_observer_ext.cpp) against the user's torch: its cache folder and
key, the build in a child under a time limit (Note [Observer build watchdog]), the build ahead (Note [Observer build
ahead]), and whether it can be built here at all (for `auto`, Note [Choosing the mode]). Imports nothing of torch's
until a build or an import of the built module is asked for."""
import ctypes
import hashlib
import os
import sys

OBSERVER_VERSION = 11  # 3: the lens OOM glue (Note [Lens OOM type]) · 4: trace entries' user_metadata (labels) · 5:
#                      events_off (Note [Recorded steps]) · 6: built optimized (Note [Observer build flags]) · 7:
#                      figures (Note [Figures without the dict]) · 8: gpumem_tracker_figures (Note [Figures on the
#                      sampler's thread]) · 9: segment entries' private pool ids (SEGMENT_POOL in observer.h) · 10:
#                      gpumem_links_on (Note [Backward on the forward line]) · 11: the running node read at each
#                      allocation, no callback per node (Note [Learned steps])

# Note [Observer build flags]: torch.utils.cpp_extension's JIT build passes no -O flag, so the tracker was built
# at -O0: a profile of a ResNet-50 step after the recorded steps (H100, 2026-11-28)
# showed `std::atomic<bool>::load` as a function of its own, the tracker's "return at once" costing about 70 ns a
# trace entry, 2,300 entries a step. Both builds (the child's and the in-process load that imports it) must pass
# the same flags: torch hashes them with the sources, and a difference would rebuild in the workload's process.
BUILD_CFLAGS = ["-O2"]

# Note [Observer source in the build folder]: the C++ is a file of the package (_observer_ext.cpp; the cache key is
# derived from its text, so a change of it is a new build folder). Both builds compile the same copy of it in the
# build folder (written only when its text differs, so its time stays): torch.utils.cpp_extension.load runs ninja in
# each process, and ninja rebuilds when a source's path or time changes, so a package installed elsewhere (the VSIX's
# copy beside a pip install) or reinstalled would otherwise compile again in the workload's process, unwatched.
TRACKER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_observer_ext.cpp")
with open(TRACKER_SOURCE, encoding="utf-8") as _f:
    TRACKER_SRC = _f.read()
del _f
SOURCE_IN_FOLDER = "tracker_source.cpp"


def _build_dir(torch):
    text = "%s|%s|%d|%s" % (torch.__version__, TRACKER_SRC, OBSERVER_VERSION, " ".join(BUILD_CFLAGS))
    key = hashlib.sha1(text.encode()).hexdigest()[:12]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpumem", "observer-" + key), "gpumem_observer_" + key


def _source_in(folder):
    """The tracker's source in its build folder (Note [Observer source in the build folder]); its path."""
    path = os.path.join(folder, SOURCE_IN_FOLDER)
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == TRACKER_SRC:
                return path
    except OSError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(TRACKER_SRC)
    return path


# Note [Observer build watchdog]: the tracker is compiled in a child Python (the user's, without our
# bootstrap: no GPUMEM_SESSION_DIR) under a time limit, and only a finished build is imported here. In
# process, torch.utils.cpp_extension would wait without end on its lock file (FileBaton) when an earlier
# build was killed mid-way, and a compiler that hangs would hang the workload at its first CUDA use with
# an empty capture. A lock older than the limit is such a leftover and is removed (said on stderr); a build
# that runs out of time or fails falls back to PyTorch's history (the mode's second source), never a stall.
BUILD_TIMEOUT_S = 240.0
_BUILD_CHILD = r"""
import sys
from torch.utils.cpp_extension import load
src, folder, name, cflags = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
load(name=name, sources=[src], with_cuda=True, build_directory=folder, verbose=False, extra_cflags=cflags)
"""


def _build_timeout():
    try:
        return max(1.0, float(os.environ.get("GPUMEM_OBSERVER_BUILD_TIMEOUT", BUILD_TIMEOUT_S)))
    except ValueError:
        return BUILD_TIMEOUT_S


def _build_in_child(folder, name, timeout):
    """Compiles the tracker in a child process; None when built, else why not (one line)."""
    import subprocess
    import time

    lock = os.path.join(folder, "lock")
    try:
        age = time.time() - os.stat(lock).st_mtime
        if age > timeout:
            os.remove(lock)
            sys.stderr.write("gpumem: removed a stale observer build lock (%d s old, from a build that was killed)\n" % age)
    except OSError:
        pass
    src = _source_in(folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    try:
        # Its own process group: on time-out the compiler and ninja it started end with it.
        argv = [sys.executable, "-c", _BUILD_CHILD, src, folder, name, " ".join(BUILD_CFLAGS)]
        p = subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    except OSError as exc:
        return "cannot start %s to build the observer (%s)" % (sys.executable, exc)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
        p.communicate()
        return "building the observer took longer than %d s (GPUMEM_OBSERVER_BUILD_TIMEOUT)" % timeout
    if p.returncode != 0:
        lines = [l for l in out.decode("utf-8", "replace").strip().splitlines() if l.strip()]
        return "building the observer failed: %s" % (lines[-1] if lines else "exit code %d" % p.returncode)
    return None


def _built(folder):
    """Whether the tracker module is in its build folder (the one test of "built", for every caller)."""
    try:
        return any(f.endswith(".so") for f in os.listdir(folder))
    except OSError:
        return False


def lens_glue(torch):
    """The built tracker module's path when it has the lens OOM glue (Note [Lens OOM type]), else None. Never
    builds: a lens run must not wait for a compiler; the glue comes with the observer that VS Code and
    `gpumem build-observer` build ahead, and the lens mode passes OOMs on as RuntimeError until then."""
    try:
        folder = _build_dir(torch)[0]
        for f in sorted(os.listdir(folder)):
            if f.endswith(".so"):
                lib = ctypes.CDLL(os.path.join(folder, f))
                return os.path.join(folder, f) if hasattr(lib, "gpumem_glue_set") else None
    except (OSError, AttributeError):
        pass
    return None


def prebuild(torch, on_start=None):
    """Note [Observer build ahead]: the tracker's first build takes ~25 s (one per torch version and
    OBSERVER_VERSION). A run must not wait for it where it can be done ahead: VS Code builds it in the
    background when the Python environment changes (with a progress notification), and both `gpumem run`
    launchers start this build beside the workload, so it overlaps the workload's own start (importing torch,
    building the model); a workload that reaches its first CUDA use first waits for that same build
    (torch.utils.cpp_extension's lock on the build folder) instead of compiling twice. Returns what happened."""
    import time

    folder, name = _build_dir(torch)
    if _built(folder):
        return {"built": True, "already": True, "folder": folder, "torch": torch.__version__}
    available, why = availability(torch)
    if not available:
        return {"built": False, "already": False, "folder": folder, "torch": torch.__version__, "why": why,
                "no_cuda": _cpu_only(torch)}
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        return {"built": False, "already": False, "folder": folder, "torch": torch.__version__, "why": str(exc)}
    if on_start is not None:
        on_start({"building": True, "folder": folder, "torch": torch.__version__})
    t0 = time.time()
    why = _build_in_child(folder, name, _build_timeout())
    return {"built": why is None, "already": False, "folder": folder, "torch": torch.__version__, "why": why,
            "seconds": round(time.time() - t0, 1)}


def build_tracker(torch):
    """The tracker extension, built once per torch version; (module, None) or (None, why not)."""
    folder, name = _build_dir(torch)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        return None, "cannot create %s (%s)" % (folder, exc)
    if not _built(folder):
        sys.stderr.write("gpumem: building the observer, first run only (about 30 s) in %s\n" % folder)
        why = _build_in_child(folder, name, _build_timeout())
        if why:
            return None, why
    try:
        from torch.utils.cpp_extension import load

        # Built: this only checks the sources' hash and imports the module.
        mod = load(name=name, sources=[_source_in(folder)], with_cuda=True, build_directory=folder, verbose=False,
                   extra_cflags=BUILD_CFLAGS)
        return mod, None
    except Exception as exc:  # no compiler, no ninja, no headers, a layout change
        text = str(exc).strip().splitlines()
        return None, "%s: %s" % (type(exc).__name__, text[-1] if text else "")


def _cpu_only(torch):
    """A torch built without CUDA (nor ROCm): nothing to observe, so nothing to build. Note [Observer build ahead]: VS
    Code builds ahead at activation, and a workspace with test files activates it; on a CPU-only torch that build
    could only fail, after a compile, at every activation."""
    version = getattr(torch, "version", None)
    return version is not None and not getattr(version, "cuda", None) and not getattr(version, "hip", None)


def availability(torch):
    """(True, None) when the tracker is built for this torch or can be built here (a C++ compiler, ninja and
    Python's headers), else (False, why). Cheap: looks at files and the PATH, imports nothing."""
    import shutil
    import sysconfig

    if _cpu_only(torch):
        return False, "this torch (%s) is built without CUDA: there is no CUDA allocator to observe" % torch.__version__
    if _built(_build_dir(torch)[0]):
        return True, None
    cxx = os.environ.get("CXX") or "c++"
    if not shutil.which(cxx.split()[0]) and not shutil.which("g++"):
        return False, "no C++ compiler (%s) to build the observer of PyTorch's allocator" % cxx
    if not shutil.which("ninja"):
        try:
            import ninja  # noqa: F401  (the pip package puts its binary next to it)
        except ImportError:
            return False, "no ninja to build the observer of PyTorch's allocator"
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.isfile(os.path.join(include, "Python.h")):
        return False, "no Python headers (%s/Python.h) to build the observer of PyTorch's allocator" % include
    return True, None
