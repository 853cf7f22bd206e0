# The virtual body's unix-port master at its documented 80 KB for data: idle GET /mcp streams beyond the bound are refused (503, Retry-After) and every plan is still served.
#
# Issue 24 (4): 57 idle streams on one session were held; at 80 KB, 6 made 8 of 20 plans and
# every GET /status answer 503, 8 refused all 20 plans (a stream holds about 3.4 KB there).
import json
import socket
import time
import urllib.request

from e2e_support import VirtualBody, one_step

TOKEN = "mcp-heap-token"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "heap", "version": "0"}}}  # fmt: skip


def _session(vb):
    req = urllib.request.Request(
        vb.url("/mcp"),
        data=json.dumps(INIT).encode(),
        method="POST",
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.headers["Mcp-Session-Id"]


def _open_stream(vb, sid):
    """(socket left open, status, head) of one GET /mcp that is never read further."""
    s = socket.create_connection(vb.http, timeout=30)
    s.sendall(
        (
            "GET /mcp HTTP/1.1\r\nHost: body\r\nAuthorization: Bearer %s\r\n"
            "Accept: text/event-stream\r\nMcp-Session-Id: %s\r\n\r\n" % (TOKEN, sid)
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(512)
        if not chunk:
            break
        head += chunk
    return s, int(head.split(b" ", 2)[1]), head.decode("latin-1")


def test_eight_idle_mcp_streams_at_80k_leave_every_plan_served(tmp_path):
    from vbody import launch

    heap = "%dk" % (launch.DATA_NEEDS["master"] // 1024)
    vb = VirtualBody(
        out_dir=str(tmp_path), heap=heap, master_config={"http": {"token": TOKEN}}
    ).start()
    held = []
    try:
        assert vb.wait_http(30), "master HTTP never came up: %s" % vb.failure()
        assert vb.wait_menu(["led_on", "led_off"], 30) is not None, vb.failure()
        # 8 on one session, then 8 over three more (the table holds 4): the attack's two shapes
        one = _session(vb)
        many = [_session(vb) for _ in range(3)]
        codes = []
        for sid in [one] * 8 + [many[i % 3] for i in range(8)]:
            s, code, head = _open_stream(vb, sid)
            codes.append(code)
            if code == 200:
                held.append(s)
            else:
                assert code == 503 and "Retry-After: 5" in head, head
                s.close()
        assert codes.count(200) == 2 and codes.count(503) == 14, codes
        assert codes[:2] == [200, 503], "one stream per session: %r" % codes
        plans = []
        for i in range(20):
            status, rep = vb.plan(one_step("led_on" if i % 2 else "led_off"))
            plans.append(status if status != 200 or rep.get("ok") else rep)
        assert plans == [200] * 20, "plans beside 2 held and 14 refused streams: %r" % plans
        status, doc = vb.request("GET", "/status")
        assert status == 200 and doc["mcp"]["streams"] == 2, (status, doc.get("mcp"))
        assert doc["mcp"]["streams_refused"] == 14, doc["mcp"]
        assert vb.failure() is None, vb.failure()
    finally:
        for s in held:
            s.close()
        vb.stop()
