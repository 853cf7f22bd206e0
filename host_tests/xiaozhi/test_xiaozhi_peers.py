# The xiaozhi links against replicas of the real peers (tools/xiaozhi_server.py): xinnan's server and the MCP endpoint relay (CPython, fake facade).
import asyncio

import websockets

from master.links import mcp
from master.links import xiaozhi
from master.links import xiaozhi_link
from master.links import xiaozhi_endpoint
from xiaozhi_fakes import EXPRESS, Facade, Log, stop_link
from xiaozhi_relay import EndpointRelay, RelayRobot
from xiaozhi_server import XiaozhiServer

IDENT = {"device_id": "aa:bb:cc:dd:ee:02", "client_id": "12345678-1234-4123-8123-123456789abd"}


def run(coro, timeout=90):
    asyncio.run(asyncio.wait_for(coro, timeout))


class Rig:
    """A replica of xinnan's server and one device Link over the fake facade."""

    def __init__(self, idle_close_s=180, **facade):
        self.srv = XiaozhiServer(peer="xinnan", idle_close_s=idle_close_s)
        self.facade = Facade(**facade)
        self.device = xiaozhi.Device(self.facade, "0.1.0")
        self.log = Log()

    async def __aenter__(self):
        self.old = xiaozhi.log, xiaozhi_link.log
        xiaozhi.log = xiaozhi_link.log = self.log
        await self.srv.start()
        cfg = {"ota_url": self.srv.ota_url, "max_message": 4096}
        self.link = xiaozhi_link.Link(self.device, cfg, IDENT, backoff=xiaozhi.Backoff(100, 400))
        self.task = asyncio.create_task(self.link.run())
        return self

    async def __aexit__(self, *exc):
        await stop_link(self.link, self.task)
        await self.srv.stop()
        xiaozhi.log, xiaozhi_link.log = self.old

    async def listed(self, after=None, timeout=20):
        srv = self.srv

        def pred():
            for s in srv.sessions[srv.sessions.index(after) + 1 if after else 0 :]:
                if s.ready.is_set() and not s.closed.is_set():
                    return s
            return None

        return await srv.wait(pred, timeout)


def _names(tools):
    return [t["name"] for t in tools]


def test_xinnan_lists_once_ignores_list_changed_and_a_new_session_lists_the_new_menu():
    async def go():
        async with Rig() as rig:
            s1 = await rig.listed()
            assert s1.hellos == 1 and s1.tools == mcp.tools(rig.facade.menu()), s1.tools
            assert s1.initialize["protocolVersion"] == "2024-11-05", s1.initialize
            rig.facade.extra.append(EXPRESS)
            rig.facade.publish("menu", {"added": ["express"], "removed": []})
            s2 = await rig.listed(after=s1, timeout=20)
            assert "notifications/tools/list_changed" in s1.ignored, s1.ignored
            assert s1.lists == [_names(mcp.tools(rig.facade.menu()))[:-1]], "s1 listed once"
            assert "express" in _names(s2.tools), _names(s2.tools)
            assert s2.tools == mcp.tools(rig.facade.menu()), _names(s2.tools)
            st = rig.link.status()
            assert st["reopens"] == 1 and st["last_error"] is None, st
            assert rig.log.what("reopen"), rig.log.lines
            assert s1.closed.is_set(), "the old session was closed before the new one"
            text = await s2.call_tool("express", {"emotion": "happy"})
            assert text.startswith("express: done"), text

    run(go())


def test_no_reopen_while_a_call_runs_and_calls_ids_from_one_are_answered():
    async def go():
        async with Rig(play_ms=4500) as rig:
            s1 = await rig.listed()
            call = asyncio.ensure_future(s1.call_tool("chime"))
            await asyncio.sleep(0.2)
            rig.facade.extra.append(EXPRESS)
            rig.facade.publish("menu", {"added": ["express"], "removed": []})
            text = await call  # id 1, the id of initialize too: answered as the call's
            assert text.startswith("chime: done"), text
            assert s1.calls[0][1] > 4.0, "the call ran its 4.5 s in s1: no re-open cut it"
            s2 = await rig.listed(after=s1)
            assert "express" in _names(s2.tools)
            assert s1.calls[0][2]["id"] == 1, s1.calls

    run(go())


def test_pages_of_many_tools_stay_under_8000_bytes_and_join_to_the_menu():
    async def go():
        async with Rig(many=90) as rig:
            s = await rig.listed()
            assert len(s.pages) > 2, s.pages
            assert max(p["bytes"] for p in s.pages) <= 8000, [p["bytes"] for p in s.pages]
            assert s.tools == mcp.tools(rig.facade.menu())
            assert not s.list_errors, s.list_errors

    run(go())


def test_a_long_step_is_answered_within_30_s():
    async def go():
        async with Rig(play_ms=3000) as rig:
            rig.device.call_deadline_ms = 1000
            s = await rig.listed()
            text = await s.call_tool("chime")
            name, took, p = s.calls[0]
            assert took < 2.5 and "still running" in text, (took, text)

    run(go())


def test_the_idle_close_is_reconnected_quietly():
    async def go():
        async with Rig(idle_close_s=1.5) as rig:
            rig.link.ran_ms = 1000
            s1 = await rig.listed()
            s2 = await rig.listed(after=s1, timeout=30)
            assert s1.idle_closed, "the server closed the first session (no voice)"
            st = rig.link.status()
            assert st["server_closes"] >= 1 and st["last_error"] is None, st
            assert rig.log.what("closed_by_server"), rig.log.lines
            errors = [d for d in rig.log.lines if d.get("error") is not None]
            assert not errors, errors
            assert s2.tools == mcp.tools(rig.facade.menu())

    run(go())


