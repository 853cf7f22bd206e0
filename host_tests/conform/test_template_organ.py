# The organ template (organs/template.py, a push button) on a fake clock: its contract and its EVENTs.
from organbus import frame
from organbus.command import decode_event, encode_command
from organbus.descriptor import decode_descriptor
from organs.template import ButtonOrgan

UNIX_PORT = True


class FakeButton:
    """A pull-up button: reads 1 until pressed."""

    def __init__(self):
        self.pressed = False

    def value(self):
        return 0 if self.pressed else 1


def _booted(pin):
    b = ButtonOrgan(pin, log=lambda line: None)
    assert b.organ.start(0), "the template's own DESCRIPTOR is refused: %s" % b.organ.refusal
    b.organ.feed(frame.ACK_FRAME, 0)
    return b


def _drain(organ):
    out = []
    while True:
        f = organ.pop()
        if f is None:
            return out
        out.append(f)


def _events(frames):
    return [decode_event(f[5:-3]) for f in frames if f[2] == frame.EVENT]


def _command(b, now, name, values=()):
    b.organ.feed(frame.encode(frame.COMMAND, encode_command(name, values)), now)
    return [f for f in _drain(b.organ) if f[2] == frame.COMMAND_RESP]


def test_the_template_describes_a_valid_contract():
    b = _booted(FakeButton())
    d = decode_descriptor(b.organ.descriptor_frame[5:-3])
    caps = {c["name"]: c for c in d["capabilities"]}
    assert sorted(caps) == ["button_cancel", "button_wait"], caps
    wait = caps["button_wait"]
    assert wait["exec_type"] == "continuous" and wait["max_duration_ms"] >= 2000, wait
    assert wait["params"][0]["min"] == 100 and wait["params"][0]["max"] == 2000, wait


def test_a_press_ends_the_wait_with_status_0():
    pin = FakeButton()
    b = _booted(pin)
    assert _command(b, 10, "button_wait", [1500]) == [frame.RESP_OK_FRAME]
    b.organ.poll(100)
    assert _events(_drain(b.organ)) == [], "EVENT before any press"
    pin.pressed = True
    b.organ.poll(120)
    assert _events(_drain(b.organ)) == [(1, "button_wait", 0)]


def test_the_timeout_is_clamped_and_ends_the_wait_with_status_1():
    b = _booted(FakeButton())
    assert _command(b, 0, "button_wait", [1e6]) == [frame.RESP_OK_FRAME], "out of range: clamped"
    b.organ.poll(1999)
    assert _events(_drain(b.organ)) == [], "ended before the clamped 2000 ms"
    b.organ.poll(2000)
    assert _events(_drain(b.organ)) == [(1, "button_wait", 1)]
    assert _command(b, 2100, "button_wait", [-5]) == [frame.RESP_OK_FRAME]
    b.organ.poll(2199)
    assert _events(_drain(b.organ)) == [], "ended before the clamped 100 ms"
    b.organ.poll(2200)
    assert _events(_drain(b.organ)) == [(1, "button_wait", 1)]


def test_cancel_stops_the_wait_and_a_near_miss_name_is_refused():
    b = _booted(FakeButton())
    _command(b, 0, "button_wait", [2000])
    b.organ.feed(frame.encode(frame.COMMAND, encode_command("button_cancel")), 50)
    out = _drain(b.organ)
    assert _events(out) == [(1, "button_wait", 1)], out
    assert frame.RESP_OK_FRAME in out
    for name in ("BUTTON_CANCEL", "button", "button_cancell"):
        assert _command(b, 60, name) == [frame.RESP_FAIL_FRAME], name
    assert _command(b, 70, "button_wait", [float("nan")]) == [frame.RESP_FAIL_FRAME]


def test_waiting_timers_and_cancel_round_trips_allocate_nothing():
    import micropython

    b = _booted(FakeButton())
    cancel = frame.encode(frame.COMMAND, encode_command("button_cancel"))
    _command(b, 0, "button_wait", [2000])  # a COMMAND with numbers decodes outside the lock
    types = [0] * 256
    now = 0
    b.organ.poll(now)
    micropython.heap_lock()
    try:
        for i in range(300):  # 3 s: the wait times out at 2 s, then heartbeats and cancels
            now += 10
            if i % 10 == 5:
                b.organ.feed(cancel, now)
            b.organ.poll(now)
            while True:
                f = b.organ.pop()
                if f is None:
                    break
                types[f[2]] += 1
    finally:
        micropython.heap_unlock()
    assert types[frame.COMMAND_RESP] == 30, "every cancel answered: %d" % types[frame.COMMAND_RESP]
    assert types[frame.EVENT] == 1, "the first cancel ends the wait: %d" % types[frame.EVENT]
    assert types[frame.HEARTBEAT] == 3, "heartbeats kept coming: %d" % types[frame.HEARTBEAT]
