# LED organ on a fake clock with fake Pin/NeoPixel: section-9 contract, on/off, blink timing, stops.
from organbus import frame
from organbus.command import decode_event, encode_command
from organbus.descriptor import decode_descriptor
from organs.led import LedOrgan, Light

UNIX_PORT = True

SECTION_9 = {
    "module_id": "LED_001",
    "module_type": "led",
    "capabilities": [
        ("led_on", "Turn the light on.", "immediate", "led", 0, []),
        ("led_off", "Turn the light off.", "immediate", "led", 0, []),
        (
            "led_blink",
            "Blink the light a number of times.",
            "continuous",
            "led",
            40000,
            [("count", "int", 1, 20, ""), ("period_ms", "int", 100, 2000, "ms")],
        ),
    ],
}


class FakePin:
    def __init__(self, clock):
        self.clock = clock
        self.log = []  # (t, level) on every write

    def value(self, x=None):
        if x is None:
            return self.log[-1][1] if self.log else 0
        self.log.append((self.clock[0], 1 if x else 0))


class FakePixels:
    def __init__(self, n=1):
        self.n = n
        self.buf = [(0, 0, 0)] * n
        self.writes = []

    def fill(self, c):
        for i in range(self.n):
            self.buf[i] = c

    def write(self):
        self.writes.append(list(self.buf))


class Rig:
    def __init__(self, active_low=False, pixels=None):
        self.clock = [0]
        self.pin = FakePin(self.clock)
        if pixels is None:
            self.light = Light(pin=self.pin, active_low=active_low)
        else:
            self.light = Light(pixels=pixels, color=(10, 20, 30))
        self.lines = []
        self.led = LedOrgan(self.light, log=self.lines.append)
        self.organ = self.led.organ
        self.sent = []
        self.dec = frame.Decoder(self._on)
        assert self.organ.start(0), "LED organ starts: %r" % self.organ.refusal
        self.feed(frame.ACK_FRAME)

    def _on(self, ftype, payload, n):
        self.sent.append((self.clock[0], ftype, bytes(payload[:n])))

    def drain(self):
        while True:
            f = self.organ.pop()
            if f is None:
                return
            self.dec.feed(f, self.clock[0])

    def feed(self, data):
        self.organ.feed(data, self.clock[0])
        self.drain()

    def command(self, name, values=()):
        before = len(self.sent)
        self.feed(frame.encode(frame.COMMAND, encode_command(name, values)))
        r = [p for (t, ty, p) in self.sent[before:] if ty == frame.COMMAND_RESP]
        assert len(r) == 1, "one COMMAND_RESP: %r" % (self.sent[before:],)
        return r[0][0]

    def run_until(self, t, step=1):
        while self.clock[0] < t:
            self.clock[0] += step
            self.organ.poll(self.clock[0])
            self.drain()

    def events(self):
        return [(t, decode_event(p)) for (t, ty, p) in self.sent if ty == frame.EVENT]

    def changes(self, since=0):
        out = []
        for t, v in self.pin.log:
            if t >= since and (not out or out[-1][1] != v):
                out.append((t, v))
        return out


def test_descriptor_matches_section_9():
    r = Rig()
    d = decode_descriptor(r.organ.descriptor_frame[5:-3])
    assert d["module_id"] == SECTION_9["module_id"], d
    assert d["module_type"] == SECTION_9["module_type"], d
    got = []
    for c in d["capabilities"]:
        params = [(p["name"], p["type"], p["min"], p["max"], p["unit"]) for p in c["params"]]
        got.append(
            (
                c["name"],
                c["description"],
                c["exec_type"],
                c["resource_group"],
                c["max_duration_ms"],
                params,
            )
        )
    assert got == SECTION_9["capabilities"], "descriptor is section 9 exactly: %r" % got


def test_on_and_off_active_high():
    r = Rig()
    assert r.pin.log[-1][1] == 0, "starts dark (active-high: low)"
    assert r.command("led_on") == 0, "led_on done"
    assert r.pin.log[-1][1] == 1 and r.light.on, r.pin.log
    assert r.command("led_off") == 0, "led_off done"
    assert r.pin.log[-1][1] == 0 and not r.light.on, r.pin.log
    assert r.events() == [], "immediate abilities send no EVENT"


def test_on_and_off_active_low():
    r = Rig(active_low=True)
    assert r.pin.log[-1][1] == 1, "starts dark (active-low: high)"
    r.command("led_on")
    assert r.pin.log[-1][1] == 0, "active-low on drives the pin low"
    r.command("led_off")
    assert r.pin.log[-1][1] == 1, "active-low off drives the pin high"


