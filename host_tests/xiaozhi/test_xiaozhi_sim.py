# End to end: the virtual body with --xiaozhi against the stand-in server (the master's link on the unix port).
import json
import os
import time

import pytest

from e2e_support import Tap, VirtualBody
from organbus import frame
from master.links import mcp
from xiaozhi_server import ServerThread

ABILITIES = ["led_on", "led_off", "led_blink", "chime"]


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with ServerThread() as st:
        b = VirtualBody(out_dir=str(tmp_path_factory.mktemp("sim")), xiaozhi=st.server.ota_url)
        b.start()
        try:
            assert b.wait_http(15), "the master's HTTP port did not open"
            got = b.wait_menu(ABILITIES, 20)
            assert got and set(ABILITIES) <= set(got), got
            ready(st, 30)
            yield st, b
        finally:
            b.stop()


def ready(st, timeout=30, other_than=None):
    srv = st.server

    def pred():
        s = srv.session
        if s is not None and s is not other_than and s.ready.is_set():
            return s
        return None

    return st.wait(pred, timeout)


def request(st, s, method, params=None):
    async def go(srv):
        return await s.request(method, params)

    return st.call(go)


def send(st, s, obj):
    async def go(srv):
        if isinstance(obj, (bytes, str)):
            await s.ws.send(obj)
        else:
            await s.send(obj)

    st.call(go)


def tools_now(st, s):
    async def go(srv):
        return await s.list_tools()

    return st.call(go)


def xstatus(b):
    return b.status().get("xiaozhi") or {}


def test_discovery_carries_the_headers_and_the_hello_is_exchanged(rig):
    st, b = rig
    headers, info = st.server.ota_requests[0]
    assert headers["device-id"] == ":".join("%02x" % c for c in b"SIM-master"), headers
    cid = headers["client-id"]
    assert len(cid) == 36 and cid[14] == "4", "a version-4 UUID: %r" % cid
    assert headers["user-agent"].startswith("organbus-master/"), headers
    assert headers["activation-version"] == "1" and headers["accept-language"] == "en-US"
    assert headers["content-type"] == "application/json", headers
    assert info["uuid"] == cid and info["mac_address"] == headers["device-id"], info
    s = st.server.session
    assert s.hello["type"] == "hello" and s.hello["features"]["mcp"] is True, s.hello
    assert s.headers["protocol-version"] == "1" and s.headers["client-id"] == cid, s.headers
    assert all(m.get("session_id") == s.id for m in s.received), s.received
    x = xstatus(b)
    assert x["state"] == "ready" and x["session_id"] == s.id, x


def test_tools_list_all_pages_is_the_live_menu(rig):
    st, b = rig
    s = ready(st)
    tools = tools_now(st, s)
    assert tools == mcp.tools(b.menu()), "tools/list (all pages) is the live menu"
    assert all(p["bytes"] <= 8192 for p in s.pages), s.pages


def test_tools_call_led_on_shows_in_the_pin_log(rig):
    st, b = rig
    s = ready(st)
    request(st, s, "tools/call", {"name": "led_off", "arguments": {}})
    time.sleep(0.2)
    m = b.mark()
    p = request(st, s, "tools/call", {"name": "led_on", "arguments": {}})
    assert p["result"]["content"][0]["text"].startswith("led_on: done"), p
    on = b.wait_for(lambda e: e["src"] == "led" and e.get("event") == "pin", 3, m)
    assert on is not None and on["value"] == 1, "the LED pin went on: %r" % on


def test_out_of_range_blink_count_is_clamped_by_the_organ(rig):
    st, b = rig
    s = ready(st)
    request(st, s, "tools/call", {"name": "led_off", "arguments": {}})
    time.sleep(0.2)
    m = b.mark()
    p = request(
        st, s, "tools/call", {"name": "led_blink", "arguments": {"count": 0, "period_ms": 200}}
    )
    text = p["result"]["content"][0]["text"]
    assert text.startswith("led_blink: done") and "clamps" in text, text
    time.sleep(0.5)  # the pin log is tailed every 50 ms
    ups = b.select(lambda e: e["src"] == "led" and e.get("event") == "pin" and e["value"] == 1, m)
    assert len(ups) == 1, "count 0 clamped to 1 by the organ: one blink, got %r" % ups


def test_unknown_tool_is_an_error_listing_the_tools(rig):
    st, b = rig
    s = ready(st)
    p = request(st, s, "tools/call", {"name": "led_disco", "arguments": {}})
    e = p["error"]
    names = [c["name"] for c in b.menu()["capabilities"]]
    assert e["code"] == -32602 and "led_disco" in e["message"], e
    assert "available tools: " + ", ".join(names) in e["message"], e


