"""The control channel over a real Unix socket: every command, its capture events, bad input of every
kind, several clients, and replies within 100 ms while the workload holds the GIL.
Run: python3 test/native/recorder/test_control.py"""
import ctypes
import json
import os
import pickle
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture as cap  # noqa: E402
import common  # noqa: E402

MIB = 1024 * 1024


def scenario_serve(folder):
    """A workload: allocates, announces readiness, then serves until told to stop via a file."""
    lib = common.load()
    sock = os.path.join(folder, "ctl.sock")
    common.configure(lib, capture_path=os.path.join(folder, "c.gpumem"), control_socket=sock)
    keep = lib.gpumem_malloc(3 * MIB, 0, None)
    lib.gpumem_free(lib.gpumem_malloc(5 * MIB, 0, None), 0, 0, None)  # leaves a free cached segment
    open(os.path.join(folder, "ready"), "w").close()
    hold = ctypes.PyDLL(None).usleep  # PyDLL keeps the GIL held during the call
    hold.argtypes = [ctypes.c_uint]
    while not os.path.exists(os.path.join(folder, "stop")):
        hold(200000)  # busy "workload": the GIL is held 200 ms at a time
    lib.gpumem_free(keep, 0, 0, None)
    lib.gpumem_shutdown(0)


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(5)
        self.s.connect(path)
        self.buf = b""

    def send(self, raw):
        self.s.sendall(raw)

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("server closed the connection")
            self.buf += chunk
        ln, self.buf = self.buf.split(b"\n", 1)
        return json.loads(ln)

    def ask(self, obj):
        self.send(json.dumps(obj).encode() + b"\n")
        return self.line()

    def close(self):
        self.s.close()


class ControlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.folder = cls.dir.name
        os.chmod(cls.folder, 0o700)
        cls.sock = os.path.join(cls.folder, "ctl.sock")
        cls.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--scenario", "serve", cls.folder])
        deadline = time.time() + 20
        while not os.path.exists(os.path.join(cls.folder, "ready")):
            if time.time() > deadline or cls.proc.poll() is not None:
                raise AssertionError("workload did not start")
            time.sleep(0.02)

    @classmethod
    def tearDownClass(cls):
        open(os.path.join(cls.folder, "stop"), "w").close()
        cls.proc.wait(timeout=20)
        cls.dir.cleanup()

    def client(self):
        c = Client(self.sock)
        self.addCleanup(c.close)
        return c

    def test_socket_mode_0600(self):
        st = os.stat(self.sock)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

    def test_ping_answers_within_100ms_while_the_gil_is_held(self):
        c = self.client()
        worst = 0.0
        for i in range(10):
            t = time.perf_counter()
            r = c.ask({"cmd": "ping", "id": i})
            worst = max(worst, time.perf_counter() - t)
            self.assertEqual(r["id"], i)
        self.assertLess(worst, 0.1)
        self.assertTrue(r["ok"])
        self.assertEqual(r["pid"], self.proc.pid)
        self.assertEqual(r["rank"], int(os.environ.get("RANK", "0")))
        self.assertEqual([d["index"] for d in r["devices"]], [0])
        self.assertEqual(r["devices"][0]["allocated"], 3 * MIB)
        self.assertGreaterEqual(r["devices"][0]["reserved"], 3 * MIB)

    def test_empty_cache_reports_and_records_origin_1(self):
        r = self.client().ask({"cmd": "empty_cache", "id": "e"})
        self.assertTrue(r["ok"], r)
        self.assertEqual(r["id"], "e")
        self.assertLessEqual(r["reserved_after"], r["reserved_before"])
        time.sleep(0.2)  # flushes every 50 ms
        c = cap.Capture(os.path.join(self.folder, "c.gpumem"))
        recs = [cap.F.EmptyCacheRec.unpack_from(p[3]) for p in c.of("empty_cache")]
        self.assertIn((r["reserved_before"], r["reserved_after"], 1), [(b, a, o) for _, b, a, o, _ in recs])

    def test_snapshot_default_and_explicit_paths(self):
        c = self.client()
        r = c.ask({"cmd": "snapshot"})
        self.assertTrue(r["ok"], r)
        self.assertEqual(os.path.dirname(r["pickle"]), self.folder)
        self.assertRegex(os.path.basename(r["pickle"]), r"^snapshot-%d-\d+\.pickle$" % self.proc.pid)
        explicit = os.path.join(self.folder, "mine.pickle")
        r2 = c.ask({"cmd": "snapshot", "path": explicit})
        self.assertEqual(r2["pickle"], explicit)
        with open(explicit, "rb") as f:
            snap = pickle.load(f)
        live = [b for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"]
        self.assertEqual([b["requested_size"] for b in live], [3 * MIB])
        time.sleep(0.2)
        capf = cap.Capture(os.path.join(self.folder, "c.gpumem"))
        at = {rec[4]: rec[0] for rec in capf.records}
        self.assertEqual(at[r2["offset"]], "state")
        bad = c.ask({"cmd": "snapshot", "path": os.path.join(self.folder, "no", "such", "x.pickle")})
        self.assertFalse(bad["ok"])
        self.assertIn("cannot write snapshot pickle", bad["error"])

    def test_mark_appears_in_the_capture(self):
        self.assertEqual(self.client().ask({"cmd": "mark", "name": "from-socket"}), {"ok": True})
        time.sleep(0.2)
        c = cap.Capture(os.path.join(self.folder, "c.gpumem"))
        names = [c.strings[cap.F.MarkerRec.unpack_from(p[3])[1]] for p in c.of("marker")]
        self.assertIn("from-socket", names)

    def test_bad_requests_get_errors_and_the_connection_survives(self):
        c = self.client()
        for raw, needle in [(b"not json\n", "malformed JSON"), (b"[1,2]\n", "JSON object"),
                            (b'{"cmd":"launch"}\n', "unknown cmd"), (b'{"nocmd":1}\n', "missing \"cmd\""),
                            (b'{"cmd":"mark"}\n', "name"), (b'{"cmd":"snapshot","path":3}\n', "path")]:
            c.send(raw)
            r = c.line()
            self.assertFalse(r["ok"], raw)
            self.assertIn(needle, r["error"])
        self.assertTrue(c.ask({"cmd": "ping"})["ok"])

    def test_partial_lines_and_pipelined_requests(self):
        c = self.client()
        c.send(b'{"cmd":"pi')
        time.sleep(0.05)
        c.send(b'ng","id":1}\n{"cmd":"ping","id":2}\n\n{"cmd":"ping","id":3}')
        self.assertEqual([c.line()["id"] for _ in range(2)], [1, 2])
        c.send(b"\n")
        self.assertEqual(c.line()["id"], 3)

    def test_huge_line_is_refused_and_skipped(self):
        c = self.client()
        c.send(b'{"cmd":"mark","name":"' + b"x" * (200 * 1024) + b'"}\n{"cmd":"ping","id":"after"}\n')
        r = c.line()
        self.assertFalse(r["ok"])
        self.assertIn("longer than", r["error"])
        self.assertEqual(c.line()["id"], "after")

    def test_many_clients_and_abrupt_disconnects(self):
        clients = [self.client() for _ in range(8)]
        for i, c in enumerate(clients):
            c.send(json.dumps({"cmd": "ping", "id": i}).encode() + b"\n")
        self.assertEqual([c.line()["id"] for c in clients], list(range(8)))
        # A client that sends and vanishes before reading: the reply hits a closed socket (no SIGPIPE).
        for _ in range(5):
            gone = Client(self.sock)
            gone.send(b'{"cmd":"snapshot"}\n{"cmd":"ping"}\n')
            gone.close()
        self.assertTrue(self.client().ask({"cmd": "ping"})["ok"])
        self.assertIsNone(self.proc.poll())


class SocketPathTest(unittest.TestCase):
    def test_too_long_path_fails_with_a_clear_error(self):
        lib_out = common.run_scenario(os.path.abspath(__file__), "long_path")
        self.assertIn("Unix socket path must be", lib_out)


def scenario_long_path():
    lib = common.load()
    import json as _j
    path = "/tmp/" + "d" * 120 + "/ctl.sock"
    rc = lib.gpumem_configure(_j.dumps({"backend": "sim", "control_socket": path}).encode())
    print(rc, lib.gpumem_last_error().decode())
    assert rc == -1


if __name__ == "__main__":
    common.main({"serve": scenario_serve, "long_path": scenario_long_path})
