# The one HTTP client (master/net/http.py) over fake streams: URLs, request heads, bounded head reads, bodies, deadlines.
from master.net import http
from net_fakes import Source, run

UNIX_PORT = True

CONTROLS = ("\r", "\n", "\r\n", "\x00", "\t", "\x0b", "\x0c", "\x1b", "\x7f")


def _refused(fn, *args):
    try:
        fn(*args)
    except http.NetError as e:
        return str(e)
    raise AssertionError("%r was taken" % (args,))


def test_a_control_character_anywhere_in_a_url_refuses_it():
    # the attack of issue 24 (defect 3) and its class: CR, LF, NUL, TAB, ... in every part
    assert "control character" in _refused(
        http.parse_url, "ws://h/xz HTTP/1.1\r\nX-Injected: yes", ("ws", "wss")
    )
    for c in CONTROLS:
        for url in (
            "http://h" + c + "/",
            "http://h:80" + c + "/",
            "http://h/x" + c + "y",
            "http://h/x?q=" + c + "X-Injected: yes",
            "http://h/x#" + c,
            c + "http://h/",
        ):
            why = _refused(http.parse_url, url)
            assert "control character" in why and "refused" in why, (url, why)


def _target(url):
    return http.parse_url(url, ("ws", "wss", "http", "https"))[3]


def test_spaces_quotes_and_non_ascii_are_percent_encoded():
    cases = (
        ("ws://h/xz HTTP/1.1", "/xz%20HTTP/1.1"),
        ("ws://h/a b", "/a%20b"),
        ('ws://h/"q"<>', "/%22q%22%3C%3E"),
        ("ws://h/\u00e9", "/%C3%A9"),
        ("ws://h/a\\b{}|^`", "/a%5Cb%7B%7D%7C%5E%60"),
        ("ws://h/p?x=a b&y=\u00fc", "/p?x=a%20b&y=%C3%BC"),
        ("ws://h/%41%2f", "/%41%2f"),
        ("ws://h/100%", "/100%25"),
        ("ws://h/%zz", "/%25zz"),
        ("ws://h/a#frag ment", "/a"),
        ("ws://h?q", "/?q"),
        ("ws://h", "/"),
        ("http://h/x/~a-b_c.d!$&'()*+,;=:@?/", "/x/~a-b_c.d!$&'()*+,;=:@?/"),
    )
    for url, want in cases:
        got = _target(url)
        assert got == want, (url, got, want)
        for ch in got:
            assert " " < ch < "\x7f", (url, got)


def test_hosts_and_ports():
    assert http.parse_url("ws://[::1]:81/x", ("ws",)) == ("ws", "::1", 81, "/x")
    assert http.parse_url("https://h.example") == ("https", "h.example", 443, "/")
    assert http.parse_url("http://h:/x") == ("http", "h", 80, "/x")
    assert http.host_header("::1", 81, "ws") == "[::1]:81"
    assert http.host_header("h", 80, "http") == "h" and http.host_header("h", 443, "wss") == "h"
    for url, words in (
        ("http://a b/", "holds ' '"),
        ("http://h\u00e9/", "holds"),
        ("http://h%0d%0a/", "holds '%'"),
        ("http://h: 80/", "not a number"),
        ("http://h:+80/", "not a number"),
        ("http://h:123456/", "not a number"),
        ("http://h:0/", "out of range"),
        ("http://h:65536/", "out of range"),
        ("http://u@h/", "user info"),
        ("http://:80/", "no host"),
        ("http://[::1/", "IPv6"),
        ("http://[::1]x/", "IPv6"),
        ("http://[fe80::1%eth0]/", "holds '%'"),
        ("ftp://h/", "must start with http:// or https://"),
        ("http:/h/", "must start with"),
        (None, "must be a string"),
        ("http://h/" + "a" * 3000, "more than 2048"),
    ):
        why = _refused(http.parse_url, url)
        assert words in why, (url, why)


