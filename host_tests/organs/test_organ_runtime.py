# Organ runtime on a fake clock and a fake link: section-7 cadence, dispatch, refusals, clamping, UTF-8.
import json
import struct

from organbus import frame
from organbus.command import decode_event, encode_command
from organbus.descriptor import decode_descriptor
from organbus.ticks import ticks_add
from organs.runtime import ANNOUNCING, REGISTERED, STOPPED, Organ

UNIX_PORT = True

NAN = float("nan")
INF = float("inf")


def _caps():
    return [
        {
            "name": "beep",
            "description": "Beep once.",
            "exec_type": "immediate",
            "resource_group": "",
            "max_duration_ms": 0,
            "params": [],
        },
        {
            "name": "move",
            "description": "Move.",
            "exec_type": "continuous",
            "resource_group": "legs",
            "max_duration_ms": 5000,
            "params": [
                {"name": "speed", "type": "float", "min": -1.0, "max": 1.0, "unit": "m/s"},
                {"name": "steps", "type": "int", "min": -10, "max": 10, "unit": ""},
                {"name": "loud", "type": "bool", "min": 0, "max": 1, "unit": ""},
            ],
        },
        {
            "name": "say",
            "description": "Say the text.",
            "exec_type": "continuous",
            "resource_group": "audio",
            "max_duration_ms": 3000,
            "params": [{"name": "text", "type": "string", "min": 1, "max": 12, "unit": ""}],
        },
    ]


def _descriptor(**over):
    d = {
        "module_id": "TST_001",
        "module_type": "test",
        "hw_version": 0x0102,
        "fw_version": 0x0304,
        "capabilities": _caps(),
    }
    d.update(over)
    return d


class Rig:
    """An organ with recording handlers, a log and a wire that decodes what the organ sends."""

    def __init__(self, descriptor=None, status=0, raises=False, t0=0):
        self.t0 = t0  # the organ's clock reads t0 + now (wrapping like the board's ticks)
        self.calls = []
        self.lines = []
        self.status = status
        self.raises = raises
        handlers = {"beep": self.handler("beep"), "move": self.handler("move")}
        handlers["say"] = self.handler("say")
        self.organ = Organ(descriptor or _descriptor(), handlers, log=self.lines.append)
        self.sent = []  # (time, type, payload bytes)
        self.dec = frame.Decoder(self._on)
        self.now = 0

    def handler(self, name):
        def h(values, text, now):
            if self.raises:
                raise OSError("hardware says no")
            self.calls.append((name, list(values), text, now))
            return self.status

        return h

    def _on(self, ftype, payload, n):
        self.sent.append((self.now, ftype, bytes(payload[:n])))

    def drain(self):
        while True:
            f = self.organ.pop()
            if f is None:
                return
            self.dec.feed(f, self.now)

    def run_until(self, t, step=10):
        while self.now < t:
            self.now += step
            self.organ.poll(self.at(self.now))
            self.drain()

    def at(self, t):
        return ticks_add(self.t0, t) if self.t0 else t

    def send(self, data):
        self.organ.feed(data, self.at(self.now))
        self.drain()

    def command(self, name, values=(), text=None):
        """Sends one COMMAND; returns the COMMAND_RESP status byte."""
        return self.raw_command(encode_command(name, values, text))

    def raw_command(self, payload):
        before = len(self.sent)
        self.send(frame.encode(frame.COMMAND, payload))
        resps = [s for s in self.sent[before:] if s[1] == frame.COMMAND_RESP]
        assert len(resps) == 1, "one COMMAND_RESP per COMMAND, got %r" % (self.sent[before:],)
        assert len(resps[0][2]) == 1, "COMMAND_RESP carries one status byte: %r" % (resps[0],)
        return resps[0][2][0]

    def times(self, ftype, since=0):
        return [t for (t, ty, _) in self.sent if ty == ftype and t >= since]

    def events(self):
        return [json.loads(x) for x in self.lines]


def _started(**kw):
    r = Rig(**kw)
    assert r.organ.refusal is None, "test descriptor is valid: %r" % r.organ.refusal
    assert r.organ.start(r.at(0)), "organ starts"
    return r


