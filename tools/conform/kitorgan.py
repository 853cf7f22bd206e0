# The organ the kit plays against a master under test: its answers, EVENTs and section 7 cadence.
import threading
import time

from organbus import frame
from organbus.command import CommandError, decode_command, encode_event
from organbus.descriptor import decode_descriptor

EVENT_AFTER_MS = 600  # the kit's continuous abilities end this long after they start
RESP_DELAY_MS = 300  # the kit answers cf_hold this late (one COMMAND outstanding)


class KitOrgan:
    """The organ the kit plays: answers COMMANDs at once (cf_hold after RESP_DELAY_MS), sends
    EVENT done EVENT_AFTER_MS after a continuous ability started; when `alive`, keeps the
    section 7 cadence (HEARTBEAT 1 s, DESCRIPTOR 5 s; DISCOVER: DESCRIPTOR at once)."""

    def __init__(self, cable, payload):
        self.c = cable
        self.payload = payload
        self.d = decode_descriptor(payload)
        self.caps = {c["name"]: c for c in self.d["capabilities"]}
        self.alive = False  # the cadence runs
        self.commands = []  # (t, name, values, text, raw payload)
        self.events = []  # (t, name) EVENTs sent
        self.resps = []  # (t, name, status) COMMAND_RESPs sent
        self._pending = []  # (due, kind, name)
        self._stop = False
        self._i = 0
        self._next_hb = self._next_desc = 0.0
        self._lock = threading.Lock()
        self._t = threading.Thread(target=self._run, name="kit-organ", daemon=True)
        self._t.start()

    def start_cadence(self, now):
        with self._lock:
            self.alive = True
            self._next_hb = now + 1.0
            self._next_desc = now + 5.0

    def silence(self):
        with self._lock:
            self.alive = False

    def stop(self):
        self._stop = True

    def describe(self):
        """Send the DESCRIPTOR; the time its last byte is on the wire (at 115200)."""
        return self.c.send(frame.DESCRIPTOR, self.payload) + self.c.wire_s(len(self.payload) + 8)

    def _run(self):
        c = self.c
        while not self._stop and not c.closed:
            with c.cond:
                if self._i >= len(c.frames):
                    c.cond.wait(0.005)
                new = c.frames[self._i :]
                self._i += len(new)
            for f in new:
                self._on_frame(f)
            now = time.monotonic()
            with self._lock:
                due = [p for p in self._pending if p[0] <= now]
                self._pending = [p for p in self._pending if p[0] > now]
                alive = self.alive
            for _, kind, name in due:
                if kind == "resp":
                    self._resp(name, 0)
                else:
                    self.events.append((c.send(frame.EVENT, encode_event(name, 0)), name))
            if alive:
                if now >= self._next_hb:
                    c.send(frame.HEARTBEAT)
                    self._next_hb = max(self._next_hb + 1.0, now + 0.5)
                if now >= self._next_desc:
                    self.describe()
                    self._next_desc = max(self._next_desc + 5.0, now + 2.5)

    def _resp(self, name, status):
        t = self.c.send(frame.COMMAND_RESP, bytes([status]))
        self.resps.append((t, name, status))
        cap = self.caps.get(name)
        if status == 0 and cap is not None and cap["exec_type"] != "immediate":
            with self._lock:
                self._pending.append((time.monotonic() + EVENT_AFTER_MS / 1000, "event", name))

    def _on_frame(self, f):
        if f.ftype == frame.DISCOVER and self.alive:
            self.describe()
        if f.ftype != frame.COMMAND:
            return
        p = f.payload
        name = None
        values, text = None, None
        try:
            name = bytes(p[1 : 1 + p[0]]).decode("utf-8") if p else ""
            cap = self.caps.get(name)
            if cap is None:
                raise CommandError("unknown name")
            values, text = decode_command(p, len(p), cap)
        except (CommandError, IndexError, UnicodeError, ValueError):
            self.commands.append((f.t, name, None, None, p))
            if self.alive:
                self._resp(name, 1)
            return
        self.commands.append((f.t, name, values, text, p))
        if not self.alive:
            return  # a powered-off organ answers nothing
        if name == "cf_hold":
            with self._lock:
                self._pending.append((time.monotonic() + RESP_DELAY_MS / 1000, "resp", name))
        else:
            self._resp(name, 0)
