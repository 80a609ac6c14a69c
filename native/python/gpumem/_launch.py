"""Pure-Python launcher: the same session-folder and environment contract as src/core/base/launch and
src/core/base/sessionFolder (see README.md), so a GPU machine without Node.js can run
`python3 -m gpumem run -- train.py`. The recording settings and their variables come from the settings table
(_settings.TABLE, Note [Settings table] in src/core/base/settings/table.ts)."""
import datetime
import json
import os
import re
import signal
import subprocess
import sys

from . import _settings

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)  # native/python (site-packages in an installed package)
ROOT = os.path.dirname(os.path.dirname(PYTHON_DIR))
# Note [Installed package] (native/python/build_backend/gpumem_build.py): an installed package carries the
# sitecustomize.py that goes first on a workload's PYTHONPATH in gpumem/_site, and the lens allocator beside its
# modules; in the repository (and the VSIX) they are native/python/sitecustomize.py and dist/native/.
BOOT_DIR = os.path.join(HERE, "_site") if os.path.isdir(os.path.join(HERE, "_site")) else PYTHON_DIR


def default_allocator_so():
    packaged = os.path.join(HERE, "libgpumem_allocator.so")
    return packaged if os.path.exists(packaged) else os.path.join(ROOT, "dist", "native", "libgpumem_allocator.so")


def session_slug(name):
    base = os.path.basename(name)
    if base.lower().endswith(".py"):
        base = base[:-3]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", base).strip("-.")[:40].rstrip("-")
    return slug or "session"


def create_session_folder(root, name, command=None, now=None):
    """<root>/<YYYYMMDD-HHMMSS>-<name>/ with mode 0700; -2, -3… when the second is taken."""
    now = now or datetime.datetime.now()
    root = os.path.abspath(root)
    os.makedirs(root, exist_ok=True)
    base = "%s-%s" % (now.strftime("%Y%m%d-%H%M%S"), session_slug(name))
    for i in range(1, 1000):
        path = os.path.join(root, base if i == 1 else "%s-%d" % (base, i))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)
        if command is not None:
            doc = {"version": 1, "name": session_slug(name), "created": now.astimezone().isoformat(),
                   "command": list(command), "cwd": os.getcwd()}
            fd = os.open(os.path.join(path, "session.json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
        return path
    raise RuntimeError("too many sessions named %s in %s" % (base, root))


def workload_env(session_dir, allocator_so, user_roots=None, base=None, **given):
    """The workload's environment: `base` (default: this one) without stale GPUMEM_* plumbing (the user's own
    switches, _settings.USER_ENV_SWITCHES, pass through), every recording setting by the table (`given` by its
    _settings names; None or absent: its default), and our bootstrap first on PYTHONPATH. A wrong value raises
    SettingsError with the table's message; a name the table does not have, TypeError (a typo is a bug)."""
    unknown = sorted(set(given) - {d["py"] for d in _settings.TABLE})
    if unknown:
        raise TypeError("workload_env: no recording setting %s" % ", ".join(unknown))
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("GPUMEM_") or k in _settings.USER_ENV_SWITCHES}
    env.update({"GPUMEM_SESSION_DIR": session_dir, "GPUMEM_ALLOCATOR_SO": allocator_so})
    for decl in _settings.TABLE:
        value = given.get(decl["py"])
        value = decl["default"] if value is None else value
        text = _settings.to_env(decl, value)
        _settings.parse_text(decl, text, decl["env"])  # the table's rule, as the bootstrap will read it
        # a default that means none (the simulator's own capacity) needs no variable: absent is the default
        if not (value == 0 and decl["default"] == 0 and decl["zero"]):
            env[decl["env"]] = text
    if user_roots:
        env["GPUMEM_USER_ROOTS"] = os.pathsep.join(user_roots)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p != BOOT_DIR] if env.get("PYTHONPATH") else []
    env["PYTHONPATH"] = os.pathsep.join([BOOT_DIR] + rest)
    return env


def run(argv, out_dir, python=None, allocator_so=None, quiet=False, **settings):
    """Run `argv` (script + args, or ['-m', mod, …], or a full command when argv[0] is not a .py and
    not -m) under the lens; `settings`: recording settings by their _settings names (the settings table's `py`).
    Returns the workload's exit status as a shell would report it, and the session folder."""
    allocator_so = os.path.abspath(allocator_so or default_allocator_so())
    if not os.path.exists(allocator_so):
        raise SystemExit("gpumem: the lens allocator is not built: %s is missing (run `make -C native/allocator`)" % allocator_so)
    if not argv:
        raise SystemExit("gpumem run: nothing to run; usage: python3 -m gpumem run [--out DIR] -- script.py [args…]")
    python = python or sys.executable
    if argv[0] == "-m" or argv[0].endswith(".py"):
        command = [python] + list(argv)
        name = argv[1] if argv[0] == "-m" and len(argv) > 1 else argv[0]
    else:
        command = list(argv)  # e.g. torchrun …: its python children inherit the environment
        name = next((a for a in argv if a.endswith(".py")), argv[0])
    folder = create_session_folder(out_dir, name, command)
    env = workload_env(folder, allocator_so, user_roots=[os.getcwd()], **settings)
    if not quiet:
        sys.stderr.write("gpumem: session folder %s\n" % folder)
    if settings.get("allocator_mode", "auto") in ("auto", "pytorch") and settings.get("backend", "cuda") == "cuda":
        build_observer_ahead(python, env)
    proc = subprocess.Popen(command, env=env)
    # In a terminal, Ctrl-C reaches the whole foreground process group, the workload included: a
    # forwarded copy would interrupt its KeyboardInterrupt handling. Forward only signals the terminal
    # did not deliver (kill, a scheduler's SIGTERM), and never exit before the workload does.
    terminal_delivers_sigint = _foreground_of_terminal()
    previous = {}

    def forward(signum, _frame):
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM):
        ignore = sig == signal.SIGINT and terminal_delivers_sigint
        previous[sig] = signal.signal(sig, signal.SIG_IGN if ignore else forward)
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    captures = sorted(f for f in os.listdir(folder) if f.endswith(".gpumem"))
    if not quiet:
        if captures:
            for c in captures:
                sys.stderr.write("gpumem: capture %s\n" % os.path.join(folder, c))
        else:
            sys.stderr.write("gpumem: no capture was written (the workload never used CUDA, or tracking was off; see above)\n")
    return (128 - code) if code < 0 else code, folder


def build_observer_ahead(python, workload_env_):
    """Starts `python -m gpumem build-observer` beside the workload (Note [Observer build ahead] in
    gpumem/_observer_build.py): it returns at once when the observer is built; otherwise its build overlaps the
    workload's start. Detached and silent; the workload never waits for this process itself."""
    env = {k: v for k, v in workload_env_.items() if not k.startswith("GPUMEM_")}
    try:
        subprocess.Popen([python, "-m", "gpumem", "build-observer", "--quiet"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        pass  # the workload builds it itself at its first CUDA use


def _foreground_of_terminal():
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False
