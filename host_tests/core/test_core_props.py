# Property tests (hypothesis, CPython) of the frame Decoder: chunking, junk and bit flips, the 100 ms
# delivery bound, and the Decoder against a small reference model written straight from PROTOCOL.md.
# A frame that appears but was not sent is a CRC collision: counted, verified and reported, not hidden.
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from organbus import frame
from organbus.crc16 import crc16_pure

COUNTERS = frame.COUNTER_NAMES
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODEC_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# examples run, decoded frames that were not sent (verified collisions)
STATS = {"junk_examples": 0, "collisions": 0, "frames_checked": 0}


@pytest.fixture(scope="module", autouse=True)
def _report_collisions(request):
    yield
    line = (
        "test_core_props: %d CRC collision(s) in %d junk/bit-flip examples (%d frames checked); "
        "each one verified as a legal frame present in the stream"
        % (STATS["collisions"], STATS["junk_examples"], STATS["frames_checked"])
    )
    tr = request.config.pluginmanager.getplugin("terminalreporter")
    cm = request.config.pluginmanager.getplugin("capturemanager")
    if tr is not None and cm is not None:
        with cm.global_and_fixture_disabled():  # shown even without -s
            tr.write_line("")
            tr.write_line(line)
    else:
        print(line)


def ref_frame(ftype, payload):
    body = bytes([3, ftype, len(payload) >> 8, len(payload) & 0xFF]) + bytes(payload)
    c = crc16_pure(body)
    return b"\xaa" + body + bytes([c >> 8, c & 0xFF, 0x55])


class RefDecoder:
    """The receiving rules of PROTOCOL.md section 2, written for clarity, not speed. Every pending
    byte keeps the time of the read that brought it; a candidate's age is its SOF's."""

    def __init__(self):
        self.pending = bytearray()
        self.times = []  # arrival of each pending byte
        self.last = 0  # when the last byte came
        self.frames = []
        self.c = dict.fromkeys(COUNTERS, 0)

    def feed(self, data, now):
        if not data:
            self.idle(now)
            return
        self.last = now  # bytes that come in are no evidence of quiet: that is idle()'s
        self.c["bytes"] += len(data)
        self.pending += data
        self.times += [now] * len(data)
        self._scan()
        self._age(now)  # still incomplete after the read

    def _age(self, now):
        # a candidate cannot take 90 ms at 115200 baud: abandon every one that old
        while self.pending and now - self.times[0] >= 90:
            self.c["abandoned"] += 1
            self._drop(1)
            self._scan()

    def idle(self, now):
        if self.pending:
            if now - self.last >= 50:  # quiet line: everything held is stale
                self.flush()
            else:
                self._age(now)

    def flush(self):
        while self.pending:
            # what is pending is an incomplete candidate: abandon it, rescan after its SOF
            self.c["abandoned"] += 1
            self._drop(1)
            self._scan()

    def _drop(self, k, junk=True):
        if junk:
            self.c["junk"] += k
        del self.pending[:k]
        del self.times[:k]

    def _scan(self):
        p = self.pending
        while p:
            i = p.find(b"\xaa")
            if i < 0:
                i = len(p)
            self._drop(i)
            if not p:
                return
            if len(p) < 2:
                return
            if p[1] != 3:  # refused as soon as VER is there
                self.c["bad_version"] += 1
            elif len(p) < 5:
                return
            else:
                n = (p[3] << 8) | p[4]
                if n > 512:
                    self.c["oversize"] += 1
                elif len(p) < n + 8:
                    return
                elif p[n + 7] != 0x55:
                    self.c["bad_eof"] += 1
                elif crc16_pure(p, 0xFFFF, 1, n + 5) != (p[n + 5] << 8) | p[n + 6]:
                    self.c["crc_errors"] += 1
                else:
                    self.c["frames"] += 1
                    if p[2] not in frame.TYPE_NAMES:
                        self.c["unknown"] += 1
                    self.frames.append((p[2], bytes(p[5 : 5 + n])))
                    self._drop(n + 8, junk=False)
                    continue
            self._drop(1)


