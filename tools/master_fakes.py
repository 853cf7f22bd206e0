# Scripted fake organs and a fake clock around the master's sans-IO core (both interpreters).
# What the benches use (tools/bench_master.py, the RV32 guest); the tests' own pieces are
# host_tests/helpers/master_rig.py.
from organbus import command
from organbus import frame
from organbus.descriptor import encode_descriptor

from master.bus import body as _body
from master.bus.hub import EventLog, Hub


def _cap(name, desc, exec_type, group, max_ms, params=()):
    return {
        "name": name,
        "description": desc,
        "exec_type": exec_type,
        "resource_group": group,
        "max_duration_ms": max_ms,
        "params": list(params),
    }


def _p(name, t, lo, hi, unit=""):
    return {"name": name, "type": t, "min": lo, "max": hi, "unit": unit}


def led(module_id="LED_001"):
    return {
        "module_id": module_id,
        "module_type": "led",
        "hw_version": 0x0100,
        "fw_version": 0x0100,
        "capabilities": [
            _cap("led_on", "Turn the light on.", "immediate", "led", 0),
            _cap("led_off", "Turn the light off.", "immediate", "led", 0),
            _cap(
                "led_blink",
                "Blink the light a number of times.",
                "continuous",
                "led",
                40000,
                [_p("count", "int", 1, 20), _p("period_ms", "int", 100, 2000, "ms")],
            ),
        ],
    }


def speaker(module_id="SPK_001", voice=True):
    caps = []
    if voice:
        caps.append(
            _cap(
                "speak",
                "Say the text out loud.",
                "continuous",
                "audio",
                30000,
                [_p("text", "string", 1, 240)],
            )
        )
        caps.append(
            _cap(
                "announce",
                "Play an attention chime, then say the text.",
                "continuous",
                "audio",
                30000,
                [_p("text", "string", 1, 240)],
            )
        )
    caps.append(_cap("chime", "Play a short attention chime.", "continuous", "audio", 2000))
    return {
        "module_id": module_id,
        "module_type": "speaker",
        "hw_version": 0x0100,
        "fw_version": 0x0100,
        "capabilities": caps,
    }


def menu_caps(*descs):
    out = []
    for d in descs:
        for c in d["capabilities"]:
            m = dict(c)
            m["module_id"] = d["module_id"]
            out.append(m)
    return out


class FakeOrgan:
    """A scripted organ: answers DISCOVER/ACK per section 7 and COMMANDs per its policy.

    resp: 0, 1 or None (silent); event_ms: ms after answering before a continuous ability's
    EVENT (None: never); event_status: the EVENT status."""

    def __init__(self, desc, resp=0, event_ms=100, event_status=0, raw=None):
        self.desc = desc
        self.payload = raw if raw is not None else encode_descriptor(desc)
        self.resp = resp
        self.event_ms = event_ms
        self.event_status = event_status
        self.inbox = []
        self.decoder = frame.Decoder(self._got)
        self.acked = False
        self.alive = True
        self.answer_discover = True
        self.commands = []  # (now, name, values, text)
        self.acks = self.discovers = 0
        self.rig = None
        self.port = None
        self.t_boot = None
        self.t_hb = 0
        self.t_desc = None
        self.t_desc5 = 0
        self.pending_events = []  # [due, name, status]

    def _got(self, ftype, payload, n):
        self.inbox.append((ftype, bytes(payload[:n])))

    def send(self, f):
        if self.alive:
            self.rig.feed(self.port, f)

    def poll(self, now):
        # the organ's timer step (the name every timer has: poll(now))
        if not self.alive:
            self.inbox = []
            return
        if self.t_boot is None:
            self.t_boot = now
        inbox, self.inbox = self.inbox, []
        for ftype, p in inbox:
            if ftype == frame.DISCOVER:
                self.discovers += 1
                if self.answer_discover:
                    self.acked = False
                    self.t_desc = now
                    self.send(frame.encode(frame.DESCRIPTOR, self.payload))
            elif ftype == frame.ACK:
                self.acks += 1
                if not self.acked:
                    self.t_hb = self.t_desc5 = now
                self.acked = True
            elif ftype == frame.COMMAND:
                self._command(now, p)
        due = [e for e in self.pending_events if e[0] <= now]
        for e in due:
            self.pending_events.remove(e)
            self.send(frame.encode(frame.EVENT, command.encode_event(e[1], e[2])))
        if self.acked:
            if now - self.t_hb >= 1000:
                self.t_hb = now
                self.send(frame.HEARTBEAT_FRAME)
            if now - self.t_desc5 >= 5000:
                self.t_desc5 = now
                self.send(frame.encode(frame.DESCRIPTOR, self.payload))
        elif now - self.t_boot >= 1000 and (self.t_desc is None or now - self.t_desc >= 2000):
            self.t_desc = now
            self.send(frame.encode(frame.DESCRIPTOR, self.payload))

    def _command(self, now, p):
        name = command.command_name(p, len(p))
        cap = None
        for c in self.desc["capabilities"]:
            if c["name"] == name:
                cap = c
        values, text = command.decode_command(p, len(p), cap) if cap else ((), None)
        if text is not None and not isinstance(text, str):
            text = str(bytes(text), "utf-8")
        self.commands.append((now, name, list(values), text))
        self.acked = True
        if self.resp is None:
            return
        self.send(frame.RESP_OK_FRAME if self.resp == 0 else frame.RESP_FAIL_FRAME)
        if (
            self.resp == 0
            and cap
            and cap["exec_type"] == "continuous"
            and self.event_ms is not None
        ):
            self.pending_events.append([now + self.event_ms, name, self.event_status])


