# The master as a real unix-port process (tools/sim.py board master) with real organ processes (CPython).
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from organbus import frame
import master_rig as mf
import plan_corpus as pc
from organbus.descriptor import encode_descriptor

from support import ROOT, free_port as _free_port

SIM = [sys.executable, os.path.join(ROOT, "tools", "sim.py"), "board"]


class Proc:
    """A board process whose stdout JSON lines are collected by a thread."""

    def __init__(self, args, tmp, name, stdin=False):
        self.lines = queue.Queue()
        self.seen = []
        self.p = subprocess.Popen(
            SIM + args + ["--out", str(tmp / name)],
            cwd=ROOT,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            line = line.strip()
            try:
                obj = json.loads(line)
            except ValueError:
                obj = {"raw": line}
            self.lines.put(obj)

    def wait_for(self, pred, timeout=10.0):
        end = time.monotonic() + timeout
        for obj in self.seen:
            if pred(obj):
                return obj
        while time.monotonic() < end:
            try:
                obj = self.lines.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(obj)
            if pred(obj):
                return obj
        raise AssertionError("not seen within %.1f s; saw %r" % (timeout, self.seen[-20:]))

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj) + "\n")
        self.p.stdin.flush()

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def _event(name, **kw):
    def pred(o):
        return o.get("event") == name and all(o.get(k) == v for k, v in kw.items())

    return pred


def _http(port, path, body=None):
    req = urllib.request.Request(
        "http://127.0.0.1:%d%s" % (port, path),
        data=None if body is None else body.encode(),
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=40) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _master(tmp, p0, p1, name="master"):
    return Proc(
        [
            "master",
            "--uart",
            "0=listen:127.0.0.1:%d" % p0,
            "--uart",
            "1=listen:127.0.0.1:%d" % p1,
            "--http",
            "127.0.0.1:0",
            "--console",
            "link",
        ],
        tmp,
        name,
        stdin=True,
    )


def test_master_with_real_organs(tmp_path):
    p0, p1 = _free_port(), _free_port()
    procs = []
    try:
        m = _master(tmp_path, p0, p1)
        procs.append(m)
        boot = m.wait_for(_event("boot"))
        assert boot["ports"] == [0, 1] and boot["mode"] == "two-port", boot
        http = m.wait_for(_event("http"))["port"]
        procs.append(Proc(["led", "--uart", "1=connect:127.0.0.1:%d" % p0], tmp_path, "led"))
        procs.append(Proc(["speaker", "--uart", "1=connect:127.0.0.1:%d" % p1], tmp_path, "spk"))
        t0 = time.monotonic()
        m.wait_for(_event("registered", module_id="LED_001", port=0), 10)
        spk = m.wait_for(_event("registered", module_id="SPK_001", port=1), 10)
        assert time.monotonic() - t0 < 5, "organs registered after %.1f s" % (time.monotonic() - t0)
        status, menu = _http(http, "/menu")
        names = [c["name"] for c in menu["capabilities"]]  # in registration order
        led = [c["name"] for c in menu["capabilities"] if c["module_id"] == "LED_001"]
        assert led == ["led_on", "led_off", "led_blink"], names
        assert [n for n in names if n not in led] == spk["capabilities"], names
        voice = "speak" in names
        # the section 8 plan (chime before the voice exists)
        steps = [pc.step("t1", "led_on")]
        if voice:
            steps.append(pc.step("t2", "speak", {"text": "Light is on."}, 5, ["t1"]))
        else:
            steps.append(pc.step("t2", "chime", None, 5, ["t1"]))
        status, report = _http(http, "/plan", pc.text(pc.plan(steps, response="Light is on.")))
        assert status == 200, (status, report)
        assert [s["status"] for s in report["steps"]] == ["done", "done"], report
        assert report["ok"] is True, report
        # a refused plan over HTTP: 422 with the problems, nothing sent
        status, obj = _http(http, "/plan", pc.text(pc.plan([pc.step("t1", "led_toggle")])))
        assert status == 422 and obj["problems"][0].startswith('steps[0].action: "led_toggle"'), obj
        status, obj = _http(http, "/plan", "{not json")
        assert status == 400, (status, obj)
        # the console link on stdin/stdout
        m.send({"op": "status", "id": 7})
        r = m.wait_for(lambda o: o.get("op") == "status" and o.get("id") == 7)
        assert r["status"] == 200 and r["reply"]["mode"] == "two-port", r
        assert [o["online"] for o in r["reply"]["organs"]] == [True, True], r["reply"]["organs"]
        m.send({"op": "plan", "id": 8, "plan": pc.plan([pc.step("a", "led_off")])})
        r = m.wait_for(lambda o: o.get("op") == "plan" and o.get("id") == 8)
        assert r["status"] == 200 and r["reply"]["steps"][0]["status"] == "done", r
        m.send({"op": "dance"})
        r = m.wait_for(lambda o: o.get("op") == "dance")
        assert r["status"] == 400 and "unknown" in r["reply"]["problems"][0], r
        # master restart: the organs are found again within 3 s
        m.stop()
        m2 = _master(tmp_path, p0, p1, "master2")
        procs.append(m2)
        m2.wait_for(_event("boot"))
        t0 = time.monotonic()
        m2.wait_for(_event("registered", module_id="LED_001"), 5)
        m2.wait_for(_event("registered", module_id="SPK_001"), 5)
        took = time.monotonic() - t0
        assert took < 3.0, "rediscovery took %.1f s" % took
    finally:
        for p in procs:
            p.stop()