class Sink:
    def __init__(self):
        self.got = []
        self.now = 0
        self.dec = frame.Decoder(self.on_frame)

    def on_frame(self, t, payload, n):
        self.got.append((t, bytes(payload[:n]), self.now))


# ---- strategies

types = st.sampled_from([1, 2, 3, 4, 0x10, 0x11, 0x20, 0x21]) | st.integers(0, 255)
payloads = st.one_of(
    st.binary(max_size=16),
    st.binary(max_size=512),
    st.lists(st.sampled_from([0xAA, 0x03, 0x55, 0x00]), max_size=40).map(bytes),
)
frames_st = st.lists(st.tuples(types, payloads), max_size=8)
junk_st = st.lists(
    st.sampled_from([0xAA, 0x03, 0x55, 0x00, 0x02, 0x01]) | st.integers(0, 255), max_size=30
).map(bytes)


def _cuts(draw, n):
    return sorted(set(draw(st.lists(st.integers(0, n), max_size=12))))


def _chunks(data, cuts):
    out = []
    prev = 0
    for c in cuts + [len(data)]:
        out.append(data[prev:c])
        prev = c
    return [c for c in out if c]


@SETTINGS
@given(st.data())
def test_any_chunking_gives_the_same_frames(data):
    sent = data.draw(frames_st)
    stream = b"".join(ref_frame(t, p) for t, p in sent)
    cuts = _cuts(data.draw, len(stream))
    s = Sink()
    for chunk in _chunks(stream, cuts):
        s.dec.feed(chunk, 0)
    assert [(t, p) for t, p, _ in s.got] == sent, "chunking at %r changed the frames" % cuts
    c = s.dec.counters()
    assert c["frames"] == len(sent) and c["junk"] == 0 and c["bytes"] == len(stream), c
    assert s.dec.pending() == 0, "nothing is left pending after whole frames"


def check_not_sent(sent, intact, stream, got):
    """Match decoded frames against what was sent; return the verified collisions.

    A decoded frame is either the next intact sent frame (in order), or it was not sent: then
    it must be a legal frame that really is in the stream bytes (a CRC collision: a corrupted
    stretch that still passes every check), and it is counted. Any intact sent frame not
    delivered must overlap such a collision."""
    j = 0
    matched = [False] * len(sent)
    collisions = []
    for t, p in got:
        k = j
        while k < len(sent) and not (intact[k] and sent[k][0][:2] == (t, p)):
            k += 1
        if k < len(sent):
            matched[k] = True
            j = k + 1
            continue
        raw = ref_frame(t, p)
        at = stream.find(raw)
        assert at >= 0, "decoded %r is neither sent nor a legal frame in the stream" % ((t, p),)
        collisions.append((at, at + len(raw)))
    for k, ((t, p), (a, b)) in enumerate(sent):
        if intact[k] and not matched[k]:
            hit = any(a < cb and ca < b for ca, cb in collisions)
            assert hit, "intact frame %d %r at %d..%d was not delivered" % (k, (t, p[:8]), a, b)
    return collisions


@SETTINGS
@given(st.data())
def test_junk_and_bit_flips_never_invent_frames(data):
    pieces = data.draw(st.lists(st.tuples(types, payloads, junk_st), min_size=1, max_size=8))
    stream = bytearray()
    sent = []
    for t, p, junk in pieces:
        stream += junk
        a = len(stream)
        stream += ref_frame(t, p)
        sent.append(((t, p), (a, len(stream))))
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, len(stream) - 1), st.integers(0, 7)), max_size=6)
    )
    for i, bit in flips:
        stream[i] ^= 1 << bit
    stream = bytes(stream)
    intact = []
    for (t, p), (a, b) in sent:
        intact.append(stream[a:b] == ref_frame(t, p))
    s = Sink()
    for chunk in _chunks(stream, _cuts(data.draw, len(stream))):
        s.dec.feed(chunk, 0)
    s.dec.flush()
    got = [(t, p) for t, p, _ in s.got]
    collisions = check_not_sent(sent, intact, stream, got)
    STATS["junk_examples"] += 1
    STATS["frames_checked"] += len(got)
    STATS["collisions"] += len(collisions)
    if collisions:
        event("CRC collision")
    c = s.dec.counters()
    framed = sum(len(p) + 8 for _, p in got)
    assert c["bytes"] == c["junk"] + framed, "every byte is junk or framed: %r" % c


