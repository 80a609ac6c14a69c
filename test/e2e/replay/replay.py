"""The replay workload: plays a recorded capture into a session folder as if a workload were running.

CI has no GPU. From the extension's point of view this process is a tracked PyTorch workload: it reads
the session contract of native/python/README.md (GPUMEM_SESSION_DIR, proc-<pid>.json, the short-socket
rule), writes capture-<pid>.gpumem by streaming the fixture's records at real-time speed (their t_ns
deltas, divided by --speed), and serves the control socket with the allocator's protocol (ping,
empty_cache, snapshot, mark). Pure Python 3 standard library.

    python3 replay.py FIXTURE.gpumem [--speed 1.0] [--hold 30]

Note [Empty cache on a replayed state]: the replay tracks the segments and allocated blocks of what it
has streamed. empty_cache appends a REC_SEGMENT_FREE for every fixed segment holding no allocated block,
a REC_SEGMENT_UNMAP for every run of whole free pages (2 MiB in the small pool, 20 MiB in the large) of an expandable segment's mapped ranges and a REC_EMPTY_CACHE (origin 1 = control channel) with reserved
before/after, like the allocator. Records streamed later stay consistent with that: an allocation in a
released segment first re-reserves it (REC_SEGMENT_ALLOC), the fixture's own free of a released segment
is dropped, and REC_STATS / REC_DEVICE_SAMPLE report reserved/used minus what was released. REC_STATE
records of the fixture are passed through unchanged (they describe the recorded run).
"""
import argparse
import bisect
import datetime
import hashlib
import json
import os
import pickle
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpumem_records as R  # noqa: E402

STATE, STATE_SEGMENT, STATE_BLOCK = R.STATE, R.STATE_SEGMENT, R.STATE_BLOCK
assert STATE_SEGMENT.size == 56 and STATE_BLOCK.size == 32
MAX_SUN_PATH = 107


def socket_path(session_dir, pid):
    """The short-socket rule of native/python/README.md."""
    inside = os.path.join(session_dir, f"ctl-{pid}.sock")
    if len(inside.encode()) <= MAX_SUN_PATH:
        return inside
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = os.path.join(runtime, "gpumem") if runtime and os.path.isdir(runtime) else f"/tmp/gpumem-{os.getuid()}"
    os.makedirs(base, mode=0o700, exist_ok=True)
    st = os.stat(base)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise SystemExit(f"replay: {base} is not a private folder of this user; remove it or fix its mode (0700)")
    digest = hashlib.sha1(os.path.abspath(session_dir).encode()).hexdigest()[:12]
    return os.path.join(base, f"{digest}-{pid}.sock")


def cut_range(table, lo, hi, only_maps=False):
    """Removes [lo, hi) from a table of {addr: {"size": …}} ranges, splitting entries it cuts through.
    Returns the bytes removed."""
    removed = 0
    for a, seg in list(table.items()):
        end = a + seg["size"]
        if end <= lo or a >= hi or (only_maps and seg.get("kind") != "map"):
            continue
        del table[a]
        if a < lo:
            table[a] = dict(seg, size=lo - a)
        if end > hi:
            table[hi] = dict(seg, size=end - hi)
        removed += min(end, hi) - max(a, lo)
    return removed



def merged_mappings(segments):
    """A snapshot's segments: fixed segments as they are; an expandable segment's mapped pieces that touch, joined
    into one (the allocator maps each growth on its own, and a block may span two of them, as in PyTorch's snapshot
    of an expandable segment: one segment, its blocks adding up to its size)."""
    out, last = {}, None
    for addr in sorted(segments):
        seg = segments[addr]
        prev = out.get(last) if last is not None else None
        if (prev is not None and seg.get("kind") == "map" and prev.get("kind") == "map" and last + prev["size"] == addr
                and all(prev[k] == seg[k] for k in ("stream", "pool0", "pool1", "flags"))):
            out[last] = dict(prev, size=prev["size"] + seg["size"])
            continue
        out[addr], last = dict(seg), addr
    return out

class DeviceState:
    def __init__(self):
        self.segments = {}  # addr -> dict(size, flags, stream, pool0, pool1, stack, kind: 'segment'|'map')
        self.blocks = {}  # addr -> (size, requested, stack, stream)
        self.released = {}  # addr -> segment dict, released by our empty_cache and not re-reserved
        self.other_used = None  # device used − reserved at the last device sample (context, libraries)
        self.total = 0

    @property
    def reserved(self):
        return sum(s["size"] for s in self.segments.values())

    @property
    def allocated(self):
        return sum(b[0] for b in self.blocks.values())

    @property
    def released_bytes(self):
        return sum(s["size"] for s in self.released.values())

    def containing(self, table, addr):
        keys = sorted(table)
        i = bisect.bisect_right(keys, addr) - 1
        if i >= 0 and addr < keys[i] + table[keys[i]]["size"]:
            return keys[i]
        return None


