# The xiaozhi device's protocol state (master/links/xiaozhi.py) over a fake facade, on CPython and the unix port.
import json

try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from master.links import mcp
from master.links import xiaozhi
from master.links import xiaozhi_discovery
from master.links import xiaozhi_mcp
from master.net import jsonout
from xiaozhi_fakes import ANNOUNCE, EXPRESS, Facade, Log, _ms

UNIX_PORT = True


def _device(**kw):
    f = Facade(**kw)
    d = xiaozhi.Device(f, "0.1.0")
    d.start()
    assert d.on_hello({"type": "hello", "transport": "websocket", "session_id": "S-1"})
    return f, d


def _text(m):
    # a queued message: JSON in pieces (master/net/jsonout.py), each at most 256 bytes
    assert all(len(p) <= 256 for p in m), [len(p) for p in m]
    return jsonout.join(m)


def _out(d):
    """Messages queued for the server, parsed, and the queue emptied."""
    out = [json.loads(_text(m)) for m in d.outbox]
    d.outbox = []
    return out


def _mcp(d, mid, method, params=None):
    p = {"jsonrpc": "2.0", "id": mid, "method": method}
    if params is not None:
        p["params"] = params
    d.on_text(json.dumps({"session_id": "S-1", "type": "mcp", "payload": p}))


async def _settle(d, ms=3000):
    t0 = _ms()
    while d.tasks or d._speaking:  # a task leaves d.tasks as it ends
        await asyncio.sleep(0.01)
        assert _ms() - t0 < ms, "tasks did not finish in %d ms" % ms


def _with_log():
    rec = Log()
    xiaozhi.log = xiaozhi_mcp.log = rec
    return rec


def test_client_hello_is_the_contracts():
    d = xiaozhi.Device(Facade())
    h = d.client_hello()
    assert h["type"] == "hello" and h["version"] == 1 and h["transport"] == "websocket", h
    assert h["features"]["mcp"] is True, h
    ap = h["audio_params"]
    assert (ap["format"], ap["sample_rate"], ap["channels"], ap["frame_duration"]) == (
        "opus", 16000, 1, 60), ap  # fmt: skip


def test_nothing_goes_out_before_the_hello_and_everything_after_carries_the_session():
    f = Facade()
    d = xiaozhi.Device(f)
    d.start()
    assert not d.send({"type": "event", "name": "x", "data": {}}), "no session yet"
    assert not d.on_hello({"type": "tts", "state": "start"}), "not a hello"
    try:
        d.on_hello({"type": "hello"})
        raise AssertionError("a hello without session_id must be refused")
    except xiaozhi.XiaozhiError as e:
        assert "session_id" in str(e), str(e)
    assert d.on_hello({"type": "hello", "transport": "websocket", "session_id": "S-9"})
    _mcp(d, 1, "initialize", {"capabilities": {}})
    _mcp(d, 2, "ping")
    f.publish("offline", {"module_id": "LED_001"})
    out = _out(d)
    assert len(out) == 3 and all(m["session_id"] == "S-9" for m in out), out


def test_initialize_declares_tools_and_list_changed():
    f, d = _device()
    _mcp(d, 1, "initialize", {"protocolVersion": "2024-11-05", "capabilities": {"vision": {}}})
    (m,) = _out(d)
    r = m["payload"]["result"]
    assert m["type"] == "mcp" and m["payload"]["id"] == 1, m
    assert r["protocolVersion"] == "2024-11-05", r
    assert r["capabilities"]["tools"]["listChanged"] is True, r
    assert r["serverInfo"]["name"] == "organbus", r


