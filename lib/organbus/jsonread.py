# The strict JSON reader (RFC 8259) of plan bodies: the same values and the same refusal words on every interpreter.
#
# Our own so CPython and MicroPython refuse the same bodies with the same words: invalid UTF-8
# (MicroPython's str() takes overlongs, encoded surrogates and code points above U+10FFFF),
# NaN/Infinity, numbers longer than anything the protocol carries (checked by length before any
# conversion, so CPython's int-string limit is never reached), trailing data, control characters
# and too deep nesting are refused with their cause and byte offset; duplicate keys are reported.
#
# Fast path: a scan of the bytes (viper on MicroPython) checks the whole grammar and the limits;
# a text it passes, holding no duplicate key, no surrogate escape and no exponent, is then
# parsed by the interpreter's own `json.loads` (C on MicroPython: 1.1 M RV32 instructions for a
# 16-step plan where this reader takes 7.1 M). Anything the scan does not pass (every refusal,
# and the texts json.loads would read differently) goes to the reader below, which names it.
import json
from array import array

import micropython
from micropython import const

from organbus.utf8 import first_invalid, sequence_length

MAX_DEPTH = 16  # a plan nests 4 deep; anything deeper than this is not a plan
# A number token longer than this is refused unread: the longest integer below the f32 maximum
# (3.4e38) written out, with its sign, is 40 characters; f32 carries 9 significant digits.
MAX_NUMBER_LEN = 40

_WS = b" \t\n\r"
_HEX = b"0123456789abcdefABCDEF"
# escape byte -> replacement bytes
_ESC = {
    0x22: b'"',
    0x5C: b"\\",
    0x2F: b"/",
    0x62: b"\b",
    0x66: b"\f",
    0x6E: b"\n",
    0x72: b"\r",
    0x74: b"\t",
}


@micropython.viper
def _control_at(buf: ptr8, i: int, end: int) -> int:
    # the first offset >= i of a byte < 0x20 in buf[:end], or end
    while i < end:
        if buf[i] < 0x20:
            return i
        i += 1
    return end


_STACK_MAX = const(32)  # nesting the scan can follow (its stack); deeper limits use the reader
_KEYS = const(24)  # keys of the open objects the scan compares (a plan holds 16 at most)
_STACK = bytearray(2 * _STACK_MAX)  # the scan's open containers, reused by every read

_KEYAT = array("i", [0] * (2 * _KEYS))  # the scan's keys: (start, length) as 32-bit words
_LIT = b"truefalsenull"  # the scan's words