def test_collision_accounting_sees_a_real_collision():
    # a corruption the CRC cannot see: another 3-byte payload with the same CRC (for each
    # first byte exactly one 2-byte tail gives any wanted CRC)
    sent_p = b"\x12\x34\x56"
    want = ref_frame(0x10, sent_p)
    crc = (want[-3] << 8) | want[-2]
    other = None
    for v in range(65536):
        p = bytes([0x99, v >> 8, v & 0xFF])
        if crc16_pure(bytes([3, 0x10, 0, 3]) + p) == crc:
            other = p
            break
    assert other is not None, "CRC-16 must have a colliding 3-byte payload"
    wire = want[:5] + other + want[8:]
    assert wire != want and ref_frame(0x10, other) == wire, "the corrupted frame is legal"
    stream = b"\x00" + wire + ref_frame(3, b"")
    s = Sink()
    s.dec.feed(stream, 0)
    got = [(t, p) for t, p, _ in s.got]
    sent = [((0x10, sent_p), (1, 12)), ((3, b""), (12, 20))]
    collisions = check_not_sent(sent, [False, True], stream, got)
    assert collisions == [(1, 12)], "the corrupted frame must be counted as a collision: %r" % got


@SETTINGS
@given(
    st.integers(1, 512),
    st.lists(st.tuples(types, st.binary(max_size=40)), min_size=1, max_size=6),
    st.integers(1, 60),
    st.integers(0, 9),
)
def test_frames_behind_a_corrupt_header_arrive_within_100ms(claimed, good, step, phase):
    # PROTOCOL.md section 2: every valid frame that follows a corrupt header is delivered within
    # 100 ms of its own last byte. A header claiming `claimed` bytes, then good frames `step` ms
    # apart; the reader polls every 10 ms: feed() when bytes came, idle() when none did.
    due = [(phase + k * step, ref_frame(t, p)) for k, (t, p) in enumerate(good)]
    s = Sink()
    s.dec.feed(bytes([0xAA, 0x03, 0x10, claimed >> 8, claimed & 0xFF]), 0)
    last_byte = {}
    now = 0
    k = 0
    while now < due[-1][0] + 200:
        now += 10
        s.now = now
        chunk = b""
        while k < len(due) and due[k][0] <= now:
            chunk += due[k][1]
            last_byte[k] = now
            k += 1
        if chunk:
            s.dec.feed(chunk, now)
        else:
            s.dec.idle(now)
    delivered = [(t, p) for t, p, _ in s.got]
    assert delivered == good, "frames behind the corrupt header: %r" % delivered
    for k, (_, _, at) in enumerate(s.got):
        assert at - last_byte[k] <= 100, "frame %d came %d ms after its last byte" % (
            k,
            at - last_byte[k],
        )


BYTE_MS = 10 / 115.2  # one byte at 115200 8N1
header_st = st.tuples(st.integers(0, 600), types).map(
    lambda h: bytes([0xAA, 0x03, h[1], h[0] >> 8, h[0] & 0xFF])
)
paced_st = st.lists(
    st.tuples(
        st.integers(0, 120),  # ms of silence before this piece
        st.lists(header_st, max_size=9),  # a chain of corrupt headers
        junk_st,
        st.tuples(types, st.one_of(st.binary(max_size=24), st.binary(max_size=512))),
    ),
    min_size=1,
    max_size=8,
)


