# The network client against the rogue server (rogue.py), one file for CPython (pytest) and the unix port (main()).
import sys

try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from master.links import nudge
from master.net import ws
from master.links import xiaozhi
from master.links import xiaozhi_link
from master.net import http

IDENT = {"device_id": "aa:bb:cc:dd:ee:03", "client_id": "12345678-1234-4123-8123-123456789abe"}

# websocket (url, token) of discovery answers (rogue /ota?u=N), each with what must happen:
# "refused" and a word of the reason, or "sent" and the request line the server must get.
INJECTIONS = (
    ("ws://127.0.0.1:%d/record/xz HTTP/1.1\r\nX-Injected: yes", None, "refused", "control"),
    ("ws://127.0.0.1:%d/record/xz\nX-Injected: yes", None, "refused", "control"),
    ("ws://127.0.0.1:%d/record/x\x00y", None, "refused", "control"),
    ("ws://127.0.0.1\r\nX-Injected: yes:%d/record/", None, "refused", "control"),
    ("ws://127.0.0.1:%d/record/tok", "t\r\nX-Injected: yes", "refused", "token"),
    ("ws://127.0.0.1:%d/record/a b?c=d e", None, "sent", "GET /record/a%20b?c=d%20e HTTP/1.1"),
    ('ws://127.0.0.1:%d/record/\u00e9"<>', None, "sent", "GET /record/%C3%A9%22%3C%3E HTTP/1.1"),
)


class _Facade:
    def subscribe(self, fn):
        pass

    def menu(self):
        return {"capabilities": []}


def _link(url):
    dev = xiaozhi.Device(_Facade(), "0.1.0")
    return xiaozhi_link.Link(dev, {"ota_url": url, "max_message": 4096}, IDENT)


async def _refused(aw, kinds):
    try:
        await aw
    except kinds as e:
        return str(e)
    raise AssertionError("taken")


async def case_upgrade_answers_are_bounded(port):
    # defect 7 on the WebSocket handshake: a 10 MB line, an endless head, a trickle
    base = "ws://127.0.0.1:%d" % port
    s = ws.WebSocket(max_message=4096)
    why = await _refused(s.connect(base + "/line10m", timeout_ms=30000), ws.WsError)
    assert "longer than 4096 bytes" in why, why
    why = await _refused(s.connect(base + "/headers", timeout_ms=30000), ws.WsError)
    assert "longer than 8192 bytes" in why, why
    why = await _refused(s.connect(base + "/trickle", timeout_ms=800), ws.WsTimeout)
    assert "within 800 ms" in why, why
    assert not s.open and len(s._buf) == 4096, "the message buffer never grows"


async def case_discovery_answers_are_bounded(port):
    base = "http://127.0.0.1:%d" % port
    for path, words in (
        ("/line10m", "longer than 4096 bytes"),
        ("/headers", "longer than 8192 bytes"),
        ("/trickle", "no whole answer within 800 ms"),
        ("/silent", "no whole answer within 800 ms, waiting for the answer"),
    ):
        link = _link(base + path)
        old, xiaozhi_link.DISCOVERY_MS = xiaozhi_link.DISCOVERY_MS, 800
        try:
            why = await _refused(link.discover(), xiaozhi.XiaozhiError)
        finally:
            xiaozhi_link.DISCOVERY_MS = old
        assert why.startswith("OTA request: POST 127.0.0.1:%d" % port) and words in why, why


async def case_nudge_answers_are_bounded(port):
    buf = bytearray(256)
    for path, kind, words in (
        ("/line10m", http.NetError, "longer than 4096 bytes"),
        ("/headers", http.NetError, "longer than 8192 bytes"),
        ("/trickle", http.NetTimeout, "within 800 ms"),
    ):
        parts = http.parse_url("http://127.0.0.1:%d%s" % (port, path))
        why = await _refused(nudge.post_json(parts, '{"reason": "r"}', 800, buf), kind)
        assert words in why, (path, why)


async def case_discovery_cannot_inject_headers(port):
    # defect 3: a discovery answer's websocket url and token never add a line to the upgrade
    for i, (url, token, what, words) in enumerate(INJECTIONS):
        link = _link("http://127.0.0.1:%d/ota?u=%d" % (port, i))
        why = await _refused(link.session(), (xiaozhi.XiaozhiError, ws.WsError))
        if what == "refused":
            assert words in why and "refused" in why, (i, why)
        else:
            assert "upgrade refused: HTTP 400" in why, (i, why)


PORT_CASES = [
    case_upgrade_answers_are_bounded,
    case_discovery_answers_are_bounded,
    case_nudge_answers_are_bounded,
    case_discovery_cannot_inject_headers,
]


def main(argv):
    from mprun import run_cases

    port = int(argv[1])
    return run_cases([(c, (port,)) for c in PORT_CASES])


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv) else 0)
