# Frame encoder and streaming Decoder: chunking, rejection and resume rules, the 50 ms idle rule, counters.

from organbus import frame
from organbus import ticks
from organbus.crc16 import crc16_pure

UNIX_PORT = True

HB = b"\xaa\x03\x03\x00\x00\x60\xf0\x55"
ACK = b"\xaa\x03\x02\x00\x00\xa0\xa1\x55"
DISC = b"\xaa\x03\x04\x00\x00\xa1\x41\x55"
RESP0 = b"\xaa\x03\x11\x00\x01\x00\xac\x64\x55"
RESP1 = b"\xaa\x03\x11\x00\x01\x01\x6c\xa5\x55"
COUNTERS = (
    "frames",
    "bytes",
    "junk",
    "crc_errors",
    "bad_version",
    "oversize",
    "bad_eof",
    "abandoned",
    "unknown",
)


def _frame(ftype, payload):
    # independent reference encoder
    body = bytes([3, ftype, len(payload) >> 8, len(payload) & 0xFF]) + bytes(payload)
    c = crc16_pure(body)
    return b"\xaa" + body + bytes([c >> 8, c & 0xFF, 0x55])


class Sink:
    def __init__(self, handled=None):
        self.got = []
        if handled is None:
            self.dec = frame.Decoder(self.on_frame)
        else:
            self.dec = frame.Decoder(self.on_frame, handled)

    def on_frame(self, ftype, payload, n):
        self.got.append((ftype, bytes(payload[:n])))

    def feed_all(self, data, now=0, step=0):
        if step <= 0:
            self.dec.feed(data, now)
        else:
            for i in range(0, len(data), step):
                self.dec.feed(data[i : i + step], now)
        return self.got


def _check_counts(dec, msg, **want):
    c = dec.counters()
    for k in want:
        assert c[k] == want[k], "%s: counter %s is %r, want %r (all: %r)" % (
            msg,
            k,
            c[k],
            want[k],
            c,
        )


def _conserved(sink, msg):
    # after end of input every byte fed is either junk or part of a delivered frame
    c = sink.dec.counters()
    framed = 0
    for _, p in sink.got:
        framed += len(p) + 8
    assert c["bytes"] == c["junk"] + framed, "%s: bytes %d != junk %d + framed %d" % (
        msg,
        c["bytes"],
        c["junk"],
        framed,
    )


def test_type_constants():
    want = {
        "DESCRIPTOR": 0x01,
        "ACK": 0x02,
        "HEARTBEAT": 0x03,
        "DISCOVER": 0x04,
        "COMMAND": 0x10,
        "COMMAND_RESP": 0x11,
        "EVENT": 0x20,
        "DATA": 0x21,
    }
    for name in want:
        assert getattr(frame, name) == want[name], "frame.%s should be 0x%02X" % (name, want[name])
        assert frame.TYPE_NAMES[want[name]] == name, "TYPE_NAMES[0x%02X] should be %s" % (
            want[name],
            name,
        )
    assert frame.MAX_LEN == 512, "MAX_LEN is 512"
    assert frame.OVERHEAD == 8, "OVERHEAD is 8"


def test_prebuilt_frames():
    assert bytes(frame.ACK_FRAME) == ACK, "ACK_FRAME bytes"
    assert bytes(frame.HEARTBEAT_FRAME) == HB, "HEARTBEAT_FRAME bytes"
    assert bytes(frame.DISCOVER_FRAME) == DISC, "DISCOVER_FRAME bytes"
    assert bytes(frame.RESP_OK_FRAME) == RESP0, "RESP_OK_FRAME bytes"
    assert bytes(frame.RESP_FAIL_FRAME) == RESP1, "RESP_FAIL_FRAME bytes"