def test_tools_list_pages_of_at_most_8_kb_join_to_the_menu():
    f, d = _device(many=60)
    cursor, tools, sizes = "", [], []
    for mid in range(2, 40):
        _mcp(d, mid, "tools/list", {"cursor": cursor, "withUserTools": False})
        (raw,) = d.outbox
        raw = _text(raw)
        d.outbox = []
        sizes.append(len(raw))
        r = json.loads(raw)["payload"]["result"]
        tools.extend(r["tools"])
        cursor = r.get("nextCursor")
        if not cursor:
            break
    assert len(sizes) > 1, "60 long tools need more than one page: %s" % sizes
    assert max(sizes) <= 8000, "a page over 8,000 bytes (78's firmware limit): %s" % sizes
    assert max(sizes) > 7000, "pages are filled up to the limit: %s" % sizes
    assert tools == mcp.tools(f.menu()), "pages joined differ from the menu's tools"
    assert d.status()["lists"] == 1 and d.status()["listed"] is True, d.status()


def test_tools_call_answers_after_the_step_finished():
    async def go():
        f, d = _device(play_ms=300)
        _mcp(d, 5, "tools/call", {"name": "led_blink", "arguments": {"count": 3, "period_ms": 200}})
        await asyncio.sleep(0.1)
        assert not d.outbox, "no answer while the step still runs"
        await _settle(d)
        (m,) = _out(d)
        r = m["payload"]["result"]
        assert m["payload"]["id"] == 5 and not r["isError"], m
        assert r["content"][0]["text"].startswith("led_blink: done"), r
        assert f.commands == [("led_blink", {"count": 3, "period_ms": 200})], f.commands

    asyncio.run(go())


def test_unknown_tool_is_an_error_that_lists_the_tools():
    async def go():
        f, d = _device()
        _mcp(d, 6, "tools/call", {"name": "fly", "arguments": {}})
        await _settle(d)
        (m,) = _out(d)
        e = m["payload"]["error"]
        assert e["code"] == -32602 and "unknown tool 'fly'" in e["message"], e
        for name in ("led_on", "led_blink", "speak", "chime"):
            assert name in e["message"] and name in e["data"]["tools"], e
        assert not f.commands, "nothing ran"

    asyncio.run(go())


def test_notifications_and_responses_are_dropped_unknown_methods_answered():
    f, d = _device()
    p = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    d.on_text(json.dumps({"type": "mcp", "payload": p}))
    d.on_text(json.dumps({"type": "mcp", "payload": {"jsonrpc": "2.0", "id": 3, "result": {}}}))
    assert not d.outbox and d.counts["notifications"] == 1, d.counts
    _mcp(d, 7, "resources/list")
    (m,) = _out(d)
    assert m["payload"]["error"]["code"] == -32601, m
    d.on_text(json.dumps({"type": "mcp", "payload": [1, 2]}))
    (m,) = _out(d)
    assert m["payload"]["error"]["code"] == -32600, m


def test_tts_sentences_are_spoken_in_order_as_one_queue_and_opus_dropped():
    async def go():
        f, d = _device(play_ms=200)
        d.on_text('{"type": "tts", "state": "start"}')
        d.on_text('{"type": "tts", "state": "sentence_start", "text": "First one."}')
        d.on_binary(120)
        d.on_binary(120)
        d.on_text('{"type": "tts", "state": "sentence_start", "text": "Second one."}')
        d.on_binary(120)
        d.on_text('{"type": "tts", "state": "stop"}')
        await _settle(d)
        said = [p["text"] for a, p in f.commands]
        assert said == ["First one.", "Second one."], said
        (a1, s1, e1), (a2, s2, e2) = f.times
        assert s2 >= e1, "the second sentence starts after the first ended: %s" % f.times
        assert d.counts["audio_dropped"] == 3 and d.counts["sentences"] == 2, d.counts
        assert not d.outbox, "TTS sends nothing back"

    asyncio.run(go())


