# The xiaozhi Link (discovery, session, reconnects) against the stand-in server, over the fake facade (CPython).
import asyncio
import json

import pytest

from master.links import mcp
from master.net import ws
from master.links import xiaozhi
from master.links import xiaozhi_link
from xiaozhi_fakes import Facade, Log, stop_link
from xiaozhi_server import XiaozhiServer

IDENT = {"device_id": "aa:bb:cc:dd:ee:01", "client_id": "12345678-1234-4123-8123-123456789abc"}


@pytest.fixture(autouse=True)
def quiet_log():
    rec = Log()
    old = xiaozhi.log, xiaozhi_link.log
    xiaozhi.log = xiaozhi_link.log = rec
    yield rec
    xiaozhi.log, xiaozhi_link.log = old


class Rig:
    """The stand-in server and one Link with its fake facade, on one event loop."""

    def __init__(self, token=None, **facade):
        self.srv = XiaozhiServer(token=token)
        self.facade = Facade(**facade)
        self.device = xiaozhi.Device(self.facade, "0.1.0")
        self.link = None
        self.clock = []

    async def __aenter__(self):
        await self.srv.start()
        cfg = {"ota_url": self.srv.ota_url, "max_message": 4096}
        fast = xiaozhi.Backoff(100, 400)
        self.link = xiaozhi_link.Link(
            self.device, cfg, IDENT, set_clock=lambda ms, tz: self.clock.append(ms), backoff=fast
        )
        self.task = asyncio.create_task(self.link.run())
        return self

    async def __aexit__(self, *exc):
        await stop_link(self.link, self.task)
        await self.srv.stop()

    async def ready(self, timeout=15):
        srv = self.srv
        return await srv.wait(
            lambda: srv.session if srv.session and srv.session.ready.is_set() else None, timeout
        )


def run(coro):
    asyncio.run(asyncio.wait_for(coro, 90))


def test_discovery_hello_and_tools():
    async def go():
        async with Rig() as rig:
            s = await rig.ready()
            (headers, info), *_ = rig.srv.ota_requests
            assert headers["device-id"] == IDENT["device_id"], headers
            assert headers["client-id"] == IDENT["client_id"], headers
            assert headers["user-agent"] == "organbus-master/0.1.0", headers
            assert headers["activation-version"] == "1", headers
            assert headers["accept-language"] == "en-US", headers
            assert headers["content-type"] == "application/json", headers
            assert info["uuid"] == IDENT["client_id"], info
            assert s.headers["protocol-version"] == "1", s.headers
            assert s.headers["device-id"] == IDENT["device_id"], s.headers
            assert s.headers["client-id"] == IDENT["client_id"], s.headers
            assert "authorization" not in s.headers, "no token was handed out"
            assert s.hello["features"]["mcp"] is True, s.hello
            assert s.initialize["capabilities"]["tools"]["listChanged"] is True
            assert s.tools == mcp.tools(rig.facade.menu()), s.tools
            assert rig.clock, "server_time sets the clock"
            assert rig.link.state == "ready", rig.link.status()
            assert all(m.get("session_id") == s.id for m in s.received), s.received

    run(go())


def test_token_goes_on_the_upgrade_and_many_tools_come_in_pages():
    async def go():
        async with Rig(token="sekret", many=80) as rig:
            s = await rig.ready()
            assert s.headers["authorization"] == "Bearer sekret", s.headers
            assert len(s.pages) > 1 and max(p["bytes"] for p in s.pages) <= 8192, s.pages
            assert s.tools == mcp.tools(rig.facade.menu())

    run(go())


def test_tools_call_and_unknown_tool():
    async def go():
        async with Rig() as rig:
            s = await rig.ready()
            p = await s.request("tools/call", {"name": "led_on", "arguments": {}})
            assert p["result"]["content"][0]["text"].startswith("led_on: done"), p
            p = await s.request("tools/call", {"name": "warp", "arguments": {}})
            assert p["error"]["code"] == -32602 and "led_on" in p["error"]["message"], p
            assert rig.facade.commands == [("led_on", {})], rig.facade.commands

    run(go())


