# The WebSocket client cases against ws_rig's server, one file for CPython (pytest) and the unix port (main()).
import sys

try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio
import hashlib
import json

from master.net import ws

HOST = "127.0.0.1"


def _url(port, path, scheme="ws"):
    return "%s://%s:%d%s" % (scheme, HOST, port, path)


def _text(sock, n):
    return bytes(sock.message[:n]).decode()


async def _open(port, path, **kw):
    s = ws.WebSocket(**kw)
    await s.connect(_url(port, path))
    return s


async def case_handshake_and_headers(port):
    s = ws.WebSocket()
    await s.connect(
        _url(port, "/headers?x=1"),
        {"Authorization": "Bearer tok", "Protocol-Version": "1", "Device-Id": "aa:bb"},
    )
    assert s.open, "open after the upgrade"
    op, n = await s.recv(2000)
    got = json.loads(_text(s, n))
    assert op == ws.TEXT, op
    assert got["authorization"] == "Bearer tok", got
    assert got["protocol-version"] == "1" and got["device-id"] == "aa:bb", got
    assert got["sec-websocket-version"] == "13", got
    assert got["host"] == "%s:%d" % (HOST, port), got
    await s.close()
    assert not s.open, "closed"


async def case_echo_text_binary_and_masking(port):
    s = await _open(port, "/echo")
    await s.send_text("héllo")  # websockets refuses unmasked client frames: an echo proves masking
    op, n = await s.recv(2000)
    assert op == ws.TEXT and _text(s, n) == "héllo", (op, _text(s, n))
    await s.send_binary(b"\x00\xff\x10")
    op, n = await s.recv(2000)
    assert op == ws.BINARY and bytes(s.message[:n]) == b"\x00\xff\x10", (op, n)
    await s.send_text("")
    op, n = await s.recv(2000)
    assert op == ws.TEXT and n == 0, (op, n)
    assert s.messages_out == 3 and s.messages_in == 3, s.counters()
    await s.close()


async def case_long_messages_masked_across_chunks(port):
    # tx_chunk 1001 is not a multiple of 4: the mask phase must carry across chunks
    s = ws.WebSocket(tx_chunk=1001)
    await s.connect(_url(port, "/digest"))
    for size in (125, 126, 65535, 65536, 70001):
        data = bytes((i * 7 + 3) & 0xFF for i in range(size))
        await s.send_binary(data)
        op, n = await s.recv(5000)
        want = "binary %d %s" % (size, _hex(hashlib.sha1(data).digest()))
        assert _text(s, n) == want, (size, _text(s, n))
    text = "ü" * 3000
    await s.send_text(text)
    op, n = await s.recv(5000)
    assert _text(s, n).startswith("text 6000 "), _text(s, n)
    await s.close()


def _hex(b):
    return "".join("%02x" % x for x in b)


async def case_fragmented_messages(port):
    s = await _open(port, "/fragments")
    op, n = await s.recv(2000)
    assert op == ws.TEXT and _text(s, n) == "abcdef", _text(s, n)
    op, n = await s.recv(2000)
    assert op == ws.BINARY and bytes(s.message[:n]) == b"\x01\x02\x03", bytes(s.message[:n])
    await s.close()


async def case_ping_inside_a_fragmented_message(port):
    s = await _open(port, "/interleaved")
    op, n = await s.recv(2000)
    assert _text(s, n) == "abcdef", _text(s, n)
    assert s.pings == 1, s.counters()
    await s.close()


async def case_server_ping_answered(port):
    s = await _open(port, "/ping")
    op, n = await s.recv(5000)
    assert _text(s, n) == "pong-ok", _text(s, n)
    assert s.pings == 1, s.counters()
    await s.close()


async def case_client_ping_gets_pong(port):
    s = await _open(port, "/echo")
    await s.ping(b"p1")
    await s.send_text("after ping")
    op, n = await s.recv(2000)
    assert _text(s, n) == "after ping", _text(s, n)
    assert s.pongs == 1, s.counters()
    await s.close()


async def case_close_with_code(port):
    s = await _open(port, "/close")
    try:
        await s.recv(2000)
        raise AssertionError("recv after the server's close must raise")
    except ws.WsClosed as e:
        assert e.code == 4000 and e.reason == "bye", (e.code, e.reason)
    assert not s.open and s.close_code == 4000, s.close_code
    # our own close with a code: the echo server closes with the code it is asked for
    s = await _open(port, "/echo")
    await s.send_text("close:4321")
    try:
        await s.recv(2000)
        raise AssertionError("closed by the server")
    except ws.WsClosed as e:
        assert e.code == 4321, e.code
    s = await _open(port, "/echo")
    await s.close(4100, "done here")
    assert not s.open and s.close_code == 4100, s.close_code


