# The virtual body's MQTT link on a real Mosquitto, Home Assistant played by paho-mqtt: discovery, commands, availability, plans, the fleet, a broker away.
import json
import os
import signal
import subprocess
import sys
import time

from e2e_support import VirtualBody, plan_of
from ha_rig import HA
from support import ROOT

KEEPALIVE = 10
DEVICE = "homeassistant/device/%s/config"


def _body(tmp_path, broker, node, **kw):
    cfg = {"mqtt": {"host": "127.0.0.1", "port": broker.port, "client_id": node}}
    cfg["mqtt"]["keepalive_s"] = KEEPALIVE
    return VirtualBody(out_dir=str(tmp_path / node), master_config=cfg, **kw)


def _wav_bytes(b):
    d = b.board("speaker").wav
    if not os.path.isdir(d):
        return 0
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def _configs(port, cid, wait=1.0):
    """The retained device configs a client that subscribes now receives: {topic: doc}."""
    ha = HA(port, ("homeassistant/device/+/config",), cid)
    time.sleep(wait)
    ha.close()
    return {m[1]: json.loads(m[2]) for m in ha.msgs if m[3] and m[2]}


def _told(b):
    return [e for e in b.events if e.get("src") == "master" and e.get("event") in ("mqtt", "crash", "error")][-10:]  # fmt: skip


def test_home_assistant_sees_and_drives_the_body(tmp_path, broker):
    ha = HA(broker.port)
    b = _body(tmp_path, broker, "b1")
    t0 = time.monotonic()
    b.start()
    try:
        assert b.wait_http(20), "the master's HTTP port did not open"
        assert b.wait_menu(["led_on", "chime"], 20), _told(b)
        # within 5 s of boot: the retained configs, each entity with its unique_id
        time.sleep(max(0.0, 5.0 - (time.monotonic() - t0) - 1.0))
        got = _configs(broker.port, "ha-late")
        assert time.monotonic() - t0 <= 6.5, "took too long to look"
        cmps = {}
        for doc in got.values():
            assert doc["o"]["name"] == "organbus" and doc["dev"]["ids"], doc
            cmps.update(doc["cmps"])
        kinds = sorted(c["p"] for c in cmps.values())
        assert kinds == ["button", "light", "notify", "sensor", "sensor", "sensor", "update"], got
        assert all(c.get("uniq_id") for c in cmps.values()), cmps
        assert set(got) == {DEVICE % "b1", DEVICE % "b1_LED_001", DEVICE % "b1_SPK_001"}, got
        led_doc = got[DEVICE % "b1_LED_001"]
        assert led_doc["dev"]["via_device"] == "b1", led_doc
        light = cmps["LED_001_light"]
        base = light["~"]
        cmd = light["cmd_t"].replace("~", base, 1)
        state = light["stat_t"].replace("~", base, 1)
        assert ha.last(base + "/availability")[2] == b"online"
        # the light's command lights the LED (pin log), its state says so within 2 s
        m, k = b.mark(), ha.mark()
        t1 = time.monotonic()
        ha.publish(cmd, b"ON")
        on = b.wait_for(lambda e: e["src"] == "led" and e.get("event") == "pin" and e["value"] == 1, 2, m)  # fmt: skip
        assert on is not None, "the LED pin went on: %s" % _told(b)
        st = ha.wait(state, lambda p: p == b"ON", 2 - (time.monotonic() - t1), k)
        assert st is not None, "the light's state topic said ON within 2 s"
        ha.publish(cmd, b"OFF")
        assert ha.wait(state, lambda p: p == b"OFF", 3, k), "and OFF"
        # the blink effect: led_blink within its bounds, the default and one given
        effect = light["fx_cmd_t"].replace("~", base, 1)
        for payload in (b"blink", b"blink 2 100"):
            m, k = b.mark(), ha.mark()
            ha.publish(effect, payload)
            rep = ha.wait(base + "/report/ha", lambda p: b"led_blink" in p, 15, k)
            assert rep is not None and json.loads(rep[2])["status"] == 200, (payload, rep)
            steps = json.loads(rep[2])["reply"]["steps"]
            assert steps[0]["action"] == "led_blink" and steps[0]["status"] == "done", steps
            ons = b.select(lambda e: e["src"] == "led" and e.get("event") == "pin" and e["value"] == 1, m)  # fmt: skip
            assert len(ons) >= 2, "the LED blinked: %s" % ons
        # out of the ability's bounds: answered as POST /plan answers the same one step
        status, reply = b.request("POST", "/plan", json.dumps(plan_of([("led_blink", {"count": 99, "period_ms": 100})])).encode())  # fmt: skip
        k = ha.mark()
        ha.publish(effect, b"blink 99 100")
        rep = ha.wait(base + "/report/ha", lambda p: b"led_blink" in p or b"count" in p, 15, k)
        assert rep is not None and json.loads(rep[2])["status"] == status, (rep, status, reply)
        # the notify entity's message is spoken: a WAV is written
        if "speak" in b.menu_names():
            wav0 = _wav_bytes(b)
            m = b.mark()
            ha.publish(cmps["SPK_001_speak"]["cmd_t"].replace("~", base, 1), b"Hello from Home Assistant.")  # fmt: skip
            done = b.wait_for(lambda e: e["src"] == "speaker" and e.get("event") == "done" and e.get("name") == "speak", 30, m)  # fmt: skip
            assert done is not None, "the message was spoken"
            time.sleep(0.3)
            assert _wav_bytes(b) > wav0, "the speaker wrote the message's WAV"
        else:
            raise AssertionError("the speaker's voice is not installed: no speak on the menu")
        m = b.mark()
        ha.publish(cmps["SPK_001_chime"]["cmd_t"].replace("~", base, 1), b"PRESS")
        assert b.wait_for(lambda e: e["src"] == "speaker" and e.get("event") == "done" and e.get("name") == "chime", 10, m), "the button chimed"  # fmt: skip
        # Home Assistant's birth message: every config published again
        k = ha.mark()
        ha.publish("homeassistant/status", b"online")
        for topic in got:
            assert ha.wait(topic, lambda p: p.startswith(b"{"), 5, k), "%s again" % topic
        # unplug led: the light unavailable within 16 s; replug: back
        k = ha.mark()
        t2 = time.monotonic()
        b.unplug("led")
        off = ha.wait(base + "/LED_001/availability", lambda p: p == b"offline", 16, k)
        assert off is not None and off[0] - t2 <= 16, "the LED organ unavailable within 16 s"
        b.replug("led")
        assert ha.wait(base + "/LED_001/availability", lambda p: p == b"online", 20, k), "back"
        assert b.wait_menu(["led_on"], 10)
        # SIGKILL the master: the body offline within 1.5 x keepalive
        k = ha.mark()
        t3 = time.monotonic()
        os.kill(b.board("master").pid, signal.SIGKILL)
        gone = ha.wait(base + "/availability", lambda p: p == b"offline", KEEPALIVE * 1.5, k)
        assert gone is not None, "the last will within 1.5 x keepalive"
        print("offline %.1f s after SIGKILL" % (gone[0] - t3))
    finally:
        b.stop()
        ha.close()