@micropython.viper
def _scan(buf: ptr8, n: int, stack: ptr8, keys: ptr32, max_depth: int, max_number: int) -> int:
    # One JSON text in buf[:n] by RFC 8259's grammar, number tokens of at most max_number
    # bytes, no control character in a string, no \u escape of a surrogate, no key twice
    # in an object (as bytes): members * 4 + 1 with an exponent + 2 when keys could not
    # all be compared (an escaped key, more than _KEYS open); -2 - offset where the reader
    # refuses a value nested deeper than max_depth (so its recursion never goes there);
    # else -1. The bytes are valid UTF-8 already (first_invalid). `stack`: per open
    # container its byte ({ or [) and the index of its first key in `keys`, which holds
    # (start, length) of the open objects' keys.
    i = 0
    depth = 0
    members = 0
    flags = 0
    nk = 0  # keys held in `keys`
    want = 1  # 1: a value comes next; 0: a value just ended; 2: a key; 3: a container's
    # first member or its close; 4: a key's ':'
    while True:
        while i < n:
            c = buf[i]
            if c == 0x20 or c == 0x0A or c == 0x0D or c == 0x09:
                i += 1
            else:
                break
        if want == 0:
            if depth == 0:
                if i < n:
                    return -1
                return members * 4 + flags
            if i >= n:
                return -1
            c = buf[i]
            top = stack[2 * depth - 2]
            if c == 0x2C:  # ,
                i += 1
                want = 1
                if top == 0x7B:
                    want = 2  # a key
            elif (c == 0x7D and top == 0x7B) or (c == 0x5D and top == 0x5B):
                depth -= 1
                nk = stack[2 * depth + 1]  # its keys are let go
                i += 1
                continue
            else:
                return -1
            continue
        if i >= n:
            return -1
        c = buf[i]
        if want >= 3:
            if want == 4:  # a key ended: its ':', then its value
                if c != 0x3A:
                    return -1
                i += 1
                if depth > max_depth:
                    return -2 - i  # the reader's refusal: the first value is too deep
                want = 1
                continue
            # a container just opened: its close, or its first member
            top = stack[2 * depth - 2]
            if c == top + 2:  # } is { + 2, ] is [ + 2
                depth -= 1
                i += 1
                want = 0
                continue
            if top == 0x7B:
                want = 2
            elif depth > max_depth:
                return -2 - i  # the reader's refusal: its first item is too deep
            else:
                want = 1
        if want == 2 and c != 0x22:
            return -1
        if c == 0x7B or c == 0x5B:  # { [
            stack[2 * depth] = c
            stack[2 * depth + 1] = nk
            depth += 1
            i += 1
            want = 3
            continue
        if c == 0x22:  # "
            i += 1
            s0 = i
            esc = 0
            while True:
                if i >= n:
                    return -1
                c = buf[i]
                if c == 0x22:
                    break
                if c < 0x20:
                    return -1
                if c == 0x5C:
                    esc = 1
                    if i + 1 >= n:
                        return -1
                    e = buf[i + 1]
                    if e == 0x75:  # u
                        if i + 5 >= n:
                            return -1
                        cp = 0
                        k = i + 2
                        while k < i + 6:
                            h = buf[k]
                            if 0x30 <= h and h <= 0x39:
                                cp = cp * 16 + h - 0x30
                            elif 0x61 <= h and h <= 0x66:
                                cp = cp * 16 + h - 0x57
                            elif 0x41 <= h and h <= 0x46:
                                cp = cp * 16 + h - 0x37
                            else:
                                return -1
                            k += 1
                        if 0xD800 <= cp and cp <= 0xDFFF:
                            return -1  # a surrogate: the reader pairs or keeps it (Lone)
                        i += 6
                        continue
                    if (
                        e == 0x22
                        or e == 0x5C
                        or e == 0x2F
                        or e == 0x62
                        or e == 0x66
                        or e == 0x6E
                        or e == 0x72
                        or e == 0x74
                    ):
                        i += 2
                        continue
                    return -1
                i += 1
            kl = i - s0
            i += 1
            if want == 2:  # a key: not one its object had before, its ':', its value
                members += 1
                if esc or nk >= _KEYS:
                    flags |= 2  # json.loads' objects are counted instead
                else:
                    j = stack[2 * depth - 1]
                    while j < nk:
                        if keys[2 * j + 1] == kl:
                            a = keys[2 * j]
                            m = 0
                            while m < kl and buf[a + m] == buf[s0 + m]:
                                m += 1
                            if m == kl:
                                return -1  # a repeated key: the reader lists it
                        j += 1
                    keys[2 * nk] = s0
                    keys[2 * nk + 1] = kl
                    nk += 1
                want = 4
            else:
                want = 0
            continue
        if c == 0x2D or (0x30 <= c and c <= 0x39):
            start = i
            if c == 0x2D:
                i += 1
            if i < n and buf[i] == 0x30:
                i += 1
            elif i < n and 0x31 <= buf[i] and buf[i] <= 0x39:
                while i < n and 0x30 <= buf[i] and buf[i] <= 0x39:
                    i += 1
            else:
                return -1
            part = 0  # then 1 after a fraction's '.', 2 after an exponent's 'e'
            while i < n:
                c = buf[i]
                if c == 0x2E and part == 0:
                    part = 1
                elif (c == 0x65 or c == 0x45) and part < 2:
                    part = 2
                    flags = 1
                    if i + 1 < n and (buf[i + 1] == 0x2B or buf[i + 1] == 0x2D):
                        i += 1
                else:
                    break
                i += 1
                j = i
                while i < n and 0x30 <= buf[i] and buf[i] <= 0x39:
                    i += 1
                if i == j:
                    return -1  # a '.' or an exponent without a digit
            if i - start > max_number:
                return -1
            want = 0
            continue
        # true, false, null: the word at _LIT[a:a + m]
        a = 0
        m = 4
        if c == 0x66:  # f
            a = 4
            m = 5
        elif c == 0x6E:  # n
            a = 9
        elif c != 0x74:  # t
            return -1
        if i + m > n:
            return -1
        lit = ptr8(_LIT)
        k = 1
        while k < m and buf[i + k] == lit[a + k]:
            k += 1
        if k < m:
            return -1
        i += m
        want = 0


class JsonError(ValueError):
    """Not one JSON text: `cause` says what, `offset` the byte where; `msg` says both."""

    def __init__(self, cause, offset):
        self.cause = cause
        self.offset = offset
        self.msg = "%s at offset %d" % (cause, offset)
        super().__init__(self.msg)