async def case_oversize_refused_and_counted(port):
    s = ws.WebSocket(max_message=4096)
    await s.connect(_url(port, "/oversize"))
    op, n = await s.recv(5000)
    assert _text(s, n) == "after", _text(s, n)[:40]
    assert s.oversize == 2, s.counters()
    assert s.messages_in == 1, s.counters()
    assert len(s._buf) == 4096, "the message buffer never grows"
    await s.close()


async def case_stall_mid_frame_times_out_then_reconnects(port):
    s = ws.WebSocket()
    s.read_timeout_ms = 400
    await s.connect(_url(port, "/stall"))
    try:
        await s.recv(5000)
        raise AssertionError("a frame cut off mid-way must time out")
    except ws.WsTimeout:
        pass
    assert not s.open, "a connection out of step is dead"
    await s.abort()
    await s.connect(_url(port, "/echo"))  # the same object reconnects
    await s.send_text("again")
    op, n = await s.recv(2000)
    assert _text(s, n) == "again", _text(s, n)
    await s.close()


async def case_idle_timeout_keeps_connection(port):
    s = await _open(port, "/echo")
    try:
        await s.recv(200)
        raise AssertionError("no frame within 200 ms must raise WsTimeout")
    except ws.WsTimeout:
        pass
    assert s.open, "an idle timeout between frames leaves the connection usable"
    await s.send_text("still here")
    op, n = await s.recv(2000)
    assert _text(s, n) == "still here", _text(s, n)
    await s.close()


async def case_bad_accept_refused(port):
    s = ws.WebSocket()
    try:
        await s.connect(_url(port, "/badaccept"))
        raise AssertionError("a wrong Sec-WebSocket-Accept must be refused")
    except ws.WsError as e:
        assert "Sec-WebSocket-Accept" in str(e), str(e)
    assert not s.open
    try:
        await s.connect(_url(port, "/refuse"))
        raise AssertionError("a 403 must be refused")
    except ws.WsError as e:
        assert "403" in str(e), str(e)


async def case_connect_timeout(port):
    s = ws.WebSocket()
    try:
        await s.connect(_url(port, "/slowupgrade"), timeout_ms=300)
        raise AssertionError("no upgrade answer: the connect must time out")
    except ws.WsTimeout as e:
        assert "within 300 ms" in str(e), str(e)
    try:
        await s.connect("ws://127.0.0.1:1/", timeout_ms=2000)
        raise AssertionError("nothing listens on port 1")
    except ws.WsError as e:
        assert "cannot connect" in str(e) or "within" in str(e), str(e)


async def case_protocol_errors_close(port):
    for path, words in (("/badutf8", "UTF-8"), ("/masked", "masked")):
        s = await _open(port, path)
        try:
            await s.recv(2000)
            raise AssertionError("%s must be a protocol error" % path)
        except ws.WsError as e:
            assert words in str(e), str(e)
        assert not s.open, path


async def case_wss(tls_port, cadata):
    s = ws.WebSocket()
    ctx = ws.default_ssl_context(cadata)
    await s.connect(_url(tls_port, "/echo", "wss"), ssl_context=ctx)
    await s.send_text("over tls")
    op, n = await s.recv(5000)
    assert _text(s, n) == "over tls", _text(s, n)
    await s.close()


PLAIN = [
    case_handshake_and_headers,
    case_echo_text_binary_and_masking,
    case_long_messages_masked_across_chunks,
    case_fragmented_messages,
    case_ping_inside_a_fragmented_message,
    case_server_ping_answered,
    case_client_ping_gets_pong,
    case_close_with_code,
    case_oversize_refused_and_counted,
    case_stall_mid_frame_times_out_then_reconnects,
    case_idle_timeout_keeps_connection,
    case_bad_accept_refused,
    case_connect_timeout,
    case_protocol_errors_close,
]


def main(argv):
    from mprun import run_cases

    port = int(argv[1])
    tls_port = int(argv[2]) if len(argv) > 2 else 0
    cases = [(c, (port,)) for c in PLAIN]
    if tls_port:
        with open(argv[3], "rb") as f:
            cases.append((case_wss, (tls_port, f.read())))
    return run_cases(cases)


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv) else 0)
