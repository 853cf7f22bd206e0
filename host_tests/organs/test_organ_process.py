# Each organ as a real unix-port process under `tools/sim.py board`, this test playing master on the TCP cable.
import json
import math
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import wave
from concurrent.futures import ThreadPoolExecutor

import pytest

from organbus import frame
from organbus.command import decode_event, encode_command
from organbus.descriptor import decode_descriptor
from board_rig import DirectBoard
from support import MICROPYPATH, ROOT, run_micropython

SIM = os.path.join(ROOT, "tools", "sim.py")


class Master:
    """Listens on a loopback port, starts the board with its UART connected there, records frames."""

    def __init__(self, role, extra=()):
        self.tmp = tempfile.mkdtemp(prefix="organ-%s-" % role)
        self.log_path = os.path.join(self.tmp, "board.log")
        self.wav_path = os.path.join(self.tmp, "audio.wav")
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.ls.settimeout(20)
        port = self.ls.getsockname()[1]
        cmd = [sys.executable, SIM, "board", role, "--uart", "1=connect:127.0.0.1:%d" % port]
        cmd += ["--log", self.log_path, "--wav", self.wav_path, "--out", self.tmp] + list(extra)
        self.frames = []  # (t, type, payload)
        self.lines = []  # (t, dict) board events from stdout
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.err = []
        threading.Thread(target=self._stdout, daemon=True).start()
        threading.Thread(target=self._stderr, daemon=True).start()
        self.conn, _ = self.ls.accept()
        self.dec = frame.Decoder(self._on_frame)
        threading.Thread(target=self._wire, daemon=True).start()

    def _stdout(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                with self.lock:
                    self.lines.append((t, obj))

    def _stderr(self):
        for line in self.proc.stderr:
            self.err.append(line.rstrip())

    def _wire(self):
        while True:
            try:
                b = self.conn.recv(4096)
            except OSError:
                return
            if not b:
                return
            with self.lock:
                self._t = time.monotonic()
                # TCP loses nothing: keep the 50 ms idle rule out of this receiver (now=0), so
                # a cable stalled by a loaded machine cannot make the test drop a frame.
                self.dec.feed(b, 0)

    def _on_frame(self, ftype, payload, n):
        self.frames.append((self._t, ftype, bytes(payload[:n])))

    def send(self, data):
        self.conn.sendall(data)
        return time.monotonic()

    def wait_frame(self, ftype, since, timeout=5.0, pred=None):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                for f in self.frames:
                    if f[0] >= since and f[1] == ftype and (pred is None or pred(f[2])):
                        return f
            time.sleep(0.005)
        raise AssertionError(
            "no %s after t=%.3f within %.1f s; frames: %r; stderr: %s"
            % (frame.TYPE_NAMES[ftype], since, timeout, self.frames[-8:], self.stderr())
        )

    def wait_line(self, event, timeout=20.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                for t, obj in self.lines:
                    if obj.get("event") == event:
                        return t, obj
            time.sleep(0.005)
        raise AssertionError("no %r line; lines %r; %s" % (event, self.lines, self.stderr()))

    def command(self, payload, timeout=2.0):
        """Sends a COMMAND payload; returns (status, time sent)."""
        t = self.send(frame.encode(frame.COMMAND, payload))
        f = self.wait_frame(frame.COMMAND_RESP, t, timeout)
        assert len(f[2]) == 1, "one status byte: %r" % (f,)
        return f[2][0], t

    def times(self, ftype, since, until):
        with self.lock:
            return [t for (t, ty, _) in self.frames if ty == ftype and since <= t <= until]

    def stderr(self):
        return "\n".join(self.err[-20:])

    def close(self):
        try:
            self.conn.close()
        except OSError:
            pass
        self.ls.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def remove(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


def _gaps(ts):
    return [round(b - a, 3) for a, b in zip(ts, ts[1:])]


def _check_lifecycle(m):
    """Boot, the 1 s wait, 2 s announcing, ACK, 1 s heartbeats and the 5 s descriptor."""
    t_boot, boot = m.wait_line("boot")
    d1 = m.wait_frame(frame.DESCRIPTOR, 0, 5)
    assert 0.8 <= d1[0] - t_boot <= 1.5, "first DESCRIPTOR %.3f s after boot" % (d1[0] - t_boot)
    d2 = m.wait_frame(frame.DESCRIPTOR, d1[0] + 0.01, 4)
    assert 1.8 <= d2[0] - d1[0] <= 2.3, "announcing every 2 s: %.3f" % (d2[0] - d1[0])
    assert m.times(frame.HEARTBEAT, 0, d2[0]) == [], "no HEARTBEAT before ACK"
    t_ack = m.send(frame.ACK_FRAME)
    d3 = m.wait_frame(frame.DESCRIPTOR, t_ack, 6.5)
    assert 4.7 <= d3[0] - t_ack <= 5.4, "DESCRIPTOR 5 s after ACK: %.3f" % (d3[0] - t_ack)
    hb = m.times(frame.HEARTBEAT, t_ack, d3[0] + 0.05)
    assert 0.8 <= hb[0] - t_ack <= 1.3, "first HEARTBEAT 1 s after ACK: %.3f" % (hb[0] - t_ack)
    assert len(hb) == 5, "a HEARTBEAT every second: %r" % _gaps([t_ack] + hb)
    assert all(0.85 <= g <= 1.15 for g in _gaps(hb)), "heartbeat gaps: %r" % _gaps(hb)
    assert d1[2] == d2[2] == d3[2], "the same descriptor every time"
    return boot, decode_descriptor(d1[2])


def _pin_changes(path, pin):
    out = []
    with open(path) as f:
        for line in f:
            obj = json.loads(line)
            if obj.get("pin") == pin and "value" in obj:
                out.append((obj["t_ms"], obj["value"]))
    return out


def _led_organ_process():
    m = Master("led")
    try:
        boot, d = _check_lifecycle(m)
        assert boot["module_id"] == "LED_001", boot
        assert [c["name"] for c in d["capabilities"]] == ["led_on", "led_off", "led_blink"], d
        assert m.command(encode_command("led_on"))[0] == 0, "led_on done"
        assert m.command(encode_command("led_off"))[0] == 0, "led_off done"
        assert m.command(encode_command("led_toggle"))[0] == 1, "unknown name answers 1"
        assert m.command(encode_command("led_on") + b"\x00")[0] == 1, "wrong length answers 1"
        assert m.command(encode_command("led_blink", (float("nan"), 200)))[0] == 1, "NaN: 1"
        status, t = m.command(encode_command("led_blink", (3, 200)))
        assert status == 0, "blink started"
        ev = m.wait_frame(frame.EVENT, t, 3)
        assert decode_event(ev[2]) == (1, "led_blink", 0), decode_event(ev[2])
        assert 0.55 <= ev[0] - t <= 0.8, "3 x 200 ms blink took %.3f s" % (ev[0] - t)
        status, t = m.command(encode_command("led_blink", (20, 1000)))
        time.sleep(0.3)
        assert m.command(encode_command("led_on"))[0] == 0, "led_on during a blink"
        ev = m.wait_frame(frame.EVENT, t, 2)
        assert decode_event(ev[2]) == (1, "led_blink", 1), "blink stopped: %r" % (ev,)
        # DISCOVER: the DESCRIPTOR at once, then every 2 s (no heartbeats) until ACK.
        t = m.send(frame.DISCOVER_FRAME)
        d1 = m.wait_frame(frame.DESCRIPTOR, t, 1)
        assert d1[0] - t < 0.2, "DESCRIPTOR at once after DISCOVER: %.3f s" % (d1[0] - t)
        d2 = m.wait_frame(frame.DESCRIPTOR, d1[0] + 0.01, 3)
        assert 1.8 <= d2[0] - d1[0] <= 2.3, "then every 2 s: %.3f" % (d2[0] - d1[0])
        assert m.times(frame.HEARTBEAT, d1[0] + 0.05, d2[0]) == [], "announcing: no HEARTBEAT"
        t = m.send(frame.ACK_FRAME)
        hb = m.wait_frame(frame.HEARTBEAT, t, 2)
        assert 0.8 <= hb[0] - t <= 1.3, "HEARTBEAT 1 s after the new ACK: %.3f" % (hb[0] - t)
    finally:
        m.close()
    pin = json.load(open(os.path.join(ROOT, "boards", "led_organ", "board.json")))["pins"]["led"]
    ch = _pin_changes(m.log_path, pin)
    values = [v for _, v in ch]
    # off at boot; on, off; blink 3: on off on off on off; blink 20 cut by led_on: on (off on)...
    assert values[:9] == [0, 1, 0, 1, 0, 1, 0, 1, 0], "pin log: %r" % ch
    blink = [t for t, _ in ch[3:9]]
    assert all(80 <= g <= 130 for g in _gaps(blink)), "100 ms half periods: %r" % _gaps(blink)
    assert values[-1] == 1, "led_on took effect after the stopped blink: %r" % ch[-4:]
    events = [json.loads(x).get("event") for x in open(m.log_path) if '"event"' in x]
    for e in ("boot", "ack", "command", "done"):
        assert e in events, "board log records %r: %r" % (e, events)
    m.remove()


def _wav_energy(path):
    with wave.open(path) as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2, "16-bit mono"
        rate = w.getframerate()
        raw = w.readframes(w.getnframes())
    s = struct.unpack("<%dh" % (len(raw) // 2), raw)
    win = rate // 100  # 10 ms windows
    loud = []
    for i in range(0, len(s) - win + 1, win):
        rms = math.sqrt(sum(x * x for x in s[i : i + win]) / win)
        loud.append(rms > 500)
    return rate, s, loud


def _speaker_organ_process():
    m = Master("speaker")
    try:
        boot, d = _check_lifecycle(m)
        names = [c["name"] for c in d["capabilities"]]
        no_voice = [obj for _, obj in m.lines if obj.get("event") == "voice"]
        if no_voice:
            assert names == ["chime"], "without a voice engine, chime alone: %r" % names
        else:
            assert names == ["speak", "announce", "chime"], "voice installed: %r" % names
        assert m.command(encode_command("beep"))[0] == 1, "unknown name answers 1"
        assert m.command(encode_command("chime") + b"\x01")[0] == 1, "wrong length answers 1"
        status, t = m.command(encode_command("chime"))
        assert status == 0, "chime started"
        ev = m.wait_frame(frame.EVENT, t, 3)
        assert decode_event(ev[2]) == (1, "chime", 0), decode_event(ev[2])
        assert 0.6 <= ev[0] - t <= 1.2, "EVENT when the 0.7 s chime has played: %.3f" % (ev[0] - t)
        if "speak" in names:
            assert m.command(encode_command("speak", (), ""))[0] == 1, "empty text is below min"
            status, t = m.command(encode_command("speak", (), "Hello."))
            assert status == 0, "speak started"
            ev = m.wait_frame(frame.EVENT, t, 15)
            assert decode_event(ev[2]) == (1, "speak", 0), decode_event(ev[2])
    finally:
        m.close()
    rate, s, loud = _wav_energy(m.wav_path)
    assert rate == 11025, rate
    # The chime is the first take: its loud span is 0.7 s (the last ~30 ms fade below the mark).
    first = loud.index(True)
    end = first
    while end < len(loud) and (loud[end] or any(loud[end : end + 3])):
        end += 1
    span = (end - first) * 10
    assert 600 <= span <= 720, "chime audible for %d ms, want about 700" % span
    assert max(abs(x) for x in s[: (end + 1) * rate // 100]) > 8000, "a real chime, not a hum"
    m.remove()


@pytest.fixture(scope="module")
def organ_runs():
    """Both organ processes at once (each scenario takes ~15 s of real time)."""
    pool = ThreadPoolExecutor(max_workers=2)
    futs = {"led": pool.submit(_led_organ_process), "speaker": pool.submit(_speaker_organ_process)}
    yield futs
    pool.shutdown(wait=True)


def test_led_organ_process(organ_runs):
    organ_runs["led"].result(timeout=120)


def test_speaker_organ_process(organ_runs):
    organ_runs["speaker"].result(timeout=120)


def _run_board_copy(role_dir, edit):
    """Runs a copy of a board's main.py next to an edited board.json (simulated machine)."""
    tmp = tempfile.mkdtemp(prefix="organ-board-")
    try:
        shutil.copy(os.path.join(ROOT, "boards", role_dir, "main.py"), tmp)
        with open(os.path.join(ROOT, "boards", role_dir, "board.json")) as f:
            cfg = json.load(f)
        edit(cfg)
        with open(os.path.join(tmp, "board.json"), "w") as f:
            json.dump(cfg, f)
        path = ":".join([os.path.join(ROOT, "tools", "simhw"), MICROPYPATH])
        r = run_micropython([os.path.join(tmp, "main.py")], path=path, timeout=30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    return r, lines


def test_organ_with_an_invalid_own_descriptor_does_not_start():
    def bad_id(cfg):
        cfg["settings"]["module_id"] = "LED-001"

    r, lines = _run_board_copy("led_organ", bad_id)
    assert r.returncode == 0, r.stderr
    assert [x["event"] for x in lines] == ["refused"], "refused, nothing else: %r" % lines
    assert "module_id" in lines[0]["reason"] and "LED-001" in lines[0]["reason"], lines


def test_board_without_its_pin_does_not_start():
    def no_led(cfg):
        del cfg["pins"]["led"]

    r, lines = _run_board_copy("led_organ", no_led)
    assert [x["event"] for x in lines] == ["refused"], (lines, r.stderr)
    assert "led" in lines[0]["reason"], lines

    def no_i2s(cfg):
        del cfg["pins"]["i2s_din"]

    r, lines = _run_board_copy("speaker_organ", no_i2s)
    assert "refused" in [x["event"] for x in lines], (lines, r.stderr)
    assert "i2s_din" in [x for x in lines if x["event"] == "refused"][0]["reason"], lines


def test_chime_is_the_same_on_both_interpreters():
    # The unix port renders through the viper inner loop, CPython through the pure twin.
    from organbus.crc16 import crc16_pure

    from organs.audio import Chime

    code = (
        "from organs.audio import Chime\nfrom organbus.crc16 import crc16_pure\n"
        "c = Chime(11025)\nb = bytearray(1024)\ncrc = 0xFFFF\nt = 0\n"
        "while True:\n n = c.fill(b)\n if not n: break\n"
        " crc = crc16_pure(b, crc, 0, n)\n t += n\nprint(t, crc)\n"
    )
    r = run_micropython(["-c", code], timeout=60)
    assert r.returncode == 0, r.stderr
    c, b, crc, total = Chime(11025), bytearray(1024), 0xFFFF, 0
    while True:
        n = c.fill(b)
        if not n:
            break
        crc = crc16_pure(b, crc, 0, n)
        total += n
    assert r.stdout.split() == [str(total), str(crc)], (r.stdout, total, crc)


def test_active_low_gpio_led_board():
    def gpio(cfg):
        cfg["pins"]["led"] = 2
        cfg["settings"].update({"led_kind": "gpio", "active_low": True})

    b = DirectBoard("led_organ", gpio)
    try:
        assert b.command(encode_command("led_on")) == 0, "led_on done"
        assert b.command(encode_command("led_off")) == 0, "led_off done"
        time.sleep(0.2)
        lines, err = b.stop()
        values = [v for _, v in _pin_changes(b.pinlog, 2)]
        assert values == [1, 0, 1], "active-low: dark (high), on (low), off (high): %r %s" % (
            values,
            err,
        )
    finally:
        b.remove()


def test_speaker_board_without_a_voice_offers_chime_alone():
    b = DirectBoard("speaker_organ", lambda cfg: None, without_voice=True)
    try:
        d = decode_descriptor(b.wait(frame.DESCRIPTOR))
        assert [c["name"] for c in d["capabilities"]] == ["chime"], d
        assert b.command(encode_command("speak", (), "Hello.")) == 1, "no speak without a voice"
        assert b.command(encode_command("chime")) == 0, "chime still plays"
        ev = decode_event(b.wait(frame.EVENT))
        assert ev == (1, "chime", 0), ev
        lines, err = b.stop()
        voice = [x for x in lines if x["event"] == "voice"]
        assert voice and voice[0]["installed"] is False and "voice" in voice[0]["reason"], lines
    finally:
        b.remove()