def _paced_run(pieces, poll_ms):
    # The stream on a 115200 8N1 line; a reader that polls every poll_ms takes every byte that
    # has arrived (feed at the poll's time) or, when none has, calls idle().
    stream = bytearray()
    arrive = []  # ms of each byte's arrival on the line
    sent = []
    t = 0.0
    for gap, headers, junk, (ftype, payload) in pieces:
        t += gap
        for part in headers + [junk]:
            for b in part:
                stream.append(b)
                arrive.append(t)
                t += BYTE_MS
        a = len(stream)
        for b in ref_frame(ftype, payload):
            stream.append(b)
            arrive.append(t)
            t += BYTE_MS
        sent.append(((ftype, payload), (a, len(stream))))
    s = Sink()
    read_at = []  # poll time at which each byte was fed
    i = 0
    now = 0
    while i < len(stream) or now < arrive[-1] + 200:
        now += poll_ms
        s.now = now
        j = i
        while j < len(stream) and arrive[j] <= now:
            j += 1
        if j > i:
            s.dec.feed(bytes(stream[i:j]), now)
            read_at += [now] * (j - i)
            i = j
        else:
            s.dec.idle(now)
    return bytes(stream), sent, s.got, read_at


@SETTINGS
@given(paced_st)
def test_header_chains_hold_no_frame_past_100ms(pieces):
    # PROTOCOL.md section 2 against chains of corrupt headers of any length, in random streams
    # paced at line rate, with the reader polling every 10 ms and every 1 ms: each legal frame
    # sent is delivered within 100 ms of the read that took its last byte.
    for poll_ms in (10, 1):
        stream, sent, got, read_at = _paced_run(pieces, poll_ms)
        intact = [True] * len(sent)
        check_not_sent(sent, intact, stream, [(t, p) for t, p, _ in got])
        k = 0
        for t, p, at in got:
            while k < len(sent) and sent[k][0] != (t, p):
                k += 1
            if k == len(sent):
                continue  # a collision, already verified as a legal frame in the stream
            last = read_at[sent[k][1][1] - 1]
            assert at - last <= 100, "%d ms polls: frame %d out %d ms after its last byte" % (
                poll_ms,
                k,
                at - last,
            )
            k += 1


events_st = st.lists(
    st.one_of(
        st.tuples(st.just("f"), st.integers(0, 60), st.binary(min_size=1, max_size=30)),
        st.tuples(st.just("F"), st.integers(0, 60), st.tuples(types, payloads)),
        st.tuples(st.just("c"), st.integers(0, 60), st.integers(0, 600)),
        st.tuples(st.just("i"), st.integers(0, 80), st.none()),
    ),
    max_size=25,
)


@SETTINGS
@given(events_st)
def test_decoder_matches_reference_model(events):
    # random bytes, whole frames, corrupt headers and idle polls, with time moving on
    s = Sink()
    ref = RefDecoder()
    now = 0
    for kind, dt, arg in events:
        now += dt
        if kind == "i":
            s.dec.idle(now)
            ref.idle(now)
            continue
        if kind == "f":
            data = arg
        elif kind == "F":
            data = ref_frame(*arg)
        else:
            data = bytes([0xAA, 0x03, 0x10, arg >> 8, arg & 0xFF])
        s.dec.feed(data, now)
        ref.feed(data, now)
        assert [(t, p) for t, p, _ in s.got] == ref.frames, "frames differ after %s at %d" % (
            kind,
            now,
        )
    s.dec.flush()
    ref.flush()
    assert [(t, p) for t, p, _ in s.got] == ref.frames, "frames differ after the end"
    assert s.dec.counters() == ref.c, "counters differ:\n%r\n%r" % (s.dec.counters(), ref.c)


# ---- codecs: round trips, and any bytes get a reason, never a crash

import math  # noqa: E402
import struct  # noqa: E402

from organbus import command  # noqa: E402
from organbus import descriptor  # noqa: E402

