# tools/sim.py --config FILE (the board's /config.json from the command line) with tools/flash.py master --ota against it: commit, a replay refused, rollbacks refused during an upload and after a failed trial, a trickle cut by the deadline, a nudge.
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from e2e_support import one_step
from support import ROOT
from deploy import ota as tool
from master.ota import service as ota

KEY = "3c" * 32
TOKEN = "sim-config-token"
UPLOAD_MS = 15000  # the whole-upload deadline, from the config as a board would have it
SIM = [sys.executable, os.path.join(ROOT, "tools", "sim.py")]
FLASH = [sys.executable, os.path.join(ROOT, "tools", "flash.py")]
CAPTURED = []


class Nudges(http.server.BaseHTTPRequestHandler):
    got = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        Nudges.got.append(json.loads(self.rfile.read(n)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *a):
        pass


class Sim:
    """tools/sim.py --config --json as a user starts it, its stdout lines read as they come."""

    def __init__(self, out, config_path):
        self.p = subprocess.Popen(
            SIM + ["--config", config_path, "--json", "--out", out],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines = []
        self.err = []
        threading.Thread(target=self._read, args=(self.p.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.p.stderr, self.err), daemon=True).start()
        start = self.wait(lambda o: o.get("kind") == "start", 30)
        assert start and start.get("http"), "no start line: %s %s" % (self.lines, self.err)
        self.url = start["http"].rstrip("/")

    def _read(self, f, into):
        for line in f:
            try:
                into.append(json.loads(line))
            except ValueError:
                into.append({"kind": "text", "text": line.rstrip()})

    def wait(self, pred, timeout, since=0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for o in self.lines[since:]:
                if pred(o):
                    return o
            time.sleep(0.1)
        return None

    def say(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def request(self, method, path, body=None, token=TOKEN):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if data:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def ota(self):
        return self.request("GET", "/ota")[1]

    def wait_ota(self, pred, timeout):
        end = time.monotonic() + timeout
        doc = None
        while time.monotonic() < end:
            try:
                doc = self.ota()
                if pred(doc):
                    return doc
            except OSError:
                pass  # resetting
            time.sleep(0.3)
        raise AssertionError("GET /ota never matched; last %s" % doc)

    def plan_ok(self, action="led_on", timeout=30):
        # a one-step plan, retried while the organs register again after a reset
        plan = one_step(action)
        end = time.monotonic() + timeout
        last = None
        while time.monotonic() < end:
            try:
                last = self.request("POST", "/plan", plan)
                if last[0] == 200 and last[1].get("ok"):
                    return True
            except OSError as e:
                last = e
            time.sleep(0.5)
        raise AssertionError("no plan ran within %d s: %s" % (timeout, last))


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim-config")
    Nudges.got = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Nudges)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    config = {
        "http": {"token": TOKEN},
        "ota": {"key": KEY, "upload_ms": UPLOAD_MS},
        "nudge_url": "http://127.0.0.1:%d/nudge" % srv.server_address[1],
        "nudge_min_s": 1,
        "wifi": {"ssid": "home", "password": "x"},  # a board's only: said in one note line
    }
    path = str(out / "config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    key_file = str(out / "ota.key")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    s = Sim(str(out / "run"), path)
    s.key_file = key_file
    s.out = str(out)
    try:
        s.plan_ok()
        yield s
    finally:
        try:
            s.say("quit")
            s.p.wait(30)
        except Exception:
            s.p.kill()
        srv.shutdown()


def test_0_a_config_that_cannot_be_taken_is_one_line_and_status_2(tmp_path):
    for text, words in (
        ("{", "not JSON"),
        ("[1]", "expected a JSON object, the board's /config.json"),
        ('{"xiaozhi": {"ota_url": "http://10.0.0.5/ota/"}}', "only loopback addresses"),
        ('{"nudge_url": "http://192.168.1.9:8000/n"}', "nudge_url 'http://192.168.1.9:8000/n'"),
        ('{"mqtt": {"host": "broker.lan", "port": 1883}}', "mqtt.host 'broker.lan'"),
    ):
        path = tmp_path / "config.json"
        path.write_text(text)
        r = subprocess.run(
            SIM + ["--config", str(path)], capture_output=True, text=True, timeout=30
        )
        assert r.returncode == 2, (text, r.stdout + r.stderr)
        line = r.stderr.strip()
        assert "\n" not in line and line.startswith("sim.py: error: --config %s: " % path), line
        assert words in line, (text, line)
    r = subprocess.run(
        SIM + ["--config", str(tmp_path / "nope.json")], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 2 and "No such file" in r.stderr, r.stderr


def test_1_the_config_is_the_masters(sim):
    assert any("wifi: a board's only" in e.get("text", "") for e in sim.err), sim.err
    status, doc = sim.request("GET", "/ota", token=None)
    assert status == 401, (status, doc)  # its token is the config's
    doc = sim.ota()
    assert doc["state"] == "running" and doc["highest_seq"] == 0 and not doc["uploading"], doc
    # nudges go to the config's nudge_url: the LED's cable out (offline after 15 s), and back
    sim.say("unplug led")
    for words, then in (("went offline", "replug led"), ("back online", None)):
        end = time.monotonic() + 40
        while time.monotonic() < end and not [n for n in Nudges.got if words in n["reason"]]:
            time.sleep(0.2)
        assert [n for n in Nudges.got if words in n["reason"]], (words, Nudges.got)
        if then:
            sim.say(then)
    sim.plan_ok()


def test_2_flash_ota_commits_against_the_virtual_master(sim, monkeypatch):
    push = tool.Master.push

    def spy(self, data, *a, **k):  # v1's bytes as anyone on the network would see them
        CAPTURED.append(bytes(data))
        return push(self, data, *a, **k)

    monkeypatch.setattr(tool.Master, "push", spy)
    assert tool.update(sim.url, TOKEN, sim.key_file, None, "v1", 90) == 0, sim.ota()
    monkeypatch.undo()
    r = subprocess.run(
        FLASH
        + ["master", "--ota", sim.url, "--token", TOKEN, "--ota-key", sim.key_file]
        + ["--ota-version", "v2"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0 and "committed: v2 runs" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "(sequence 2)" in r.stdout + r.stderr, r.stdout + r.stderr
    doc = sim.ota()
    assert doc["version"] == "v2" and doc["seq"] == 2 and doc["previous"] == "v1", doc
    sim.plan_ok()


def test_3_a_replayed_older_bundle_is_refused_and_v2_stays(sim):
    status, answer = tool.Master(sim.url, TOKEN).push(CAPTURED[0])
    assert status == 409, (status, answer)
    assert "sequence number 1 is not newer than 2" in answer["error"], answer
    doc = sim.ota()
    assert doc["version"] == "v2" and doc["state"] == "running", doc
    sim.plan_ok("led_off")


def test_4_a_rollback_during_an_upload_is_refused_and_the_target_survives_its_refusal(sim):
    files = tool.bundle_files("x64", sim.out) + [("master/pad.bin", os.urandom(200000))]
    data = bytearray(tool.bundle(bytes.fromhex(KEY), files, "v3", sim.ota()["highest_seq"] + 1))
    data[-1] ^= 1  # refused at the last file's hash, into slot a: v1's, the rollback target
    result = {}

    def upload():
        result["push"] = tool.Master(sim.url, TOKEN).push(
            bytes(data), lambda sent, total: time.sleep(0.01), chunk=2048
        )

    t = threading.Thread(target=upload)
    t.start()
    sim.wait_ota(lambda d: d["uploading"], 30)
    status, answer = sim.request("POST", "/ota/rollback")
    t.join(60)
    assert status == 409 and "an update is uploading" in answer["error"], (status, answer)
    assert result["push"][0] == 422 and "master/pad.bin" in result["push"][1]["error"], result
    doc = sim.ota()
    assert doc["version"] == "v2" and doc["previous"] == "v1" and doc["previous_slot"] == "a", doc
    sim.plan_ok()


def test_5_a_rollback_after_a_failed_trial_is_refused_and_the_master_serves(sim):
    def broken(files, arch, stage):  # v3's app cannot even be imported: the board resets
        return [(p, b"not an .mpy" if p == "master/app.mpy" else d) for p, d in files]

    assert tool.update(sim.url, TOKEN, sim.key_file, None, "v3", 120, broken) == 1, sim.ota()
    doc = sim.wait_ota(lambda d: d["state"] == "rolled_back", 30)
    assert doc["version"] == "v2" and doc["previous"] is None, doc
    assert "did not commit" in doc["result"]["reason"], doc
    sim.plan_ok()
    status, answer = sim.request("POST", "/ota/rollback")
    assert status == 409 and "no known-good code to go back to" in answer["error"], answer
    time.sleep(1.0)  # no reset follows a refusal
    assert sim.ota()["version"] == "v2"
    sim.plan_ok("led_off")


def test_6_a_trickling_upload_is_cut_by_the_deadline_and_frees_the_lock(sim):
    host, port = sim.url[len("http://") :].split(":")
    data = bytes(tool.bundle(bytes.fromhex(KEY), [("master/x.py", b"X = 1\n")], "v9", 99))
    s = socket.create_connection((host, int(port)))
    s.sendall(
        b"POST /ota HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
        % (TOKEN.encode(), len(data))
    )
    t0 = time.monotonic()
    s.settimeout(0.1)
    answer = b""
    sent = 0
    second = None
    while time.monotonic() - t0 < UPLOAD_MS / 1000 + 20 and not answer:
        s.sendall(data[sent : sent + 1])  # a byte a second: within the 3 s a read may wait
        sent += 1
        if second is None and sent == 3:
            second = tool.Master(sim.url, TOKEN).push(data)  # meanwhile: the lock is held
        try:
            answer = s.recv(4096)
        except socket.timeout:
            pass
        time.sleep(0.9)
    took = time.monotonic() - t0
    s.settimeout(5)
    while b"\r\n\r\n" in answer and not answer.endswith(b"}"):
        more = s.recv(4096)
        if not more:
            break
        answer += more
    s.close()
    assert second[0] == 409 and "already uploading" in second[1]["error"], second
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
    assert b"deadline of %d ms" % UPLOAD_MS in answer, answer
    assert UPLOAD_MS / 1000 <= took < UPLOAD_MS / 1000 + 10, took
    # the lock is free: the next upload is read (and refused for what it is)
    status, doc = tool.Master(sim.url, TOKEN).push(data)
    assert status == 400 and "entry modules are missing" in doc["error"], (status, doc)
    assert sim.ota()["version"] == "v2"
    sim.plan_ok()
