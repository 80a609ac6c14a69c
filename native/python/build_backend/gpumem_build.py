"""The build backend of `pip install native/python` (PEP 517; pyproject.toml names it, with backend-path). Standard
library only and no build requirements, so pip builds the package offline, with or without build isolation, on the
Python of a GPU machine (the package's 3.9 and later: TOML is read by tomllib from 3.11, else by read_toml below).

Note [Installed package]:
- The wheel holds the gpumem package as it is in native/python/gpumem, its .py and .cpp files (the one copy of the Python side: the VSIX
  ships the same folder, src/core/base/launch puts it on the workload's PYTHONPATH), plus two files that the
  repository keeps elsewhere:
  - gpumem/_site/sitecustomize.py, a copy of native/python/sitecustomize.py: `gpumem run` puts gpumem/_site first on
    a workload's PYTHONPATH (never site-packages itself, whose packages would then shadow the standard library);
  - gpumem/libgpumem_allocator.so, the lens allocator built while the wheel is made, from native/allocator with the
    machine's C++ compiler (`make`, CXX if set, else g++): the same Makefile as `npm run build`, so the same glibc
    2.28 / libstdc++ 3.4.25 floor (Note [Binary floor] in native/floor/README.md). A wheel built on one machine
    therefore runs on any Linux of the same architecture at or above the floor; it is tagged linux_<arch>, as a
    wheel built from source is (check_floor.py says whether it could carry manylinux_2_28).
- The sdist carries the C++ it builds from under native/ (allocator, format headers, floor), so that an sdist
  unpacked anywhere builds the same way; from the repository they are found at ../allocator.
- No editable install: native/python holds a sitecustomize.py, which a .pth would put on every process's path.
  From the repository, PYTHONPATH=native/python is the development set-up (native/python/README.md)."""
import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # native/python, or an unpacked sdist
ALLOCATOR_SO = "libgpumem_allocator.so"
# The package's files that ship: its modules and the observer extension's C++, which the workload compiles against
# its own torch at first use (gpumem/_observer_ext.cpp, Note [Observer source in the build folder]).
SHIPPED_SUFFIXES = (".py", ".cpp")
# The C++ an sdist carries, relative to native/ (the allocator's Makefile reads ../format and ../floor).
NATIVE_PARTS = ("allocator/Makefile", "allocator/recorder_tests.mk", "allocator/exports.map", "allocator/src",
                "allocator/include", "format", "floor/floor.h", "floor/floor_shims.cc")


# ---- pyproject.toml ------------------------------------------------------------------------------------------
def read_toml(text):
    """The TOML this project's pyproject.toml is written in: [table] and [dotted.table] headers, keys with a string,
    a list of strings or a boolean. Anything else is an error, never a guess (test_pip_package compares the result
    with tomllib's)."""
    doc, table = {}, None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]", line)
        if header:
            table = doc
            for part in header.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        item = re.fullmatch(r'("[^"]*"|[A-Za-z0-9_-]+)\s*=\s*(.+?)\s*(#[^"\]]*)?', line)
        if item is None or table is None:
            raise ValueError("pyproject.toml:%d: not the TOML this backend reads: %s" % (n, raw))
        key = item.group(1).strip('"')
        table[key] = _toml_value(item.group(2), n)
    return doc


def _toml_value(text, n):
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r'"[^"\\]*"', text):
        return text[1:-1]
    if re.fullmatch(r'\[\s*("[^"\\]*"\s*,\s*)*("[^"\\]*"\s*,?\s*)?\]', text):
        return re.findall(r'"([^"\\]*)"', text)
    raise ValueError("pyproject.toml:%d: a value this backend does not read: %s" % (n, text))


def project_metadata():
    path = os.path.join(PROJECT, "pyproject.toml")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        import tomllib  # Python 3.11
        doc = tomllib.loads(text)
    except ImportError:
        doc = read_toml(text)
    meta = dict(doc["project"])
    if "version" in meta.get("dynamic", []):
        meta["version"] = package_version()
    return meta


