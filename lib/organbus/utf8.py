# Strict UTF-8 checks that behave the same on CPython and MicroPython (no overlongs, surrogates or > U+10FFFF).
import sys

MAX_TEXT = 240  # bytes: the longest text a parameter carries on the wire (PROTOCOL.md)


def _seq_len(buf, i, end):
    """Length of the valid UTF-8 sequence at buf[i], or 0 if it is not one."""
    c = buf[i]
    if c < 0x80:
        return 1
    if 0xC2 <= c <= 0xDF:
        n, lo, hi = 2, 0x80, 0xBF
    elif 0xE0 <= c <= 0xEF:
        n = 3
        lo = 0xA0 if c == 0xE0 else 0x80
        hi = 0x9F if c == 0xED else 0xBF
    elif 0xF0 <= c <= 0xF4:
        n = 4
        lo = 0x90 if c == 0xF0 else 0x80
        hi = 0x8F if c == 0xF4 else 0xBF
    else:
        return 0
    if i + n > end or not lo <= buf[i + 1] <= hi:
        return 0
    for k in range(i + 2, i + n):
        if not 0x80 <= buf[k] <= 0xBF:
            return 0
    return n


def valid_utf8(buf, start=0, end=-1):
    """Whether buf[start:end] is all valid UTF-8 (runs of ASCII passed by first_invalid's scan)."""
    return first_invalid(buf, start, end) < 0


if sys.implementation.name == "micropython":
    import micropython

    @micropython.viper
    def _ascii_end(buf: ptr8, i: int, end: int) -> int:
        # the first offset >= i of a byte >= 0x80 in buf[:end], or end
        while i < end:
            if buf[i] >= 0x80:
                return i
            i += 1
        return end

else:

    def _ascii_end(buf, i, end):
        while i < end:
            if buf[i] >= 0x80:
                return i
            i += 1
        return end


if sys.implementation.name == "micropython":

    @micropython.viper
    def ascii_str(s) -> bool:
        """Whether the str s is all ASCII (then valid UTF-8 of len(s) bytes), read in place."""
        # MicroPython keeps a str as its UTF-8 bytes and a NUL after them: when its first n
        # bytes (n = len(s), characters) are ASCII and a NUL follows, those are all its bytes
        n = int(len(s))
        b = ptr8(s)
        i = 0
        while i < n:
            if b[i] >= 0x80:
                return False
            i += 1
        return b[n] == 0

else:

    def ascii_str(s):
        """Whether the str s is all ASCII (then valid UTF-8 of len(s) bytes)."""
        return s.isascii()


ascii_end = _ascii_end  # (buf, i, end): the first offset >= i of a byte >= 0x80, or end


def first_invalid(buf, start=0, end=-1):
    """Offset of the first byte of buf[start:end] that does not begin a valid UTF-8 sequence, or
    -1 when it is all valid (the same rules as valid_utf8). Runs of ASCII are passed by a viper
    scan on MicroPython; no allocation."""
    if end < 0:
        end = len(buf)
    i = start
    while True:
        i = _ascii_end(buf, i, end)
        if i >= end:
            return -1
        n = _seq_len(buf, i, end)
        if not n:
            return i
        i += n


def sequence_length(lead):
    """How many bytes a sequence that starts with byte `lead` claims (1 for a byte that cannot
    start one): the bytes a message about an invalid sequence names."""
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 1


def truncate_utf8(buf, n, limit):
    """Largest length <= limit of buf[:n] that ends on a character boundary (buf assumed valid)."""
    if n <= limit:
        return n
    i = limit
    while i > 0 and (buf[i] & 0xC0) == 0x80:
        i -= 1
    return i


def clip_text(s, limit):
    """s (a str) cut to at most `limit` UTF-8 bytes at a character boundary."""
    b = s.encode("utf-8")
    if len(b) <= limit:
        return s
    return str(b[: truncate_utf8(b, len(b), limit)], "utf-8")