def _registered(at=1000):
    r = _started()
    r.run_until(at)
    r.send(frame.ACK_FRAME)
    r.sent = []
    return r


# -- lifecycle (section 7) ---------------------------------------------------------------------


def test_boot_waits_one_second_then_descriptor_every_two_seconds():
    r = _started()
    r.run_until(9990, step=5)
    assert r.times(frame.DESCRIPTOR) == [1000, 3000, 5000, 7000, 9000], r.times(frame.DESCRIPTOR)
    assert r.times(frame.HEARTBEAT) == [], "no HEARTBEAT before ACK: %r" % r.times(frame.HEARTBEAT)
    assert r.organ.state == ANNOUNCING, "still announcing without ACK"


def test_descriptor_payload_is_the_declared_contract():
    r = _started()
    r.run_until(1000)
    t, ty, payload = r.sent[0]
    assert decode_descriptor(payload) == decode_descriptor(
        r.organ.descriptor_frame[5:-3]
    ), "frame carries the descriptor"
    d = decode_descriptor(payload)
    assert d["module_id"] == "TST_001" and d["hw_version"] == 0x0102, d
    assert [c["name"] for c in d["capabilities"]] == ["beep", "move", "say"], d


def test_ack_then_heartbeat_every_second_and_descriptor_every_five():
    r = _started()
    r.run_until(3500)
    r.send(frame.ACK_FRAME)
    r.run_until(14990, step=5)
    assert r.times(frame.HEARTBEAT) == list(range(4500, 15000, 1000)), r.times(frame.HEARTBEAT)
    assert r.times(frame.DESCRIPTOR) == [1000, 3000, 8500, 13500], r.times(frame.DESCRIPTOR)
    assert r.organ.state == REGISTERED, "registered after ACK"
    assert {"event": "ack"} in r.events(), r.lines


# Ticks wrap: at 2**30 on the C6 and with organbus.ticks on CPython, at 2**62 on the 64-bit unix
# port. ticks_add(0, -2500) crosses the wrap of the interpreter running the test; 2**30 - 2500 is
# the board's wrap given explicitly (the same on CPython; on the unix port it passes 2**30 unwrapped).
WRAP_STARTS = sorted(set([ticks_add(0, -2500), ticks_add((1 << 30) - 1, -2499)]))


def test_cadence_across_the_tick_wrap():
    for t0 in WRAP_STARTS:
        r = _started(t0=t0)
        r.run_until(3500)
        r.send(frame.ACK_FRAME)
        r.run_until(14990, step=5)
        hb = r.times(frame.HEARTBEAT)
        assert hb == list(range(4500, 15000, 1000)), "start %d: heartbeats at %r" % (t0, hb)
        desc = r.times(frame.DESCRIPTOR)
        assert desc == [1000, 3000, 8500, 13500], "start %d: descriptors at %r" % (t0, desc)
        assert r.organ.state == REGISTERED, "start %d: registered across the wrap" % t0
        assert r.status == 0 and r.command("move", (0.5, 3.0, 1.0)) == 0, "commands still answered"


def test_ack_while_registered_keeps_the_cadence():
    r = _started()
    r.run_until(1000)
    r.send(frame.ACK_FRAME)
    r.run_until(2300)
    r.send(frame.ACK_FRAME)  # the master ACKs every DESCRIPTOR: no reset of the timers
    r.run_until(6990, step=5)
    assert r.times(frame.HEARTBEAT) == [2000, 3000, 4000, 5000, 6000], r.times(frame.HEARTBEAT)
    assert r.times(frame.DESCRIPTOR) == [1000, 6000], r.times(frame.DESCRIPTOR)
    assert r.events().count({"event": "ack"}) == 1, "ack logged once per registration"