lower = "abcdefghijklmnopqrstuvwxyz"
ident = st.builds(
    lambda a, b: a + b,
    st.sampled_from(lower),
    st.text(alphabet=lower + "0123456789_", max_size=14),
)
f32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


def _signed_zero(draw, v):
    # a zero bound may come as -0.0 (f32 80000000), which must survive decode and encode too
    return -0.0 if v == 0 and draw(st.booleans()) else v


# f32 bit patterns a mutation writes over any 4 bytes: signed zeros, subnormals, integral and
# non-integral values, the largest f32, infinities, NaNs, or any bits at all
F32_PATTERNS = st.sampled_from(
    [0x80000000, 0x00000000, 0x80000001, 0x00000001, 0x3F800000, 0xBF800000, 0x3F000000]
    + [0x4B800001, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001]
) | st.integers(0, 2**32 - 1)


@st.composite
def params_st(draw):
    out = []
    names = draw(st.lists(ident, unique=True, max_size=6))
    text_at = len(names) - 1 if names and names[-1] == "text" else -1
    for i, name in enumerate(names):
        if name == "text" and i != text_at:
            continue
        if i == text_at:
            lo = _signed_zero(draw, draw(st.integers(0, 240)))
            out.append(
                {
                    "name": "text",
                    "type": "string",
                    "min": lo,
                    "max": draw(st.integers(lo, 240)),
                    "unit": "",
                }
            )
            continue
        kind = draw(st.sampled_from(["int", "float", "bool"]))
        if kind == "bool":
            lo, hi = draw(st.sampled_from([(0, 0), (0, 1), (1, 1)]))
            lo, hi = _signed_zero(draw, lo), _signed_zero(draw, hi)
        elif kind == "int":
            lo = draw(st.integers(-(2**20), 2**20))
            hi = draw(st.integers(lo, 2**21))
            lo, hi = _signed_zero(draw, lo), _signed_zero(draw, hi)
        else:
            a, b = draw(f32s), draw(f32s)
            lo, hi = min(a, b), max(a, b)
            lo, hi = lo + 0.0, hi + 0.0  # floats, -0.0 kept
        unit = draw(st.text(max_size=3).filter(lambda u: len(u.encode()) <= 7))
        out.append({"name": name, "type": kind, "min": lo, "max": hi, "unit": unit})
    return out


@st.composite
def descriptor_st(draw):
    caps = []
    for name in draw(
        st.lists(ident.filter(lambda n: len(n) <= 23), unique=True, min_size=1, max_size=8)
    ):
        exec_type = draw(st.sampled_from(descriptor.EXEC_TYPES))
        caps.append(
            {
                "name": name,
                "description": draw(
                    st.text(min_size=1, max_size=20).filter(lambda d: 1 <= len(d.encode()) <= 63)
                ),
                "exec_type": exec_type,
                "resource_group": draw(st.text(alphabet=lower + "_0123456789", max_size=15)),
                "max_duration_ms": (
                    0 if exec_type == "immediate" else draw(st.integers(0, 2**32 - 1))
                ),
                "params": draw(params_st()),
            }
        )
    return {
        "module_id": draw(
            st.text(alphabet=lower + lower.upper() + "0123456789_", min_size=1, max_size=15)
        ),
        "module_type": draw(st.text(alphabet=lower + "0123456789_", min_size=1, max_size=15)),
        "hw_version": draw(st.integers(0, 0xFFFF)),
        "fw_version": draw(st.integers(0, 0xFFFF)),
        "capabilities": caps,
    }


def _same_bound(a, b):
    return struct.pack(">f", a) == struct.pack(">f", b)


@CODEC_SETTINGS
@given(descriptor_st())
def test_descriptor_round_trip(d):
    p = descriptor.encode_descriptor(d)
    back = descriptor.decode_descriptor(p)
    assert descriptor.encode_descriptor(back) == p, "decode then encode changed the bytes"
    for c0, c1 in zip(d["capabilities"], back["capabilities"]):
        for k in ("name", "description", "exec_type", "resource_group", "max_duration_ms"):
            assert c0[k] == c1[k], k
        for p0, p1 in zip(c0["params"], c1["params"]):
            assert (
                p0["name"] == p1["name"] and p0["type"] == p1["type"] and p0["unit"] == p1["unit"]
            )
            assert _same_bound(p0["min"], p1["min"]) and _same_bound(p0["max"], p1["max"]), (p0, p1)


