# The WebSocket client's answers to a peer's errors (master/net/ws.py over fake streams): close codes, stalls, deadlines.
from master.net import ws
from master.net import wsframe
from master.links import xiaozhi
from master.links import xiaozhi_link
from master.net import http
from net_fakes import Sink, Source, run
from organbus.ticks import ticks_diff, ticks_ms

UNIX_PORT = True

IDENT = {"device_id": "aa:bb:cc:dd:ee:04", "client_id": "12345678-1234-4123-8123-123456789abf"}


def _sock(parts, **kw):
    """An open WebSocket whose server is `parts` (fake streams), reads cut off after 100 ms."""
    s = ws.WebSocket(max_message=256)
    s.reader = Source(parts, **kw)
    s._readinto = s.reader.readinto
    s.writer = Sink()
    s.open = True
    s.read_timeout_ms = 100
    return s


def _sent(s):
    """The frames the client wrote, unmasked: [(opcode, payload)]."""
    data = s.writer.data if s.writer is not None else s._sink.data
    out = []
    i = 0
    while i < len(data):
        op, ln = data[i] & 0x0F, data[i + 1] & 0x7F
        assert data[i + 1] & 0x80, "a client frame is masked"
        i += 2
        if ln == 126:
            ln = (data[i] << 8) | data[i + 1]
            i += 2
        key = data[i : i + 4]
        out.append((op, wsframe.mask(data[i + 4 : i + 4 + ln], key)))
        i += 4 + ln
    return out


def _close(code, reason=b""):
    p = bytes(((code >> 8) & 0xFF, code & 0xFF)) + reason
    return bytes((0x88, len(p))) + p


def _recv(s, **kw):
    # recv until it raises; the sink is kept for _sent (abort drops the writer)
    s._sink = s.writer
    try:
        run(s.recv(**kw))
    except ws.WsError as e:
        return e
    raise AssertionError("recv returned")


def _code(payload):
    return (payload[0] << 8) | payload[1]


def test_an_invalid_close_code_is_answered_1002_never_echoed():
    # defect 13: 999, 1005, 5000 were echoed; RFC 6455 section 7.4: the reply is 1002
    for code in (0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535):
        s = _sock([_close(code)])
        e = _recv(s)
        assert isinstance(e, ws.WsClosed) and e.code == ws.PROTOCOL_ERROR, (code, e)
        assert "close code %d" % code in str(e), str(e)
        sent = _sent(s)
        assert len(sent) == 1 and sent[0][0] == ws.CLOSE, (code, sent)
        assert _code(sent[0][1]) == ws.PROTOCOL_ERROR, (code, sent)
        assert not s.open and s.close_code == ws.PROTOCOL_ERROR, (code, s.close_code)


def test_a_valid_close_code_is_echoed():
    for code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1014, 3000, 4999):
        s = _sock([_close(code, b"bye")])
        e = _recv(s)
        assert isinstance(e, ws.WsClosed) and (e.code, e.reason) == (code, "bye"), (code, e)
        assert [(op, _code(p)) for op, p in _sent(s)] == [(ws.CLOSE, code)], (code, _sent(s))


def test_a_close_of_one_byte_or_with_a_bad_reason_is_a_protocol_error():
    s = _sock([b"\x88\x01\x03"])
    e = _recv(s)
    assert e.code == ws.PROTOCOL_ERROR and "a close frame of 1 byte" in str(e), str(e)
    assert [(op, _code(p)) for op, p in _sent(s)] == [(ws.CLOSE, ws.PROTOCOL_ERROR)], _sent(s)
    s = _sock([_close(1000, b"\xc3\x28")])
    e = _recv(s)
    assert e.code == ws.BAD_DATA and "not UTF-8" in str(e), str(e)
    assert [(op, _code(p)) for op, p in _sent(s)] == [(ws.CLOSE, ws.BAD_DATA)], _sent(s)
    s = _sock([b"\x88\x00"])  # no code at all: an empty close answers it
    e = _recv(s)
    assert e.code == ws.NO_STATUS, e
    assert _sent(s) == [(ws.CLOSE, b"")], _sent(s)