def test_command_before_ack_stops_announcing():
    r = _started()
    r.run_until(1500)
    assert r.command("beep") == 0, "command answered before ACK"
    r.run_until(8000, step=5)
    assert r.times(frame.DESCRIPTOR) == [1000, 6500], r.times(frame.DESCRIPTOR)
    assert r.times(frame.HEARTBEAT) == list(range(2500, 8001, 1000)), r.times(frame.HEARTBEAT)


def test_command_during_boot_wait_is_answered():
    r = _started()
    r.run_until(300)
    assert r.command("beep") == 0, "a command in the first second is still answered"
    r.run_until(2000)
    assert r.times(frame.HEARTBEAT) == [1300], r.times(frame.HEARTBEAT)


def test_discover_sends_descriptor_at_once_then_every_two_seconds_until_ack():
    r = _registered(1000)
    r.run_until(10250, step=5)
    r.sent = []
    r.send(frame.DISCOVER_FRAME)
    assert r.times(frame.DESCRIPTOR) == [10250], "DESCRIPTOR at once: %r" % r.sent
    r.run_until(15000, step=5)
    assert r.times(frame.DESCRIPTOR) == [10250, 12250, 14250], r.times(frame.DESCRIPTOR)
    assert r.times(frame.HEARTBEAT) == [], "announcing again: no HEARTBEAT %r" % r.sent
    r.send(frame.ACK_FRAME)
    r.run_until(21000, step=5)
    assert r.times(frame.HEARTBEAT, 15000) == list(range(16000, 21001, 1000)), r.sent
    assert r.times(frame.DESCRIPTOR, 15000) == [20000], r.times(frame.DESCRIPTOR)
    assert {"event": "discover"} in r.events(), r.lines


def test_discover_during_boot_wait_answers_at_once():
    r = _started()
    r.run_until(400)
    r.send(frame.DISCOVER_FRAME)
    r.run_until(5000)
    assert r.times(frame.DESCRIPTOR) == [400, 2400, 4400], r.times(frame.DESCRIPTOR)


def test_frames_arrive_split_and_behind_junk():
    r = _started()
    r.run_until(1000)
    data = (
        b"\x00\xaa\x55junk" + frame.ACK_FRAME + frame.encode(frame.COMMAND, encode_command("beep"))
    )
    for i in range(len(data)):
        r.send(data[i : i + 1])
    assert r.organ.state == REGISTERED, "ACK found behind junk, fed a byte at a time"
    assert [s[1] for s in r.sent if s[1] == frame.COMMAND_RESP] == [frame.COMMAND_RESP], r.sent
    assert r.organ.counters()["junk"] >= 7, r.organ.counters()


def test_frames_an_organ_does_not_take_are_ignored():
    r = _registered()
    for f in (
        frame.HEARTBEAT_FRAME,
        frame.RESP_OK_FRAME,
        frame.encode(frame.DATA, b"x"),
        frame.encode(0x7E, b""),
    ):
        r.send(f)
    assert r.sent == [], "nothing answers them: %r" % r.sent
    assert r.organ.counters()["ignored"] == 4, r.organ.counters()
    assert r.organ.counters()["unknown"] == 1, "type 0x7E counted unknown by the decoder"


def test_boot_log_line():
    r = _started()
    assert r.events()[0] == {"event": "boot", "module_id": "TST_001"}, r.lines
    assert r.lines[0].startswith('{"event": '), "event key first: %r" % r.lines[0]


# -- own contract --------------------------------------------------------------------------------


def _refused(descriptor, handlers=None):
    lines = []
    if handlers is None:
        handlers = {c["name"]: (lambda v, t, n: 0) for c in descriptor["capabilities"]}
    o = Organ(descriptor, handlers, log=lines.append)
    assert not o.start(0), "an invalid organ does not start"
    o.poll(5000)
    o.feed(frame.DISCOVER_FRAME, 5000)
    assert o.pop() is None, "a refused organ sends nothing"
    assert o.state == STOPPED, "state stays stopped"
    ev = [json.loads(x) for x in lines]
    assert len(ev) == 1 and ev[0]["event"] == "refused", lines
    return ev[0]["reason"]