def test_encode():
    assert frame.encode(frame.HEARTBEAT) == HB, "encode(HEARTBEAT)"
    assert frame.encode(frame.COMMAND_RESP, b"\x00") == RESP0, "encode(COMMAND_RESP, 00)"
    for n in (0, 1, 2, 100, 511, 512):
        p = bytes(range(256)) * 2
        p = p[:n]
        got = frame.encode(0x21, p)
        assert got == _frame(0x21, p), "encode of a %d-byte payload" % n
        assert isinstance(got, bytes), "encode returns bytes"


def test_encode_payload_kinds():
    p = b"\x05hello"
    want = _frame(0x10, p)
    for buf in (p, bytearray(p), memoryview(p)):
        assert frame.encode(0x10, buf) == want, "encode from %s" % type(buf).__name__


def test_encode_into_offset_and_n():
    buf = bytearray(600)
    for i in range(len(buf)):
        buf[i] = 0xEE
    payload = b"\x05speak\x02hi-extra"
    k = frame.encode_into(buf, 0x10, payload, 9, 3)
    want = _frame(0x10, payload[:9])
    assert k == len(want), "encode_into returns the frame length, got %r" % k
    assert bytes(buf[3 : 3 + k]) == want, "encode_into wrote the wrong bytes"
    assert buf[0] == 0xEE and buf[1] == 0xEE and buf[2] == 0xEE, "bytes before off were touched"
    assert buf[3 + k] == 0xEE, "byte after the frame was touched"
    k = frame.encode_into(buf, frame.ACK)
    assert k == 8 and bytes(buf[:8]) == ACK, "encode_into(buf, ACK)"


def test_encode_refuses_oversize():
    for f in (
        lambda: frame.encode(0x21, bytes(513)),
        lambda: frame.encode_into(bytearray(600), 0x21, bytes(513)),
    ):
        try:
            f()
        except ValueError:
            continue
        raise AssertionError("a 513-byte payload must be refused with ValueError")


def test_encode_refuses_small_buffer():
    for size, off in ((10, 0), (13, 1), (13, -1)):
        buf = bytearray(size)
        try:
            frame.encode_into(buf, 0x21, bytes(5), -1, off)
        except ValueError:
            assert buf == bytearray(size), "a refused encode must not touch the buffer"
            continue
        raise AssertionError("encode_into must refuse %d bytes at %d" % (size, off))
    assert frame.encode_into(bytearray(13), 0x21, bytes(5)) == 13, "an exact fit is fine"


def test_encode_refuses_n_beyond_payload():
    try:
        frame.encode_into(bytearray(64), 0x21, b"abc", 10)
    except ValueError:
        return
    raise AssertionError("n larger than the payload must be refused (it would read past it)")


def test_decode_each_prebuilt():
    for f, t, p in (
        (HB, 3, b""),
        (ACK, 2, b""),
        (DISC, 4, b""),
        (RESP0, 17, b"\x00"),
        (RESP1, 17, b"\x01"),
    ):
        s = Sink()
        got = s.feed_all(f)
        assert got == [(t, p)], "decoding %r gave %r" % (f, got)
        _check_counts(s.dec, "one frame", frames=1, bytes=len(f), junk=0, unknown=0)


def test_any_chunk_size():
    frames = [
        (3, b""),
        (17, b"\x00"),
        (1, bytes(range(200))),
        (0x10, b"\x05speak\x03abc"),
        (2, b""),
    ]
    stream = b"".join(_frame(t, p) for t, p in frames)
    for step in (1, 2, 3, 5, 7, 8, 9, 64, 333, len(stream)):
        s = Sink()
        got = s.feed_all(stream, 0, step)
        assert got == frames, "chunk size %d gave %r" % (step, got)
        _check_counts(s.dec, "step %d" % step, frames=5, bytes=len(stream), junk=0)


def test_feed_n_limits_input():
    s = Sink()
    buf = bytearray(64)
    buf[: len(HB)] = HB
    buf[len(HB) : 2 * len(HB)] = ACK
    s.dec.feed(buf, 0, len(HB))
    assert s.got == [(3, b"")], "feed(buf, now, n) must take only buf[:n], got %r" % s.got
    _check_counts(s.dec, "n=8", bytes=8, frames=1)
    s.dec.feed(memoryview(buf)[8:], 0, 8)
    assert s.got == [(3, b""), (2, b"")], "second feed gave %r" % s.got