def test_speech_queue_is_bounded():
    async def go():
        rec = _with_log()
        f, d = _device(play_ms=50)
        d.on_text('{"type": "tts", "state": "start"}')
        for i in range(20):
            d.on_text(json.dumps({"type": "tts", "state": "sentence_start", "text": "s%d" % i}))
        await _settle(d, 10000)
        assert d.counts["sentences_dropped"] >= 3, d.counts
        said = [p["text"] for a, p in f.commands]
        assert said == ["s%d" % i for i in range(len(said))], "in order, the first ones: %s" % said
        assert rec.what("sentence_dropped"), rec.lines

    asyncio.run(go())


def test_emotion_runs_express_only_by_exact_name():
    async def go():
        rec = _with_log()
        f, d = _device()
        d.on_text('{"type": "llm", "emotion": "happy"}')
        await _settle(d)
        assert not f.commands, "no express on the menu: nothing runs"
        (line,) = rec.what("emotion")
        assert line["emotion"] == "happy" and line["shown"] is False, line
        f2, d2 = _device(extra=[EXPRESS])
        d2.on_text('{"type": "llm", "emotion": "happy"}')
        await _settle(d2)
        assert f2.commands == [("express", {"emotion": "happy"})], f2.commands

    asyncio.run(go())


def test_alert_becomes_announce_where_the_menu_has_it():
    async def go():
        rec = _with_log()
        f, d = _device()
        msg = '{"type": "alert", "status": "Warning", "message": "Battery low", "emotion": "sad"}'
        d.on_text(msg)
        await _settle(d)
        assert not f.commands, f.commands
        assert rec.what("alert")[0]["announced"] is False, rec.lines
        f2, d2 = _device(extra=[ANNOUNCE])
        d2.on_text(msg)
        await _settle(d2)
        assert f2.commands == [("announce", {"text": "Battery low"})], f2.commands

    asyncio.run(go())


def test_reboot_waits_for_a_quiet_bus():
    async def go():
        _with_log()
        f, d = _device(play_ms=400)
        d.on_text('{"type": "tts", "state": "sentence_start", "text": "Going down."}')
        d.on_text('{"type": "system", "command": "reboot"}')
        d.on_text('{"type": "system", "command": "reboot"}')
        await asyncio.sleep(0.2)
        assert f.resets == 0, "not while the speaker plays"
        await _settle(d)
        assert f.resets == 1, "one reset once quiet: %d" % f.resets
        assert f.times[0][2] <= _ms(), f.times

    asyncio.run(go())


def test_stt_logged_unknown_counted_malformed_survived():
    rec = _with_log()
    f, d = _device()
    d.on_text('{"type": "stt", "text": "what time is it"}')
    assert rec.what("stt")[0]["text"] == "what time is it", rec.lines
    d.on_text('{"type": "custom", "payload": 1}')
    d.on_text('{"type": "tts", "state": "nonsense"}')
    for bad in ("{not json", "[1, 2]", '"text"', "null", '{"no": "type"}', b"\xff\xfe", ""):
        d.on_text(bad)
    d.on_text('{"type": "llm", "emotion": 5}')
    d.on_text('{"type": "alert"}')
    d.on_text('{"type": "mcp"}')
    assert d.counts["unknown"] == 1, d.counts
    assert d.counts["malformed"] == 8, d.counts
    assert not f.commands


def test_body_events_go_to_the_server_and_menu_changes_as_list_changed():
    f, d = _device()
    f.publish("menu", None)
    assert not d.outbox, "no list_changed before initialize"
    _mcp(d, 1, "initialize")
    _out(d)
    f.publish("offline", {"module_id": "LED_001", "module_type": "led", "port": 0})
    f.publish("menu", None)
    f.publish("event", {"module_id": "SPK_001", "name": "speak", "status": 0})
    f.publish("online", {"module_id": "LED_001", "module_type": "led", "port": 0})
    out = _out(d)
    kinds = [m.get("name") or m["payload"]["method"] for m in out]
    assert kinds == [
        "organ_offline", "notifications/tools/list_changed", "organ_event", "organ_online",
    ], kinds  # fmt: skip
    assert out[0] == {"session_id": "S-1", "type": "event", "name": "organ_offline",
                      "data": {"module_id": "LED_001", "module_type": "led", "port": 0}}, out[0]  # fmt: skip
    d.end()
    f.publish("offline", {"module_id": "LED_001"})
    assert not d.outbox, "nothing queued without a session"