def package_version():
    """gpumem.__version__: the version has one home on the Python side."""
    with open(os.path.join(PROJECT, "gpumem", "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("gpumem/__init__.py has no __version__ line")
    return m.group(1)


def dist_name(meta):
    return re.sub(r"[-_.]+", "_", meta["name"]).lower()


def metadata_text(meta):
    lines = ["Metadata-Version: 2.1", "Name: %s" % meta["name"], "Version: %s" % meta["version"]]
    if meta.get("description"):
        lines.append("Summary: %s" % meta["description"])
    if meta.get("license"):
        lines.append("License: %s" % meta["license"])
    if meta.get("requires-python"):
        lines.append("Requires-Python: %s" % meta["requires-python"])
    for c in meta.get("classifiers", []):
        lines.append("Classifier: %s" % c)
    body = ""
    if meta.get("readme"):
        with open(os.path.join(PROJECT, meta["readme"]), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + body


def entry_points_text(meta):
    groups = {}
    if meta.get("scripts"):
        groups["console_scripts"] = meta["scripts"]
    groups.update(meta.get("entry-points", {}))
    out = []
    for group, items in groups.items():
        out.append("[%s]" % group)
        out += ["%s = %s" % (k, v) for k, v in items.items()]
        out.append("")
    return "\n".join(out)


# ---- the allocator -------------------------------------------------------------------------------------------
def native_dir():
    """native/ of an unpacked sdist, else of the repository around native/python."""
    for candidate in (os.path.join(PROJECT, "native"), os.path.dirname(PROJECT)):
        if os.path.isfile(os.path.join(candidate, "allocator", "Makefile")):
            return candidate
    raise RuntimeError("the lens allocator's sources are missing: neither %s nor %s holds allocator/Makefile" % (
        os.path.join(PROJECT, "native"), os.path.dirname(PROJECT)))


def build_allocator(work):
    """Builds libgpumem_allocator.so into `work` with native/allocator's Makefile; returns its path."""
    make = shutil.which("make")
    if make is None:
        raise RuntimeError("building the lens allocator needs make and a C++17 compiler (Debian/Ubuntu: apt-get "
                           "install make g++; RHEL/Rocky: dnf install make gcc-c++)")
    jobs = str(max(1, min(8, os.cpu_count() or 1)))
    so = os.path.join(work, ALLOCATOR_SO)
    # Objects go to the Makefile's own build/ (in the repository: the very ones `npm run build` made, so a wheel
    # built there only links); the library to `work`.
    cmd = [make, "-C", os.path.join(native_dir(), "allocator"), "-j" + jobs, "OUT=" + work, so]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if proc.returncode != 0 or not os.path.isfile(so):
        tail = "\n".join(proc.stdout.splitlines()[-30:])
        raise RuntimeError("building the lens allocator failed (%s):\n%s" % (" ".join(cmd), tail))
    sys.stderr.write("gpumem_build: built %s in %.0f s\n" % (ALLOCATOR_SO, time.monotonic() - t0))
    return so


# ---- the wheel -----------------------------------------------------------------------------------------------
def platform_tag():
    return re.sub(r"[-.]", "_", sysconfig.get_platform())


def package_files():
    """(path in the wheel, path on disk) of the Python side, sorted."""
    out = []
    pkg = os.path.join(PROJECT, "gpumem")
    for folder, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(SHIPPED_SUFFIXES):
                full = os.path.join(folder, name)
                out.append(("gpumem/" + os.path.relpath(full, pkg).replace(os.sep, "/"), full))
    out.append(("gpumem/_site/sitecustomize.py", os.path.join(PROJECT, "sitecustomize.py")))
    return out


class _Wheel:
    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, name, data, executable=False):
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o755 if executable else 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append((name, "sha256=" + digest, str(len(data))))

    def close(self, record_name):
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerows(self.record + [(record_name, "", "")])
        info = zipfile.ZipInfo(record_name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, buf.getvalue())
        self.zip.close()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    meta = project_metadata()
    name, version = dist_name(meta), meta["version"]
    filename = "%s-%s-py3-none-%s.whl" % (name, version, platform_tag())
    info = "%s-%s.dist-info" % (name, version)
    with tempfile.TemporaryDirectory(prefix="gpumem-build-") as work:
        so = build_allocator(work)
        path = os.path.join(wheel_directory, filename)
        wheel = _Wheel(path)
        try:
            for arcname, disk in package_files():
                with open(disk, "rb") as f:
                    wheel.add(arcname, f.read())
            with open(so, "rb") as f:
                wheel.add("gpumem/" + ALLOCATOR_SO, f.read(), executable=True)
            wheel.add(info + "/METADATA", metadata_text(meta).encode())
            wheel.add(info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: gpumem_build\nRoot-Is-Purelib: false\n"
                                        "Tag: py3-none-%s\n" % platform_tag()).encode())
            wheel.add(info + "/entry_points.txt", entry_points_text(meta).encode())
            wheel.add(info + "/top_level.txt", b"gpumem\n")
        finally:
            wheel.close(info + "/RECORD")
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


# ---- the sdist -----------------------------------------------------------------------------------------------
def build_sdist(sdist_directory, config_settings=None):
    meta = project_metadata()
    base = "%s-%s" % (dist_name(meta), meta["version"])
    filename = base + ".tar.gz"
    native = native_dir()
    files = [("pyproject.toml", os.path.join(PROJECT, "pyproject.toml")),
             ("README.md", os.path.join(PROJECT, "README.md")),
             ("sitecustomize.py", os.path.join(PROJECT, "sitecustomize.py")),
             ("build_backend/gpumem_build.py", os.path.abspath(__file__))]
    files += [(arc, disk) for arc, disk in package_files() if not arc.startswith("gpumem/_site/")]
    for part in NATIVE_PARTS:
        full = os.path.join(native, part)
        if os.path.isdir(full):
            for folder, dirs, names in os.walk(full):
                dirs.sort()
                for n in sorted(names):
                    disk = os.path.join(folder, n)
                    files.append(("native/" + os.path.relpath(disk, native).replace(os.sep, "/"), disk))
        else:
            files.append(("native/" + part, full))
    path = os.path.join(sdist_directory, filename)
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        pkg_info = metadata_text(meta).encode()
        _tar_add(tar, base + "/PKG-INFO", pkg_info)
        for arc, disk in files:
            with open(disk, "rb") as f:
                _tar_add(tar, base + "/" + arc, f.read())
    return filename


def _tar_add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 1577836800, 0o644
    tar.addfile(info, io.BytesIO(data))


def get_requires_for_build_sdist(config_settings=None):
    return []
