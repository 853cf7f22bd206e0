# A JSON request body read from its pieces into one small buffer, each string clamped as it comes: a long Body Protocol text on a small heap.
#
# The strict reader (organbus.jsonread) cuts every string out whole, twice: a 3.9 KB /speak
# body, under the 4 KB limit, found no free block that size at 80 KB and got 503. The speaker
# says 240 bytes of a text at most (utf8.MAX_TEXT), so `Clamp.read` walks the body's pieces
# (httpd Request.pieces) once, byte by byte, writing into one buffer taken at boot everything
# but the tail of each long string: a string keeps its first `limit` bytes of text, at a
# character boundary (and no more than 2 * `limit` bytes of its JSON, when escapes spell it).
# Only that is read strictly. What is dropped is still checked: its UTF-8 here (the strict
# reader's words: it checks UTF-8 first too), and the first bad escape or control character
# is kept, with a few bytes after it, for the strict reader to refuse with its own words; a
# lone surrogate is kept as well (the strict reader's value of such a string). Offsets in
# every refusal are the whole body's.
from micropython import const

from organbus import jsonread
from organbus.utf8 import sequence_length

_OUT = const(0)  # between strings
_STR = const(1)  # in a string
_ESC = const(2)  # after a backslash in a string
_HEX = const(3)  # in the four hex digits of a \u escape
_SIMPLE = b'"\\/bfnrt'
_HEXDIGITS = b"0123456789abcdefABCDEF"


class Overflow(ValueError):
    """The body, its strings clamped, does not fit the buffer."""


