"""`python3 -m gpumem run|ping|empty-cache|snapshot|build-observer` — the CLI for machines without Node.js.

    python3 -m gpumem run [options] [--] script.py|-m module|command [args…]
                          (the options of `gpumem run`: python3 -m gpumem run --help)
    python3 -m gpumem ping|empty-cache|snapshot --session DIR [--pid N]
    python3 -m gpumem build-observer [--json]   # the PyTorch-allocator mode's observer, built ahead (once per torch)
"""
import argparse
import json
import os
import sys

from . import _control, _launch, _settings


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.2f %s" % (n, unit))
        n /= 1024.0


def _run_parser():
    """`run`'s options: --out, --python and --allocator-so, and every recording setting the table gives an option
    (Note [Same options] in src/cli/commands/run.ts: `gpumem run` takes the same ones, with the same help)."""
    p = argparse.ArgumentParser(prog="python3 -m gpumem run", description="Run your workload with GPU memory tracking.")
    p.add_argument("--out", default=".gpumem", metavar="DIR", help="folder for session folders (default: .gpumem)")
    p.add_argument("--python", default=None, metavar="PATH", help="interpreter for script.py / -m (default: this one)")
    for decl in _settings.TABLE:
        if not decl["cli"]:
            continue
        if decl["kind"] == "flag":
            p.add_argument(decl["cli"], dest="setting_" + decl["py"], action="store_true", help=decl["help"])
        else:
            p.add_argument(decl["cli"], dest="setting_" + decl["py"], metavar=decl["metavar"], default=None,
                           help=decl["help"])
    p.add_argument("--allocator-so", default=None, metavar="PATH",
                   help="the lens library (default: the one installed with this package, else the built "
                        "dist/native/libgpumem_allocator.so)")
    return p


def _run(argv):
    p = _run_parser()
    # Our options end at `--`, `-m` or the first word that is not one of ours: everything after belongs
    # to the workload (`run train.py --out x` passes --out to train.py).
    with_value = {a.option_strings[0] for a in p._actions if a.option_strings and a.nargs is None and a.const is None}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--" or word == "-m" or not word.startswith("-"):
            break
        i += 2 if word in with_value else 1
    args = p.parse_args(argv[:i])
    command = argv[i + 1:] if argv[i:i + 1] == ["--"] else argv[i:]
    settings = {}
    for decl in _settings.TABLE:
        given = getattr(args, "setting_" + decl["py"], None) if decl["cli"] else None
        if decl["kind"] == "flag":
            if given:
                settings[decl["py"]] = False  # a flag's option turns it off (--no-trim, --no-stacks)
        elif given is not None:
            try:
                settings[decl["py"]] = _settings.parse_text(decl, given, decl["cli"])
            except _settings.SettingsError as exc:
                p.error(str(exc))
    code, _folder = _launch.run(command, args.out, args.python, args.allocator_so, **settings)
    return code


def _control_cmd(name, argv):
    p = argparse.ArgumentParser(prog="python3 -m gpumem " + name)
    p.add_argument("--session", required=True, help="the session folder (printed by `run`)")
    p.add_argument("--pid", type=int, default=None, help="only this process (default: all live ones)")
    p.add_argument("--json", action="store_true", help="print the raw replies")
    args = p.parse_args(argv)
    procs = _control.live_processes(args.session)
    if args.pid is not None:
        procs = [q for q in procs if q["pid"] == args.pid]
    if not procs:
        sys.stderr.write("gpumem %s: no running workload process in %s%s\n"
                         % (name, args.session, "" if args.pid is None else " with pid %d" % args.pid))
        return 2
    cmd = {"ping": "ping", "empty-cache": "empty_cache", "snapshot": "snapshot"}[name]
    status = 0
    for q in procs:
        try:
            reply = _control.request(q["socket"], {"cmd": cmd}, timeout=60.0 if cmd == "snapshot" else 5.0)
        except _control.ControlError as exc:
            sys.stderr.write("gpumem %s: pid %d: %s\n" % (name, q["pid"], exc))
            status = 1
            continue
        if args.json:
            print(json.dumps(dict(reply, pid=q["pid"])))
        elif not reply["ok"]:
            sys.stderr.write("gpumem %s: pid %d refused: %s\n" % (name, q["pid"], reply.get("error")))
            status = 1
        elif cmd == "empty_cache":
            b, a = reply["reserved_before"], reply["reserved_after"]
            print("pid %d rank %d: reserved %s -> %s (released %s)" % (q["pid"], q.get("rank", 0), _fmt(b), _fmt(a), _fmt(b - a)))
        elif cmd == "snapshot":
            print(reply["pickle"])
        else:
            devs = ", ".join("cuda:%d allocated %s reserved %s" % (d["index"], _fmt(d["allocated"]), _fmt(d["reserved"]))
                             for d in reply.get("devices", []))
            print("pid %d rank %d: %s" % (q["pid"], q.get("rank", 0), devs or "no device in use"))
    return status


def _build_observer(argv):
    """Builds the observer of PyTorch's allocator for this interpreter's torch, if it is not built yet
    (Note [Observer build ahead] in gpumem/_observer_build.py). One line, or with --json one JSON object per line:
    {"building": true, …} when a build starts (so a caller can show progress only then), then the result."""
    p = argparse.ArgumentParser(prog="python3 -m gpumem build-observer")
    p.add_argument("--json", action="store_true", help="print JSON lines: a build's start, then the result")
    p.add_argument("--quiet", action="store_true", help="print nothing (exit status only)")
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError as exc:
        result = {"built": False, "already": False, "why": "this Python has no torch (%s)" % exc}
    else:
        from . import _observer_build

        def started(event):
            if args.json:
                print(json.dumps(event), flush=True)
            elif not args.quiet:
                print("gpumem: building the observer for torch %s (once per torch version, about 30 s)" % event["torch"],
                      flush=True)

        result = _observer_build.prebuild(torch, started)
    if args.json:
        print(json.dumps(result))
    elif not args.quiet:
        if result.get("already"):
            print("gpumem: the observer is built for torch %s (%s)" % (result["torch"], result["folder"]))
        elif result["built"]:
            print("gpumem: built the observer for torch %s in %.0f s (%s)" % (result["torch"], result["seconds"], result["folder"]))
        elif result.get("no_cuda"):
            print("gpumem: no observer to build: %s" % result["why"])
        else:
            print("gpumem: the observer cannot be built here: %s; runs record from PyTorch's history instead" % result["why"])
    return 0 if result["built"] else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(__doc__.strip())
        return 0 if argv else 2
    sub, rest = argv[0], argv[1:]
    if sub == "run":
        return _run(rest)
    if sub in ("ping", "empty-cache", "snapshot"):
        return _control_cmd(sub, rest)
    if sub == "build-observer":
        return _build_observer(rest)
    sys.stderr.write("gpumem: unknown command %r; use run, ping, empty-cache or snapshot (see --help)\n" % sub)
    return 2


def script():
    """`python3 -m gpumem`, and the `gpumem` command of an installed package (pyproject.toml)."""
    # The launcher's own process must not start tracking itself (it never imports torch anyway).
    os.environ.pop("GPUMEM_SESSION_DIR", None)
    return main()


if __name__ == "__main__":
    sys.exit(script())