def test_payload_view_is_fixed_and_sized():
    views = []

    def cb(t, payload, n):
        views.append(payload)
        assert isinstance(payload, memoryview), "payload is a memoryview"
        assert len(payload) >= n, "payload view shorter than n"

    dec = frame.Decoder(cb)
    dec.feed(HB + RESP0 + _frame(1, b"xyz"), 0)
    assert len(views) == 3, "three frames expected, got %d" % len(views)
    assert views[0] is views[1] and views[1] is views[2], "payload view must be one fixed object"


def test_junk_before_and_between():
    s = Sink()
    stream = b"\x00\x55\x13garbage" + HB + b"\x01\x02" + RESP0 + b"zz"
    s.feed_all(stream)
    s.dec.flush()
    assert s.got == [(3, b""), (17, b"\x00")], "junk around frames gave %r" % s.got
    _check_counts(s.dec, "junk", frames=2, junk=len(stream) - 17, bytes=len(stream))
    _conserved(s, "junk")


def test_bad_version_resumes_after_sof():
    s = Sink()
    stream = b"\xaa\x02\x03\x00\x00\x60\xf0\x55" + HB
    s.feed_all(stream)
    assert s.got == [(3, b"")], "bad version then HB gave %r" % s.got
    _check_counts(s.dec, "bad version", bad_version=1, frames=1, junk=8, crc_errors=0)


def test_bad_crc_resumes_after_sof():
    s = Sink()
    stream = b"\xaa\x03\x03\x00\x00\x00\x00\x55" + RESP0
    s.feed_all(stream)
    assert s.got == [(17, b"\x00")], "bad CRC then RESP gave %r" % s.got
    _check_counts(s.dec, "bad crc", crc_errors=1, frames=1, junk=8)


def test_bad_eof_resumes_after_sof():
    s = Sink()
    stream = HB[:-1] + b"\x54" + HB
    s.feed_all(stream)
    assert s.got == [(3, b"")], "bad EOF then HB gave %r" % s.got
    _check_counts(s.dec, "bad eof", bad_eof=1, frames=1, junk=8)


def test_oversize_resumes_after_sof():
    s = Sink()
    stream = b"\xaa\x03\x01\x02\x01" + HB
    s.feed_all(stream)
    assert s.got == [(3, b"")], "oversize then HB gave %r" % s.got
    _check_counts(s.dec, "oversize", oversize=1, frames=1, junk=5)


def test_max_len_frame():
    p = bytes((i * 7) & 0xFF for i in range(512))
    s = Sink()
    s.feed_all(b"\xaa" + _frame(0x21, p) + HB, 0, 13)
    assert s.got == [(0x21, p), (3, b"")], "a 512-byte payload must be legal"
    _check_counts(s.dec, "max len", oversize=0, frames=2, junk=1, bad_version=1)


def test_sof_inside_corrupt_body():
    # the real SOF sits inside the bytes a corrupt header claimed: found without waiting
    s = Sink()
    s.feed_all(b"\xaa\x03\x01\x00\x05" + HB)
    assert s.got == [(3, b"")], "SOF inside a claimed body gave %r" % s.got


def test_sof_bytes_inside_payload():
    p = b"\xaa\xaa\x03\x00\x00\x55"
    s = Sink()
    s.feed_all(b"\xaa" + _frame(0x7E, p), 0, 1)
    assert s.got == [(0x7E, p)], "0xAA inside a payload gave %r" % s.got
    _check_counts(s.dec, "aa in payload", unknown=1, frames=1, junk=1)


def test_unknown_type_counted_and_passed():
    s = Sink()
    s.feed_all(_frame(0x7E, b"") + _frame(0x21, b"d") + HB)
    assert [t for t, _ in s.got] == [0x7E, 0x21, 3], "all legal frames are handed over: %r" % s.got
    _check_counts(s.dec, "unknown", unknown=1, frames=3)