def test_outbox_is_bounded():
    f, d = _device()
    for i in range(40):
        f.publish("event", {"module_id": "X", "name": "n", "status": 0})
    assert len(d.outbox) == xiaozhi.MAX_OUTBOX, len(d.outbox)
    assert d.counts["out_dropped"] == 40 - xiaozhi.MAX_OUTBOX, d.counts


def test_discovery_request_headers_and_body():
    ident = {
        "device_id": "aa:bb:cc:dd:ee:ff",
        "client_id": xiaozhi_discovery.new_client_id(bytes(16)),
    }
    h, body = xiaozhi_discovery.discovery_request(ident, "master", "0.1.0")
    assert h["Device-Id"] == "aa:bb:cc:dd:ee:ff" and h["Client-Id"] == ident["client_id"], h
    assert h["User-Agent"] == "organbus-master/0.1.0", h
    assert h["Activation-Version"] == "1" and h["Accept-Language"] == "en-US", h
    assert h["Content-Type"] == "application/json", h
    info = json.loads(jsonout.join(body))
    assert info["mac_address"] == ident["device_id"] and info["uuid"] == ident["client_id"], info
    assert ident["client_id"] == "00000000-0000-4000-8000-000000000000", ident
    assert xiaozhi_discovery.format_id(b"\xaa\x01\xff") == "aa:01:ff"


def test_parse_discovery():
    d = xiaozhi_discovery.parse_discovery(
        {"websocket": {"url": "ws://127.0.0.1:1/xiaozhi/v1/", "token": "t"},
         "server_time": {"timestamp": 1716608284000, "timezone_offset": -300},
         "firmware": {"version": "9.9.9", "url": "http://x/fw.bin"},
         "activation": {"code": "1", "message": "go to the site"}}
    )  # fmt: skip
    assert d["url"] == "ws://127.0.0.1:1/xiaozhi/v1/" and d["token"] == "t", d
    assert d["server_time_ms"] == 1716608284000 and d["tz_min"] == -300, d
    assert d["firmware"]["version"] == "9.9.9" and d["activation"]["code"] == "1", d
    for bad, words in (
        ([], "not a JSON object"),
        ({}, "no websocket"),
        ({"websocket": {"url": "http://x/"}}, "not a ws://"),
    ):
        try:
            xiaozhi_discovery.parse_discovery(bad)
            raise AssertionError("%r must be refused" % (bad,))
        except xiaozhi.XiaozhiError as e:
            assert words in str(e), str(e)


def test_backoff_doubles_with_jitter_and_resets():
    b = xiaozhi.Backoff(1000, 8000, rand=lambda: 0.5)
    assert [b.next() for _ in range(5)] == [1000, 2000, 4000, 8000, 8000]
    b.reset()
    assert b.next() == 1000
    lo = xiaozhi.Backoff(1000, 8000, rand=lambda: 0.0).next()
    hi = xiaozhi.Backoff(1000, 8000, rand=lambda: 0.999).next()
    assert lo == 750 and 1240 < hi <= 1250, (lo, hi)


def test_client_id_is_kept():
    import os

    path = "/tmp/organbus-xiaozhi-test-%d" % _ms()
    try:
        a = xiaozhi_discovery.client_id(path, b"\x01" * 16)
        b = xiaozhi_discovery.client_id(path, b"\x02" * 16)
        assert a == b and len(a) == 36, (a, b)
        assert xiaozhi_discovery.client_id(None, b"\x02" * 16) != a
    finally:
        try:
            os.remove(path)
        except OSError:
            pass