class Clamp:
    """One body at a time: `begin()`, `feed(piece)` for each piece as it comes, `finish() ->
    (value, dups, cut)`: the body's value as jsonread.read gives it, each string clamped; `cut`
    lists the text length in bytes of each string that was cut. finish raises
    jsonread.JsonError as the strict reader does, Overflow when the clamped body is longer than
    the buffer. `read(pieces)` does all three. As an httpd.Fed route's feeder, `lend()` gives
    it (or, while it reads another body, a new one) and `close()` gives it back."""

    def __init__(self, size, limit):
        self.out = bytearray(size)
        self.limit = limit
        self.raw_limit = 2 * limit
        self.esc = bytearray(12)  # the escape being read: \\uHHHH, a high one and its low
        self.lent = False

    def lend(self, req=None):
        if self.lent:
            other = Clamp(len(self.out), self.limit)
            other.lent = True
            other.begin()
            return other
        self.lent = True
        self.begin()
        return self

    def close(self):
        self.lent = False

    def read(self, pieces):
        self.begin()
        for p in pieces:
            self.feed(p)
        return self.finish()

    def feed(self, piece):
        if self.error is not None:
            return
        try:
            for b in piece:
                self._byte(b)
                self.pos += 1
        except ValueError as e:  # JsonError (UTF-8) or Overflow: said by finish
            self.error = e

    def finish(self):
        if self.error is not None:
            raise self.error
        if self.need or self.bad:  # a UTF-8 sequence cut short by the end
            self._bad_utf8()
        if self.state == _ESC or self.state == _HEX:
            self._keep_bad(self.esc_pos)  # the strict reader says where it ended
        if self.high is not None:
            self._lone_high()
        if self.stopped and not self.quoted:
            # The strict reader refuses a bad escape only when a '"' follows it somewhere (it
            # looks for the string's end first); without one, it names the first control
            # character from there on, else the body's end: given it what decides.
            self.stopped = False
            if self.quote >= 0:
                self._write(0x22, self.quote)
            elif self.ctrl >= 0:
                self._write(self.ctrl_byte, self.ctrl)
        if self.pos - self.j != self.delta:
            self.map.append((self.j, self.pos - self.j))  # the end of out is the body's end
        mv = memoryview(self.out)[: self.j]
        try:
            value, dups = jsonread.read(mv)
        except jsonread.JsonError as e:
            raise jsonread.JsonError(e.cause, self._origin(e.offset))
        return value, dups, self.cut

    # -- the walk ------------------------------------------------------------------------------

    def begin(self):
        self.error = None
        self.state = _OUT
        self.pos = 0  # offset in the whole body of the byte being read
        self.j = 0  # bytes written to out
        self.delta = 0  # whole-body offset minus out offset, from out[map[-1][0]] on
        self.map = []  # (out offset, delta) where delta changed
        self.stopped = False  # a bad byte was kept with its tail: nothing more is written
        self.tail = 0
        self.quoted = False  # a '"' is among the bytes kept after the bad one
        self.quote = -1  # offset of the first '"' after those, or -1
        self.ctrl = -1  # offset of the first control character after them, or -1
        self.ctrl_byte = 0
        self.cut = []
        self.need = 0  # UTF-8 continuation bytes still due
        self.bad = False  # an invalid sequence: its claimed bytes are being collected
        self.lo = self.hi = 0
        self.lead = 0  # offset of the current UTF-8 sequence's first byte
        self.seq = bytearray(4)
        self.sn = 0
        self.high = None  # (offset, cp) of a \u high surrogate waiting for its low

    def _write(self, b, origin):
        if self.stopped:
            return
        j = self.j
        if j >= len(self.out):
            raise Overflow("the body, its strings clamped to %d bytes, is over %d bytes" % (
                self.limit, len(self.out)))  # fmt: skip
        if origin - j != self.delta:
            self.delta = origin - j
            self.map.append((j, self.delta))
        self.out[j] = b
        self.j = j + 1

    def _origin(self, offset):
        d = 0
        for j, delta in self.map:
            if j > offset:
                break
            d = delta
        return offset + d

    def _byte(self, b):
        self._utf8(b)
        st = self.state
        pos = self.pos
        if self.tail:  # the bytes the strict reader reads after a bad one, whatever they are
            self._write(b, pos)
            self.quoted = self.quoted or b == 0x22
            self.tail = max(self.tail - 1, self.need)  # never a character cut in two
            self.stopped = not self.tail
            return
        if self.stopped:  # only what decides the strict reader's refusal (read())
            if self.quote < 0:
                if b == 0x22:
                    self.quote = pos
                elif b < 0x20 and self.ctrl < 0:
                    self.ctrl = pos
                    self.ctrl_byte = b
            return
        if st == _OUT:
            self._write(b, pos)
            if b == 0x22:
                self.state = _STR
                self.kept = 0  # bytes of text kept
                self.raw = 0  # bytes of JSON kept
                self.text = 0  # bytes of text seen
                self.cutting = False
                self.lone = False  # a lone surrogate of this string is kept
                self.keep = True  # the current character is kept
        elif st == _STR:
            if self.high is not None and b != 0x5C:
                self._lone_high()
            if b == 0x22:
                self._write(b, pos)
                self.state = _OUT
                if self.cutting:
                    self.cut.append(self.text)
            elif b == 0x5C:
                self.state = _ESC
                self.esc_pos = pos
                self.en = 0
                self._esc(b)
            elif b < 0x20:  # kept for the strict reader to refuse, and the end of writing
                self._write(b, pos)
                self.stopped = True
            elif b < 0x80 or b >= 0xC0:  # a character's first byte
                n = sequence_length(b) if b >= 0x80 else 1
                self.keep = self._fits(n, n)
                if self.keep:
                    self._write(b, pos)
            elif self.keep:  # the rest of a kept character
                self._write(b, pos)
        elif st == _ESC:
            self._esc(b)
            if self.high is not None and b != 0x75:
                self._lone_high()
            if b in _SIMPLE:
                self.state = _STR
                self._unit(1)
            elif b == 0x75:  # u
                self.state = _HEX
            else:
                self._keep_bad(self.esc_pos)
        else:  # _HEX
            self._esc(b)
            if b not in _HEXDIGITS:
                self._keep_bad(self.esc_pos)
            elif self.en == 6:
                self.state = _STR
                self._u()

    def _esc(self, b):
        self.esc[self.en] = b
        self.en += 1

    def _fits(self, text, raw):
        # whether a character of `text` bytes spelt in `raw` bytes of JSON is kept
        self.text += text
        if not self.cutting and (self.kept + text > self.limit or self.raw + raw > self.raw_limit):
            self.cutting = True
        if self.cutting:
            return False
        self.kept += text
        self.raw += raw
        return True

    def _unit(self, text):
        # the escape in esc[:en], `text` bytes once decoded: kept or dropped whole
        if self._fits(text, self.en):
            self._flush(self.esc_pos)

    def _flush(self, origin):
        for i in range(self.en):
            self._write(self.esc[i], origin + i)

    def _u(self):
        cp = int(str(self.esc[2:6], "ascii"), 16)
        if self.high is not None:
            if 0xDC00 <= cp < 0xE000:  # the low of a pair: one character of 4 bytes
                at, hcp = self.high
                self.high = None
                if self._fits(4, 12):
                    for i in range(6):
                        self._write(self.out_high[i], at + i)
                    self._flush(self.esc_pos)
                return
            self._lone_high()
        if 0xD800 <= cp < 0xDC00:  # a high: wait for its low
            self.high = (self.esc_pos, cp)
            self.out_high = bytes(self.esc[:6])
            return
        if 0xDC00 <= cp < 0xE000:  # a lone low
            self._lone()
            return
        self._unit(1 if cp < 0x80 else 2 if cp < 0x800 else 3)

    def _lone_high(self):
        at, cp = self.high
        self.high = None
        if not self.lone:
            self.lone = True
            for i in range(6):
                self._write(self.out_high[i], at + i)

    def _lone(self):
        # a lone surrogate makes the strict reader's value of the string a Lone: kept, once
        if not self.lone:
            self.lone = True
            self._flush(self.esc_pos)

    def _keep_bad(self, origin):
        # keep what the strict reader reads to refuse it (the escape so far, and for an escape
        # the rest of its character, or of its four hex digits), then stop writing
        if self.stopped:
            return
        if self.high is not None:
            self._lone_high()
        st = self.state
        self.state = _STR
        if st == _ESC or st == _HEX:
            self._flush(origin)
            if st == _ESC and self.en == 2:
                self.tail = sequence_length(self.esc[1]) - 1
            elif st == _HEX:
                self.tail = 6 - self.en
            self.quoted = self.esc[self.en - 1] == 0x22
        self.tail = max(self.tail, self.need)  # never a character cut in two
        self.stopped = not self.tail

    # -- UTF-8, checked for every byte (the strict reader's rules and words) -------------------

    def _utf8(self, b):
        if self.bad:  # the bytes an invalid sequence's lead claims, for the message
            self.seq[self.sn] = b
            self.sn += 1
            if self.sn >= sequence_length(self.seq[0]):
                self._bad_utf8()
            return
        if self.need:
            self.seq[self.sn] = b
            self.sn += 1
            if not self.lo <= b <= self.hi:
                if self.sn >= sequence_length(self.seq[0]):
                    self._bad_utf8()
                self.bad = True
                return
            self.lo, self.hi = 0x80, 0xBF
            self.need -= 1
            return
        if b < 0x80:
            return
        self.lead = self.pos
        self.seq[0] = b
        self.sn = 1
        if 0xC2 <= b <= 0xDF:
            self.need, self.lo, self.hi = 1, 0x80, 0xBF
        elif 0xE0 <= b <= 0xEF:
            self.need = 2
            self.lo = 0xA0 if b == 0xE0 else 0x80
            self.hi = 0x9F if b == 0xED else 0xBF
        elif 0xF0 <= b <= 0xF4:
            self.need = 3
            self.lo = 0x90 if b == 0xF0 else 0x80
            self.hi = 0x8F if b == 0xF4 else 0xBF
        else:
            self._bad_utf8()

    def _bad_utf8(self):
        # jsonread names the bytes the lead claims; those not seen (cut short) are not named
        n = min(sequence_length(self.seq[0]), self.sn)
        seq = self.seq[:n]
        raise jsonread.JsonError(
            "invalid UTF-8 %s %s"
            % ("byte" if len(seq) == 1 else "bytes", " ".join(["%02x" % c for c in seq])),
            self.lead,
        )