def test_handled_types():
    s = Sink(handled=(frame.HEARTBEAT, frame.COMMAND_RESP))
    s.feed_all(HB + ACK + RESP0 + _frame(1, b"x"))
    _check_counts(s.dec, "handled", unknown=2, frames=4)
    assert len(s.got) == 4, "unknown frames still reach on_frame"


def test_idle_abandons_incomplete_candidate():
    # corrupt header claims 300 bytes; the good frame inside waits until the line is quiet
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\x2c" + HB, 1000)
    assert s.got == [], "nothing can be decided before the line goes quiet"
    s.dec.idle(1049)
    assert s.got == [], "49 ms of quiet is not 50"
    _check_counts(s.dec, "49 ms", abandoned=0)
    s.dec.idle(1050)
    assert s.got == [(3, b"")], "after 50 ms the candidate is abandoned and HB found: %r" % s.got
    _check_counts(s.dec, "50 ms", abandoned=1, junk=5, frames=1, bytes=13)
    _conserved(s, "abandon")


def test_only_an_empty_read_makes_a_quiet_line():
    # Bytes read after a gap may have waited in the UART while the reader was held up, so a
    # gap between two reads with data is no quiet line: the frame in progress is completed.
    s = Sink()
    s.dec.feed(HB[:5], 0)
    s.dec.feed(HB[5:], 200)
    assert s.got == [(3, b"")], "a late second read must not cost the frame: %r" % s.got
    _check_counts(s.dec, "late read", abandoned=0, junk=0)
    # An empty read 50 ms after the last byte is a quiet line: the corrupt header goes and
    # the heartbeat it swallowed comes out.
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\x2c", 0)
    s.dec.feed(HB, 30)
    assert s.got == [], "no empty read yet, nothing abandoned: %r" % s.got
    s.dec.idle(79)
    assert s.got == [], "49 ms of quiet is not 50: %r" % s.got
    s.dec.idle(80)
    assert s.got == [(3, b"")], "the empty read abandons the old candidate: %r" % s.got
    _check_counts(s.dec, "gap", abandoned=1, junk=5)


def test_no_gap_no_abandon():
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\x2c", 0)
    s.dec.feed(HB, 20)
    s.dec.feed(b"\x00" * 10, 45)
    assert s.got == [], "bytes kept arriving: the candidate is still open, got %r" % s.got
    _check_counts(s.dec, "no gap", abandoned=0)
    s.dec.idle(89)
    assert s.got == [], "quiet is measured from the last byte (45), not the first"
    _check_counts(s.dec, "no gap", abandoned=0)


def test_old_candidate_abandoned_while_bytes_trickle():
    # a corrupt header claiming 300 bytes must not hold heartbeats that keep coming 30 ms apart
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\x2c", 0)
    s.dec.feed(HB, 30)
    s.dec.feed(HB, 60)
    s.dec.idle(89)
    assert s.got == [], "89 ms: the candidate may still be a frame on its way"
    s.dec.idle(90)
    assert s.got == [(3, b""), (3, b"")], "90 ms after its SOF it is abandoned: %r" % s.got
    _check_counts(s.dec, "age", abandoned=1, junk=5, frames=2)
    s.dec.feed(HB, 91)
    assert len(s.got) == 3, "later frames flow again"


def test_age_counts_from_the_read_of_its_sof():
    # a candidate found by a rescan is as old as the read that brought its SOF (here 80 ms, not
    # the corrupt header's 0): a long frame still arriving is kept
    desc = b"\x5a" * 300
    whole = b"\xaa\x03\x01" + bytes([len(desc) >> 8, len(desc) & 0xFF]) + desc
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x00\x20", 0)  # claims 32 bytes: complete (and bad) at t=80
    s.dec.feed(b"\x00" * 20, 40)
    s.dec.feed(whole[:20], 80)  # completes the corrupt one; a real frame starts inside
    assert s.dec.counters()["bad_eof"] + s.dec.counters()["crc_errors"] == 1, s.dec.counters()
    s.dec.feed(whole[20:200], 120)
    s.dec.feed(whole[200:], 160)
    full = _frame(1, desc)
    s.dec.feed(full[len(whole) :], 165)
    assert s.got == [(1, desc)], "the frame found by the rescan at 80 is complete at 165: %r" % [
        (t, len(p)) for t, p in s.got
    ]
    _check_counts(s.dec, "rescan age", abandoned=0)