def test_tts_reply_spoken_in_order_audio_dropped():
    async def go():
        async with Rig(play_ms=200) as rig:
            s = await rig.ready()
            await s.say(["One.", "Two."], opus_frames=3)
            f = rig.facade
            await rig.srv.wait(lambda: len(f.times) == 2, 10)
            assert [p["text"] for a, p in f.commands] == ["One.", "Two."], f.commands
            assert f.times[1][1] >= f.times[0][2], f.times
            st = rig.link.status()
            assert st["audio_dropped"] == 6, st

    run(go())


def test_body_events_and_list_changed_reach_the_server():
    async def go():
        async with Rig() as rig:
            s = await rig.ready()
            f = rig.facade
            f.online.remove("LED_001")
            f.publish("offline", {"module_id": "LED_001", "module_type": "led", "port": 0})
            f.publish("menu", None)

            def seen():
                names = [m.get("name") for m in s.received if m.get("type") == "event"]
                return "organ_offline" in names and "led_on" not in [t["name"] for t in s.tools]

            await rig.srv.wait(seen, 10)
            ev = [m for m in s.received if m.get("type") == "event"][0]
            assert ev["data"]["module_id"] == "LED_001" and ev["session_id"] == s.id, ev

    run(go())


def test_server_restart_is_reconnected_within_the_backoff():
    async def go():
        async with Rig() as rig:
            s1 = await rig.ready()
            for x in rig.srv.sessions:
                x.ws.transport.abort()
            await rig.srv.stop()
            await asyncio.sleep(0.5)
            await rig.srv.start()
            s2 = await rig.srv.wait(
                lambda: (
                    rig.srv.session
                    if rig.srv.session is not s1 and rig.srv.session.ready.is_set()
                    else None
                ),
                10,
            )
            assert s2.id != s1.id
            st = rig.link.status()
            assert st["reconnects"] >= 1 and st["sessions"] == 2, st
            p = await s2.request("tools/call", {"name": "led_off", "arguments": {}})
            assert "result" in p, p

    run(go())


def test_no_server_hello_drops_and_retries(quiet_log):
    async def go():
        async with Rig() as rig:
            rig.srv.send_hello = False
            rig.link.hello_timeout_ms = 600
            await rig.srv.wait(lambda: len([x for x in rig.srv.sessions if x.hello]) >= 2, 15)
            assert rig.link.connects == 0, rig.link.status()
            assert "no server hello" in rig.link.last_error, rig.link.status()
            first = rig.srv.sessions[0]
            await rig.srv.wait(lambda: first.closed.is_set(), 5)
            rig.srv.send_hello = True
            await rig.ready()

    run(go())


def test_watchdog_reconnects_a_silent_channel():
    async def go():
        async with Rig() as rig:
            s1 = await rig.ready()
            rig.link.watchdog_ms = 800  # the server sends nothing: keepalive is 60 s
            # the link reads with the new watchdog from its next frame on: send one
            await s1.send({"type": "stt", "text": "hi"})
            s2 = await rig.srv.wait(
                lambda: (
                    rig.srv.session
                    if rig.srv.session is not s1 and rig.srv.session.ready.is_set()
                    else None
                ),
                10,
            )
            assert "no frame" in (rig.link.last_error or ""), rig.link.status()
            assert s2 is not s1

    run(go())