def test_hello_waits_for_the_bus_to_settle():
    async def go():
        srv = XiaozhiServer(peer="xinnan")
        await srv.start()
        f = Facade()
        state = {"settled": False}
        f.settled = lambda: state["settled"]
        dev = xiaozhi.Device(f, "0.1.0")
        link = xiaozhi_link.Link(dev, {"ota_url": srv.ota_url}, IDENT)
        old = xiaozhi_link.log
        xiaozhi_link.log = Log()
        task = asyncio.create_task(link.run())
        try:
            await asyncio.sleep(1.0)
            assert not srv.ota_requests and link.state == "settling", link.state
            state["settled"] = True
            await srv.wait(lambda: srv.session and srv.session.ready.is_set(), 10)
            link.settle_ms = 300  # and a bus that never settles is waited for that long only
        finally:
            link.stop()
            task.cancel()
            await link.sock.abort()
            await srv.stop()
            xiaozhi_link.log = old

    run(go())


# -- the MCP endpoint relay ------------------------------------------------------------------


class RelayRig:
    def __init__(self, token="T0K", **facade):
        self.relay = EndpointRelay(tokens={"T0K": "agent-1"})
        self.token = token
        self.facade = Facade(**facade)
        self.device = xiaozhi_endpoint.Endpoint(self.facade, "0.1.0")
        self.log = Log()
        self.robots = []

    async def __aenter__(self):
        self.old = xiaozhi.log, xiaozhi_link.log, xiaozhi_endpoint.log
        xiaozhi.log = xiaozhi_link.log = xiaozhi_endpoint.log = self.log
        await self.relay.start()
        cfg = {"mcp_endpoint": self.relay.url("tool", self.token)}
        self.link = xiaozhi_endpoint.EndpointLink(
            self.device, cfg, backoff=xiaozhi.Backoff(100, 400)
        )
        self.task = asyncio.create_task(self.link.run())
        return self

    async def __aexit__(self, *exc):
        for r in self.robots:
            await r.close()
        await stop_link(self.link, self.task)
        await self.relay.stop()
        xiaozhi.log, xiaozhi_link.log, xiaozhi_endpoint.log = self.old

    async def wait(self, pred, timeout=10):
        end = asyncio.get_running_loop().time() + timeout
        while not pred():
            assert asyncio.get_running_loop().time() < end, "not met in %s s" % timeout
            await asyncio.sleep(0.05)

    async def robot(self):
        await self.wait(lambda: "agent-1" in self.relay.tool_connections)
        r = await RelayRobot(self.relay.url("robot", "T0K")).connect()
        self.robots.append(r)
        await asyncio.wait_for(r.ready.wait(), 10)
        return r


def test_relay_serves_the_menu_to_many_device_sessions_over_one_socket_ids_restored():
    async def go():
        async with RelayRig(many=40) as rig:
            a, b = await asyncio.gather(rig.robot(), rig.robot())
            want = mcp.tools(rig.facade.menu())
            assert a.tools == want and b.tools == want, (len(a.tools), len(b.tools))
            assert len(a.pages) > 1 and max(p["bytes"] for p in a.pages) <= 8000, a.pages
            assert a.initialize["capabilities"]["tools"], a.initialize
            got = await asyncio.gather(
                a.request("tools/call", {"name": "led_on", "arguments": {}}),
                b.request("tools/call", {"name": "led_off", "arguments": {}}),
            )
            assert [p["id"] for p in got] == [1, 1], "the relay restored each caller's id"
            assert got[0]["result"]["content"][0]["text"].startswith("led_on: done"), got
            assert got[1]["result"]["content"][0]["text"].startswith("led_off: done"), got
            ids = [m["id"] for m in rig.relay.tool_messages]
            assert all(isinstance(i, str) and "_n_" in i for i in ids), ids
            assert not rig.relay.dropped, "every message had its target: %r" % rig.relay.dropped
            inits = [m for m in rig.relay.to_tool if m.get("method") == "initialize"]
            assert len(inits) == 2 and rig.relay.tool_connects == 1, rig.relay.tool_connects
            st = rig.link.status()
            assert st["state"] == "ready" and "T0K" not in str(st), st

    run(go())


def test_relay_reopens_for_a_changed_menu_and_a_later_session_lists_it():
    async def go():
        async with RelayRig() as rig:
            a = await rig.robot()
            rig.facade.extra.append(EXPRESS)
            rig.facade.publish("menu", {"added": ["express"], "removed": []})
            await rig.wait(lambda: rig.relay.tool_connects == 2, 15)
            b = await rig.robot()
            assert "express" in _names(b.tools) and "express" not in _names(a.tools)
            assert rig.link.status()["reopens"] == 1, rig.link.status()
            assert not rig.relay.dropped, rig.relay.dropped

    run(go())


def test_relay_bad_token_is_retried_slowly_and_a_second_socket_is_survived():
    async def go():
        async with RelayRig(token="wrong") as rig:
            await rig.wait(lambda: rig.relay.refused >= 1)
            await rig.wait(lambda: rig.link.state == "backoff")
            assert "1008" in (rig.link.last_error or ""), rig.link.status()
            assert rig.link.backoff.base == rig.link.backoff.hi, "a refused token: slow retries"
        async with RelayRig() as rig:
            await rig.robot()
            # another tool server with the same token: the relay closes ours for it, and
            # (as mcp-endpoint-server does) our socket's end unregisters the newcomer
            other = await websockets.connect(rig.relay.url("tool", "T0K"))
            try:
                await rig.wait(lambda: rig.link.reconnects >= 1, 15)
                await rig.wait(lambda: "agent-1" in rig.relay.tool_connections, 15)
                r = await rig.robot()
                p = await r.request("tools/call", {"name": "led_on", "arguments": {}})
                assert "result" in p, p
            finally:
                await other.close()

    run(go())