def test_master_refuses_invalid_descriptor_with_reason(tmp_path):
    p0, p1 = _free_port(), _free_port()
    m = _master(tmp_path, p0, p1)
    s = None
    try:
        m.wait_for(_event("boot"))
        http = m.wait_for(_event("http"))["port"]
        bad = mf.led()
        bad["capabilities"][0]["name"] = "led_on"
        raw = bytearray(encode_descriptor(bad))
        raw[1:8] = b"LED-001"
        s = socket.create_connection(("127.0.0.1", p0), timeout=5)
        # the cable is paced by sim.py; give the DISCOVER a moment, then describe ourselves badly
        s.sendall(frame.encode(frame.DESCRIPTOR, bytes(raw)))
        ev = m.wait_for(_event("refused", port=0), 5)
        assert "module_id" in ev["reason"], ev
        status, st = _http(http, "/status")
        reasons = [r["reason"] for r in st["ports"][0]["refusals"]]
        assert reasons == [ev["reason"]], st["ports"][0]
        s.settimeout(0.5)
        got = b""
        try:
            while True:
                b = s.recv(256)
                if not b:
                    break
                got += b
        except socket.timeout:
            pass
        assert frame.ACK_FRAME not in got, "invalid descriptor was ACKed"
    finally:
        if s:
            s.close()
        m.stop()


def test_one_port_mode_says_so(tmp_path):
    p1 = _free_port()
    m = Proc(
        ["master", "--uart", "1=listen:127.0.0.1:%d" % p1, "--http", "127.0.0.1:0"],
        tmp_path,
        "master1",
    )
    try:
        boot = m.wait_for(_event("boot"))
        assert boot["ports"] == [1] and boot["mode"] == "one-port", boot
        assert "UART(1)" in boot["note"], boot
        http = m.wait_for(_event("http"))["port"]
        status, st = _http(http, "/status")
        assert st["mode"] == "one-port" and st["organ_ports"] == [1], st
        assert st["note"] == boot["note"], st
    finally:
        m.stop()


def test_link_steady_state_allocates_nothing():
    # master/edge.py on the unix port over a simulated UART: heartbeats and repeated
    # DESCRIPTORs (each ACKed) through the asyncio reader, GC off, heap counted
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import bench_master

    r = bench_master._link_heap(200)
    assert "error" not in r, r
    assert r["link_acks_sent"] >= 40, r
    assert r["link_heap_bytes_per_frame"] == 0, r