class Wire:
    """The fake UART edge of one port: what the master sends goes to the rig (and its organ)."""

    def __init__(self, rig, port):
        self.rig = rig
        self.port = port
        self.expects = 0

    def send(self, f):
        self.rig._send(self.port, f)

    def command(self, f):
        self.rig._send(self.port, f)
        self.expects += 1

    def unread(self):
        return False


class Rig:
    """The sans-IO master (master.bus.body.build) on a fake clock, with fake organs on ports."""

    def __init__(self, ports=(0, 1), max_steps=16, start=True, mode="two-port", record=True):
        self.record = record  # False: keep no wire/trace history (long heap benchmarks)
        self.now = 100000
        self.wire = {}
        self.txs = {}
        for p in ports:
            self.wire[p] = []
            self.txs[p] = Wire(self, p)
        self.events = []  # the event log's lines as (event, {key: value})
        self.trace = []  # ("m2o" | "o2m", port, frame type) in order
        self.organs = {}
        self.hub = Hub()
        self.body = _body.build(self.txs, self.clock, mode, max_steps, hub=self.hub)
        EventLog(self.hub, self._emit)
        self.reg = self.body.registry
        self.sched = self.body.scheduler
        if start:
            self.body.start(self.now)

    def clock(self):
        return self.now

    def _send(self, port, f):
        if self.record:
            self.wire[port].append(bytes(f))
            self.trace.append(("m2o", port, f[2]))
        o = self.organs.get(port)
        if o is not None and o.alive:
            o.decoder.feed(f, self.now)

    def _emit(self, event, pairs):
        d = {}
        for k, v in pairs:
            d[k] = v
        self.events.append((event, d))

    def attach(self, port, organ):
        organ.rig = self
        organ.port = port
        self.organs[port] = organ
        return organ

    def feed(self, port, data):
        if self.record and len(data) > 2:
            self.trace.append(("o2m", port, data[2]))
        self.body.port(port).feed(data, self.now)

    def advance(self, ms, step=10):
        end = self.now + ms
        while self.now < end:
            self.now += step
            for p in sorted(self.organs):
                self.organs[p].poll(self.now)
            self.body.poll(self.now)

    def sent_types(self, port):
        return [f[2] for f in self.wire[port]]

    def commands_sent(self):
        n = 0
        for p in self.wire:
            for f in self.wire[p]:
                if f[2] == frame.COMMAND:
                    n += 1
        return n

    def event_names(self):
        return [e[0] for e in self.events]


def standard_rig(**kw):
    """LED organ on port 0 and speaker on port 1, both registered."""
    rig = Rig(start=False, **kw)
    rig.attach(0, FakeOrgan(led()))
    rig.attach(1, FakeOrgan(speaker()))
    rig.body.start(rig.now)
    rig.advance(100)
    return rig
