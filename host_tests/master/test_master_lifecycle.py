# Registry lifecycle (PROTOCOL.md section 7) with scripted fake organs on a fake clock.
from organbus import frame
import master_rig as mf
import micropython
from organbus.descriptor import encode_descriptor

from master.bus import body
from master.bus.hub import EventLog, Feed

UNIX_PORT = True


def _names(rig):
    return [c["name"] for c in rig.body.menu()["capabilities"]]


def test_boot_sends_discover_on_every_port():
    rig = mf.Rig(ports=(0, 1))
    assert rig.wire[0] == [frame.DISCOVER_FRAME], rig.wire[0]
    assert rig.wire[1] == [frame.DISCOVER_FRAME], rig.wire[1]
    assert rig.body.menu()["capabilities"] == [], "menu not empty at boot"


def test_registration_and_ack():
    rig = mf.standard_rig()
    assert _names(rig) == ["led_on", "led_off", "led_blink", "speak", "announce", "chime"], _names(
        rig
    )
    assert frame.ACK_FRAME in rig.wire[0] and frame.ACK_FRAME in rig.wire[1], "no ACK"
    assert rig.organs[0].acked and rig.organs[1].acked, "organs not acked"
    ev = [e for e in rig.events if e[0] == "registered"]
    assert ev[0][1] == {
        "port": 0,
        "module_id": "LED_001",
        "module_type": "led",
        "capabilities": ["led_on", "led_off", "led_blink"],
        "again": False,
    }, ev[0]


def test_menu_matches_section_9():
    rig = mf.standard_rig()
    m = rig.body.menu()
    assert m["protocol"] == 3 and m["max_steps"] == 16, m
    blink = m["capabilities"][2]
    assert blink == {
        "name": "led_blink",
        "description": "Blink the light a number of times.",
        "exec_type": "continuous",
        "resource_group": "led",
        "max_duration_ms": 40000,
        "module_id": "LED_001",
        "params": [
            {"name": "count", "type": "int", "min": 1, "max": 20, "unit": ""},
            {"name": "period_ms", "type": "int", "min": 100, "max": 2000, "unit": "ms"},
        ],
    }, blink
    speak = m["capabilities"][3]
    assert speak["module_id"] == "SPK_001" and speak["params"][0]["type"] == "string", speak


def test_periodic_descriptor_acked_again_without_event():
    rig = mf.standard_rig()
    acks = rig.wire[0].count(frame.ACK_FRAME)
    n_events = len(rig.events)
    rig.advance(11000)
    assert rig.wire[0].count(frame.ACK_FRAME) == acks + 2, "periodic DESCRIPTORs not ACKed"
    assert len(rig.events) == n_events, "re-registration logged: %r" % rig.events[n_events:]


def test_invalid_descriptor_refused_with_reason():
    rig = mf.Rig(start=False)
    bad = mf.led()
    raw = bytearray(encode_descriptor(bad))
    raw[1:8] = b"LED-001"  # '-' is not allowed in a module_id
    rig.attach(0, mf.FakeOrgan(bad, raw=bytes(raw)))
    rig.body.start(rig.now)
    rig.advance(5000)
    assert frame.ACK_FRAME not in rig.wire[0], "invalid descriptor was ACKed"
    assert rig.body.menu()["capabilities"] == [], "invalid organ on the menu"
    st = rig.body.status()
    refusals = st["ports"][0]["refusals"]
    assert len(refusals) == 1 and refusals[0]["count"] >= 2, refusals
    assert "module_id" in refusals[0]["reason"], refusals[0]["reason"]
    ev = [e for e in rig.events if e[0] == "refused"]
    assert len(ev) == 1 and ev[0][1]["reason"] == refusals[0]["reason"], ev


def test_unregistered_talker_discovered_at_most_every_2s():
    rig = mf.Rig()
    t0 = rig.now
    times = []
    for i in range(1, 9):  # a HEARTBEAT every second, from an organ the master never registered
        rig.now = t0 + i * 1000
        n = len(rig.wire[0])
        rig.feed(0, frame.HEARTBEAT_FRAME)
        times += [rig.now - t0 for f in rig.wire[0][n:] if f == frame.DISCOVER_FRAME]
    assert times == [2000, 4000, 6000, 8000], "DISCOVER at %r" % times


def test_junk_is_not_a_legal_frame():
    rig = mf.Rig()
    rig.now += 3000
    rig.feed(0, b"\xaa\x03\x03\x00\x00\x00\x00\x55" + b"hello")
    assert rig.wire[0] == [frame.DISCOVER_FRAME], "junk triggered DISCOVER"
    assert rig.body.status()["ports"][0]["counters"]["crc_errors"] == 1


def test_offline_after_15s_and_rediscovered():
    rig = mf.standard_rig()
    led = rig.organs[0]
    led.alive = False
    rig.advance(14900)
    assert "led_on" in _names(rig), "offline before 15 s"
    rig.advance(300)
    assert "led_on" not in _names(rig) and "speak" in _names(rig), _names(rig)
    assert rig.events[-1] == ("offline", {"port": 0, "module_id": "LED_001"}), rig.events[-1]
    st = rig.body.status()
    assert st["organs"][0]["online"] is False and st["organs"][0]["abilities"] == [], st["organs"]
    status, obj = mf.submit(
        rig,
        '{"heard_req": 0, "steps": [{"task_id": "t1", "action": "led_on", "params": {}, '
        '"priority": 5, "depends_on": []}], "can_execute": true, "missing": [], "response": ""}',
    )
    assert status == 422, "plan for an offline organ accepted"
    # replug: the organ still thinks it is acked and heartbeats; the master DISCOVERs it
    led.alive = True
    rig.advance(3000)
    assert "led_on" in _names(rig), "not rediscovered within 3 s of replug"
    ev = [e for e in rig.events if e[0] == "registered"]
    assert ev[-1][1]["again"] is True, ev[-1]


