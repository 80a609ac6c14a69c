"""The session folder inside a workload process: capture, proc file and control-socket paths (the contract in
README.md, "Session folder contract"; the extension's side is src/core/base/sessionFolder)."""
import datetime
import hashlib
import json
import os
import stat
import tempfile

# sun_path is 108 bytes on Linux, including the terminating NUL.
MAX_SOCKET_PATH = 107


def capture_path(session_dir, pid):
    return os.path.join(session_dir, "capture-%d.gpumem" % pid)


def proc_path(session_dir, pid):
    return os.path.join(session_dir, "proc-%d.json" % pid)


def _private_dir(base):
    """Creates (or checks) a 0700 folder of ours; returns None when it is not safe to use."""
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        st = os.lstat(base)
    except OSError:
        return None
    # Another user could have pre-created it to intercept our sockets.
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return base


def socket_path(session_dir, pid, env=None):
    """<session>/ctl-<pid>.sock if it fits sun_path, else a short name in a private runtime folder."""
    env = os.environ if env is None else env
    direct = os.path.join(session_dir, "ctl-%d.sock" % pid)
    if len(os.fsencode(direct)) <= MAX_SOCKET_PATH:
        return direct
    digest = hashlib.sha1(os.fsencode(os.path.abspath(session_dir))).hexdigest()[:12]
    name = "%s-%d.sock" % (digest, pid)
    candidates = []
    if env.get("XDG_RUNTIME_DIR"):
        candidates.append(os.path.join(env["XDG_RUNTIME_DIR"], "gpumem"))
    candidates.append(os.path.join(tempfile.gettempdir(), "gpumem-%d" % os.getuid()))
    for base in candidates:
        path = os.path.join(base, name)
        if len(os.fsencode(path)) <= MAX_SOCKET_PATH and _private_dir(base):
            return path
    return None


def write_proc_file(session_dir, info):
    """Writes proc-<pid>.json atomically (clients poll the folder and must never see half a file)."""
    path = proc_path(session_dir, info["pid"])
    doc = dict(info)
    doc.setdefault("version", 1)
    doc.setdefault("started", datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    tmp = "%s.tmp" % path
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
        f.write("\n")
    os.replace(tmp, path)
    return path