def test_invalid_own_descriptor_does_not_start_and_says_why():
    reason = _refused(_descriptor(module_id="BAD-ID"))
    assert "module_id" in reason and "BAD-ID" in reason, reason
    caps = _caps()
    caps[1]["params"][0]["min"] = 2.0  # min > max
    reason = _refused(_descriptor(capabilities=caps))
    assert "speed" in reason and "greater than max" in reason, reason
    caps = _caps()
    caps[0]["name"] = "Beep"
    reason = _refused(_descriptor(capabilities=caps))
    assert "Beep" in reason, reason


def test_handlers_must_match_the_descriptor():
    d = _descriptor()
    h = {"beep": lambda v, t, n: 0, "move": lambda v, t, n: 0}
    reason = _refused(d, h)
    assert "'say'" in reason and "no handler" in reason, reason
    h["say"] = h["extra"] = lambda v, t, n: 0
    reason = _refused(d, h)
    assert "'extra'" in reason and "not declared" in reason, reason


# -- dispatch and refusals (section 5) -----------------------------------------------------------


def _last_command_event(r):
    ev = [e for e in r.events() if e["event"] == "command"]
    return ev[-1]


def test_immediate_answers_zero_and_handler_runs_once():
    r = _registered()
    assert r.command("beep") == 0, "beep done"
    assert r.calls == [("beep", [], None, r.now)], r.calls
    assert _last_command_event(r) == {"event": "command", "name": "beep", "status": 0}, r.lines


def test_unknown_names_answer_one_and_are_never_aliased():
    r = _registered()
    for name in ("bee", "beeps", "BEEP", "led_on", "x", "move_", "sa"):
        assert r.command(name) == 1, "unknown name %r must answer 1" % name
        e = _last_command_event(r)
        assert e["status"] == 1 and e["name"] == name and "unknown" in e["reason"], e
    assert r.calls == [], "no handler ran: %r" % r.calls


def test_wrong_lengths_answer_one():
    r = _registered()
    good_move = encode_command("move", (0.5, 2, 1))
    cases = [
        ("empty payload", b""),
        ("name length past the end", b"\x09beep"),
        ("beep with a trailing byte", encode_command("beep") + b"\x00"),
        ("beep with a value", encode_command("beep", (1.0,))),
        ("move missing a value", encode_command("move", (0.5, 2))),
        ("move with a byte short", good_move[:-1]),
        ("move with a trailing byte", good_move + b"\x00"),
        ("say without its text", encode_command("say")),
        ("say with a text length past the end", encode_command("say") + b"\x05ab"),
        ("say with bytes after the text", encode_command("say", (), "hi") + b"!"),
    ]
    for what, payload in cases:
        assert r.raw_command(payload) == 1, "%s must answer 1" % what
        e = _last_command_event(r)
        assert e["status"] == 1 and e.get("reason"), "%s: logged with a reason: %r" % (what, e)
    assert r.calls == [], "no handler ran: %r" % r.calls
    assert r.raw_command(good_move) == 0, "the well-formed move is accepted"


def test_nan_answers_one_in_every_position():
    r = _registered()
    for vals in ((NAN, 1, 0), (0.5, NAN, 0), (0.5, 1, NAN)):
        assert r.command("move", vals) == 1, "NaN in %r must answer 1" % (vals,)
        assert "NaN" in _last_command_event(r)["reason"], r.lines[-1]
    # A NaN with another bit pattern (quiet, negative, payload bits) is still NaN.
    payload = bytearray(encode_command("move", (0.5, 1, 0)))
    payload[5:9] = b"\xff\xc0\x12\x34"
    assert r.raw_command(bytes(payload)) == 1, "negative NaN with payload bits answers 1"
    assert r.calls == [], r.calls