def test_ws2812_pixels():
    px = FakePixels(2)
    r = Rig(pixels=px)
    assert px.writes[-1] == [(0, 0, 0)] * 2, "starts black"
    r.command("led_on")
    assert px.writes[-1] == [(10, 20, 30)] * 2, "on colour on every pixel: %r" % px.writes
    r.command("led_off")
    assert px.writes[-1] == [(0, 0, 0)] * 2, px.writes


def test_blink_timing_and_completion_event():
    r = Rig()
    r.clock[0] = 1000
    assert r.command("led_blink", (3, 200)) == 0, "blink started"
    r.run_until(1599)
    assert r.events() == [], "no EVENT before count * period"
    r.run_until(1700)
    assert r.changes(1000) == [
        (1000, 1),
        (1100, 0),
        (1200, 1),
        (1300, 0),
        (1400, 1),
        (1500, 0),
    ], r.changes(1000)
    assert r.events() == [(1600, (1, "led_blink", 0))], r.events()
    assert not r.light.on and not r.led.blinking, "ends off and idle"


def test_blink_odd_period_and_poll_wait():
    r = Rig()
    r.command("led_blink", (1, 101))
    assert r.organ.poll(0) == 50, "poll asks to be called at the first change"
    r.run_until(200)
    assert r.changes() == [(0, 0), (0, 1), (50, 0)], r.changes()
    assert r.events() == [(101, (1, "led_blink", 0))], r.events()


def test_blink_params_are_clamped_and_rounded():
    for sent, blinks, period in (
        ((0, 50), 1, 100),
        ((25, 5000), 20, 2000),
        ((2.5, 150.4), 3, 150),
        ((1.49, 99.5), 1, 100),
    ):
        r = Rig()
        assert r.command("led_blink", sent) == 0, sent
        r.run_until(blinks * period + 10, step=5)
        ons = [c for c in r.changes() if c[1] == 1]
        assert len(ons) == blinks, "%r: %d blinks, want %d" % (sent, len(ons), blinks)
        assert r.events() == [(blinks * period, (1, "led_blink", 0))], (sent, r.events())


def test_led_on_during_blink_stops_it():
    r = Rig()
    r.command("led_blink", (5, 400))
    r.run_until(500)
    assert r.command("led_on") == 0, "led_on during a blink is done"
    kinds = [ty for (t, ty, p) in r.sent if t == 500 and ty in (frame.EVENT, frame.COMMAND_RESP)]
    assert kinds == [frame.EVENT, frame.COMMAND_RESP], "EVENT (stopped) then the answer: %r" % kinds
    assert r.events() == [(500, (1, "led_blink", 1))], r.events()
    assert r.light.on, "led_on took effect"
    r.run_until(3000)
    assert r.changes(501) == [], "no blinking after the stop: %r" % r.changes(501)
    assert len(r.events()) == 1, "no completion EVENT later: %r" % r.events()


def test_led_off_during_blink_stops_it():
    r = Rig()
    r.command("led_blink", (5, 400))
    r.run_until(100)
    assert r.command("led_off") == 0, "led_off during a blink is done"
    assert r.events() == [(100, (1, "led_blink", 1))], r.events()
    assert not r.light.on, "led_off took effect"
    r.run_until(3000)
    assert len(r.events()) == 1 and r.changes(101) == [], (r.events(), r.changes(101))


def test_blink_during_blink_restarts():
    r = Rig()
    r.command("led_blink", (5, 400))
    r.run_until(300)
    r.command("led_blink", (1, 200))
    r.run_until(1000)
    assert r.events() == [(300, (1, "led_blink", 1)), (500, (1, "led_blink", 0))], r.events()


def test_log_lines_for_blink():
    import json

    r = Rig()
    r.command("led_blink", (1, 100))
    r.run_until(200)
    ev = [json.loads(x) for x in r.lines]
    assert ev == [
        {"event": "boot", "module_id": "LED_001"},
        {"event": "ack"},
        {"event": "command", "name": "led_blink", "status": 0},
        {"event": "done", "name": "led_blink", "status": 0},
    ], ev


def test_light_needs_exactly_one_output():
    for kw in ({}, {"pin": FakePin([0]), "pixels": FakePixels()}):
        try:
            Light(**kw)
        except ValueError as e:
            assert "exactly one" in str(e), e
        else:
            assert False, "Light(%r) must be refused" % kw
