# CRC-16/MODBUS: check value, buffer kinds, incremental use, ranges, fast path against the pure one.
import sys

from organbus.crc16 import crc16, crc16_pure

UNIX_PORT = True


def _rand_bytes(n, seed):
    # xorshift32: the same bytes on CPython and on the unix port
    out = bytearray(n)
    x = seed or 1
    for i in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out[i] = x & 0xFF
    return out


def _bitwise(data, crc=0xFFFF):
    # textbook bit-by-bit CRC-16/MODBUS, independent of the table the module builds
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def test_check_value():
    for f in (crc16, crc16_pure):
        got = f(b"123456789")
        assert got == 0x4B37, "check value of %r is 0x%04X, want 0x4B37" % (f, got)


def test_empty_is_init():
    assert crc16(b"") == 0xFFFF, "crc16 of nothing must be the init value"
    assert crc16(b"", 0x1234) == 0x1234, "crc16 of nothing must hand the crc back unchanged"
    assert crc16(b"abc", 0x1234, 2, 2) == 0x1234, "an empty range must hand the crc back unchanged"


def test_spec_frames_crc():
    # PROTOCOL.md section 2: CRC over VER..payload, sent big-endian before EOF
    for frame in (
        b"\xaa\x03\x03\x00\x00\x60\xf0\x55",
        b"\xaa\x03\x02\x00\x00\xa0\xa1\x55",
        b"\xaa\x03\x04\x00\x00\xa1\x41\x55",
        b"\xaa\x03\x11\x00\x01\x00\xac\x64\x55",
    ):
        want = (frame[-3] << 8) | frame[-2]
        got = crc16(frame, 0xFFFF, 1, len(frame) - 3)
        assert got == want, "CRC of %r is 0x%04X, want 0x%04X" % (frame, got, want)


def test_matches_bitwise_reference():
    for n in (1, 2, 3, 7, 8, 31, 64, 255, 256, 600):
        data = _rand_bytes(n, n * 7 + 1)
        want = _bitwise(data)
        assert crc16(data) == want, "crc16 differs from the bitwise CRC for %d bytes" % n
        assert crc16_pure(data) == want, "crc16_pure differs from the bitwise CRC for %d bytes" % n


def test_buffer_kinds():
    data = _rand_bytes(200, 99)
    want = _bitwise(data)
    for buf in (bytes(data), bytearray(data), memoryview(data), memoryview(bytes(data))):
        assert crc16(buf) == want, "crc16 wrong on %s" % type(buf).__name__
        assert crc16_pure(buf) == want, "crc16_pure wrong on %s" % type(buf).__name__


def test_memoryview_slices():
    data = _rand_bytes(300, 5)
    mv = memoryview(data)
    for a, b in ((0, 300), (1, 300), (17, 18), (100, 250), (299, 300), (150, 150)):
        want = _bitwise(data[a:b])
        assert crc16(mv[a:b]) == want, "crc16 wrong on memoryview[%d:%d]" % (a, b)
        assert crc16_pure(mv[a:b]) == want, "crc16_pure wrong on memoryview[%d:%d]" % (a, b)


def test_start_end_range():
    data = _rand_bytes(128, 3)
    for a, b in ((0, 128), (0, 0), (5, 6), (5, 127), (64, 128)):
        want = _bitwise(data[a:b])
        assert crc16(data, 0xFFFF, a, b) == want, "crc16 wrong on range %d..%d" % (a, b)
        assert crc16_pure(data, 0xFFFF, a, b) == want, "crc16_pure wrong on range %d..%d" % (a, b)
    assert crc16(data, 0xFFFF, 10) == _bitwise(data[10:]), "end=-1 must mean the end of buf"
    assert crc16(data, 0xFFFF, 10, -1) == _bitwise(data[10:]), "end=-1 must mean the end of buf"


def test_incremental_every_split():
    data = _rand_bytes(70, 11)
    whole = crc16(data)
    for cut in range(len(data) + 1):
        part = crc16(data[cut:], crc16(data[:cut]))
        assert part == whole, "incremental crc16 split at %d gives 0x%04X" % (cut, part)
        part = crc16(data, crc16(data, 0xFFFF, 0, cut), cut)
        assert part == whole, "incremental crc16 by range split at %d gives 0x%04X" % (cut, part)
        part = crc16_pure(data[cut:], crc16(data[:cut]))
        assert part == whole, "fast and pure paths do not chain at %d" % cut


def test_fast_matches_pure_random():
    for seed in range(1, 60):
        n = (seed * 37) % 530
        data = _rand_bytes(n, seed)
        init = (seed * 2654435761) & 0xFFFF
        a = crc16(data, init)
        b = crc16_pure(data, init)
        assert a == b, "seed %d: crc16 0x%04X != crc16_pure 0x%04X" % (seed, a, b)


def test_result_is_16_bit():
    for seed in range(1, 40):
        data = _rand_bytes(seed, seed)
        for init in (0, 0xFFFF, 0x8000, 0x0001):
            got = crc16(data, init)
            assert 0 <= got <= 0xFFFF, "crc16 returned %r, not a u16" % got


def test_fast_path_is_not_bytecode_on_micropython():
    # on the unix port the module must really use its viper path, not alias the pure one
    if sys.implementation.name == "micropython":
        assert crc16 is not crc16_pure, "crc16 is the pure path on MicroPython"
    else:
        assert crc16 is crc16_pure or crc16(b"123456789") == 0x4B37, "CPython path is broken"


def test_empty_buffers_of_every_kind():
    # an empty buffer may have no storage at all: the fast path must not touch it
    for buf in (b"", bytearray(), memoryview(b""), memoryview(bytearray(4))[2:2]):
        assert crc16(buf) == 0xFFFF, "crc16 of an empty %s" % type(buf).__name__
        assert crc16(buf, 0x1234) == 0x1234, "crc16 of an empty %s keeps crc" % type(buf).__name__


def test_raw_fast_path():
    from organbus.crc16 import TABLE, crc16_raw

    data = _rand_bytes(300, 77)
    for a, b in ((0, 300), (1, 296), (7, 7), (9, 8), (0, 15), (0, 16), (0, 17), (3, 35)):
        want = _bitwise(data[a:b]) if b > a else 0xFFFF
        got = crc16_raw(0xFFFF, data, TABLE, a, b)
        assert got == want, "crc16_raw over %d..%d gave 0x%04X, want 0x%04X" % (a, b, got, want)
    assert crc16_raw(0xFFFF, b"", TABLE, 0, 0) == 0xFFFF, "crc16_raw of nothing"