# -- issue 24: messages up to the WebSocket limit read within bounds; JSON-RPC errors -----------


def _mcp_raw(mid, method, params_json):
    return (
        '{"type": "mcp", "payload": {"jsonrpc": "2.0", "id": %s, "method": "%s", "params": %s}}'
        % (
            mid,
            method,
            params_json,
        )
    )


def test_long_strings_are_clipped_and_a_clipped_argument_never_runs():
    async def go():
        rec = _with_log()
        f, d = _device(play_ms=20)
        d.on_text(json.dumps({"type": "tts", "state": "sentence_start", "text": "x" * 3000}))
        d.on_text(json.dumps({"type": "stt", "text": "y" * 4000}))
        d.on_text(
            _mcp_raw(
                9, "tools/call", '{"name": "speak", "arguments": {"text": "%s"}}' % ("z" * 3500)
            )
        )
        d.on_text(_mcp_raw(10, "ping", '{"pad": "%s"}' % ("p" * 3900)))
        await _settle(d)
        assert f.commands == [("speak", {"text": "x" * 240})], "the sentence spoken, clipped"
        (stt,) = rec.what("stt")
        assert stt["text"] == "y" * 117 + "...", stt["text"]  # the log keeps lines small
        out = _out(d)
        e = [m["payload"] for m in out if m["payload"]["id"] == 9][0]["error"]
        assert e["code"] == -32602 and "a string of 3500 bytes" in e["message"], e
        assert [m["payload"] for m in out if m["payload"]["id"] == 10][0]["result"] == {}, out
        assert d.counts["clipped"] == 4 and d.counts["malformed"] == 0, d.counts
        assert [x["longest"] for x in rec.what("clipped")] == [3000, 4000, 3500, 3900], rec.lines

    asyncio.run(go())


def test_nan_or_infinity_gets_a_json_rpc_error_by_its_id():
    # defect 12 over the xiaozhi WebSocket: NaN in arguments dropped the message silently
    async def go():
        rec = _with_log()
        f, d = _device()
        for mid, token in ((11, "NaN"), (12, "Infinity"), (13, "-Infinity"), ('"s"', "NaN")):
            args = '{"name": "led_blink", "arguments": {"count": %s, "period_ms": 100}}' % token
            d.on_text(_mcp_raw(mid, "tools/call", args))
        await _settle(d)
        out = _out(d)
        assert [m["payload"]["id"] for m in out] == [11, 12, 13, "s"], out
        for m in out:
            e = m["payload"]["error"]
            assert e["code"] == -32602 and "NaN or Infinity at offset" in e["message"], e
        assert not f.commands, "nothing ran"
        # no id to answer: counted and said
        d.on_text(
            '{"type": "mcp", "payload": {"jsonrpc": "2.0", "method": "n", "params": {"x": NaN}}}'
        )
        d.on_text('{"type": "tts", "state": "sentence_start", "text": "a", "x": Infinity}')
        assert not d.outbox and d.counts["malformed"] == 6, d.counts
        said = [x["error"] for x in rec.what("malformed")]
        assert len(said) == 6 and all("NaN or Infinity at offset" in w for w in said), said

    asyncio.run(go())


def test_a_cursor_that_is_not_this_devices_gets_the_first_page_never_an_error():
    # an error to any tools/list page leaves xinnan's server without tools for the session
    rec = _with_log()
    f, d = _device(many=60)
    first = mcp.tools(f.menu())[0]
    for i, cur in enumerate(("[1]", "{}", "5", "1.5", "true", '"x"', '"-1"', '"999"', '" 1"')):
        d.on_text(_mcp_raw(20 + i, "tools/list", '{"cursor": %s}' % cur))
        (m,) = _out(d)
        p = m["payload"]
        assert p["id"] == 20 + i and "error" not in p, (cur, p)
        assert p["result"]["tools"][0] == first and p["result"]["nextCursor"], (cur, p)
    bad = rec.what("bad_cursor")
    assert len(bad) == 9 and all(b["answered"] == "page 1" for b in bad), bad
    assert "cursor" in bad[-1]["error"], bad[-1]
    for params in ('{"cursor": ""}', "{}", '{"cursor": null}'):
        d.on_text(_mcp_raw(40, "tools/list", params))
        (m,) = _out(d)
        assert m["payload"]["result"]["tools"][0]["name"] == "led_on", (params, m)
    d.on_text(_mcp_raw(41, "tools/list", '{"cursor": "2"}'))
    (m,) = _out(d)
    assert m["payload"]["result"]["tools"][0] == mcp.tools(f.menu())[2], m


