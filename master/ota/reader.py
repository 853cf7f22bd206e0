# The update's manifest read as its bytes stream in (ManifestReader), and its file entries read back from the flash one at a time (Entries).
from micropython import const

_MAX_TOKEN = const(128)  # bytes of one string or number in a manifest (a path is 96 at most)
_MAX_NEST = const(8)
# what the reader expects next
_VALUE = const(0)
_VALUE_OR_END = const(1)  # after "["
_KEY_OR_END = const(2)  # after "{"
_KEY = const(3)  # after "," in an object
_COLON = const(4)
_NEXT = const(5)  # "," or the end of the open container
_DONE = const(6)
# inside a token
_OUT = const(0)
_STR = const(1)
_ESCAPE = const(2)
_UHEX = const(3)
_ATOM = const(4)  # a number or true/false/null
_ESCAPES = {0x22: 0x22, 0x5C: 0x5C, 0x2F: 0x2F, 0x62: 8, 0x66: 12, 0x6E: 10, 0x72: 13, 0x74: 9}
_ATOM_BYTES = b"0123456789+-.eEtrufalsn"


class ManifestReader:
    """A manifest's JSON read as its bytes arrive (`feed`, then `finish()` -> (doc, dups)),
    so no buffer of the manifest's size is ever needed: only its values, built from pieces
    of at most 128 bytes (a small heap has no large free block once it has run a while). The
    first error is kept (`error`) and ends the reading; the caller says it after the
    signature's check, which comes first. Strings, numbers, true/false/null, objects
    (duplicate keys listed, the last kept) and arrays, nested 8 deep at most, as RFC 8259.
    `entries`: each element of the top object's "files" list is not kept but handed out, one
    at a time: `feed` returns after the byte that ended it (the bytes it took), with `ready`
    set and the element in `entry`; the caller takes it, clears `ready` and feeds the rest."""

    def __init__(self, entries=False):
        self.entries = entries
        self.ready = False
        self.entry = None
        self.tok = bytearray(_MAX_TOKEN)
        self.n = 0
        self.mode = _OUT
        self.expect = _VALUE
        self.stack = []  # [container, its pending key], innermost last
        self.key = False  # the string being read is a key
        self.u = 0  # the \u escape's code point so far, and its digits
        self.ud = 0
        self.doc = None
        self.dups = []
        self.error = None
        self.at = 0  # bytes read

    def _fail(self, why):
        if self.error is None:
            self.error = "%s at byte %d" % (why, self.at)

    def feed(self, data):
        k = 0
        for c in data:
            k += 1
            if self.error is not None:
                return k
            if self.mode == _ATOM:
                if c in _ATOM_BYTES:
                    self._put(c)
                    self.at += 1
                    continue
                self._atom()
                if self.error is not None:
                    return k
            if self.mode == _OUT:
                self._structure(c)
            elif self.mode == _STR:
                if c == 0x22:
                    self._string()
                elif c == 0x5C:
                    self.mode = _ESCAPE
                elif c < 0x20:
                    self._fail("a control character in a string")
                else:
                    self._put(c)
            elif self.mode == _ESCAPE:
                if c == 0x75:
                    self.mode = _UHEX
                    self.u = self.ud = 0
                elif c in _ESCAPES:
                    self._put(_ESCAPES[c])
                    self.mode = _STR
                else:
                    self._fail("a bad escape")
            else:  # _UHEX
                d = _hexval(c)
                if d < 0:
                    self._fail("a bad \\u escape")
                else:
                    self.u = self.u * 16 + d
                    self.ud += 1
                    if self.ud == 4:
                        if 0xD800 <= self.u < 0xE000:
                            self._fail("a \\u escape of a surrogate")
                        else:
                            for b in chr(self.u).encode():
                                self._put(b)
                        self.mode = _STR
            self.at += 1
            if self.ready:
                return k
        return k

    def finish(self):
        """(doc, dups) once every byte came; raises ValueError with the first error."""
        if self.mode == _ATOM and self.error is None:
            self._atom()
        if self.error is None and (self.mode != _OUT or self.expect != _DONE):
            self._fail("the manifest ends inside its value")
        if self.error is not None:
            raise ValueError(self.error)
        return self.doc, self.dups

    def _put(self, b):
        if self.n >= _MAX_TOKEN:
            self._fail("a string or number longer than %d bytes" % _MAX_TOKEN)
            return
        self.tok[self.n] = b
        self.n += 1

    def _structure(self, c):
        e = self.expect
        if c in b" \t\n\r":
            return
        if e == _DONE:
            self._fail("data after the manifest's value")
        elif e == _VALUE or e == _VALUE_OR_END:
            if c == 0x7B or c == 0x5B:  # { [
                if len(self.stack) >= _MAX_NEST:
                    self._fail("nested deeper than %d" % _MAX_NEST)
                    return
                self.stack.append([{} if c == 0x7B else [], None])
                self.expect = _KEY_OR_END if c == 0x7B else _VALUE_OR_END
            elif c == 0x5D and e == _VALUE_OR_END:  # ]
                self._value(self.stack.pop()[0])
            elif c == 0x22:
                self.key = False
                self.mode = _STR
                self.n = 0
            elif c in _ATOM_BYTES:
                self.mode = _ATOM
                self.n = 0
                self._put(c)
            else:
                self._fail("%r where a value belongs" % chr(c))
        elif e == _KEY_OR_END or e == _KEY:
            if c == 0x22:
                self.key = True
                self.mode = _STR
                self.n = 0
            elif c == 0x7D and e == _KEY_OR_END:  # }
                self._value(self.stack.pop()[0])
            else:
                self._fail("%r where a key belongs" % chr(c))
        elif e == _COLON:
            if c == 0x3A:
                self.expect = _VALUE
            else:
                self._fail("%r where a colon belongs" % chr(c))
        else:  # _NEXT
            top = self.stack[-1][0]
            is_obj = isinstance(top, dict)
            if c == 0x2C:
                self.expect = _KEY if is_obj else _VALUE
            elif (c == 0x7D and is_obj) or (c == 0x5D and not is_obj):
                self._value(self.stack.pop()[0])
            else:
                self._fail("%r where a comma or the end belongs" % chr(c))

    def _string(self):
        self.mode = _OUT
        try:
            s = bytes(self.tok[: self.n]).decode()
        except UnicodeError:
            self._fail("a string that is not UTF-8")
            return
        if self.key:
            top = self.stack[-1]
            if s in top[0]:
                self.dups.append((len(self.stack), s))
            top[1] = s
            self.expect = _COLON
        else:
            self._value(s)

    def _atom(self):
        self.mode = _OUT
        t = bytes(self.tok[: self.n])
        if t == b"true":
            self._value(True)
        elif t == b"false":
            self._value(False)
        elif t == b"null":
            self._value(None)
        elif _is_int(t):
            self._value(int(t))
        else:
            self._fail("%r is not a number this manifest takes" % t.decode())

    def _value(self, v):
        if not self.stack:
            self.doc = v
            self.expect = _DONE
            return
        top = self.stack[-1]
        if isinstance(top[0], dict):
            top[0][top[1]] = v
        elif (
            self.entries
            and len(self.stack) == 2
            and self.stack[0][1] == "files"
            and isinstance(self.stack[0][0], dict)
        ):
            self.entry = v  # one of the files, handed out, never kept
            self.ready = True
        else:
            top[0].append(v)
        self.expect = _NEXT