def test_empty_feed_is_an_idle_poll():
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\x2c" + HB, 0)
    s.dec.feed(b"", 49)
    assert s.got == [], "an empty read before 50 ms changes nothing"
    s.dec.feed(bytearray(8), 50, 0)
    assert s.got == [(3, b"")], "an empty read after 50 ms of quiet applies the idle rule"
    _check_counts(s.dec, "empty feed", bytes=13, abandoned=1)


def test_slow_frame_is_abandoned():
    # a frame whose last byte comes more than 50 ms after the rest (the reader's empty polls
    # saw the quiet line) is not a frame
    s = Sink()
    s.dec.feed(HB[:7], 0)
    s.dec.idle(60)
    s.dec.feed(HB[7:], 80)
    s.dec.flush()
    assert s.got == [], "a frame with a 80 ms hole must not be delivered: %r" % s.got
    _check_counts(s.dec, "slow", abandoned=1, frames=0, junk=8)


def test_lone_sof_then_idle_then_frame():
    s = Sink()
    s.dec.feed(b"\xaa", 0)
    s.dec.idle(50)
    s.dec.feed(HB, 100)
    assert s.got == [(3, b"")], "lone SOF, idle, frame gave %r" % s.got
    _check_counts(s.dec, "lone sof", abandoned=1, junk=1, frames=1)


def test_flush_decides_everything():
    # nested corrupt headers: flush must abandon repeatedly until nothing is pending
    s = Sink()
    stream = b"\xaa\x03\x10\x01\x2c\xaa\x03\x10\x00\x40" + HB + b"\xaa\x03"
    s.dec.feed(stream, 5)
    s.dec.flush()
    assert s.got == [(3, b"")], "flush gave %r" % s.got
    _check_counts(s.dec, "flush", abandoned=3, frames=1)
    _conserved(s, "flush")


def test_idle_without_pending_is_harmless():
    s = Sink()
    s.dec.idle(0)
    s.dec.idle(100000)
    s.dec.feed(HB, 100010)
    s.dec.idle(200000)
    assert s.got == [(3, b"")], "idle with nothing pending gave %r" % s.got
    _check_counts(s.dec, "idle", abandoned=0, junk=0, frames=1)


def test_big_chunk_of_noise_then_frame():
    noise = bytearray(3000)
    x = 7
    for i in range(len(noise)):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        noise[i] = (x >> 16) & 0xFF
    s = Sink()
    s.dec.feed(bytes(noise) + HB, 0)
    s.dec.flush()
    assert s.got[-1:] == [(3, b"")], (
        "a heartbeat after 3000 noise bytes must arrive: %r" % s.got[-2:]
    )
    _conserved(s, "noise")
    c = s.dec.counters()
    assert c["bytes"] == 3008, "bytes counts every byte fed: %r" % c


def test_counters_dict_and_attributes():
    s = Sink()
    s.feed_all(b"\x01" + HB)
    c = s.dec.counters()
    for k in COUNTERS:
        assert k in c, "counters() lacks %s" % k
        assert getattr(s.dec, k) == c[k], "attribute %s differs from counters()" % k
    assert c["junk"] == 1 and c["frames"] == 1 and c["bytes"] == 9, "counters %r" % c


# ticks_add(0, -d) crosses the wrap of the interpreter running the test (2**30 on CPython through
# organbus.ticks and on the C6, 2**62 on the 64-bit unix port); (1 << 30) - d is the board's wrap
# given explicitly, which the unix port passes without wrapping.
def _wrap_starts(d):
    return sorted(set([ticks.ticks_add(0, -d), ticks.ticks_add((1 << 30) - 1, 1 - d)]))