def test_malformed_json_rpc_requests_get_errors():
    f, d = _device()
    cases = (
        ('{"jsonrpc": "2.0", "id": 30, "method": 7}', 30, -32600, "method must be a string"),
        ('{"jsonrpc": "2.0", "id": 31}', 31, -32600, "method must be a string"),
        ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', None, -32600, "id must be"),
        ('{"jsonrpc": "2.0", "id": [1], "method": "ping"}', None, -32600, "id must be"),
        ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', None, -32600, "id must be"),
        ('{"jsonrpc": "2.0", "id": 32, "method": "ping", "params": [1]}', 32, -32602, "object"),
        ('{"jsonrpc": "1.0", "id": 33, "method": "ping"}', 33, -32600, "JSON-RPC 2.0"),
    )
    for payload, mid, code, words in cases:
        d.on_text('{"type": "mcp", "payload": %s}' % payload)
        (m,) = _out(d)
        e = m["payload"]["error"]
        assert m["payload"]["id"] == mid and e["code"] == code and words in e["message"], (
            payload,
            m,
        )


def test_messages_beyond_the_bounds_are_counted_and_said():
    rec = _with_log()
    f, d = _device()
    for raw, words in (
        ('{"type": "x", "a": [%s]}' % ",".join(["1"] * 1500), "more than 64 items"),
        ('{"type": "x", "a": %s1%s}' % ("[" * 40, "]" * 40), "nested deeper than 16"),
        ('{"type": "x", "a": 1%s}' % ("0" * 3000), "a number longer than 40"),
        ('{"type": "x", "a": [%s]}' % ",".join(["[1,2,3,4,5,6,7,8]"] * 70), "items"),
        ("{broken", "not JSON"),
    ):
        d.on_text(raw)
        assert rec.lines[-1]["what"] == "malformed" and words in rec.lines[-1]["error"], (
            raw[:40],
            rec.lines[-1],
        )
        # it may have been a request: JSON-RPC's error, id null (-32700 for text not JSON)
        (m,) = _out(d)
        e = m["payload"]["error"]
        code = -32700 if words == "not JSON" else -32600
        assert m["payload"]["id"] is None and e["code"] == code and words in e["message"], m
    assert d.counts["malformed"] == 5 and not d.outbox, d.counts
    # within the bounds: 60 keys of 60 bytes is a 4 KB message read whole
    big = dict(("k%02d" % i, "v" * 60) for i in range(60))
    big["type"] = "x"
    d.on_text(json.dumps(big))
    assert d.counts["unknown"] == 1 and d.counts["clipped"] == 0, d.counts


def test_a_full_heap_in_a_step_is_counted_and_a_call_answered():
    # defect 8: a MemoryError in a step's task ("Task exception wasn't retrieved") left a
    # tools/call without an answer and the sentence unsaid, silently
    async def go():
        rec = _with_log()
        f, d = _device()

        async def full(plan, on_accept=None, dups=()):
            raise MemoryError("memory allocation failed, allocating 272 bytes")

        f.execute = full
        d.on_text(_mcp_raw(50, "tools/call", '{"name": "led_on", "arguments": {}}'))
        d.on_text('{"type": "tts", "state": "sentence_start", "text": "one"}')
        d.on_text('{"type": "tts", "state": "sentence_start", "text": "two"}')
        await _settle(d)
        (m,) = _out(d)
        e = m["payload"]["error"]
        assert m["payload"]["id"] == 50 and e["code"] == -32603, m
        assert "short of memory" in e["message"], e
        said = sorted(x["in"] for x in rec.what("no_memory"))
        assert said == ["speak", "speak", "tools/call"], rec.lines
        assert d.counts["no_memory"] == 3 and not d.speech and not d._speaking, d.counts

    asyncio.run(go())


