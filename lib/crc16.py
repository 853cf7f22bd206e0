# CRC-16/MODBUS (reflected 0xA001, init 0xFFFF): table-driven, viper on MicroPython, pure on CPython.
import sys
from array import array

import micropython


def _make_table():
    t = array("H", bytes(512))
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
        t[i] = c
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

    @micropython.viper
    def _crc16(buf: ptr8, start: int, end: int, crc: int) -> int:
        t = ptr16(_TABLE)
        i = start
        while i < end:
            crc = (crc >> 8) ^ t[(crc ^ buf[i]) & 0xFF]
            i += 1
        return crc

    def crc16(buf, crc=0xFFFF, start=0, end=-1):
        """CRC of buf[start:end] (end=-1: to the end), continuing from crc."""
        if end < 0:
            end = len(buf)
        return _crc16(buf, start, end, crc)

else:
    crc16 = crc16_pure