def test_master_restart_rediscovers_within_3s():
    rig = mf.standard_rig()
    organs = rig.organs
    rig2 = mf.Rig(start=False)
    rig2.now = rig.now
    for p in organs:
        rig2.attach(p, organs[p])  # same organs, still acked, heartbeating
    rig2.body.start(rig2.now)
    rig2.advance(3000)
    assert _names(rig2) == ["led_on", "led_off", "led_blink", "speak", "announce", "chime"], _names(
        rig2
    )
    first = [e for e in rig2.events if e[0] == "registered"]
    assert len(first) == 2 and all(e[1]["again"] is False for e in first), first


def test_duplicate_names_stay_with_first():
    rig = mf.Rig(start=False)
    rig.attach(0, mf.FakeOrgan(mf.led("LED_001")))
    rig.body.start(rig.now)
    rig.advance(100)
    rig.attach(1, mf.FakeOrgan(mf.led("LED_002")))
    rig.advance(1200)
    m = rig.body.menu()["capabilities"]
    assert [(c["name"], c["module_id"]) for c in m] == [
        ("led_on", "LED_001"),
        ("led_off", "LED_001"),
        ("led_blink", "LED_001"),
    ], m
    dups = [e[1] for e in rig.events if e[0] == "duplicate"]
    assert [d["name"] for d in dups] == ["led_on", "led_off", "led_blink"], dups
    assert dups[0]["port"] == 1 and dups[0]["module_id"] == "LED_002", dups[0]
    st = rig.body.status()["organs"]
    assert (
        st[1]["duplicates"] == ["led_on", "led_off", "led_blink"] and st[1]["abilities"] == []
    ), st
    # the first goes away: the duplicate's abilities come onto the menu from it
    rig.organs[0].alive = False
    rig.advance(15100)
    m = rig.body.menu()["capabilities"]
    assert [c["module_id"] for c in m] == ["LED_002"] * 3, m


def test_status_fields():
    rig = mf.standard_rig()
    rig.advance(1500)
    st = rig.body.status()
    for k in ("uptime_ms", "mode", "organ_ports", "organs", "ports", "plans"):
        assert k in st, "status lacks %s" % k
    o = st["organs"][0]
    assert o["module_id"] == "LED_001" and o["module_type"] == "led" and o["port"] == 0, o
    assert o["online"] is True and 0 <= o["last_frame_age_ms"] <= 1000, o
    c = st["ports"][0]["counters"]
    for k in ("frames", "bytes", "junk", "crc_errors", "bad_version", "oversize", "bad_eof"):
        assert k in c, "counter %s missing" % k
    assert c["frames"] >= 2, c


def test_one_port_mode_in_status():
    rig = mf.Rig(ports=(1,), mode="one-port")
    st = rig.body.status()
    assert st["mode"] == "one-port" and st["organ_ports"] == [1], st
    assert rig.wire[1] == [frame.DISCOVER_FRAME], rig.wire


def test_speak_ready():
    rig = mf.standard_rig()
    assert rig.body.speak_ready() is True, "speaker online but not ready"
    rig.organs[1].alive = False
    rig.advance(3100)
    assert rig.body.speak_ready() is False, "speaker silent for 3 s still ready"
    rig2 = mf.Rig(start=False)
    rig2.attach(1, mf.FakeOrgan(mf.speaker(voice=False)))
    rig2.body.start(rig2.now)
    rig2.advance(100)
    assert rig2.body.speak_ready() is False, "chime-only speaker claims speak"


def test_heartbeat_allocates_nothing():
    # The whole sans-IO master with its hub subscribers attached (the event log, /status's
    # tallies and a bounded Feed): heartbeats, a periodic DESCRIPTOR and the timers.
    sinks = {0: _Sink(), 1: _Sink()}
    now = 100000
    b = body.build(sinks, lambda: now)
    lines = []
    EventLog(b.hub, lambda e, pairs: lines.append(e))
    feed = Feed(b.hub, 4)
    b.start(now)
    desc = frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.led()))
    b.port(0).feed(desc, now)
    b.port(1).feed(frame.encode(frame.DESCRIPTOR, mf.encode_descriptor(mf.speaker())), now)
    hb = frame.HEARTBEAT_FRAME
    p0, p1 = b.port(0), b.port(1)
    p0.feed(hb, now)  # warm up
    p0.feed(desc, now)
    b.poll(now)
    assert lines == ["registered", "registered"], lines
    acks = sinks[0].n
    queued = feed.n
    micropython.heap_lock()
    try:
        for i in range(50):
            p0.feed(hb, now + i)
            p1.feed(hb, now + i)
        p0.feed(desc, now + 60)  # the periodic DESCRIPTOR: compared, ACKed, no decode
        b.poll(now + 70)
    finally:
        micropython.heap_unlock()
    assert p0.last_rx == now + 60, "heartbeats not taken"
    assert sinks[0].n == acks + 1, "the periodic DESCRIPTOR got %d frames back, not one ACK" % (
        sinks[0].n - acks
    )
    assert feed.n == queued and b.hub.errors == 0, "the steady state published something"


class _Sink:
    # a port's tx: counts what would be sent
    def __init__(self):
        self.n = 0

    def send(self, f):
        self.n += 1

    def command(self, f):
        self.n += 1

    def unread(self):
        return False