class Replay:
    def __init__(self, fixture, session_dir, speed, hold):
        with open(fixture, "rb") as f:
            self.header, _, records = R.read_capture(f.read())
        # A capture's index (REC_INDEX, minor 6) describes that file, not the one replayed (minor 1, which has none);
        # its payload does not start with a time either.
        self.records = [r for r in records if r[0] != R.REC_INDEX]
        self.session_dir = session_dir
        self.speed = speed
        self.hold = hold
        self.pid = os.getpid()
        self.capture = os.path.join(session_dir, f"capture-{self.pid}.gpumem")
        self.socket = socket_path(session_dir, self.pid)
        self.lock = threading.Lock()  # one writer of the capture at a time; guards the state too
        self.devices = {}
        self.strings, self.frames, self.stacks = {}, {}, {}
        self.next_string = 1
        self.snapshots = 0
        self.t_first = next((t for t in (R.t_ns_of(r[0], r[3]) for r in self.records) if t is not None), 0)
        self.t_last = self.t_first
        self.start = time.monotonic()
        self.end_record = None
        self.out = None

    # ---- capture writing -----------------------------------------------------------------------

    def now_t(self):
        """Capture time of now: the fixture's clock advanced by the real time elapsed × speed."""
        return max(self.t_last, self.t_first + int((time.monotonic() - self.start) * 1e9 * self.speed))

    def write(self, data):
        self.out.write(data)
        self.out.flush()

    def emit(self, rtype, payload, device=0, flags=0):
        t = R.t_ns_of(rtype, payload)
        if t is not None:
            self.t_last = max(self.t_last, t)
        self.write(R.record(rtype, payload, device, flags))

    def intern_string(self, s):
        sid = self.next_string
        self.next_string += 1
        b = s.encode()
        self.strings[sid] = s
        self.emit(R.REC_STRING, R.STRING.pack(sid, len(b)) + b)
        return sid

    def dev(self, d):
        return self.devices.setdefault(d, DeviceState())

    # ---- streaming -------------------------------------------------------------------------------

    def track_interned(self, rtype, payload):
        if rtype == R.REC_STRING:
            sid, n = R.STRING.unpack_from(payload)
            self.strings[sid] = payload[R.STRING.size:R.STRING.size + n].decode("utf-8", "replace")
            self.next_string = max(self.next_string, sid + 1)
        elif rtype == R.REC_FRAME:
            fid, file_, func, line = R.FRAME.unpack_from(payload)
            self.frames[fid] = (file_, func, line)
        elif rtype == R.REC_STACK:
            sid, flags, n = R.STACK.unpack_from(payload)
            self.stacks[sid] = list(R.F.frame_ids(payload, n))

    def reserve_again(self, st, device, addr, t):
        """An event touches a segment our empty_cache released: the allocator would have re-reserved it."""
        key = st.containing(st.released, addr)
        if key is None:
            return
        seg = st.released.pop(key)
        st.segments[key] = seg
        rtype = R.REC_SEGMENT_MAP if seg["kind"] == "map" else R.REC_SEGMENT_ALLOC
        self.emit(rtype, R.SEGMENT_EVENT.pack(t, key, seg["size"], seg["stream"], seg["pool0"], seg["pool1"], seg["stack"], 0), device, seg["flags"])

    def stream_one(self, rtype, device, flags, payload, raw):
        """Applies one fixture record to the state and writes it (possibly adjusted). Holds the lock."""
        if rtype in R.INTERNED:
            self.track_interned(rtype, payload)
            self.write(raw)
            return
        if rtype == R.REC_END:
            self.end_record = (payload, device, flags)  # written when we exit, after the hold
            return
        st = self.dev(device)
        t = R.t_ns_of(rtype, payload)
        if rtype in (R.REC_SEGMENT_ALLOC, R.REC_SEGMENT_MAP):
            _, addr, size, stream, p0, p1, stack, _ = R.SEGMENT_EVENT.unpack_from(payload)
            key = st.containing(st.released, addr)
            if key is not None:
                del st.released[key]  # the recording reserves it anew itself
            st.segments[addr] = dict(size=size, flags=flags, stream=stream, pool0=p0, pool1=p1, stack=stack,
                                     kind="map" if rtype == R.REC_SEGMENT_MAP else "segment")
        elif rtype == R.REC_SEGMENT_FREE:
            addr = R.SEGMENT_EVENT.unpack_from(payload)[1]
            if addr in st.released:
                del st.released[addr]  # already given back by our empty_cache
                return
            st.segments.pop(addr, None)
        elif rtype == R.REC_SEGMENT_UNMAP:
            # One unmap may cover several earlier maps, or part of one (the allocator unmaps runs of
            # free pages): cut the range out of what is mapped and out of what we already released.
            _, lo, size, *_ = R.SEGMENT_EVENT.unpack_from(payload)
            already = cut_range(st.released, lo, lo + size)
            cut_range(st.segments, lo, lo + size, only_maps=True)
            if already >= size:
                return  # all of it was given back by our empty_cache
        elif rtype == R.REC_ALLOC:
            _, addr, size, req, stream, stack, _ = R.BLOCK_EVENT.unpack_from(payload)
            self.reserve_again(st, device, addr, t)
            st.blocks[addr] = (size, req, stack, stream)
        elif rtype == R.REC_FREE_COMPLETED:
            st.blocks.pop(R.BLOCK_EVENT.unpack_from(payload)[1], None)
        elif rtype == R.REC_STATS and st.released:
            f = list(R.STATS.unpack_from(payload))
            f[2] = max(0, f[2] - st.released_bytes)
            payload = R.STATS.pack(*f) + payload[R.STATS.size:]
        elif rtype == R.REC_DEVICE_SAMPLE:
            t_, used, total, proc = R.DEVICE_SAMPLE.unpack_from(payload)
            used = max(0, used - st.released_bytes)
            st.other_used = max(0, used - st.reserved)
            st.total = total
            payload = R.DEVICE_SAMPLE.pack(t_, used, total, max(0, proc - st.released_bytes) if proc else 0) + payload[R.DEVICE_SAMPLE.size:]
        elif rtype == R.REC_DEVICE:
            st.total = R.DEVICE.unpack_from(payload)[1]
        self.emit(rtype, payload, device, flags)

    def sample_now(self, device, st):
        if st.other_used is None:
            return
        used = st.reserved + st.other_used
        self.emit(R.REC_DEVICE_SAMPLE, R.DEVICE_SAMPLE.pack(self.now_t(), used, st.total, used), device)

    # ---- control commands ------------------------------------------------------------------------

    def empty_cache(self):
        with self.lock:
            before_all = after_all = 0
            for device, st in sorted(self.devices.items()):
                t = self.now_t()
                before = st.reserved
                busy = {st.containing(st.segments, addr) for addr in st.blocks}
                blocks = [(a, b[0]) for a, b in st.blocks.items()]
                for addr in sorted(st.segments):
                    seg = st.segments[addr]
                    if seg["kind"] == "map":
                        # expandable: unmap every whole free page, keep the mapped pieces around live blocks
                        runs = R.free_page_runs(addr, seg["size"], blocks, R.page_of(seg["flags"]))
                        if not runs:
                            continue
                        del st.segments[addr]
                        cursor, end = addr, addr + seg["size"]
                        for a, b in runs:
                            if a > cursor:
                                st.segments[cursor] = dict(seg, size=a - cursor)
                            st.released[a] = dict(seg, size=b - a)
                            self.emit(R.REC_SEGMENT_UNMAP, R.SEGMENT_EVENT.pack(t, a, b - a, seg["stream"], seg["pool0"], seg["pool1"], 0, 0), device, seg["flags"])
                            cursor = b
                        if cursor < end:
                            st.segments[cursor] = dict(seg, size=end - cursor)
                        continue
                    if addr in busy:
                        continue
                    st.segments.pop(addr)
                    st.released[addr] = seg
                    self.emit(R.REC_SEGMENT_FREE, R.SEGMENT_EVENT.pack(t, addr, seg["size"], seg["stream"], seg["pool0"], seg["pool1"], 0, 0), device, seg["flags"])
                after = st.reserved
                self.emit(R.REC_EMPTY_CACHE, R.EMPTY_CACHE.pack(t, before, after, 1, 0), device)
                self.sample_now(device, st)
                before_all += before
                after_all += after
            return {"ok": True, "reserved_before": before_all, "reserved_after": after_all}

    def frames_of(self, stack_id):
        out = []
        for fid in self.stacks.get(stack_id, []):
            file_, func, line = self.frames.get(fid, (0, 0, 0))
            out.append({"filename": self.strings.get(file_, "??"), "name": self.strings.get(func, "??"), "line": line})
        return out

    def snapshot(self, path=None):
        with self.lock:
            self.snapshots += 1
            path = path or os.path.join(self.session_dir, f"snapshot-{self.pid}-{self.snapshots}.pickle")
            offset = self.out.tell()
            t = self.now_t()
            segments = []
            state_payloads = {}
            for device, st in sorted(self.devices.items()):
                body = b""
                pieces = merged_mappings(st.segments)
                for addr in sorted(pieces):
                    seg = pieces[addr]
                    inside = sorted(a for a in st.blocks if addr <= a < addr + seg["size"])
                    blocks, cursor = [], addr
                    for a in inside:
                        if a > cursor:
                            blocks.append((cursor, a - cursor, 0, 0, 0))
                        size, req, stack, _ = st.blocks[a]
                        blocks.append((a, size, req, stack, 1))
                        cursor = a + size
                    if cursor < addr + seg["size"]:
                        blocks.append((cursor, addr + seg["size"] - cursor, 0, 0, 0))
                    body += STATE_SEGMENT.pack(addr, seg["size"], seg["stream"], seg["pool0"], seg["pool1"], seg["stack"], seg["flags"], 0, len(blocks), 0)
                    body += b"".join(STATE_BLOCK.pack(*b) for b in blocks)
                    states = {0: "inactive", 1: "active_allocated"}
                    segments.append({
                        "device": device, "address": addr, "total_size": seg["size"], "stream": seg["stream"],
                        "segment_type": "small" if seg["flags"] & R.POOL_SMALL else "large",
                        "segment_pool_id": (seg["pool0"], seg["pool1"]), "is_expandable": bool(seg["flags"] & R.SEG_EXPANDABLE),
                        "allocated_size": sum(b[1] for b in blocks if b[4] == 1), "active_size": sum(b[1] for b in blocks if b[4] == 1),
                        "requested_size": sum(b[2] for b in blocks if b[4] == 1), "frames": self.frames_of(seg["stack"]),
                        "blocks": [{"address": b[0], "size": b[1], "requested_size": b[2], "state": states[b[4]], "frames": self.frames_of(b[3])} for b in blocks],
                    })
                state_payloads[device] = STATE.pack(t, self.snapshots, 0, len(pieces), 0) + body
            for device, payload in state_payloads.items():
                self.emit(R.REC_STATE, payload, device)
            name = self.intern_string(path)
            self.emit(R.REC_MARKER, R.MARKER.pack(t, name, R.MARK_SNAPSHOT))
            ndev = max(self.devices, default=0) + 1
            snap = {"segments": segments, "device_traces": [[] for _ in range(ndev)], "allocator_settings": {}, "external_annotations": []}
            with open(path, "wb") as f:
                pickle.dump(snap, f, protocol=4)
            return {"ok": True, "pickle": path, "offset": offset}

    def mark(self, name):
        with self.lock:
            sid = self.intern_string(name)
            self.emit(R.REC_MARKER, R.MARKER.pack(self.now_t(), sid, R.MARK_INSTANT))
        return {"ok": True}

    def ping(self):
        with self.lock:
            devs = [{"index": d, "allocated": st.allocated, "reserved": st.reserved} for d, st in sorted(self.devices.items())]
        return {"ok": True, "pid": self.pid, "rank": int(self.header.get("rank", 0) or 0), "devices": devs}

    def handle(self, line):
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as e:
            return {"ok": False, "error": f"malformed request: {e}"}
        cmd = req.get("cmd")
        try:
            if cmd == "ping":
                reply = self.ping()
            elif cmd == "empty_cache":
                reply = self.empty_cache()
            elif cmd == "snapshot":
                reply = self.snapshot(req.get("path") or None)
            elif cmd == "mark" and isinstance(req.get("name"), str):
                reply = self.mark(req["name"])
            else:
                reply = {"ok": False, "error": f"unknown command {cmd!r}: use ping, empty_cache, snapshot or mark"}
        except Exception as e:  # a failing command must not kill the workload
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        if "id" in req:
            reply["id"] = req["id"]
        return reply

    # ---- lifecycle -----------------------------------------------------------------------------

    def serve(self):
        replay = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                for raw in self.rfile:
                    if len(raw) > 1 << 20:
                        self.wfile.write(b'{"ok":false,"error":"request too long"}\n')
                        return
                    try:
                        self.wfile.write((json.dumps(replay.handle(raw.decode("utf-8", "replace"))) + "\n").encode())
                    except (BrokenPipeError, ConnectionResetError):
                        return

        if os.path.exists(self.socket):
            os.unlink(self.socket)
        server = socketserver.ThreadingUnixStreamServer(self.socket, Handler)
        server.daemon_threads = True
        os.chmod(self.socket, 0o600)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def write_proc_file(self):
        rank = int(self.header.get("rank", 0) or 0)
        doc = {"version": 1, "pid": self.pid, "rank": rank, "local_rank": int(self.header.get("local_rank", rank) or 0),
               "world_size": int(self.header.get("world_size", 1) or 1), "capture": self.capture, "socket": self.socket,
               "argv": sys.argv, "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        tmp = os.path.join(self.session_dir, f".proc-{self.pid}.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, os.path.join(self.session_dir, f"proc-{self.pid}.json"))

    def run(self):
        header = dict(self.header, pid=self.pid, replay_of=self.header.get("pid"))
        # Like the bootstrap, the replay honours an explicit allocator mode: the replayed capture
        # then reads as PyTorch's allocator observed, with the reason the bootstrap would give.
        if os.environ.get("GPUMEM_ALLOCATOR") in ("lens", "pytorch"):
            header["allocator_mode"] = os.environ["GPUMEM_ALLOCATOR"]
            header["allocator_mode_reason"] = "asked for (--allocator %s / gpuMemoryLens.allocator)" % os.environ["GPUMEM_ALLOCATOR"]
        self.out = open(self.capture, "wb")
        self.write(R.file_header(header))
        server = self.serve()
        self.write_proc_file()
        print(f"[replay] streaming {len(self.records)} records at {self.speed}x into {self.capture}", flush=True)
        code = 0
        try:
            self.start = time.monotonic()
            for rtype, device, flags, payload, raw in self.records:
                t = R.t_ns_of(rtype, payload)
                if t is not None:
                    delay = self.start + (t - self.t_first) / 1e9 / self.speed - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                with self.lock:
                    self.stream_one(rtype, device, flags, payload, raw)
            print(f"[replay] done streaming; holding for {self.hold:g} s (control socket {self.socket})", flush=True)
            deadline = time.monotonic() + self.hold
            while time.monotonic() < deadline:
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
                with self.lock:
                    for device, st in sorted(self.devices.items()):
                        self.sample_now(device, st)
        except KeyboardInterrupt:
            print("[replay] interrupted", flush=True)
            code = 130
        finally:
            with self.lock:
                if self.end_record and code == 0:
                    payload, device, flags = self.end_record
                    _, exit_code, _ = R.END.unpack_from(payload)
                    self.emit(R.REC_END, R.END.pack(self.now_t(), exit_code, 0), device, flags)
                else:
                    self.emit(R.REC_END, R.END.pack(self.now_t(), code, 0))
                self.out.close()
            server.shutdown()
            server.server_close()
            if os.path.exists(self.socket):
                os.unlink(self.socket)
        return code