def _wav_bytes(b):
    d = b.board("speaker").wav
    return (
        sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) if os.path.isdir(d) else 0
    )


def test_tts_reply_of_two_sentences_is_spoken_twice_in_order(rig):
    st, b = rig
    s = ready(st)
    if "speak" not in b.menu_names():
        pytest.skip("the speaker's voice is not installed: no speak on the menu")
    first, second = "Hi there.", "This second sentence is a good deal longer than the first one."
    tap = Tap(b.cable("speaker").ab)  # the frames that reached the speaker organ
    before = xstatus(b).get("audio_dropped", 0)
    wav0 = _wav_bytes(b)
    m = b.mark()

    async def say(srv):
        await s.say([first, second], opus_frames=3)

    st.call(say)

    def done(e):
        return e["src"] == "speaker" and e.get("event") == "done" and e.get("name") == "speak"

    d1 = b.wait_for(done, 30, m)
    assert d1 is not None, "the first sentence was spoken"
    wav1 = _wav_bytes(b)
    d2 = b.wait_for(done, 30, b.events.index(d1) + 1)
    assert d2 is not None, "the second sentence was spoken"
    time.sleep(0.3)
    wav2 = _wav_bytes(b)
    assert wav0 < wav1 < wav2, "the speaker's WAV grew twice: %d, %d, %d bytes" % (wav0, wav1, wav2)
    speaks = [(t, p) for t, ft, p in tap._snapshot() if ft == frame.COMMAND and b"speak" in p]
    assert len(speaks) == 2, speaks
    assert first.encode() in speaks[0][1] and second.encode() in speaks[1][1], speaks
    assert speaks[1][0] >= d1["t"] - 0.05, "the second COMMAND only after the first sentence ended"
    x = xstatus(b)
    assert x["audio_dropped"] - before == 6, x


def test_malformed_oversize_and_binary_never_crash_the_master(rig):
    st, b = rig
    s = ready(st)
    boots = b.board("master").boots
    for raw in ("{not json", "[]", '{"type": 7}', '{"type": "custom"}', "y" * 9000, b"\x00" * 200):
        send(st, s, raw)
    send(st, s, b"\x01" * 30000)
    p = request(st, s, "tools/call", {"name": "led_off", "arguments": {}})
    assert "result" in p, p
    x = xstatus(b)
    assert x["malformed"] >= 3 and x["unknown"] >= 1 and x["oversize"] >= 2, x
    assert x["state"] == "ready" and b.board("master").boots == boots, x


def test_unplugged_led_sends_offline_and_list_changed(rig):
    st, b = rig
    s = ready(st)
    n = len(s.received)
    b.unplug("led")
    try:

        def offline():
            for m in s.received[n:]:
                if m.get("type") == "event" and m.get("name") == "organ_offline":
                    return m
            return None

        ev = st.wait(offline, 30)
        assert ev["data"]["module_id"] == "LED_001", ev
        changed = st.wait(
            lambda: [
                m for m in s.received[n:]
                if m.get("type") == "mcp"
                and (m.get("payload") or {}).get("method") == "notifications/tools/list_changed"
            ],
            10,
        )  # fmt: skip
        assert changed, "list_changed sent"
        st.wait(lambda: s.tools is not None and "led_on" not in [t["name"] for t in s.tools], 10)
    finally:
        b.replug("led")
    assert b.wait_menu(ABILITIES, 20), "the LED organ is back"


def test_server_restart_is_reconnected_within_the_backoff(rig):
    st, b = rig
    s1 = ready(st)
    t0 = time.monotonic()
    st.restart(down_s=1.0)
    s2 = ready(st, 30, other_than=s1)
    took = time.monotonic() - t0
    assert s2.id != s1.id and took < 20, "reconnected in %.1f s" % took
    x = xstatus(b)
    assert x["reconnects"] >= 1 and x["state"] == "ready", x
    p = request(st, s2, "tools/call", {"name": "led_on", "arguments": {}})
    assert "result" in p, p


def test_no_server_hello_within_10_s_drops_and_retries(rig):
    st, b = rig
    s1 = ready(st)
    srv = st.server
    srv.send_hello = False
    try:
        st.restart()
        # two unanswered hellos: the first dropped after 10 s, then a retry after the backoff
        st.wait(
            lambda: len([x for x in srv.sessions[srv.sessions.index(s1) + 1 :] if x.hello]) >= 2, 40
        )
        first = [x for x in srv.sessions[srv.sessions.index(s1) + 1 :] if x.hello][0]
        assert first.closed.is_set(), "the device dropped the silent connection"
        x = xstatus(b)
        assert "no server hello" in (x.get("last_error") or ""), x
    finally:
        srv.send_hello = True
    assert ready(st, 60, other_than=s1), "ready again once the server says hello"


assert json and os
