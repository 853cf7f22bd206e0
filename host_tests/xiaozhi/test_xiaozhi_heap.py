# At the master's documented heap (launch.DATA_NEEDS, 80 KB): xiaozhi messages up to the 4096-byte limit are handled, the session lives.
import json
import time

from e2e_support import VirtualBody
from vbody import launch
from xiaozhi_server import ServerThread

ABILITIES = ["led_on", "led_off", "led_blink", "chime", "speak"]
HEAP = "%dk" % (launch.DATA_NEEDS["master"] // 1024)


def _sized(obj, size):
    """`obj` with its one None string field filled so its JSON text is `size` bytes."""
    base = len(json.dumps(obj)) - len("null") + len('""')

    def fill(o):
        for k, v in o.items():
            if v is None:
                o[k] = "x" * (size - base)
                return True
            if isinstance(v, dict) and fill(v):
                return True
        return False

    assert fill(obj)
    raw = json.dumps(obj)
    assert len(raw) == size, (len(raw), size)
    return raw


def _quiet(b, timeout=60):
    # until the speech queue is empty and no plan runs
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = b.status()
        x = st.get("xiaozhi") or {}
        if not st.get("busy_groups") and not x.get("speech_queued") and not x.get("speaking"):
            return
        time.sleep(0.1)
    raise AssertionError("the body never went quiet: %s" % b.status().get("busy_groups"))


def _ready(st, other_than=None, timeout=60):
    srv = st.server
    return st.wait(
        lambda: (
            srv.session
            if srv.session is not other_than and srv.session and srv.session.ready.is_set()
            else None
        ),
        timeout,
    )


def _told(b):
    # the master's xiaozhi lines and prints, the last ones: what a failure shows
    lines = [
        e for e in b.events
        if e.get("src") == "master" and e.get("event") in ("xiaozhi", "print", "crash")
    ]  # fmt: skip
    return lines[-12:]


def test_messages_up_to_the_limit_at_the_documented_heap(tmp_path):
    # defect 8: at 80 KB any message of 2 KB or more ended the session with MemoryError
    with ServerThread() as st:
        b = VirtualBody(out_dir=str(tmp_path), heap=HEAP, xiaozhi=st.server.ota_url)
        b.start()
        try:
            assert b.wait_http(30), "the master's HTTP port did not open"
            got = b.wait_menu(ABILITIES, 30)
            assert got and set(ABILITIES) <= set(got), got
            s = _ready(st)
            answers = {}
            mid = 1000
            for size in (2048, 3072, 4096):
                for kind in ("stt", "tts", "unknown", "ping", "call", "alert", "nan"):
                    mid += 1
                    p = {"jsonrpc": "2.0", "id": mid}
                    obj = {
                        "stt": {"type": "stt", "text": None},
                        "tts": {"type": "tts", "state": "sentence_start", "text": None},
                        "unknown": {"type": "nope", "pad": None},
                        "alert": {"type": "alert", "status": "s", "message": None},
                        "ping": {"type": "mcp", "payload": dict(p, method="ping", params={"pad": None})},
                        "call": {"type": "mcp", "payload": dict(p, method="tools/call",
                                 params={"name": "speak", "arguments": {"text": None}})},
                        "nan": {"type": "mcp", "payload": dict(p, method="tools/call",
                                params={"name": "led_on", "arguments": {"x": 123}, "pad": None})},
                    }[kind]  # fmt: skip
                    obj["session_id"] = s.id
                    raw = _sized(obj, size)
                    if kind == "nan":
                        raw = raw.replace('"x": 123', '"x": NaN')  # the same length
                    answers[mid] = kind

                    async def go(srv, raw=raw):
                        await s.ws.send(raw)
                        return await s.request("ping", {}, timeout=20)  # the session still answers

                    assert "result" in st.call(go), (size, kind)
                    if kind in ("tts", "alert"):
                        _quiet(b)  # as a server's sentences come: one after the other is spoken
            # what came back for the requests sent
            got = {}
            for m in s.received:
                p = m.get("payload") if m.get("type") == "mcp" else None
                if isinstance(p, dict) and p.get("id") in answers and answers[p["id"]] != "ping":
                    got[p["id"]] = p
            for k, kind in answers.items():
                if kind == "call":
                    e = got[k]["error"]
                    assert e["code"] == -32602 and "a string of" in e["message"], got[k]
                elif kind == "nan":
                    e = got[k]["error"]
                    assert e["code"] == -32602 and "NaN or Infinity" in e["message"], got[k]
            # the reconnect after such messages still gets its tools/list out (in pieces)
            for _ in range(2):
                old = s

                async def cut(srv, old=old):
                    old.ws.transport.abort()

                st.call(cut)
                try:
                    s = _ready(st, old)
                except Exception:
                    raise AssertionError("no new session: %s" % _told(b))
                assert s.tools and "led_on" in [t["name"] for t in s.tools], s.tools

            async def call(srv):
                return await s.request("tools/call", {"name": "led_on", "arguments": {}})

            p = st.call(call)
            assert p["result"]["content"][0]["text"].startswith("led_on: done"), p
            time.sleep(0.3)
            x = b.status()["xiaozhi"]
            assert x["no_memory"] == 0 and x["sessions"] == 3 and x["reconnects"] == 2, x
            assert x["clipped"] >= 18 and x["state"] == "ready", x
            assert not any(
                "MemoryError" in e.get("line", "") for e in b.events if e.get("src") == "master"
            ), [e for e in b.events if e.get("src") == "master" and e.get("event") == "print"]
        finally:
            b.stop()
