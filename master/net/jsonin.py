# A JSON message from the network read in place within bounds: one scan clips, refuses or marks, then json.loads.
#
# The scan runs over the receive buffer itself (a WebSocket's message buffer) and rewrites it
# forward (the write position never passes the read position): a string longer than MAX_STRING
# bytes of JSON text is cut there (on a character and escape boundary) and counted; an array or
# object of more than MAX_ITEMS items, more than MAX_VALUES in all, nesting deeper than
# MAX_DEPTH or a number token longer than MAX_NUMBER refuse the message; NaN, Infinity and
# -Infinity (not JSON) become 0 and are marked, so a request that holds one can still be
# answered by its id. json.loads then reads the buffer without a copy on MicroPython. So no
# message up to the WebSocket limit asks the heap for a block larger than a clipped string or a
# list of MAX_ITEMS: what a fragmented heap at the documented 80 KB still has (docs/links.md).
import sys

import array
import json

import micropython
from micropython import const

_MP = sys.implementation.name == "micropython"

MAX_STRING = const(256)  # bytes of a string's JSON text kept; the rest is cut
MAX_ITEMS = const(64)  # items of one array or object
MAX_VALUES = const(512)  # items of all arrays and objects together
MAX_DEPTH = const(16)  # arrays and objects inside each other
MAX_NUMBER = const(40)  # characters of a number token

# _st: out [0] strings clipped, [1] longest string (bytes of JSON text), [2] non-finite numbers,
# [3] offset of the first non-finite number or of the refusal, [4] why refused; [8 + d] the
# commas seen so far in the open array or object at depth d
_st = array.array("i", [0] * (9 + MAX_DEPTH))
_INF = b"Infinity"
_WHY = (
    "",
    "nested deeper than %d levels" % MAX_DEPTH,
    "more than %d items in one array or object" % MAX_ITEMS,
    "more than %d items in all" % MAX_VALUES,
    "a number longer than %d characters" % MAX_NUMBER,
)


class Refused(ValueError):
    """A message beyond the bounds, or not JSON: `msg` says why and where."""


@micropython.viper
def _shape(buf: ptr8, n: int, st: ptr32, inf: ptr8) -> int:
    # buf[:n] rewritten in place; the new length, or -1 (refused: st[3], st[4] say where, why)
    i = 0
    o = 0
    depth = 0
    values = 0
    while i < n:
        c = buf[i]
        if c == 0x22:  # a string: its text up to MAX_STRING bytes, cut on a token boundary
            j = i + 1
            cut = j
            while j < n:
                c = buf[j]
                if c == 0x22:
                    break
                step = 1
                if c == 0x5C:  # an escape: \x, \uXXXX, or a surrogate pair as one
                    step = 2
                    if j + 1 < n and buf[j + 1] == 0x75:
                        step = 6
                        h = buf[j + 3] | 0x20 if j + 3 < n else 0
                        high = (h == 0x38 or h == 0x39 or h == 0x61 or h == 0x62) and (
                            buf[j + 2] | 0x20
                        ) == 0x64
                        if high and j + 7 < n and buf[j + 6] == 0x5C and buf[j + 7] == 0x75:
                            step = 12
                elif c >= 0xF0:
                    step = 4
                elif c >= 0xE0:
                    step = 3
                elif c >= 0xC0:
                    step = 2
                if j + step > n:
                    step = n - j
                if j + step - i - 1 <= MAX_STRING:
                    cut = j + step
                j += step
            length = j - i - 1
            if length > st[1]:
                st[1] = length
            end = j
            if length > MAX_STRING:
                end = cut
                st[0] = st[0] + 1
            while i < end:
                buf[o] = buf[i]
                o += 1
                i += 1
            if j < n:
                buf[o] = 0x22
                o += 1
            i = j + 1
            continue
        if c == 0x7B or c == 0x5B:  # { [
            depth += 1
            values += 1
            if depth > MAX_DEPTH:
                st[3] = i
                st[4] = 1
                return -1
            st[8 + depth] = 0
        elif c == 0x7D or c == 0x5D:  # } ]
            if depth > 0:
                depth -= 1
        elif c == 0x2C:  # ,
            values += 1
            k = st[8 + depth] + 1
            st[8 + depth] = k
            if k >= MAX_ITEMS:
                st[3] = i
                st[4] = 2
                return -1
            if values > MAX_VALUES:
                st[3] = i
                st[4] = 3
                return -1
        else:
            # NaN, Infinity, -Infinity: a 0 and spaces in their place, marked
            w = 0
            if c == 0x4E and i + 2 < n and buf[i + 1] == 0x61 and buf[i + 2] == 0x4E:
                w = 3
            else:
                s = i + 1 if c == 0x2D else i
                k = 0
                while k < 8 and s + k < n and buf[s + k] == inf[k]:
                    k += 1
                if k == 8:
                    w = s + 8 - i
            if w:
                if st[2] == 0:
                    st[3] = i
                st[2] = st[2] + 1
                buf[o] = 0x30
                o += 1
                k = 1
                while k < w:
                    buf[o] = 0x20
                    o += 1
                    k += 1
                i += w
                continue
            if c == 0x2D or (c >= 0x30 and c <= 0x39):  # a number token: bounded by length
                j = i
                while j < n:
                    c = buf[j]
                    if not (
                        (c >= 0x30 and c <= 0x39) or c == 0x2D or c == 0x2B or c == 0x2E
                        or c == 0x65 or c == 0x45
                    ):  # fmt: skip
                        break
                    j += 1
                if j - i > MAX_NUMBER:
                    st[3] = i
                    st[4] = 4
                    return -1
                while i < j:
                    buf[o] = buf[i]
                    o += 1
                    i += 1
                continue
        buf[o] = c
        o += 1
        i += 1
    return o


def read(buf, n):
    """(value, clipped, nonfinite) of the JSON message in buf[:n] (a bytearray, rewritten in
    place): `clipped` strings were cut at MAX_STRING bytes, `nonfinite` is the offset of the
    first NaN/Infinity (read as 0), else -1. Refused (a ValueError) saying why and where."""
    st = _st
    for k in range(5):
        st[k] = 0
    m = _shape(buf, n, st, _INF)
    if m < 0:
        raise Refused("%s at offset %d" % (_WHY[st[4]], st[3]))
    try:
        value = json.loads(memoryview(buf)[:m] if _MP else bytes(buf[:m]))
    except ValueError as e:
        raise Refused("not JSON: %s" % e)
    return value, st[0], st[3] if st[2] else -1


def longest():
    """Bytes of JSON text of the longest string of the last message read (clipped or not)."""
    return _st[1]
