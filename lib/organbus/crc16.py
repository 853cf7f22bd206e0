# CRC-16/MODBUS (reflected 0xA001, init 0xFFFF): table-driven, viper on MicroPython, pure on CPython.
import sys
from array import array

import micropython

# _TABLE holds 8 tables of 256 u16 (4 KB) for slicing-by-8: _TABLE[0:256] is the classic
# byte table T0, and T(k)[x] = (T(k-1)[x] >> 8) ^ T0[T(k-1)[x] & 0xFF], the CRC of byte x
# followed by k zero bytes. The pure path uses T0 only.


def _make_table():
    t = array("H", bytes(4096))
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
        t[i] = c
    for k in range(256, 2048):
        c = t[k - 256]
        t[k] = (c >> 8) ^ t[c & 0xFF]
    return t


_TABLE = _make_table()


def crc16_pure(buf, crc=0xFFFF, start=0, end=-1):
    """The reference path: same result as crc16 on every interpreter."""
    if end < 0:
        end = len(buf)
    t = _TABLE
    for i in range(start, end):
        crc = (crc >> 8) ^ t[(crc ^ buf[i]) & 0xFF]
    return crc


if sys.implementation.name == "micropython":

    # Argument order matters: viper keeps the first three locals in machine registers, so
    # the hot ones (crc, p, t) come first; t1..t7 (the other seven tables) live on the stack,
    # which costs less than adding k*256 to every index. Each 8-byte round folds two input
    # bytes into the CRC and looks all eight up in their own table (slicing-by-8); p walks the
    # buffer up to an end address. crc16 resolves end=-1; end <= start is an empty range.
    @micropython.viper
    def crc16_raw(crc: int, p: ptr8, t: ptr16, start: int, end: int) -> int:
        n = end - start
        if n <= 0:
            return crc  # an empty buffer's pointer may be NULL: never compute from it
        p = ptr8(uint(p) + start)
        e = uint(p) + n - 15
        t1 = ptr16(uint(t) + 512)
        t2 = ptr16(uint(t) + 1024)
        t3 = ptr16(uint(t) + 1536)
        t4 = ptr16(uint(t) + 2048)
        t5 = ptr16(uint(t) + 2560)
        t6 = ptr16(uint(t) + 3072)
        t7 = ptr16(uint(t) + 3584)
        while uint(p) < e:
            crc = (
                t[p[7]]
                ^ t1[p[6]]
                ^ t2[p[5]]
                ^ t3[p[4]]
                ^ t4[p[3]]
                ^ t5[p[2]]
                ^ t6[(crc >> 8) ^ p[1]]
                ^ t7[(crc ^ p[0]) & 0xFF]
            )
            crc = (
                t[p[15]]
                ^ t1[p[14]]
                ^ t2[p[13]]
                ^ t3[p[12]]
                ^ t4[p[11]]
                ^ t5[p[10]]
                ^ t6[(crc >> 8) ^ p[9]]
                ^ t7[(crc ^ p[8]) & 0xFF]
            )
            p = ptr8(uint(p) + 16)
        e += 15
        while uint(p) < e:
            crc = (crc >> 8) ^ t[(crc ^ p[0]) & 0xFF]
            p = ptr8(uint(p) + 1)
        return crc

    def crc16(buf, crc=0xFFFF, start=0, end=-1):
        """CRC of buf[start:end] (end=-1: to the end), continuing from crc."""
        if end < 0:
            end = len(buf)
        return crc16_raw(crc, buf, _TABLE, start, end)

else:
    crc16 = crc16_pure

    def crc16_raw(crc, buf, table, start, end):
        """The hot-path signature of the viper function, over the pure path."""
        return crc16_pure(buf, crc, start, end)


TABLE = _TABLE