class Lone:
    """A JSON string that held a lone UTF-16 surrogate escape: not text, kept to name the field."""

    def __init__(self, esc):
        self.esc = esc


def quote(s):
    """A short JSON-style quote of a str for messages (identical on both interpreters)."""
    out = ['"']
    for c in s[:40]:
        if c == '"' or c == "\\":
            out.append("\\" + c)
        elif c < " ":
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    if len(s) > 40:
        out.append("...")
    out.append('"')
    return "".join(out)


def read(raw, max_depth=MAX_DEPTH, max_number=MAX_NUMBER_LEN):
    """One JSON text (bytes-like or str) -> (value, dups); raises JsonError.

    `dups` lists every duplicate key as (path, key): `path` names the object that holds it
    ("" for the top, else like `steps[0].params`); the last value of a repeated key is kept."""
    raw = _text(raw)
    if max_depth < _STACK_MAX:
        k = _scan(raw, len(raw), _STACK, _KEYAT, max_depth, max_number)
        if k < -1:
            k = -2 - k
            if k >= len(raw):
                raise JsonError("unexpected end", k)
            raise JsonError("nested deeper than %d levels" % max_depth, k)
        if k >= 0 and not k & 1:
            v = json.loads(raw)
            if not k & 2 or _members(v) == k >> 2:
                return v, []
    return _read(raw, max_depth, max_number)


def read_strict(raw, max_depth=MAX_DEPTH, max_number=MAX_NUMBER_LEN):
    """read() by the reader alone (no scan, no json.loads): what the fast path must equal."""
    return _read(_text(raw), max_depth, max_number)


def _text(raw):
    # the body as bytes of valid UTF-8, else the refusal that names the first bad byte
    if isinstance(raw, str):
        try:
            raw = raw.encode()
        except UnicodeError:  # CPython: a str holding a lone surrogate; named like its bytes
            raw = raw.encode("utf-8", "surrogatepass")
    elif isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw)
    else:
        raise TypeError("jsonread.read: expected bytes or str, got %s" % type(raw).__name__)
    bad = first_invalid(raw)
    if bad >= 0:
        seq = raw[bad : bad + sequence_length(raw[bad])]
        raise JsonError(
            "invalid UTF-8 %s %s" % ("byte" if len(seq) == 1 else "bytes", _hex(seq)), bad
        )
    return raw


def _members(v):
    # the keys of every object in a value json.loads made: fewer than the text's when one repeats
    t = type(v)
    if t is dict:
        n = len(v)
        v = v.values()
    elif t is list:
        n = 0
    else:
        return 0
    for x in v:
        t = type(x)
        if t is dict or t is list:
            n += _members(x)
    return n


def _read(raw, max_depth, max_number):
    # the strict reader over valid UTF-8 bytes: every refusal named, duplicate keys listed
    r = _Reader(raw, max_depth, max_number)
    r.ws()
    if r.i >= len(raw):
        raise JsonError("empty", r.i)
    v = r.value("", 0)
    r.ws()
    if r.i < len(raw):
        r.fail("trailing data")
    return v, r.dups


def _hex(b):
    return " ".join("%02x" % c for c in b)


