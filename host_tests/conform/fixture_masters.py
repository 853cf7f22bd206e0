# Small masters for the kit's tests: a good one and deliberately broken ones, one defect each.
#
# Sections 7 and 8 in miniature, on one port: DISCOVER at boot and (at most once per 2 s) to an
# unregistered port, ACK to every valid DESCRIPTOR, offline after 15 s of silence, GET /menu and
# POST /plan over HTTP, steps run one at a time in priority order.
import json
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from organbus import frame
from organbus.command import decode_event, encode_command
from organbus.descriptor import DescriptorError, decode_descriptor

DEFECTS = {
    "good": None,
    "forwards_offline": "master.offline",  # plans still run on an organ that went offline
    "rewrites_numbers": "master.values",  # clamps numbers itself instead of leaving it to the organ
    "never_discovers": "master.discover",  # no DISCOVER, neither at boot nor to a stranger
}


def _clip(text, limit=240):
    b = text.encode("utf-8")[:limit]
    return b.decode("utf-8", "ignore")


class TinyMaster:
    def __init__(self, defect, port, host="127.0.0.1"):
        assert defect in DEFECTS, defect
        self.defect = defect
        self.addr = (host, port)
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.decoder = frame.Decoder(self._on_frame)
        self.organ = None  # the descriptor while online
        self.known = None  # the last descriptor ever registered
        self.last_rx = None
        self.last_discover = None
        self.resps = []
        self.events = []
        self.sock = None
        self.stopped = False
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.http.daemon_threads = True
        self.http_port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    # -- the port ------------------------------------------------------------------------------

    def _send(self, f):
        try:
            self.sock.sendall(f)
        except OSError:
            pass

    def _discover(self, now):
        if self.defect == "never_discovers":
            return
        if self.last_discover is None or now - self.last_discover >= 2.0:
            self.last_discover = now
            self._send(frame.DISCOVER_FRAME)

    def _on_frame(self, ftype, payload, n):
        now = time.monotonic()
        self.last_rx = now
        if ftype == frame.DESCRIPTOR:
            try:
                d = decode_descriptor(bytes(payload[:n]))
            except DescriptorError:
                return
            self.organ = self.known = d
            self._send(frame.ACK_FRAME)
        elif self.organ is None:
            self._discover(now)
        elif ftype == frame.COMMAND_RESP and n == 1:
            self.resps.append(payload[0])
            self.cond.notify_all()
        elif ftype == frame.EVENT:
            self.events.append(decode_event(bytes(payload[:n]))[1])
            self.cond.notify_all()

    def _run(self):
        deadline = time.monotonic() + 20
        while True:
            s = socket.socket()
            try:
                s.connect(self.addr)
                break
            except OSError:
                s.close()
                if time.monotonic() > deadline or self.stopped:
                    return
                time.sleep(0.05)
        s.settimeout(0.01)
        self.sock = s
        with self.lock:
            self._discover(time.monotonic())
        while not self.stopped:
            try:
                data = s.recv(4096)
                if not data:
                    return
            except socket.timeout:
                data = b""
            except OSError:
                return
            now = time.monotonic()
            with self.lock:
                ms = int(now * 1000) & ((1 << 30) - 1)
                self.decoder.feed(data, ms) if data else self.decoder.idle(ms)
                if self.organ is not None and now - self.last_rx >= 15.0:
                    self.organ = None

    def stop(self):
        self.stopped = True
        self.http.shutdown()
        if self.sock is not None:
            self.sock.close()

    # -- menu and plans ------------------------------------------------------------------------

    def capabilities(self, for_plans=False):
        d = self.known if (for_plans and self.defect == "forwards_offline") else self.organ
        return [] if d is None else d["capabilities"]

    def run_plan(self, plan):
        caps = {c["name"]: c for c in self.capabilities(for_plans=True)}
        steps = plan.get("steps", [])
        problems = [
            "step %s: action %r is not on the menu" % (s.get("task_id"), s.get("action"))
            for s in steps
            if s.get("action") not in caps
        ]
        if problems:
            return 422, {"problems": problems, "menu": sorted(caps)}
        report = []
        for s in sorted(steps, key=lambda s: -s.get("priority", 5)):
            cap = caps[s["action"]]
            values, text = [], None
            for p in cap["params"]:
                v = s["params"][p["name"]]
                if p["type"] == "string":
                    text = _clip(v)
                    continue
                v = float(v)
                if self.defect == "rewrites_numbers":
                    v = min(max(v, p["min"]), p["max"])
                values.append(v)
            with self.lock:
                k, e = len(self.resps), len(self.events)
                self._send(frame.encode(frame.COMMAND, encode_command(cap["name"], values, text)))
                self.cond.wait_for(lambda: len(self.resps) > k, 1.0)
                status = self.resps[k] if len(self.resps) > k else None
                if status == 0 and cap["exec_type"] != "immediate":
                    self.cond.wait_for(
                        lambda: cap["name"] in self.events[e:], cap["max_duration_ms"] / 1000
                    )
            report.append(
                {
                    "task_id": s["task_id"],
                    "action": cap["name"],
                    "status": {0: "done", 1: "refused", None: "timeout"}[status],
                }
            )
        return 200, {"ok": all(x["status"] == "done" for x in report), "steps": report}

    def _handler(self):
        master = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _answer(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path != "/menu":
                    return self._answer(404, {"error": "not found"})
                with master.lock:
                    caps = list(master.capabilities())
                self._answer(200, {"protocol": 3, "max_steps": 16, "capabilities": caps})

            def do_POST(self):
                if self.path != "/plan":
                    return self._answer(404, {"error": "not found"})
                n = int(self.headers.get("Content-Length", 0))
                try:
                    plan = json.loads(self.rfile.read(n))
                except ValueError:
                    return self._answer(400, {"problems": ["not JSON"]})
                self._answer(*master.run_plan(plan))

        return H


def f32(v):
    return struct.unpack(">f", struct.pack(">f", v))[0]
