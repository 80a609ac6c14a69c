"""Control-socket client in Python (the Node twin is src/core/base/control); for `python3 -m gpumem` on
machines without Node.js and for tests."""
import glob
import json
import os
import socket


class ControlError(RuntimeError):
    pass


def list_processes(session_dir):
    """proc-<pid>.json records of the session, ordered by rank then pid."""
    procs = []
    for path in glob.glob(os.path.join(session_dir, "proc-*.json")):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue  # being written (the writer renames atomically) or foreign
        doc["file"] = path
        procs.append(doc)
    return sorted(procs, key=lambda p: (p.get("rank", 0), p.get("pid", 0)))


def is_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except PermissionError:
        return True
    except OSError:
        return False


def live_processes(session_dir):
    return [p for p in list_processes(session_dir) if p.get("socket") and is_alive(p["pid"])]


def request(socket_path, payload, timeout=5.0):
    """Send one JSON request line and return the parsed reply (raises ControlError)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        try:
            s.connect(socket_path)
        except (FileNotFoundError, ConnectionRefusedError):
            raise ControlError("no workload listens on %s (it has exited)" % socket_path) from None
        s.sendall((json.dumps(payload) + "\n").encode())
        buf = b""
        while b"\n" not in buf:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                raise ControlError("the workload did not answer %r within %.1f s" % (payload.get("cmd"), timeout)) from None
            if not chunk:
                raise ControlError("the workload closed the connection without answering %r" % payload.get("cmd"))
            buf += chunk
    finally:
        s.close()
    try:
        reply = json.loads(buf.split(b"\n", 1)[0])
    except ValueError:
        raise ControlError("the workload's reply is not JSON: %r" % buf[:200]) from None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise ControlError("the workload's reply has no 'ok' field: %r" % buf[:200])
    return reply