def test_malformed_oversize_and_binary_never_break_the_link():
    async def go():
        async with Rig() as rig:
            s = await rig.ready()
            for raw in ("{broken", "[]", '{"type": 3}', '{"type": "nope"}', "x" * 10000):
                await s.ws.send(raw)
            await s.ws.send(b"\x00" * 300)
            await s.ws.send(b"\x01" * 20000)
            p = await s.request("tools/call", {"name": "led_on", "arguments": {}})
            assert "result" in p, p
            st = rig.link.status()
            assert st["malformed"] == 3 and st["unknown"] == 1, st
            assert st["oversize"] == 2 and st["audio_dropped"] == 1, st
            assert st["state"] == "ready" and st["sessions"] == 1, st

    run(go())


def test_bad_ota_answers_are_retried_with_a_reason():
    async def go():
        srv = XiaozhiServer()
        await srv.start()
        srv.ota_answer = lambda: {"firmware": {"version": "9"}}
        dev = xiaozhi.Device(Facade(), "0.1.0")
        link = xiaozhi_link.Link(
            dev, {"ota_url": srv.ota_url}, IDENT, backoff=xiaozhi.Backoff(50, 100)
        )
        t = asyncio.create_task(link.run())
        try:
            await srv.wait(lambda: len(srv.ota_requests) >= 3, 10)
            assert "no websocket" in link.last_error, link.status()
            assert link.reconnects >= 2 and link.state in ("backoff", "discovering"), link.status()
        finally:
            t.cancel()
            await srv.stop()

    run(go())


def test_unreachable_ota_is_a_reason_not_a_crash():
    async def go():
        dev = xiaozhi.Device(Facade(), "0.1.0")
        cfg = {"ota_url": "http://127.0.0.1:1/xiaozhi/ota/"}
        link = xiaozhi_link.Link(dev, cfg, IDENT, backoff=xiaozhi.Backoff(50, 100))
        t = asyncio.create_task(link.run())
        await asyncio.sleep(0.6)
        t.cancel()
        assert link.reconnects >= 2 and "OTA request" in link.last_error, link.status()
        bad = xiaozhi_link.Link(
            dev, {"ota_url": "ftp://x/"}, IDENT, backoff=xiaozhi.Backoff(50, 100)
        )
        t = asyncio.create_task(bad.run())
        await asyncio.sleep(0.2)
        t.cancel()
        assert "must start with http://" in bad.last_error, bad.status()

    run(go())


assert ws.TEXT == 1  # the link reads text and binary frames of master/net/ws.py
assert json


def test_the_link_on_the_unix_port():
    """The same Link on MicroPython: hello, pages, a call, a TTS reply, junk, reboot ends it."""
    import os
    import subprocess

    from support import MICROPYPATH, ROOT, micropython_exe
    from xiaozhi_server import ServerThread

    here = os.path.dirname(os.path.abspath(__file__))
    with ServerThread() as st:
        env = dict(os.environ, MICROPYPATH=MICROPYPATH + ":" + here)
        proc = subprocess.Popen(
            [micropython_exe(), os.path.join(here, "xiaozhi_device_mp.py"), st.server.ota_url],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            srv = st.server
            s = st.wait(lambda: srv.session if srv.session and srv.session.ready.is_set() else None)
            assert s.tools == mcp.tools(Facade().menu()), s.tools

            async def drive(srv):
                p = await s.request("tools/call", {"name": "led_on", "arguments": {}})
                assert p["result"]["content"][0]["text"].startswith("led_on: done"), p
                for raw in ("{bad", '{"type": "nope"}', "z" * 6000, b"\x02" * 100):
                    await s.ws.send(raw)
                await s.say(["Uno.", "Dos."], opus_frames=2)
                await s.send({"session_id": s.id, "type": "system", "command": "reboot"})

            st.call(drive)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, out + err
    r = json.loads(out.strip().splitlines()[-1])
    assert r["commands"] == [
        ["led_on", {}],
        ["speak", {"text": "Uno."}],
        ["speak", {"text": "Dos."}],
    ], r
    x = r["status"]
    assert x["malformed"] == 1 and x["unknown"] == 1 and x["oversize"] == 1, x
    assert x["audio_dropped"] == 5 and x["sessions"] == 1, x