def _heap_used():
    # bytes of the heap in use after a collect: gc.mem_alloc on MicroPython, tracemalloc here
    import gc

    gc.collect()
    if hasattr(gc, "mem_alloc"):
        return gc.mem_alloc()
    import tracemalloc

    return tracemalloc.get_traced_memory()[0]


def test_large_sentences_and_alerts_wait_as_text_one_plan_at_a_time():
    # issue 24 defect 8: at 80 KB, every alert of 2-4 KB became a plan and a task of its own at
    # once (each ~3 KB of the heap while it waited for the speaker), so 21 large messages kept
    # ~17 KB and the reconnect met MemoryError; now what waits is its (clipped) text
    try:
        import tracemalloc

        tracemalloc.start()
    except ImportError:  # MicroPython: gc.mem_alloc
        tracemalloc = None

    async def go():
        rec = _with_log()
        rec.emit = lambda event, pairs=(): None  # the recorder's own lines are not the device's
        f, d = _device(extra=[ANNOUNCE], play_ms=1500)
        in_flight = []
        run = f.execute

        async def counted(plan, on_accept=None, dups=()):
            in_flight.append(plan)
            try:
                return await run(plan, on_accept, dups)
            finally:
                in_flight.remove(plan)

        f.execute = counted
        pad = "x" * 3000
        d.on_text(json.dumps({"type": "tts", "state": "sentence_start", "text": "first"}))
        await asyncio.sleep(0.05)  # the first sentence speaking: its plan is the one in flight
        base = _heap_used()
        most = 0
        for i in range(12):
            if i % 2:
                d.on_text(json.dumps({"type": "alert", "status": "s", "message": pad + str(i)}))
            else:
                d.on_text(json.dumps({"type": "tts", "state": "sentence_start", "text": pad}))
            most = max(most, len(in_flight))
        await asyncio.sleep(0.05)
        most = max(most, len(in_flight))
        kept = _heap_used() - base
        assert most == 1, "%d plans in flight at once: one at a time, the rest wait as text" % most
        assert d.counts["clipped"] == 12 and len(d.speech) >= 11, (d.counts, len(d.speech))
        # 12 texts clipped to jsonin.MAX_STRING (256 bytes): what a 64-bit heap keeps of them
        assert kept < 12 * 640, "%d bytes kept for 12 waiting messages" % kept
        assert [a for a, t in d.speech[:2]] == ["speak", "announce"], d.speech[:2]
        d.speech = []  # the rest need not be spoken for the test
        await _settle(d, 10000)
        said = [a for a, p in f.commands]
        assert said[0] == "speak" and len(said) <= 2, said

    try:
        asyncio.run(go())
    finally:
        if tracemalloc is not None:
            tracemalloc.stop()


def test_ids_are_echoed_exactly_strings_numbers_and_repeats():
    # xinnan's server numbers tools/call from 1 again (meeting initialize's 1 and the list's 2);
    # the relay rewrites ids into strings: each answer carries its request's id as it came
    async def go():
        f, d = _device()
        ids = [1, 2, "u-1_n_1", "7", 2.0, 0, "0"]
        for mid in ids:
            _mcp(d, mid, "tools/call", {"name": "led_on", "arguments": {}})
        _mcp(d, 1, "initialize", {"protocolVersion": "2024-11-05"})
        _mcp(d, 2, "tools/list")
        await _settle(d)
        out = [m["payload"] for m in _out(d)]
        got = sorted([repr(p["id"]) for p in out])
        assert got == sorted([repr(i) for i in ids + [1, 2]]), got
        for p in out:
            assert "result" in p, p
            assert type(p["id"]) in (int, float, str), p
        calls = [p for p in out if "content" in p["result"]]
        assert [type(p["id"]) for p in calls].count(str) == 3, calls

    asyncio.run(go())