def test_the_request_head_is_exactly_its_lines():
    parts = http.parse_url("http://10.0.0.2:8002/xz ota/?a=b c")
    head = http.request_head("POST", parts, [("Device-Id", "aa:bb"), ("X-Tab", "a\tb")])
    assert head == (
        b"POST /xz%20ota/?a=b%20c HTTP/1.1\r\nHost: 10.0.0.2:8002\r\nDevice-Id: aa:bb\r\n"
        b"X-Tab: a\tb\r\n\r\n"
    ), head
    head = http.request_head("GET", http.parse_url("ws://h/", ("ws",)), [("A", 1)])
    assert head == b"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n\r\n", head


def test_no_header_name_or_value_adds_a_line():
    parts = http.parse_url("http://h/")
    for value in ("a\r\nX-Injected: yes", "a\nb", "a\rb", "a\x00", "\x7f", "Bearer t\r\n"):
        why = _refused(http.request_head, "GET", parts, {"Authorization": value})
        assert "control character" in why, (value, why)
        assert not http.request_field_ok(value), value
    for name in ("X Y", "X:Y", "", "X\r\nY", "X\n", "\u00e9", 7):
        why = _refused(http.request_head, "GET", parts, [(name, "v")])
        assert "cannot go on a request" in why, (name, why)


def _head(parts, want=(), buf=256, ms=None, **kw):
    src = Source(parts, **kw)
    ans = http.Answer(src, bytearray(buf))

    async def go():
        await ans.head(want, ms)

    run(go())
    return ans, src


def _head_refused(parts, want=(), buf=256, **kw):
    try:
        _head(parts, want, buf, **kw)
    except http.NetError as e:
        return str(e)
    raise AssertionError("head taken: %r" % (parts,))


def test_a_line_is_capped_at_4096_bytes_however_long_it_comes():
    # defect 7: 10 MB without a newline was read whole (MemoryError at 1.5 MB)
    for parts, buf in (
        ([b"HTTP/1.1 200 OK\r\nX-Long: ", 10 * 1024 * 1024], 256),
        ([b"HTTP/1.1 200 OK\r\nX-Long: ", 10 * 1024 * 1024], 4096),
        ([10 * 1024 * 1024], 64),
        ([b"HTTP/1.1 101 " + b"r" * 5000 + b"\r\n\r\n"], 4096),
    ):
        src = Source(parts)
        ans = http.Answer(src, bytearray(buf))
        try:
            run(ans.head())
            raise AssertionError("a line of 10 MB was taken")
        except http.NetError as e:
            assert "longer than 4096 bytes" in str(e), str(e)
        assert src.taken <= 4096 + 200, "read %d bytes of a line capped at 4096" % src.taken


def test_a_head_is_capped_at_8192_bytes():
    lines = [b"HTTP/1.1 200 OK\r\n"] + [b"X-A: b\r\n"] * 2000 + [b"\r\n"]
    why = _head_refused(lines)
    assert "head is longer than 8192 bytes" in why, why


def test_the_head_is_never_read_past_its_end():
    body = b"\x81\x05hello and more"
    for head in (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\n\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\n\r\n",
        b"HTTP/1.1 101\r\n\r\n",
    ):
        for readinto in (True, False):
            ans, src = _head([head + body], ("upgrade",), readinto=readinto)
            assert ans.status == 101, (head, ans.status)
            assert src.rest() == body, (head, src.rest())
            assert ans.size == len(head), (ans.size, len(head))