def _hexval(c):
    if 0x30 <= c <= 0x39:
        return c - 0x30
    if 0x61 <= c <= 0x66:
        return c - 0x57
    if 0x41 <= c <= 0x46:
        return c - 0x37
    return -1


def _is_int(t):
    # JSON's integer: -?(0|[1-9][0-9]*); a manifest holds no other number
    d = t[1:] if t[:1] == b"-" else t
    if not d or (len(d) > 1 and d[0] == 0x30) or len(d) > 20:
        return False
    for c in d:
        if not 0x30 <= c <= 0x39:
            return False
    return True


class Entries:
    """The manifest's file entries read back from its scratch file `f` one at a time (`next()`:
    True with the entry in `entry`, False at the end; then `finish()` -> (doc, dups) of the
    rest, its files list empty). From the start, or from `at`, the byte after an entry
    (`offset()` gives it). A 64-byte buffer and one entry's values at a time: the heap does not
    grow with the number of files (docs/master.md)."""

    def __init__(self, f, at=None):
        self.f = f
        self.buf = bytearray(64)
        self.n = self.i = 0
        self.reader = r = ManifestReader(True)
        self.entry = None
        if at is not None:  # inside the top object's files list, after one of them
            f.seek(at)
            r.stack = [[{}, "files"], [[], None]]
            r.expect = _NEXT
            r.at = at

    def next(self):
        r = self.reader
        while not r.ready:
            if r.error is not None:
                return False
            if self.i == self.n:
                self.n = self.f.readinto(self.buf) or 0
                self.i = 0
                if not self.n:
                    return False
            self.i += r.feed(memoryview(self.buf)[self.i : self.n])
        r.ready = False
        self.entry = r.entry
        r.entry = None
        return True

    def offset(self):
        return self.reader.at

    def finish(self):
        while self.next():
            pass
        self.close()
        return self.reader.finish()

    def close(self):
        self.f.close()