def test_ticks_wrap():
    # a 50 ms gap across the wrap still counts as quiet, and 49 ms does not
    for start in _wrap_starts(20):
        s = Sink()
        s.dec.feed(b"\xaa\x03\x10\x01\x2c" + HB, start)
        s.dec.idle(ticks.ticks_add(start, 49))
        assert s.got == [], "start %d: 49 ms across the wrap is not quiet" % start
        s.dec.idle(ticks.ticks_add(start, 50))
        assert s.got == [(3, b"")], "start %d: idle across the tick wrap gave %r" % (start, s.got)


def test_age_rule_across_the_tick_wrap():
    # a chain of corrupt headers read at -30 ms, junk every 10 ms across the wrap: all of them go
    # 90 ms after their read, and one read after the wrap keeps its own age
    for start in _wrap_starts(30):
        s = Sink()
        s.dec.feed(b"\xaa\x03\x10\x01\xff" * 3 + HB, start)
        s.dec.feed(b"\x00\xaa\x03\x10\x01\xff", ticks.ticks_add(start, 40))
        s.dec.feed(RESP0, ticks.ticks_add(start, 50))
        t = 50
        while len(s.got) < 1 and t < 300:
            t += 10
            s.dec.feed(b"\x00", ticks.ticks_add(start, t))
        assert s.got == [(3, b"")] and t == 90, "start %d: %r at %d ms" % (start, s.got, t)
        while len(s.got) < 2 and t < 300:
            t += 10
            s.dec.feed(b"\x00", ticks.ticks_add(start, t))
        assert s.got[1:] == [(17, b"\x00")] and t == 130, "start %d: %r at %d" % (start, s.got, t)
        _check_counts(s.dec, "age across the wrap", abandoned=4, frames=2)


def test_idle_abandons_every_stale_candidate():
    # two nested corrupt headers: once the line is quiet, neither may hold the heartbeat back
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\x2c\xaa\x03\x10\x00\x40" + HB, 0)
    s.dec.idle(50)
    assert s.got == [(3, b"")], "idle must abandon every stale candidate, got %r" % s.got
    _check_counts(s.dec, "nested idle", abandoned=2, junk=10, frames=1)
    assert s.dec.pending() == 0, "nothing stays pending after a quiet line"


def test_empty_read_after_gap_abandons_every_stale_candidate():
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\x2c\xaa\x03\x10\x00\x40", 0)
    s.dec.idle(60)
    s.dec.feed(HB, 60)
    assert s.got == [(3, b"")], "bytes after a quiet gap start clean, got %r" % s.got
    _check_counts(s.dec, "nested gap", abandoned=2, junk=10, frames=1)


def test_on_frame_exception_does_not_disturb_the_decoder():
    got = []

    def cb(t, payload, n):
        got.append((t, bytes(payload[:n])))
        if len(got) == 1:
            raise KeyError("receiver bug")

    dec = frame.Decoder(cb)
    try:
        dec.feed(HB + RESP0 + b"\x00" + ACK, 0)
    except KeyError as e:
        assert "receiver bug" in str(e), "the callback's own exception comes out"
    else:
        raise AssertionError("an exception in on_frame must not be swallowed")
    assert got == [(3, b""), (17, b"\x00"), (2, b"")], (
        "the rest of the chunk still came out: %r" % got
    )
    dec.feed(DISC, 1)
    assert got[-1] == (4, b""), "the decoder goes on"
    c = dec.counters()
    assert c["frames"] == 4 and c["junk"] == 1 and c["bytes"] == 34, "counters %r" % c


def test_bad_version_refused_at_once():
    # "AA 00" at the end of a burst: refused when its VER byte comes, not after 50 ms of quiet
    s = Sink()
    s.dec.feed(b"\x01\xaa\x00", 0)
    assert s.dec.pending() == 0, "nothing is held for a wrong VER"
    _check_counts(s.dec, "early ver", bad_version=1, junk=3, abandoned=0)
    s.dec.feed(b"\xaa", 1)
    s.dec.feed(b"\x03", 2)
    assert s.dec.pending() == 2, "AA 03 is a candidate until LEN says otherwise"


