# Every entry of the shared Protocol V3 conformance vectors, on both interpreters.
import json

from organbus import command
from organbus import descriptor
from organbus import frame
from organbus.crc16 import crc16, crc16_pure

UNIX_PORT = True


def _dirname(p):
    i = p.rfind("/")
    return p[:i] if i > 0 else ("/" if i == 0 else ".")


def _vectors():
    # host_tests/data/v3_vectors.json: the Protocol V3 conformance vectors, kept in the repo
    with open(_dirname(_dirname(__file__)) + "/data/v3_vectors.json") as f:
        return json.load(f)


V = _vectors()


def _hex(s):
    return bytes.fromhex(s)


def _tohex(b):
    return "".join("%02x" % x for x in b)


def _capability(name):
    for d in V["descriptors"]:
        for c in d["capabilities"]:
            if c["name"] == name:
                return c
    raise KeyError(name)


def test_vector_counts():
    assert len(V["invalid_descriptors"]) == 22, "22 invalid descriptors expected"
    assert len(V["streams"]) == 15, "15 streams expected"
    assert len(V["descriptors"]) == 2, "2 descriptors expected"


def test_crc16_vectors():
    for v in V["crc16"]:
        data = _hex(v["data"])
        for f in (crc16, crc16_pure):
            got = f(data)
            assert got == v["crc"], "crc of %s is %d, want %d" % (v["data"][:20], got, v["crc"])
        got = crc16(memoryview(bytearray(data)))
        assert got == v["crc"], "crc over a memoryview of %s" % v["data"][:20]


def test_frame_vectors_encode():
    for v in V["frames"]:
        want = _hex(v["frame"])
        got = frame.encode(v["type"], _hex(v["payload"]))
        assert got == want, "encode(%d, %s...) gave %s" % (
            v["type"],
            v["payload"][:16],
            _tohex(got),
        )
        buf = bytearray(600)
        n = frame.encode_into(buf, v["type"], _hex(v["payload"]))
        assert bytes(buf[:n]) == want, "encode_into(%d) differs" % v["type"]


def test_frame_vectors_decode():
    for v in V["frames"]:
        got = []
        dec = frame.Decoder(lambda t, p, n: got.append((t, _tohex(p[:n]))))
        dec.feed(_hex(v["frame"]), 0)
        assert got == [(v["type"], v["payload"])], "decoding frame %s gave %r" % (
            v["frame"][:16],
            got,
        )


def test_descriptor_vectors_decode():
    for v in V["descriptors"]:
        d = descriptor.decode_descriptor(_hex(v["payload"]))
        for key in ("module_id", "module_type", "hw_version", "fw_version", "capabilities"):
            assert d[key] == v[key], "%s: field %s is %r, want %r" % (
                v["module_id"],
                key,
                d[key],
                v[key],
            )
        for cap in d["capabilities"]:
            for p in cap["params"]:
                if p["type"] != "float":
                    assert (
                        type(p["min"]) is int and type(p["max"]) is int
                    ), "%s.%s bounds must be ints" % (
                        cap["name"],
                        p["name"],
                    )


def test_descriptor_vectors_decode_with_n():
    for v in V["descriptors"]:
        p = _hex(v["payload"])
        buf = bytearray(len(p) + 20)
        buf[: len(p)] = p
        d = descriptor.decode_descriptor(buf, len(p))
        assert d["module_id"] == v["module_id"], "decode_descriptor(buf, n) must stop at n"
        d = descriptor.decode_descriptor(memoryview(buf), len(p))
        assert d["capabilities"] == v["capabilities"], "decode_descriptor(memoryview, n)"


def test_descriptor_vectors_encode_and_validate():
    for v in V["descriptors"]:
        d = {}
        for key in ("module_id", "module_type", "hw_version", "fw_version", "capabilities"):
            d[key] = v[key]
        descriptor.validate_descriptor(d)
        got = descriptor.encode_descriptor(d)
        assert _tohex(got) == v["payload"], "encode_descriptor(%s) differs" % v["module_id"]


def test_invalid_descriptor_vectors():
    for v in V["invalid_descriptors"]:
        try:
            d = descriptor.decode_descriptor(_hex(v["payload"]))
        except descriptor.DescriptorError as e:
            reason = str(e)
            assert isinstance(e, ValueError), "DescriptorError must be a ValueError"
            assert len(reason) > 8, "%s: the reason %r is not specific" % (v["why"], reason)
            continue
        raise AssertionError("%s: accepted, decoded to %r" % (v["why"], d))


def test_command_vectors():
    for v in V["commands"]:
        want = _hex(v["payload"])
        got = command.encode_command(v["name"], v["values"], v["text"])
        assert got == want, "encode_command(%s) gave %s" % (v["name"], _tohex(got))
        assert command.command_name(want, len(want)) == v["name"], "command_name(%s)" % v["name"]
        values, text = command.decode_command(want, len(want), _capability(v["name"]))
        assert list(values) == [float(x) for x in v["values"]], "values of %s: %r" % (
            v["name"],
            values,
        )
        assert text == v["text"], "text of %s: %r" % (v["name"], text)


def _run_stream(s):
    got = []
    dec = frame.Decoder(lambda t, p, n: got.append([t, _tohex(p[:n])]))
    now = 0
    for chunk in s["chunks"]:
        if chunk == "idle":
            now += 50
            dec.idle(now)
        else:
            dec.feed(_hex(chunk), now)
    return got, dec, now


def test_stream_vectors():
    for s in V["streams"]:
        got, dec, now = _run_stream(s)
        assert got == s["expect"], "stream %r gave %r" % (s["name"], got)


def test_stream_vectors_with_end_of_input():
    # end of input is line idle: it may only add frames hidden behind an open candidate, and
    # afterwards every byte is accounted for
    for s in V["streams"]:
        got, dec, now = _run_stream(s)
        dec.idle(now + 50)
        assert got[: len(s["expect"])] == s["expect"], "stream %r after idle: %r" % (s["name"], got)
        c = dec.counters()
        framed = 0
        for t, p in got:
            framed += len(p) // 2 + 8
        assert c["bytes"] == c["junk"] + framed, "stream %r: counters %r do not add up" % (
            s["name"],
            c,
        )
        assert c["frames"] == len(got), "stream %r: frames counter %d" % (s["name"], c["frames"])


def test_stream_vectors_byte_by_byte():
    for s in V["streams"]:
        got = []
        dec = frame.Decoder(lambda t, p, n: got.append([t, _tohex(p[:n])]))
        now = 0
        for chunk in s["chunks"]:
            if chunk == "idle":
                now += 50
                dec.idle(now)
                continue
            b = _hex(chunk)
            for i in range(len(b)):
                dec.feed(b[i : i + 1], now)
        assert got == s["expect"], "stream %r byte by byte gave %r" % (s["name"], got)