def test_invalid_utf8_text_answers_one():
    r = _registered()
    for bad in (b"\xff", b"ab\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"a\x80b"):
        payload = encode_command("say") + bytes([len(bad)]) + bad
        assert r.raw_command(payload) == 1, "text %r is not UTF-8: answer 1" % bad
        assert "UTF-8" in _last_command_event(r)["reason"], r.lines[-1]
    assert r.calls == [], r.calls


def test_text_shorter_than_min_answers_one():
    r = _registered()
    assert r.command("say", (), "") == 1, "say declares text 1..12: empty text answers 1"
    assert r.calls == [], r.calls


def test_handler_refusal_and_failure_answer_one():
    r = _started(status=1)
    r.run_until(1000)
    assert r.command("beep") == 1, "handler returning 1 (hardware refused) answers 1"
    r = _started(raises=True)
    assert r.command("beep") == 1, "handler raising answers 1"
    e = _last_command_event(r)
    assert "hardware says no" in e["reason"], e


def _moved(r, vals):
    assert r.command("move", vals) == 0, "move %r accepted" % (vals,)
    return r.calls[-1][1]


def test_clamping_and_rounding_table():
    r = _registered()
    # (speed, steps, loud) sent -> values the handler sees
    table = [
        ((0.25, 2.5, 0.5), (0.25, 3, True)),
        ((-0.25, -2.5, 0.4999), (-0.25, -3, False)),
        ((5.0, 10.6, 7.0), (1.0, 10, True)),
        ((-5.0, -11.0, -3.0), (-1.0, -10, False)),
        ((INF, INF, INF), (1.0, 10, True)),
        ((-INF, -INF, -INF), (-1.0, -10, False)),
        ((0.0, 0.5, 0.0), (0.0, 1, False)),
        ((0.0, -0.5, 1.0), (0.0, -1, True)),
        ((0.0, 2.4999, 0.0), (0.0, 2, False)),
        ((0.0, 3.5, 0.0), (0.0, 4, False)),
        ((0.0, -0.49, 0.0), (0.0, 0, False)),
        ((1.0, 9.5, 1.0), (1.0, 10, True)),
    ]
    for sent, want in table:
        got = _moved(r, sent)
        assert len(got) == 3, got
        assert abs(got[0] - want[0]) < 1e-6, "speed %r -> %r, want %r" % (sent[0], got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is int, "steps %r -> %r, want int %r" % (
            sent[1],
            got[1],
            want[1],
        )
        assert got[2] is want[2], "loud %r -> %r, want %r" % (sent[2], got[2], want[2])


def test_float_values_are_what_the_wire_carried():
    r = _registered()
    got = _moved(r, (0.1, 0, 0))
    f32 = struct.unpack(">f", struct.pack(">f", 0.1))[0]
    assert got[0] == f32, "float passes as its f32 value: %r vs %r" % (got[0], f32)


def test_text_truncated_at_a_character_boundary():
    r = _registered()
    table = [
        ("hello", "hello"),
        ("twelve bytes", "twelve bytes"),
        ("thirteen byte", "thirteen byt"),
        ("a" * 11 + "\u20ac", "a" * 11),  # 3-byte euro sign would straddle byte 12
        ("a" * 10 + "\u20ac", "a" * 10 + "\u20ac"[:0]),  # 10 + 3 = 13 bytes: euro dropped
        ("a" * 9 + "\u20ac", "a" * 9 + "\u20ac"),  # exactly 12 bytes: kept
        ("\u20ac" * 5, "\u20ac" * 4),
        ("a" * 9 + "\U0001f600", "a" * 9),  # 4-byte emoji straddles
        ("a" * 8 + "\U0001f600", "a" * 8 + "\U0001f600"),
        ("aaaaaaaaaa\u00e9\u00e9", "aaaaaaaaaa\u00e9"),  # 2-byte chars: 10 + 2 = 12
        ("aaaaaaaaaaa\u00e9", "a" * 11),  # 11 + 2 = 13
    ]
    for sent, want in table:
        assert r.command("say", (), sent) == 0, "say %r accepted" % sent
        got = r.calls[-1][2]
        assert got == want, "text %r -> %r, want %r" % (sent, got, want)
        assert len(got.encode("utf-8")) <= 12, got


# -- continuous abilities (section 6) -------------------------------------------------------------


def test_continuous_answers_zero_when_started_and_event_on_finish():
    r = _registered()
    assert r.command("move", (0.5, 3, 0)) == 0, "move started"
    assert [s for s in r.sent if s[1] == frame.EVENT] == [], "no EVENT until it ends"
    r.now += 700
    r.organ.finish("move", 0)
    r.drain()
    ev = [decode_event(p) for (t, ty, p) in r.sent if ty == frame.EVENT]
    assert ev == [(1, "move", 0)], ev
    r.organ.finish("say", 1)
    r.drain()
    ev = [decode_event(p) for (t, ty, p) in r.sent if ty == frame.EVENT]
    assert ev == [(1, "move", 0), (1, "say", 1)], ev
    done = [e for e in r.events() if e["event"] == "done"]
    assert done == [
        {"event": "done", "name": "move", "status": 0},
        {"event": "done", "name": "say", "status": 1},
    ], done


def test_finish_of_an_immediate_ability_is_an_error():
    r = _registered()
    try:
        r.organ.finish("beep", 0)
    except ValueError as e:
        assert "immediate" in str(e), e
    else:
        assert False, "an immediate ability has no EVENT"


def test_output_queue_overflow_is_counted_not_silent():
    r = _registered()
    for _ in range(40):
        r.organ.feed(frame.encode(frame.COMMAND, encode_command("beep")), r.now)
    n = 0
    while r.organ.pop() is not None:
        n += 1
    c = r.organ.counters()
    assert n + c["dropped"] == 40 and c["dropped"] > 0, (n, c)


def test_ack_or_discover_with_a_payload_is_not_one():
    r = _started()
    r.run_until(1000)
    r.send(frame.encode(frame.ACK, b"\x00"))
    assert r.organ.state == ANNOUNCING, "an ACK carries nothing: with a payload it is ignored"
    r.sent = []
    r.send(frame.encode(frame.DISCOVER, b"x"))
    assert r.sent == [], "a DISCOVER with a payload brings no DESCRIPTOR: %r" % r.sent
    assert r.organ.counters()["ignored"] == 2, r.organ.counters()


def test_a_descriptor_too_long_for_one_frame_is_refused():
    caps = []
    for i in range(8):
        params = [
            {"name": "p%d" % k, "type": "float", "min": 0.0, "max": 1.0, "unit": "unit"}
            for k in range(6)
        ]
        caps.append(
            {
                "name": "ability_number_%d" % i,
                "description": "A long description that fills the 63 bytes it may use: %d." % i,
                "exec_type": "immediate",
                "resource_group": "group",
                "max_duration_ms": 0,
                "params": params,
            }
        )
    reason = _refused(_descriptor(capabilities=caps))
    assert "exceeds LEN 512" in reason, reason


def test_finish_of_an_unknown_ability_is_an_error():
    r = _registered()
    try:
        r.organ.finish("fly", 0)
    except ValueError as e:
        assert "'fly'" in str(e), e
    else:
        assert False, "finish('fly') must raise"


class _DyingUart:
    def __init__(self, after):
        self.reads = 0
        self.after = after
        self.out = bytearray()

    def readinto(self, buf):
        self.reads += 1
        if self.reads > self.after:
            raise OSError("the UART went away")
        return None

    def write(self, f):
        self.out.extend(f)
        return len(f)


def test_run_ends_when_a_task_dies():
    from organs.runtime import run

    r = Rig()
    uart = _DyingUart(20)
    try:
        run(r.organ, uart, poll_ms=1)
    except OSError as e:
        assert "went away" in str(e), e
    else:
        assert False, "run must raise what killed its reader"
    # the reader and the writer (which drains the UART before the timers) each stop at their
    # first failed read: nobody keeps polling a dead UART
    assert 21 <= uart.reads <= 22, "the UART was polled until it failed: %d" % uart.reads


def test_run_refuses_an_invalid_organ():
    from organs.runtime import run

    lines = []
    o = Organ(_descriptor(module_type="Bad"), {}, log=lines.append)
    assert run(o, _DyingUart(0), poll_ms=1) is False, "an invalid organ does not run"
    assert json.loads(lines[0])["event"] == "refused", lines