class _Reader:
    # Recursive descent over the body's bytes (O(1) indexing on both interpreters; strings are
    # cut out with find() and decoded at the end); `path` names where duplicate keys sit. The
    # body is valid UTF-8 by the time it runs.
    def __init__(self, b, max_depth, max_number):
        self.s = b
        self.i = 0
        self.dups = []
        self.max_depth = max_depth
        self.max_number = max_number

    def fail(self, what):
        if self.i >= len(self.s):
            raise JsonError("unexpected end", self.i)
        raise JsonError(what, self.i)

    def ws(self):
        s = self.s
        n = len(s)
        i = self.i
        while i < n and s[i] in _WS:
            i += 1
        self.i = i

    def value(self, path, depth):
        if depth > self.max_depth:
            self.fail("nested deeper than %d levels" % self.max_depth)
        self.ws()
        if self.i >= len(self.s):
            self.fail("")
        c = self.s[self.i]
        if c == 0x7B:  # {
            return self.obj(path, depth + 1)
        if c == 0x5B:  # [
            return self.arr(path, depth + 1)
        if c == 0x22:  # "
            return self.string()
        if c == 0x2D or 0x30 <= c <= 0x39:
            return self.number()
        for word, v in ((b"true", True), (b"false", False), (b"null", None)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return v
        self.fail("unexpected character %s" % quote(self._char()))

    def _char(self):
        # the character at i, for messages
        s = self.s
        j = self.i + 1
        while j < len(s) and (s[j] & 0xC0) == 0x80:
            j += 1
        return str(s[self.i : j], "utf-8")

    def _at(self, c):
        # white space skipped, the byte c comes next: taken (True), or not (False)
        self.ws()
        if self.s.startswith(c, self.i):
            self.i += 1
            return True
        return False

    def _more(self, close, what):
        # after a member: ',' (another comes: True) or `close` (the end: False), else `what`
        if self._at(b","):
            return True
        if not self._at(close):
            self.fail(what)
        return False

    def obj(self, path, depth):
        self.i += 1
        out = {}
        more = not self._at(b"}")
        while more:
            self.ws()
            if not self.s.startswith(b'"', self.i):
                self.fail("expected a key string")
            k = self.string()
            if isinstance(k, Lone):
                k = "\\u" + k.esc
            if not self._at(b":"):
                self.fail("expected ':'")
            sub = k if not path else path + "." + k
            v = self.value(sub, depth)
            if k in out:
                self.dups.append((path, k))
            out[k] = v
            more = self._more(b"}", "expected ',' or '}'")
        return out

    def arr(self, path, depth):
        self.i += 1
        out = []
        more = not self._at(b"]")
        while more:
            out.append(self.value("%s[%d]" % (path, len(out)), depth))
            more = self._more(b"]", "expected ',' or ']'")
        return out

    def hex4(self):
        h = self.s[self.i : self.i + 4]
        if len(h) < 4:
            self.i = len(self.s)
            self.fail("")
        for c in h:
            if c not in _HEX:
                self.fail("bad \\u escape")
        self.i += 4
        h = str(h, "ascii")
        return int(h, 16), h

    def _plain(self, parts, a, b):
        # raw bytes a..b of a string: no control characters allowed
        if a < b:
            k = _control_at(self.s, a, b)
            if k < b:
                self.i = k
                self.fail("control character in a string")
            parts.append(self.s[a:b])

    def string(self):
        s = self.s
        n = len(s)
        i = self.i + 1
        parts = []
        lone = None
        while True:
            j = s.find(b'"', i)
            if j < 0:
                self._plain(parts, i, n)
                self.i = n
                self.fail("")
            k = s.find(b"\\", i, j)
            if k < 0:
                self._plain(parts, i, j)
                self.i = j + 1
                if len(parts) == 1 and not lone:
                    return str(parts[0], "utf-8")  # no escapes: no join
                break
            self._plain(parts, i, k)
            self.i = k + 1
            if self.i >= n:
                self.fail("")
            e = s[self.i]
            if e in _ESC:
                parts.append(_ESC[e])
                self.i += 1
            elif e == 0x75:  # u
                self.i += 1
                cp, h = self.hex4()
                if 0xD800 <= cp < 0xDC00 and s.startswith(b"\\u", self.i):
                    save = self.i
                    self.i += 2
                    lo, h2 = self.hex4()
                    if 0xDC00 <= lo < 0xE000:
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                    else:
                        self.i = save
                if 0xD800 <= cp < 0xE000:
                    lone = lone or h.lower()
                else:
                    parts.append(chr(cp).encode())
            else:
                self.fail("bad escape \\%s" % self._char())
            i = self.i
        if lone:
            return Lone(lone)
        return str(b"".join(parts), "utf-8")

    def number(self):
        # The token is scanned by the grammar, then refused by length before any conversion.
        s = self.s
        n = len(s)
        i = start = self.i
        if s[i] == 0x2D:
            i += 1
        if i < n and s[i] == 0x30:
            i += 1
        else:
            i = self._digits(i)
        frac = False
        if i < n and s[i] == 0x2E:  # .
            i = self._digits(i + 1)
            frac = True
        if i < n and (s[i] == 0x65 or s[i] == 0x45):  # e E
            i += 1
            if i < n and (s[i] == 0x2B or s[i] == 0x2D):
                i += 1
            i = self._digits(i)
            frac = True
        if i - start > self.max_number:
            self.i = start
            self.fail("number of %d characters, more than %d" % (i - start, self.max_number))
        self.i = i
        text = s[start:i]
        if not frac:
            return int(text)
        x = float(text)
        if x - x != 0:  # inf (NaN cannot be spelled in JSON)
            self.i = start
            self.fail("number out of range")
        return x

    def _digits(self, i):
        # a number's digits from i on, at least one: where they end, else "bad number" at i
        s = self.s
        n = len(s)
        j = i
        while j < n and 0x30 <= s[j] <= 0x39:
            j += 1
        if j == i:
            self.i = i
            self.fail("bad number")
        return j