def _paced_chain(headers, poll_ms, limit=400):
    # Issue 17 item 1: `headers` corrupt headers, then a heartbeat, all in one read at t=0; after
    # that one junk byte every poll_ms. Returns when the heartbeat came out (ms), or -1.
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\xff" * headers + HB, 0)
    t = 0
    while not s.got and t < limit:
        t += poll_ms
        s.dec.feed(b"\x00", t)
    return t if s.got == [(3, b"")] else -1


def test_a_chain_of_corrupt_headers_delays_no_frame_past_the_bound():
    # Every header of the chain came in the read that brought the heartbeat: each one's age counts
    # from that read, not from when the rescan found it, so all of them go at 90 ms together.
    for headers in (1, 2, 3, 7):
        for poll_ms in (10, 1):
            at = _paced_chain(headers, poll_ms)
            assert (
                0 <= at <= 100
            ), "%d headers, %d ms polls: heartbeat out at %d ms, want <= 100" % (
                headers,
                poll_ms,
                at,
            )
            assert at >= 90, "%d headers: out at %d ms, before the 90 ms age" % (headers, at)


def test_a_chain_spread_over_reads_keeps_each_headers_own_age():
    # Headers that came in different reads are each abandoned 90 ms after their own read: the one
    # read at 40 ms is not old at 90 ms, so the heartbeat behind it waits until 130 ms.
    s = Sink()
    s.dec.feed(b"\xaa\x03\x10\x01\xff", 0)
    s.dec.feed(b"\x00\xaa\x03\x10\x01\xff", 40)
    s.dec.feed(HB, 60)
    for t in range(70, 130, 10):
        s.dec.feed(b"\x00", t)
        assert s.got == [], "at %d ms the second header (read at 40) is younger than 90 ms" % t
    s.dec.feed(b"\x00", 130)
    assert s.got == [(3, b"")], "the second header goes 90 ms after its own read: %r" % s.got
    _check_counts(s.dec, "spread chain", abandoned=2)


def test_on_frame_exception_in_the_time_rules():
    # Frames that come out of an abandoned candidate (idle's quiet and age rules, flush) may
    # raise in on_frame too: every one still comes out, and the first exception is raised.
    for rule in ("quiet", "age", "flush"):
        got = []

        def cb(t, payload, n):
            got.append(t)
            if len(got) <= 2:
                raise ValueError("receiver bug %d" % len(got))

        dec = frame.Decoder(cb)
        dec.feed(b"\xaa\x03\x10\x01\x2c" + HB + RESP0 + b"\xaa\x03\x10\x00\x40" + ACK, 0)
        try:
            if rule == "quiet":
                dec.idle(50)
            elif rule == "age":
                dec.feed(b"\x00", 60)
                dec.idle(90)
            else:
                dec.flush()
        except ValueError as e:
            assert "receiver bug 1" in str(e), "%s: the first exception comes out: %r" % (rule, e)
        else:
            raise AssertionError("%s: an exception in on_frame must not be swallowed" % rule)
        assert got == [3, 17, 2], "%s: every frame behind came out: %r" % (rule, got)
        assert dec.pending() == 0, "%s: nothing is left pending" % rule
        _check_counts(dec, rule, frames=3, abandoned=2)
        dec.feed(DISC, 200)
        assert got[-1] == 4, "%s: the decoder goes on" % rule


def test_idle_returns_what_is_pending():
    s = Sink()
    assert s.dec.idle(0) == 0, "nothing pending"
    s.dec.feed(b"\xaa\x03\x10\x00\x05\x01", 0)
    assert s.dec.idle(10) == 6 == s.dec.pending(), "a candidate of 6 bytes is pending"
    assert s.dec.idle(50) == 0 == s.dec.pending(), "the quiet rule took it"
