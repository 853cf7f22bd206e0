# httpd pieces without sockets (head parsing, rate limiter, response bytes), on CPython and the unix port.
from master.links import httpd, httplimits

UNIX_PORT = True


def test_parse_head_good_and_bad():
    m, p, q, h = httpd.parse_head(b"POST /plan?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5")
    assert (m, p, q) == ("POST", "/plan", "x=1"), (m, p, q)
    assert h == {"host": "a", "content-length": "5"}, h
    _, _, _, h = httpd.parse_head(b"GET / HTTP/1.0\r\nX-A: 1\r\nx-a: 2")
    assert h["x-a"] == "1, 2", h
    for bad, status in (
        (b"GET", 400),
        (b"GET nothing HTTP/1.1", 400),
        (b"GET / HTTP/2", 400),
        (b"GET / HTTP/1.1\r\nbad line", 400),
        (b"GET / HTTP/1.1\r\nA B: c", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b", 400),
        (b"GET / HTTP/1.1" + b"\r\nA: b" * 33, 431),
    ):
        try:
            httpd.parse_head(bad)
            assert False, "accepted %r" % bad
        except httpd.HttpError as e:
            assert e.status == status and e.reason, (bad, e.status, e.reason)


def test_heap_guard_looks_once_a_second_while_there_is_room():
    class Gc:  # gc.mem_free() as the floor sees it, its looks and collections counted
        def __init__(self):
            self.free = 20000
            self.looks = 0
            self.collects = 0

        def mem_free(self):
            self.looks += 1
            return self.free

        def collect(self):
            self.collects += 1

    fake = Gc()
    saved = httplimits.gc, httplimits._HAS_MEM_FREE
    httplimits.gc, httplimits._HAS_MEM_FREE = fake, True
    try:
        g = httplimits.HeapGuard(6144)
        assert not g.short(0) and fake.looks == 1
        assert not g.short(999) and fake.looks == 1  # room at the last look: not looked again
        fake.free = 9000
        assert not g.short(1000) and fake.looks == 2  # a second on: looked at
        assert not g.short(1001) and fake.looks == 3  # under twice the floor: every request
        fake.free = 5000
        assert g.short(1002) and (fake.looks, fake.collects) == (5, 1)  # short after a collect
        assert g.short(1003) and (fake.looks, fake.collects) == (7, 2)
    finally:
        httplimits.gc, httplimits._HAS_MEM_FREE = saved


def test_rate_limiter_bucket_and_retry_after():
    r = httpd.RateLimiter(2, 3)
    got = [r.take("a", 0) for _ in range(4)]
    assert got == [0, 0, 0, 1], got
    assert r.take("b", 0) == 0, "another client has its own bucket"
    assert r.take("a", 499) == 1 and r.take("a", 500) == 0, "one token per 500 ms at 2/s"
    # A full table forgets only a bucket that has refilled (issue 17 item 5: it used to evict
    # the oldest, so a returning address met a fresh bucket and the limiter failed open).
    r = httpd.RateLimiter(1, 1, clients=2)
    r.take("a", 0)
    r.take("b", 10)
    assert r.take("c", 20) == 0 and sorted(r.buckets) == ["a", "b"], r.buckets
    assert r.take("d", 30) == 1, "c and d share the overflow bucket: its one token is spent"
    assert r.take("e", 1500) == 0 and sorted(r.buckets) == ["b", "e"], (
        "a refilled bucket makes room: %r" % r.buckets
    )


def test_rotating_addresses_never_beat_the_limit():
    # 17..64 addresses in turn, each asking 90 times a second for 2 s: the limiter lets at most
    # what the table's clients plus the overflow bucket may take, never everything.
    for n in (16, 17, 40, 64):
        r = httpd.RateLimiter(10, 30, clients=16)
        ok = asked = 0
        for t in range(0, 2000, 11):  # ~90 requests per second per address
            for i in range(n):
                asked += 1
                if r.take("10.0.%d.%d" % (i // 250, i % 250), t) == 0:
                    ok += 1
        most = (min(n, 16) + 1) * (30 + 10 * 2)  # burst plus 2 s of refill, per bucket
        assert ok <= most, "%d addresses: %d of %d requests passed, more than %d" % (
            n,
            ok,
            asked,
            most,
        )
        assert ok < asked / 2, "%d addresses: %d of %d passed" % (n, ok, asked)


def test_encode_response_and_client_address():
    raw = httpd.encode_response(429, {"error": "slow down"}, {"Retry-After": "2"})
    head, body = raw.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 429 Too Many Requests\r\n"), head
    assert b"Retry-After: 2" in head and b"Connection: close" in head, head
    assert b"Content-Length: %d" % len(body) in head and b"application/json" in head, head
    raw = httpd.encode_response(202)
    assert raw.endswith(b"Content-Length: 0\r\nConnection: close\r\n\r\n"), raw
    assert httpd.client_address(("10.0.0.5", 4242)) == "10.0.0.5"
    sockaddr = bytearray(b"\x02\x00\xe1\x90\x7f\x00\x00\x01" + bytes(8))
    assert httpd.client_address(sockaddr) == "127.0.0.1"
    assert httpd.same("abc", "abc") and not httpd.same("abc", "abd")
    assert not httpd.same("abc", "ab")


def test_every_status_line_has_its_own_reason_phrase():
    # issue 24 (14): 409 went out as "409 Status"; a status outside the table gets its class's
    # name (RFC 9110 15.1), never a made-up word
    for status, phrase in ((409, b"Conflict"), (406, b"Not Acceptable"), (100, b"Continue"),
                           (413, b"Content Too Large"), (507, b"Insufficient Storage"),
                           (418, b"Client Error"), (299, b"Successful"), (599, b"Server Error"),
                           (199, b"Informational"), (399, b"Redirection")):  # fmt: skip
        line = httpd.encode_response(status, {"error": "x"}).split(b"\r\n", 1)[0]
        assert line == b"HTTP/1.1 %d %s" % (status, phrase), line
        assert httpd.status_line(status).encode() == line + b"\r\n", status
    for status in httpd.REASONS:
        assert httpd.reason(status) == httpd.REASONS[status] != "Status", status