def test_a_frame_that_stops_half_way_is_a_stall_that_says_where():
    # defect 14: a stalled header was reported as the idle watchdog ("no frame for ...")
    for parts, words in (
        ([b"\x81"], "its header, 1 of 2 bytes"),
        ([b"\x81\x7e\x01"], "its length, 3 of 4 bytes"),
        ([b"\x81\x0a" + b"abc"], "a message's payload, 3 of 10 bytes"),
        ([b"\x89\x05hi"], "a control frame's payload, 2 of 5 bytes"),
    ):
        for idle in (5000, None):
            s = _sock(parts, hang=True)
            e = _recv(s, idle_ms=idle)
            assert isinstance(e, ws.WsStalled), (parts, e)
            assert "stalled inside a frame: %s within 100 ms" % words in str(e), str(e)
            assert not s.open, "a connection out of step is dropped"


def test_idle_is_not_a_stall_and_leaves_the_connection_open():
    s = _sock([], hang=True)
    e = _recv(s, idle_ms=100)
    assert type(e) is ws.WsTimeout and "no frame within 100 ms" in str(e), e
    assert s.open, "nothing of a frame was read: the connection is still in step"


def _pings(n):
    return b"\x89\x00" * n


def test_within_bounds_a_recv_that_pings_keep_alive():
    # pings keep the idle watchdog quiet, never a recv's whole deadline
    s = _sock([_pings(100000)], gap_ms=10)
    t0 = ticks_ms()
    e = _recv(s, idle_ms=5000, within_ms=300)
    took = ticks_diff(ticks_ms(), t0)
    assert type(e) is ws.WsTimeout and "no whole message within 300 ms" in str(e), e
    assert s.open and s.pings > 3, s.counters()
    assert took < 3000, "recv took %d ms past a 300 ms deadline" % took
    s = _sock([_pings(20), b"\x81\x02ok"], gap_ms=10)
    assert run(s.recv(idle_ms=100)) == (ws.TEXT, 2), "pings keep an idle deadline alive"


class _Facade:
    def subscribe(self, fn):
        pass

    def menu(self):
        return {"capabilities": []}


def _link(sock):
    link = xiaozhi_link.Link(xiaozhi.Device(_Facade()), {"ota_url": "http://h/"}, IDENT)
    link.sock = sock
    return link


def test_a_server_that_pings_and_never_says_hello_is_dropped_in_time():
    # defect 11: pings every 3 s kept the link in `hello` for over 30 s (the protocol: 10 s)
    s = _sock([_pings(100000)], gap_ms=10)
    link = _link(s)
    link.hello_timeout_ms = 300
    t0 = ticks_ms()
    try:
        run(http.wait_ms(link._await_hello(), 5000))
        raise AssertionError("a hello that never came was taken")
    except xiaozhi.XiaozhiError as e:
        assert "no server hello within 300 ms" in str(e), str(e)
    took = ticks_diff(ticks_ms(), t0)
    assert took < 3000, "the hello wait took %d ms past its 300 ms" % took
    assert s.pings > 3, s.counters()


def test_the_link_says_a_stall_is_a_stall_and_idle_is_the_watchdog():
    link = _link(_sock([b"\x81"], hang=True))
    try:
        run(link._reader())
        raise AssertionError("a stall was taken")
    except ws.WsStalled as e:
        assert "stalled inside a frame: its header, 1 of 2 bytes" in str(e), str(e)
    s = _sock([], hang=True)
    link = _link(s)
    link.watchdog_ms = 100
    s._sink = s.writer
    try:
        run(link._reader())
        raise AssertionError("silence was taken")
    except xiaozhi.XiaozhiError as e:
        assert "no frame from the server for 100 ms" in str(e), str(e)
    assert [(op, _code(p)) for op, p in _sent(s)][:1] == [(ws.CLOSE, wsframe.GOING_AWAY)], _sent(s)