def test_plan_topic_answers_as_post_plan(tmp_path, broker):
    ha = HA(broker.port)
    b = _body(tmp_path, broker, "b2")
    b.start()
    try:
        assert b.wait_http(20) and b.wait_menu(["led_on"], 20), _told(b)
        assert ha.wait("organbus/b2/availability", lambda p: p == b"online", 10)
        cases = {
            "run": json.dumps(plan_of([("led_on", {}), ("led_off", {})], chain=True)),
            "refused": json.dumps(plan_of([("fly", {})])),
            "incomplete": '{"steps": [{"task_id": "a", "action": "led_off"}]}',
            "malformed": '{"steps": [',
            "duplicate": '{"heard_req": 0, "heard_req": 1}',
        }
        for ref, raw in cases.items():
            status, reply = b.request("POST", "/plan", raw.encode())
            k = ha.mark()
            ha.publish("organbus/b2/plan/" + ref, raw.encode())
            rep = ha.wait("organbus/b2/report/" + ref, None, 20, k)
            assert rep is not None, "a report for %s: %s" % (ref, _told(b))
            got = json.loads(rep[2])
            assert got["status"] == status, (ref, got, status, reply)
            if ref == "run":
                assert got["reply"]["ok"] and len(got["reply"]["steps"]) == 2, got
                assert [s["status"] for s in got["reply"]["steps"]] == [s["status"] for s in reply["steps"]]  # fmt: skip
            else:
                assert got["reply"] == reply, (ref, got["reply"], reply)
        assert ha.last("organbus/b2/events") is not None, "the event stream is on the broker"
        kinds = {json.loads(m[2])["event"] for m in ha.msgs if m[1] == "organbus/b2/events"}
        assert {
            "step",
            "plan",
            "rejected",
        } <= kinds, kinds  # (the boot's, before it connected, are not kept)
    finally:
        b.stop()
        ha.close()