def test_a_refusal_carries_its_text_as_error_and_no_text_is_an_action():
    # xinnan's server reads a failed call's reason from "error" beside isError, and takes a
    # content[0].text that is JSON with "action" as a command
    async def go():
        f, d = _device()
        _mcp(d, 3, "tools/call", {"name": "chime", "arguments": {}})
        f.script["led_on"] = "refused"
        _mcp(d, 4, "tools/call", {"name": "led_on", "arguments": {}})
        await _settle(d)
        out = dict((m["payload"]["id"], m["payload"]["result"]) for m in _out(d))
        for mid, r in out.items():
            text = r["content"][0]["text"]
            try:
                j = json.loads(text)
            except ValueError:
                j = None
            assert not (isinstance(j, dict) and "action" in j), text
        assert out[3]["isError"] is False and "error" not in out[3], out[3]
        assert out[4]["isError"] is True and "refused" in out[4]["error"], out[4]
        assert out[4]["error"] == out[4]["content"][0]["text"], out[4]

    asyncio.run(go())


def test_a_call_still_running_at_the_deadline_is_answered_and_goes_on():
    async def go():
        f, d = _device(play_ms=600)
        d.call_deadline_ms = 200
        _mcp(d, 9, "tools/call", {"name": "chime", "arguments": {}})
        t0 = _ms()
        while not d.outbox:
            await asyncio.sleep(0.01)
            assert _ms() - t0 < 2000, "no answer by the deadline"
        (m,) = _out(d)
        r = m["payload"]["result"]
        assert m["payload"]["id"] == 9, m
        assert "still running" in r["content"][0]["text"], r
        assert d.calls == 0 and d.counts["calls_late"] == 1, (d.calls, d.counts)
        assert f.playing == 1 and not f.quiet(), "the step goes on after the answer"
        await _settle(d)
        assert f.playing == 0 and not d.outbox, "the step ended; its late answer is dropped"
        assert f.commands == [("chime", {})], f.commands

    asyncio.run(go())


def test_reopen_is_due_when_the_menu_changed_after_the_list_and_nothing_runs():
    f, d = _device()
    now = _ms()
    assert not d.reopen_due(now), "nothing listed yet: the next list is the live menu"
    f.publish("menu", {"added": [], "removed": []})  # before the server listed: it lists it
    _mcp(d, 2, "tools/list")
    _out(d)
    assert d.listed_gen == d.menu_gen and not d.reopen_due(now + 10000), d.status()
    f.publish("menu", {"added": ["speak"], "removed": []})
    _out(d)  # list_changed
    t = d.changed_at
    assert not d.reopen_due(t + xiaozhi.RELIST_WAIT_MS - 100), "the server has its few seconds"
    assert d.reopen_due(t + xiaozhi.RELIST_WAIT_MS), "no list after the change: re-open"
    d.calls = 1
    assert not d.reopen_due(t + 60000), "a call running: not now"
    d.calls = 0
    d.speech.append(("speak", "hi"))
    assert not d.reopen_due(t + 60000), "speech waiting: not now"
    d.speech = []
    _mcp(d, 2, "tools/list")  # the server listed again after list_changed: nothing to do
    _out(d)
    assert not d.reopen_due(t + 60000) and d.changed_at is None, d.status()
    d.start()
    assert d.listed_gen is None and not d.reopen_due(t + 60000), "a new session lists afresh"