@CODEC_SETTINGS
@given(
    st.one_of(st.binary(max_size=300), descriptor_st().map(descriptor.encode_descriptor)), st.data()
)
def test_any_bytes_decode_or_get_a_reason(payload, data):
    # mutate a valid payload a little, or take random bytes: a dict or a DescriptorError
    b = bytearray(payload)
    for _ in range(data.draw(st.integers(0, 3))):
        if b:
            i = data.draw(st.integers(0, len(b) - 1))
            b[i] = data.draw(st.integers(0, 255))
    for _ in range(data.draw(st.integers(0, 2))):
        if len(b) >= 4:  # an f32 field (or any 4 bytes) set to a telling pattern
            i = data.draw(st.integers(0, len(b) - 4))
            b[i : i + 4] = struct.pack(">I", data.draw(F32_PATTERNS))
    try:
        d = descriptor.decode_descriptor(bytes(b))
    except descriptor.DescriptorError as e:
        assert str(e), "a refusal carries its reason"
        return
    assert descriptor.encode_descriptor(d) == bytes(b), "an accepted payload re-encodes to itself"


@CODEC_SETTINGS
@given(st.binary(max_size=60), descriptor_st())
def test_any_command_bytes_get_a_reason(payload, d):
    try:
        name = command.command_name(payload, len(payload))
    except command.CommandError:
        return
    for cap in d["capabilities"]:
        try:
            values, text = command.decode_command(payload, len(payload), cap)
        except command.CommandError:
            continue
        assert name == cap["name"], "decoded against another capability's name"
        assert command.encode_command(name, values, text) == payload, "decode/encode round trip"
    try:
        command.decode_event(payload, len(payload))
    except command.CommandError:
        pass


@CODEC_SETTINGS
@given(descriptor_st(), st.data())
def test_commands_round_trip_and_clamp(d, data):
    cap = data.draw(st.sampled_from(d["capabilities"]))
    values = []
    text = None
    for p in cap["params"]:
        if p["type"] == "string":
            text = data.draw(st.text(max_size=80).filter(lambda t: len(t.encode()) <= 255))
        else:
            values.append(data.draw(st.floats(width=32, allow_nan=False)))
    payload = command.encode_command(cap["name"], values, text)
    got, got_text = command.decode_command(payload, len(payload), cap)
    assert list(got) == values and got_text == text, "COMMAND round trip"
    nums = [p for p in cap["params"] if p["type"] != "string"]
    for p, x in zip(nums, got):
        v = command.clamp_value(p, x)
        if p["type"] == "bool":
            assert v is (min(max(x, p["min"]), p["max"]) >= 0.5)
        elif p["type"] == "int":
            c = min(max(x, p["min"]), p["max"])
            assert isinstance(v, int) and abs(v - c) <= 0.5, (p, x, v)
            if abs(v - c) == 0.5:
                assert abs(v) > abs(c), "a half rounds away from zero: %r -> %r" % (c, v)
        else:
            assert p["min"] <= v <= p["max"], (p, x, v)
    if text is not None:
        b = text.encode()
        limit = data.draw(st.integers(0, 240))
        k = command.truncate_utf8(b, len(b), limit)
        assert k <= limit or k == len(b) <= limit, (k, limit)
        b[:k].decode()  # a character boundary
        for j in range(k + 1, min(limit, len(b)) + 1):
            assert not _boundary(b, j), "cut at %d, but %d <= %d is a boundary too" % (k, j, limit)


def _boundary(b, k):
    try:
        b[:k].decode()
        return True
    except UnicodeDecodeError:
        return False