def test_three_bodies_one_fleet(tmp_path, broker):
    bodies = [_body(tmp_path, broker, n) for n in ("f1", "f2", "f3")]
    fleet = [sys.executable, os.path.join(ROOT, "tools", "fleet.py"), "--mqtt", "127.0.0.1:%d" % broker.port]  # fmt: skip
    try:
        for b in bodies:
            b.start()
        for b in bodies:
            assert b.wait_http(30) and b.wait_menu(["led_on", "chime"], 30), _told(b)
        time.sleep(1.0)
        r = subprocess.run(fleet + ["--json"], capture_output=True, text=True, timeout=30)
        listed = {}
        for line in r.stdout.splitlines():
            item = json.loads(line)
            listed[item["body"]] = item
        assert set(listed) == {"f1", "f2", "f3"}, r.stdout + r.stderr
        for item in listed.values():
            assert item["availability"] == "online" and "led_on" in item["abilities"], item
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(plan_of([("led_on", {})])))
        marks = [b.mark() for b in bodies]
        r = subprocess.run(
            fleet + ["--plan", str(plan)], capture_output=True, text=True, timeout=90
        )
        reports = [json.loads(x) for x in r.stdout.splitlines()]
        assert sorted(x["body"] for x in reports) == ["f1", "f2", "f3"], r.stdout + r.stderr
        assert all(x["status"] == 200 and x["reply"]["ok"] for x in reports), reports
        assert r.returncode == 0, r.stderr
        for b, m in zip(bodies, marks):
            assert b.select(lambda e: e["src"] == "led" and e.get("event") == "pin" and e["value"] == 1, m), "each LED lit"  # fmt: skip
    finally:
        for b in bodies:
            b.stop()


def test_broker_away_10_s(tmp_path, broker):
    b = _body(tmp_path, broker, "b4")
    b.start()
    try:
        assert b.wait_http(20) and b.wait_menu(["led_on"], 20), _told(b)
        ha = HA(broker.port)
        assert ha.wait("organbus/b4/availability", lambda p: p == b"online", 10)
        ha.close()
        broker.stop()  # persistence false: the retained configs are gone with it
        t0 = time.monotonic()
        ran = 0
        while time.monotonic() - t0 < 10:
            status, reply = b.request("POST", "/plan", json.dumps(plan_of([("led_on", {})])).encode(), timeout=5)  # fmt: skip
            assert status == 200 and reply["ok"], (status, reply)
            ran += 1
            time.sleep(0.5)
        assert ran >= 10, "plans over HTTP ran while the broker was away: %d" % ran
        assert b.status()["mqtt"]["connected"] is False
        broker.start()
        ha = HA(broker.port, cid="ha2")
        got = ha.wait(DEVICE % "b4", None, 30)
        assert got is not None, "the body reconnected and published its config again: %s" % b.status()["mqtt"]  # fmt: skip
        assert ha.wait("organbus/b4/availability", lambda p: p == b"online", 5)
        st = b.status()["mqtt"]
        assert st["connected"] and st["connects"] >= 2, st
        ha.close()
    finally:
        b.stop()


def test_at_the_documented_heap(tmp_path, broker):
    # the master's 80 KB (launch.DATA_NEEDS): plans on the plan topic and Home Assistant's
    # commands answered beside the link; the free heap printed (docs/links.md "MQTT", memory)
    from vbody import launch

    heap = "%dk" % (launch.DATA_NEEDS["master"] // 1024)
    ha = HA(broker.port)
    b = _body(tmp_path, broker, "h1", heap=heap, heap_report_ms=1000)
    b.start()
    try:
        assert b.wait_http(30) and b.wait_menu(["led_on", "chime"], 30), _told(b)
        assert ha.wait("organbus/h1/availability", lambda p: p == b"online", 10)
        blink = json.dumps(plan_of([("led_blink", {"count": 2, "period_ms": 100})]))
        k = ha.mark()
        for i in range(5):
            ha.publish("organbus/h1/cmd/LED_001/light", b"ON" if i % 2 == 0 else b"OFF")
            ha.publish("organbus/h1/plan/p%d" % i, blink.encode())
            time.sleep(1.0)
        for i in range(5):
            rep = ha.wait("organbus/h1/report/p%d" % i, None, 20, k)
            assert rep is not None and json.loads(rep[2])["status"] == 200, (i, rep, _told(b))
        ha_reps = [m for m in ha.msgs[k:] if m[1] == "organbus/h1/report/ha"]
        assert len(ha_reps) == 5 and all(json.loads(m[2])["status"] == 200 for m in ha_reps), ha_reps  # fmt: skip
        frees = [e["free"] for e in b.events if e.get("src") == "master" and e.get("event") == "heap"]  # fmt: skip
        print("--heap %s with the MQTT link: free after gc.collect %s" % (heap, frees[-6:]))
        assert not [e for e in b.events if e.get("event") == "mqtt" and e.get("what") == "error"]
    finally:
        b.stop()
        ha.close()
