#!/usr/bin/env python3
"""check_floor.py BINARY... — every shipped binary asks for nothing newer than the floor (Note [Binary floor] in
README.md): glibc 2.28, libstdc++ 3.4.25 (GLIBCXX_3.4.25 and CXXABI_1.3.11, GCC 8's), libgcc_s GCC_7.0.0. Reads
each binary's dynamic symbols with objdump -T (binutils), of either architecture, and prints one line per binary
with the highest version it needs from each library, then one line per symbol above the floor, naming it. A binary
that binds a libpthread or libdl symbol to its first version must name libpthread.so.0 and libdl.so.2 (objdump -p),
where glibc 2.28 keeps them. With GPUMEM_RESULTS set, one results line per binary (Note [Results format] in
test/README.md). Exit status 1 when any binary is above the floor."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

FLOOR = {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 25), "CXXABI": (1, 3, 11), "GCC": (7, 0, 0)}
# Which library each version family names, for the messages.
LIBRARY = {"GLIBC": "glibc 2.28", "GLIBCXX": "libstdc++ 3.4.25", "CXXABI": "libstdc++ 3.4.25", "GCC": "libgcc_s of GCC 8"}
# In libc.so.6 since glibc 2.32–2.34; on glibc 2.28 in these libraries (floor.h pins them to their first version).
MOVED = (("libpthread.so.0", re.compile(r"^pthread_")), ("libdl.so.2", re.compile(r"^dl(open|sym|error|close|addr|vsym|info)$")))
VERSION = re.compile(r"\(?\b(GLIBCXX|GLIBC|CXXABI|GCC)_([0-9][0-9.]*)\)?\s+(\S+)\s*$")


def objdump():
    for tool in ("objdump", "aarch64-linux-gnu-objdump"):
        if shutil.which(tool):
            return tool
    raise SystemExit("check_floor: objdump not found (apt-get install -y binutils)")


def needs(path, tool):
    """[(family, version tuple, symbol)] of the binary's undefined dynamic symbols, and its NEEDED libraries."""
    out = subprocess.run([tool, "-T", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("objdump -T %s: %s" % (path, out.stderr.strip()))
    found = []
    for line in out.stdout.splitlines():
        if "*UND*" not in line:
            continue
        m = VERSION.search(line)
        if m:
            found.append((m.group(1), tuple(int(x) for x in m.group(2).split(".")), m.group(3)))
    dyn = subprocess.run([tool, "-p", path], capture_output=True, text=True).stdout
    needed = set(re.findall(r"^\s*NEEDED\s+(\S+)", dyn, re.M))
    return found, needed


def fmt(family, version):
    return "%s_%s" % (family, ".".join(str(x) for x in version))


def check(path, tool):
    """(one summary line, [problems])."""
    found, needed = needs(path, tool)
    highest, problems = {}, []
    for family, version, sym in found:
        if version > highest.get(family, ()):
            highest[family] = version
        if version > FLOOR[family]:
            problems.append("%s needs %s@%s, above the floor %s (%s): pin it in native/floor/floor.h or define it "
                            "in native/floor/floor_shims.cc (Note [Binary floor])" % (
                                os.path.basename(path), sym, fmt(family, version), fmt(family, FLOOR[family]),
                                LIBRARY[family]))
    for lib, names in MOVED:
        users = sorted({s for f, v, s in found if f == "GLIBC" and names.match(s) and v < (2, 32)})
        if users and lib not in needed:
            problems.append("%s binds %s to glibc's first version but does not name %s, where glibc 2.28 has "
                            "them: link it with -l:%s (Note [Binary floor])" % (os.path.basename(path), ", ".join(users),
                                                                                lib, lib))
    summary = "%s: %s" % (path, " ".join(fmt(f, highest[f]) for f in ("GLIBC", "GLIBCXX", "CXXABI", "GCC") if f in highest))
    return summary, problems


def emit(name, ok, ms, message):
    dest = os.environ.get("GPUMEM_RESULTS")
    if not dest:
        return
    line = {"layer": os.environ.get("GPUMEM_RESULTS_LAYER") or "native", "name": name,
            "status": "pass" if ok else "fail", "ms": ms}
    if message:
        line["message"] = message
    fd = os.open(dest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


def main(paths):
    if not paths:
        raise SystemExit(__doc__)
    tool = objdump()
    bad = 0
    for path in paths:
        t0 = time.monotonic()
        name = "floor/%s" % os.path.relpath(path)
        try:
            summary, problems = check(path, tool)
        except (OSError, RuntimeError) as exc:
            summary, problems = path, [str(exc)]
        ms = (time.monotonic() - t0) * 1000
        print(("ok   " if not problems else "FAIL ") + summary)
        for p in problems:
            print("     " + p)
        emit(name, not problems, ms, "; ".join(problems[:3]))
        bad += bool(problems)
    print("%d passed, %d failed" % (len(paths) - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
