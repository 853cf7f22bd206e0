# Helpers of the end-to-end tests: the virtual body (tools/vbody) and a wire tap that decodes frames.
import os
import struct
import sys
import threading
import wave
from collections import Counter

from support import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))

from vbody.body import VirtualBody  # noqa: E402,F401
from organbus import frame  # noqa: E402  (lib/)
from organbus import command  # noqa: E402

LED = ["led_blink", "led_off", "led_on"]
SPEAKER_MIN = ["chime"]  # speak/announce too when the voice is installed
ALL_MIN = LED + SPEAKER_MIN


class Tap:
    """Decodes the frames one direction of a cable delivered (after faults), with times.

    _feed runs in the wire's own thread (the pacer, or the End's reader for delivered=False):
    the lock is held only to append or to take a snapshot, never while frames are scanned, so
    a test that looks at thousands of frames does not hold up the bytes on the wire.
    """

    def __init__(self, wire, delivered=True):
        self.frames = []  # (monotonic t, type, payload bytes), in time order
        self.lock = threading.Lock()
        self.t = 0.0
        self.dec = frame.Decoder(self._on_frame)
        (wire.delivered_taps if delivered else wire.taps).append(self._feed)

    def _feed(self, t, data):
        with self.lock:
            self.t = t
            self.dec.feed(data, int(t * 1000))

    def _on_frame(self, ftype, payload, n):
        self.frames.append((self.t, ftype, bytes(payload[:n])))

    def _snapshot(self, t0=0.0, t1=float("inf")):
        with self.lock:
            frames = self.frames
            n = len(frames)
        # append-only: the first n entries never change; those of [t0, t1] by bisection
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if frames[mid][0] < t0:
                lo = mid + 1
            else:
                hi = mid
        out = []
        for i in range(lo, n):
            f = frames[i]
            if f[0] > t1:
                break
            out.append(f)
        return out

    def commands(self, t0=0.0, t1=float("inf")):
        return [
            command.command_name(p, len(p))
            for t, ft, p in self._snapshot(t0, t1)
            if ft == frame.COMMAND
        ]

    def count(self, ftype, first_byte=None):
        return sum(
            1
            for _, ft, p in self._snapshot()
            if ft == ftype and (first_byte is None or (p and p[0] == first_byte))
        )

    def events_ok(self):
        """Names of continuous abilities whose EVENT said completed (status 0)."""
        out = Counter()
        for _, ft, p in self._snapshot():
            if ft == frame.EVENT:
                kind, name, status = command.decode_event(p, len(p))
                if status == 0:
                    out[name] += 1
        return out


def running_body(out_dir, **kw):
    """A VirtualBody started with `kw`, yielded once its HTTP port is open and the LED's
    abilities and the chime are on the menu, stopped afterwards (a module fixture's body)."""
    b = VirtualBody(out_dir=out_dir, **kw).start()
    try:
        assert b.wait_http(15), "the master's HTTP port did not open"
        got = b.wait_menu(["led_on", "led_off", "led_blink", "chime"], 20)
        assert got and "led_on" in got and "chime" in got, got
        yield b
    finally:
        b.stop()


def one_step(action, **params):
    return plan_of([(action, params)])


def plan_of(steps, chain=False):
    out = []
    for i, (action, params) in enumerate(steps):
        deps = ["t%d" % i] if chain and i else []
        out.append(
            {
                "task_id": "t%d" % (i + 1),
                "action": action,
                "params": params,
                "priority": 5,
                "depends_on": deps,
            }
        )
    return {
        "heard_req": 0,
        "steps": out,
        "can_execute": True,
        "missing": [],
        "response": "",
    }


def counters_sum(obj, key):
    """Sum of every value named `key` anywhere in a JSON object (status shapes may grow)."""
    if isinstance(obj, dict):
        return sum(
            (v if k == key and isinstance(v, int) else counters_sum(v, key)) for k, v in obj.items()
        )
    if isinstance(obj, list):
        return sum(counters_sum(v, key) for v in obj)
    return 0


def wav_stats(path):
    """(seconds, rms) of a 16-bit mono WAV file."""
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1, "%s: not 16-bit mono" % path
        n = w.getnframes()
        rate = w.getframerate()
        data = w.readframes(n)
    samples = struct.unpack("<%dh" % n, data[: 2 * n])
    rms = (sum(s * s for s in samples) / n) ** 0.5 if n else 0.0
    return n / rate, rms