def main():
    ap = argparse.ArgumentParser(description="Replay a gpumem capture as a live workload (no GPU needed).")
    ap.add_argument("fixture", help="a capture file (.gpumem) to stream")
    ap.add_argument("--speed", type=float, default=float(os.environ.get("GPUMEM_REPLAY_SPEED", "1")), help="time speed-up factor (default 1 = real time)")
    ap.add_argument("--hold", type=float, default=float(os.environ.get("GPUMEM_REPLAY_HOLD", "30")), help="seconds to stay alive after the last record, serving the control socket")
    ap.add_argument("--standin-if-missing", action="store_true",
                    help="if FIXTURE does not exist, replay the stand-in capture of the sample (make_standin.py) instead")
    args = ap.parse_args()
    session_dir = os.environ.get("GPUMEM_SESSION_DIR")
    if not session_dir:
        sys.exit("replay: GPUMEM_SESSION_DIR is not set; run this through GPU Memory Lens (or set it to a session folder)")
    if args.speed <= 0:
        sys.exit("replay: --speed must be > 0")
    if not os.path.isfile(args.fixture) and args.standin_if_missing:
        # Note [Stand-in for npm start]: a machine without the recorded fixture still shows the product:
        # the stand-in goes into the session folder (a name the session scan ignores) and is replayed.
        standin = os.path.join(session_dir, "replay-standin.gpumem")
        subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_standin.py"), standin],
                       check=True, stdout=subprocess.DEVNULL)
        args.fixture = standin
    if not os.path.isfile(args.fixture):
        sys.exit(f"replay: no capture at {args.fixture}")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(Replay(args.fixture, os.path.abspath(session_dir), args.speed, args.hold).run())


if __name__ == "__main__":
    main()