def test_only_the_headers_asked_for_are_kept():
    ans, _ = _head(
        [
            b"HTTP/1.1 200 OK\r\nSet-Cookie: " + b"c" * 3000 + b"\r\nCONTENT-length:  5 \r\n",
            b"X-Other: y\r\nConnection: keep-alive\r\nconnection: upgrade\r\n\r\n",
        ],
        ("content-length", "connection"),
    )
    assert ans.headers == {"content-length": "5", "connection": "keep-alive, upgrade"}, ans.headers
    assert ans.reason == "OK", ans.reason
    why = _head_refused(
        [b"HTTP/1.1 200 OK\r\nSec-WebSocket-Accept: " + b"x" * 300 + b"\r\n\r\n"],
        ("sec-websocket-accept",),
    )
    assert "sec-websocket-accept header is longer than 256 bytes" in why, why
    why = _head_refused([b"HTTP/1.1 200 OK\r\nA: b\r\n  folded\r\n\r\n"])
    assert "obs-fold" in why, why
    why = _head_refused(
        [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"], ("content-length",)
    )
    assert "two different Content-Length" in why, why
    why = _head_refused([b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"])
    assert "without a name" in why, why


def test_status_lines():
    for line, status, reason in (
        (b"HTTP/1.1 200 OK", 200, "OK"),
        (b"HTTP/1.0 404 Not Found", 404, "Not Found"),
        (b"HTTP/1.1 101", 101, ""),
    ):
        ans, _ = _head([line + b"\r\n\r\n"])
        assert (ans.status, ans.reason) == (status, reason), (line, ans.status, ans.reason)
    for line in (b"HTTP/2 200 OK", b"ICY 200 OK", b"HTTP/1.1 2x0 OK", b"HTTP/1.1  200", b"\x00"):
        why = _head_refused([line + b"\r\n\r\n"])
        assert "not an HTTP answer" in why, (line, why)
    assert "closed before an answer" in _head_refused([])
    assert "closed inside the answer's head" in _head_refused([b"HTTP/1.1 200 OK\r\nA: b"])


def _body(raw, buf=64, want=("content-length", "transfer-encoding")):
    src = Source([raw])
    ans = http.Answer(src, bytearray(buf))

    async def go():
        await ans.head(want)
        return await ans.body()

    n = run(go())
    return bytes(ans.buf[:n])


def _body_refused(raw, buf=64):
    try:
        _body(raw, buf)
    except http.NetError as e:
        return str(e)
    raise AssertionError("body taken: %r" % raw)


def test_bodies_by_length_chunks_or_close_within_the_buffer():
    ok = b"HTTP/1.1 200 OK\r\n"
    assert _body(ok + b"Content-Length: 5\r\n\r\nhello+extra") == b"hello"
    assert _body(ok + b"\r\nuntil close") == b"until close"
    chunked = (
        ok + b"Transfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nT: 1\r\n\r\n"
    )
    assert _body(chunked) == b"hello world"
    assert (
        _body(ok + b"Transfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n")
        == b"0123456789"
    )
    for raw, words in (
        (ok + b"Content-Length: 65\r\n\r\n" + b"x" * 65, "65 bytes is longer than 64"),
        (ok + b"\r\n" + b"x" * 65, "longer than 64 bytes"),
        (ok + b"Content-Length: -1\r\n\r\n", "not a number"),
        (ok + b"Content-Length: 10\r\n\r\nshort", "closed 5 bytes into"),
        (ok + b"Transfer-Encoding: gzip\r\n\r\n", "not supported"),
        (ok + b"Transfer-Encoding: chunked\r\n\r\n41\r\n" + b"x" * 65, "longer than 64"),
        (ok + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", "without a size"),
        (ok + b"Transfer-Encoding: chunked\r\n\r\n1234567\r\n", "more than 6 hex digits"),
        (
            ok + b"Transfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n0\r\n\r\n",
            "does not end with CR LF",
        ),
        (ok + b"Transfer-Encoding: chunked\r\n\r\n" + b"1" * 5000, "more than 6 hex"),
        (ok + b"Transfer-Encoding: chunked\r\n\r\n1;" + b"e" * 5000, "longer than 4096"),
    ):
        why = _body_refused(raw)
        assert words in why, (raw[:60], why)


def test_a_trickle_meets_the_deadline_of_the_whole_head():
    # every byte comes within 20 ms, the head never ends: one deadline for the whole of it
    parts = [b"HTTP/1.1 200 OK\r\n", 100000]  # then 100000 bytes of "a", a read at a time
    try:
        _head(parts, ms=300, gap_ms=20)
        raise AssertionError("a trickle kept the head open past its deadline")
    except http.NetTimeout as e:
        assert "no whole answer head within 300 ms" in str(e), str(e)


def test_a_silent_server_meets_the_deadline():
    try:
        _head([b"HTTP/1.1 200"], ms=200, hang=True)
        raise AssertionError("a silent server held the head")
    except http.NetTimeout as e:
        assert "within 200 ms (12 bytes came)" in str(e), str(e)
