# DESCRIPTOR payload codec and validation (PROTOCOL.md section 4): every refusal names its field and rule.
import math
import struct
import sys

import micropython
from micropython import const

from organbus.utf8 import MAX_TEXT, ascii_end, ascii_str, valid_utf8

EXEC_TYPES = ("immediate", "continuous", "periodic", "event_driven")
PARAM_TYPES = ("int", "float", "string", "bool")
MAX_CAPABILITIES = const(8)
MAX_PARAMS = const(6)
F32_MAX = 3.4028234663852886e38
# halfway to 2**128: from here on an f32 is inf (from text: mpy-tool freezes no f32 literal
# beyond F32_MAX, and a port of f32 floats reads it as inf, as it would the literal)
_F32_OVERFLOW = float("3.4028235677973366e38")


class DescriptorError(ValueError):
    pass


# each ASCII byte's classes: 1 lower-case letter, 2 upper-case letter, 4 digit, 8 underscore
_CLASS = bytearray(256)
for _c in range(256):
    _CLASS[_c] = (97 <= _c <= 122) | (65 <= _c <= 90) << 1 | (48 <= _c <= 57) << 2 | (_c == 95) << 3

_MP = sys.implementation.name == "micropython"
_NONE = None  # (viper compares an object with None through a name)
_ZERO = 0  # (and an object with an int through names: the bounds' rules)
_ONE = 1
_MAX_TEXT = MAX_TEXT
_NOT_Q = const(1 << 25)  # the quick read's "not this way" (below): folded into viper's code,
_NOT = _NOT_Q  # and the same number as an object, for the comparisons of the bounds
_FIRST = const(16)  # (_qstr: the first byte a lower-case letter)
if not _MP:  # CPython: viper's casts are viperhost's (tools/shim, beside micropython's)
    import typing

    if not typing.TYPE_CHECKING:
        from viperhost import ptr8, uint  # noqa: F401


# Viper on MicroPython; on CPython the same lines run as Python over viperhost's casts.
@micropython.viper
def _all_in(buf: ptr8, i: int, e: int, table: ptr8, mask: int) -> int:
    # 1 when every byte of buf[i:e] has a class in mask, else 0
    while i < e:
        if not (table[buf[i]] & mask):
            return 0
        i += 1
    return 1


def _name(where):
    # a field's name: a str, or (format, args) formatted only for a refusal (a % format is
    # ~10,000 RV32 instructions; a descriptor has a few dozen fields)
    return where if type(where) is str else where[0] % where[1]


def _len(s):
    # UTF-8 bytes of the str s
    return len(s) if ascii_str(s) else len(s.encode("utf-8"))


def _check_ascii(where, field, s, lo, hi, rule, upper=False, first_letter=False):
    # where + field names the string (joined only for a refusal). Every character a letter of
    # the cases allowed, "_" or a digit; with first_letter the first one a lower-case letter.
    a = ascii_str(s)
    n = len(s) if a else len(s.encode("utf-8"))
    if n < lo or n > hi:
        raise DescriptorError(
            "%s%s: %r is %d bytes, must be %d..%d" % (_name(where), field, s, n, lo, hi)
        )
    if not n:
        return
    # every class is ASCII; MicroPython: the str's own bytes
    if (
        not a
        or not _all_in(s if _MP else s.encode(), 0, n, _CLASS, 13 | upper << 1)
        or (first_letter and not "a" <= s[0] <= "z")
    ):
        raise DescriptorError("%s%s: %r must match %s" % (_name(where), field, s, rule))


def _check_utf8_len(where, field, s, lo, hi):
    n = _len(s)
    if n < lo or n > hi:
        raise DescriptorError("%s%s: %d bytes, must be %d..%d" % (_name(where), field, n, lo, hi))


def _finite(x):
    return x - x == 0  # inf - inf and nan - nan are nan


_STR, _INT, _NUM, _LIST = "a string", "an int", "a number", "a list"
_TOP = (
    ("module_id", _STR),
    ("module_type", _STR),
    ("hw_version", _INT),
    ("fw_version", _INT),
    ("capabilities", _LIST),
)
_CAP = (
    ("name", _STR),
    ("description", _STR),
    ("exec_type", _STR),
    ("resource_group", _STR),
    ("max_duration_ms", _INT),
    ("params", _LIST),
)
_PARAM = (("name", _STR), ("type", _STR), ("min", _NUM), ("max", _NUM), ("unit", _STR))


def _is(v, kind):
    if kind is _STR:
        return isinstance(v, str)
    if kind is _LIST:
        return isinstance(v, (list, tuple))
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (kind is _NUM and isinstance(v, float))


def _shape(prefix, obj, fields):
    # every key there, every value of its type: so the rules below fail with reasons, not
    # with a KeyError or a TypeError
    if not isinstance(obj, dict):
        raise DescriptorError("%s: must be a dict, not %s" % (prefix or "descriptor", type(obj)))
    for key, kind in fields:
        if key not in obj:
            raise DescriptorError("%s%s: missing" % (prefix, key))
        if not _is(obj[key], kind):
            raise DescriptorError("%s%s: %r must be %s" % (prefix, key, obj[key], kind))


def _check_shape(d):
    _shape("", d, _TOP)
    for ci, c in enumerate(d["capabilities"]):
        at = "capabilities[%d]." % ci
        _shape(at, c, _CAP)
        for pi, p in enumerate(c["params"]):
            _shape("%sparams[%d]." % (at, pi), p, _PARAM)


def validate_descriptor(d):
    """Checks a descriptor dict against every rule of section 4; raises DescriptorError."""
    _check_shape(d)
    _check_rules(d)


def _check_rules(d):
    # the rules on a dict of the right shape (decode_descriptor's dicts always are)
    _check_ascii("module_id", "", d["module_id"], 1, 15, "[A-Za-z0-9_]", upper=True)
    _check_ascii("module_type", "", d["module_type"], 1, 15, "[a-z0-9_]")
    for key in ("hw_version", "fw_version"):
        if not 0 <= d[key] <= 0xFFFF:
            raise DescriptorError("%s: %r must be a u16" % (key, d[key]))
    caps = d["capabilities"]
    if not 1 <= len(caps) <= MAX_CAPABILITIES:
        raise DescriptorError("capability_count: %d, must be 1..8" % len(caps))
    seen = []
    for ci, c in enumerate(caps):
        at = ("capabilities[%d]", ci)
        _check_ascii(at, ".name", c["name"], 1, 23, "[a-z][a-z0-9_]*", first_letter=True)
        if c["name"] in seen:
            raise DescriptorError("%s.name: %r repeats" % (_name(at), c["name"]))
        seen.append(c["name"])
        at = ("capabilities[%d] (%s)", (ci, c["name"]))
        _check_utf8_len(at, ".description", c["description"], 1, 63)
        if c["exec_type"] not in EXEC_TYPES:
            raise DescriptorError(
                "%s.exec_type: %r is not one of %s" % (_name(at), c["exec_type"], EXEC_TYPES)
            )
        _check_ascii(at, ".resource_group", c["resource_group"], 0, 15, "[a-z0-9_]")
        ms = c["max_duration_ms"]
        if not 0 <= ms <= 0xFFFFFFFF:
            raise DescriptorError("%s.max_duration_ms: %r must be a u32" % (_name(at), ms))
        if c["exec_type"] == "immediate" and ms:
            raise DescriptorError(
                "%s.max_duration_ms: must be 0 for an immediate ability" % _name(at)
            )
        params = c["params"]
        if len(params) > MAX_PARAMS:
            raise DescriptorError("%s.param_count: %d, must be 0..6" % (_name(at), len(params)))
        strings = [p for p in params if p["type"] == "string"]
        if len(strings) > 1:
            raise DescriptorError(
                "%s.params: %d string params, at most one (text)" % (_name(at), len(strings))
            )
        names = []
        for pi, p in enumerate(params):
            pat = ("capabilities[%d] (%s).params[%d]", (ci, c["name"], pi))
            _check_ascii(pat, ".name", p["name"], 1, 15, "[a-z][a-z0-9_]*", first_letter=True)
            if p["name"] in names:
                raise DescriptorError("%s.name: %r repeats" % (_name(pat), p["name"]))
            names.append(p["name"])
            pat = ("capabilities[%d] (%s).params[%d] (%s)", (ci, c["name"], pi, p["name"]))
            t = p["type"]
            if t not in PARAM_TYPES:
                raise DescriptorError("%s.type: %r is not one of %s" % (_name(pat), t, PARAM_TYPES))
            lo, hi = p["min"], p["max"]
            if not (_finite(lo) and _finite(hi)):
                raise DescriptorError("%s: min %r and max %r must be finite" % (_name(pat), lo, hi))
            if abs(lo) >= _F32_OVERFLOW or abs(hi) >= _F32_OVERFLOW:
                raise DescriptorError(
                    "%s: min %r or max %r does not fit an f32" % (_name(pat), lo, hi)
                )
            if lo > hi:
                raise DescriptorError("%s: min %r is greater than max %r" % (_name(pat), lo, hi))
            if t == "bool" and (lo < 0 or hi > 1):
                raise DescriptorError("%s: a bool param's bounds must be within 0..1" % _name(pat))
            if t == "string":
                if p["name"] != "text":
                    raise DescriptorError("%s: a string param must be named 'text'" % _name(pat))
                if pi != len(params) - 1:
                    raise DescriptorError("%s: the text param must be the last param" % _name(pat))
                if lo < 0 or hi > MAX_TEXT:
                    raise DescriptorError(
                        "%s: text length bounds %r..%r must be within 0..%d"
                        % (_name(pat), lo, hi, MAX_TEXT)
                    )
            _check_utf8_len(pat, ".unit", p["unit"], 0, 7)


class _Reader:
    # every read names its field as what + field (joined only for a refusal)
    def __init__(self, buf, n):
        self.buf = buf
        self.pos = 0
        self.end = n

    def need(self, k, what, field):
        if self.pos + k > self.end:
            raise DescriptorError(
                "%s%s: truncated (needs %d bytes at offset %d of %d)"
                % (_name(what), field, k, self.pos, self.end)
            )

    # (each read tests its bytes inline and calls need() only to refuse: a call is ~1,000
    # RV32 instructions)
    def u8(self, what, field=""):
        p = self.pos
        if p >= self.end:
            self.need(1, what, field)
        self.pos = p + 1
        return self.buf[p]

    def u16(self, what, field=""):
        p = self.pos
        if p + 2 > self.end:
            self.need(2, what, field)
        b = self.buf
        self.pos = p + 2
        return (b[p] << 8) | b[p + 1]

    def u32(self, what, field=""):
        return (self.u16(what, field) << 16) | self.u16(what, field)

    def f32(self, what, field=""):
        p = self.pos
        if p + 4 > self.end:
            self.need(4, what, field)
        self.pos = p + 4
        return struct.unpack_from(">f", self.buf, p)[0]

    def str8(self, what, field=""):
        p = self.pos
        if p >= self.end:
            self.need(1, what, field)
        b = self.buf
        k = b[p]
        p += 1
        self.pos = p
        if p + k > self.end:
            self.need(k, what, field)
        self.pos = p + k
        if ascii_end(b, p, p + k) < p + k and not valid_utf8(b, p, p + k):
            raise DescriptorError("%s%s: not valid UTF-8" % (_name(what), field))
        return str(b[p : p + k], "utf-8")


def _f32(x):
    return struct.unpack(">f", struct.pack(">f", x))[0]


def _bound(t, x):
    if t == "float":
        if _SINGLE:
            return x  # floats are f32 (the C6): x is its own shortest form (what follows gives x)
        # the shortest of 7..9 significant digits that is still the same f32: 0.1 reads as
        # 0.1, and encoding the decoded dict gives back the very bytes
        for digits in (7, 8, 9):
            v = float("%.*g" % (digits, x))
            if _f32(v) == x:
                return v
        return x
    # Integral bounds of int, bool and string params read as ints, except -0.0: the int 0
    # would encode as 00000000, not the 80000000 that came.
    if _finite(x) and x == int(x) and (x or math.copysign(1.0, x) > 0):
        return int(x)
    return x


_SINGLE = _f32(0.1) == 0.1  # floats are single precision (MicroPython on the C6)


def _text(b, p, k):
    return str(b[p : p + k], "utf-8")


def _float_at(b, p):
    # a float param's bound at b[p], as the reader gives it; _NOT when it is not finite
    x = struct.unpack_from(">f", b, p)[0]
    return _bound("float", x) if _finite(x) else _NOT


# The quick read: one walk over a payload that keeps every rule in its plainest form (names
# and units ASCII or valid UTF-8, the bounds of int, bool and string params whole numbers
# below 2**24), the same dict as the reader's; anything else (every refusal among it) is
# None, and the reader below decodes it or names its refusal (each text stays the reader's).
# Viper on MicroPython (the reader took ~400,000 RV32 instructions for the LED's 184 bytes),
# the same lines on CPython over viperhost's casts.
@micropython.viper
def _qstr(payload, p: int, n: int, lo: int, hi: int, mask: int):
    # the str8 at payload[p] when it lies in payload[:n], has lo..hi bytes and each of its
    # bytes has a class in mask (mask 0: valid UTF-8; with _FIRST, the first a lower-case
    # letter), else None
    b = ptr8(payload)
    if p >= n:
        return None
    k = int(b[p])
    p += 1
    e = p + k
    if k < lo or k > hi or e > n:
        return None
    t = ptr8(_CLASS)
    if mask & _FIRST and k and not (t[b[p]] & 1):
        return None
    i = p
    while i < e:
        c = int(b[i])
        if mask:
            if not (t[c] & mask):
                return None
        elif c >= 0x80:
            if not valid_utf8(payload, p, e):
                return None
            break
        i += 1
    return _text(payload, p, k)


@micropython.viper
def _new_name(payload, p: int, n: int, hi: int, seen):
    # a capability's or a param's name (1..hi bytes of [a-z0-9_], a letter first) not yet in
    # `seen`, added to it; else None
    name = _qstr(payload, p, n, 1, hi, 13 | _FIRST)
    if name is _NONE or name in seen:
        return None
    seen.append(name)
    return name


@micropython.viper
def _whole(payload, p: int) -> int:
    # the f32 at payload[p] (an int, bool or string param's bound) as the int _bound gives
    # for it, when it is 0 or a whole number of magnitude 1 up to below 2**24; else _NOT_Q
    b = ptr8(payload)
    e = ((int(b[p]) & 0x7F) << 1) | (int(b[p + 1]) >> 7)
    m = ((int(b[p + 1]) & 0x7F) << 16) | (int(b[p + 2]) << 8) | int(b[p + 3])
    if e == 0:
        if m or int(b[p]) & 0x80:
            return _NOT_Q  # a subnormal, or -0.0 (which stays a float)
        return 0
    e -= 127
    if e < 0 or e > 23:
        return _NOT_Q  # a fraction, a big number, inf or nan
    m |= 0x800000
    s = 23 - e
    if m & ((1 << s) - 1):
        return _NOT_Q
    v = m >> s
    if int(b[p]) & 0x80:
        v = 0 - v
    return v


@micropython.viper
def _quick(payload, n: int):
    b = ptr8(payload)
    mid = _qstr(payload, 0, n, 1, 15, 15)
    if mid is _NONE:
        return None
    p = 1 + int(b[0])
    mtype = _qstr(payload, p, n, 1, 15, 13)
    if mtype is _NONE:
        return None
    p += 1 + int(b[p])
    if p + 5 > n:
        return None
    count = int(b[p + 4])
    if count < 1 or count > MAX_CAPABILITIES:
        return None
    d = {"module_id": mid, "module_type": mtype}
    d["hw_version"] = (int(b[p]) << 8) | int(b[p + 1])
    d["fw_version"] = (int(b[p + 2]) << 8) | int(b[p + 3])
    p += 5
    caps = []
    d["capabilities"] = caps
    ci = 0
    seen = []  # the capabilities' names so far
    while ci < count:
        name = _new_name(payload, p, n, 23, seen)
        if name is _NONE:
            return None
        p += 1 + int(b[p])
        desc = _qstr(payload, p, n, 1, 63, 0)
        if desc is _NONE:
            return None
        p += 1 + int(b[p])
        if p >= n or int(b[p]) > 3:
            return None
        e = int(b[p])
        group = _qstr(payload, p + 1, n, 0, 15, 13)
        if group is _NONE:
            return None
        p += 2 + int(b[p + 1])
        if p + 5 > n:
            return None
        ms = (uint(b[p]) << 24) | (uint(b[p + 1]) << 16) | (uint(b[p + 2]) << 8) | uint(b[p + 3])
        pc = int(b[p + 4])
        p += 5
        if (e == 0 and ms) or pc > MAX_PARAMS:
            return None
        c = {"name": name}
        c["description"] = desc
        c["exec_type"] = EXEC_TYPES[e]
        c["resource_group"] = group
        c["max_duration_ms"] = ms
        params = []
        c["params"] = params
        names = []
        pi = 0
        while pi < pc:
            pname = _new_name(payload, p, n, 15, names)
            if pname is _NONE:
                return None
            p += 1 + int(b[p])
            if p + 9 > n or int(b[p]) > 3:
                return None
            ty = int(b[p])
            if ty == 1:
                lo = _float_at(payload, p + 1)
                hi = _float_at(payload, p + 5)
            else:
                lo = _whole(payload, p + 1)
                hi = _whole(payload, p + 5)
            if lo == _NOT or hi == _NOT or lo > hi:
                return None
            if ty == 3 and (lo < _ZERO or hi > _ONE):
                return None
            if ty == 2 and (pname != "text" or pi != pc - 1 or lo < _ZERO or hi > _MAX_TEXT):
                return None
            unit = _qstr(payload, p + 9, n, 0, 7, 0)
            if unit is _NONE:
                return None
            p += 10 + int(b[p + 9])
            q = {"name": pname}
            q["type"] = PARAM_TYPES[ty]
            q["min"] = lo
            q["max"] = hi
            q["unit"] = unit
            params.append(q)
            pi += 1
        caps.append(c)
        ci += 1
    if p != n:
        return None
    return d


def decode_descriptor(payload, n=-1):
    """The descriptor dict of a DESCRIPTOR payload (payload[:n]); raises DescriptorError."""
    if n < 0:
        n = len(payload)
    d = _quick(payload, n) if n <= len(payload) else None
    return _read(payload, n) if d is None else d


def _read(payload, n):
    # the reader: decodes every descriptor, names every refusal
    r = _Reader(payload, n)
    d = {"module_id": r.str8("module_id"), "module_type": r.str8("module_type")}
    d["hw_version"] = r.u16("hw_version")
    d["fw_version"] = r.u16("fw_version")
    count = r.u8("capability_count")
    if not 1 <= count <= MAX_CAPABILITIES:
        raise DescriptorError("capability_count: %d, must be 1..8" % count)
    caps = d["capabilities"] = []
    for ci in range(count):
        at = ("capabilities[%d]", ci)
        c = {"name": r.str8(at, ".name")}
        at = ("capabilities[%d] (%s)", (ci, c["name"]))
        c["description"] = r.str8(at, ".description")
        e = r.u8(at, ".exec_type")
        if e >= len(EXEC_TYPES):
            raise DescriptorError("%s.exec_type: %d is not 0..3" % (_name(at), e))
        c["exec_type"] = EXEC_TYPES[e]
        c["resource_group"] = r.str8(at, ".resource_group")
        c["max_duration_ms"] = r.u32(at, ".max_duration_ms")
        pc = r.u8(at, ".param_count")
        if pc > MAX_PARAMS:
            raise DescriptorError("%s.param_count: %d, must be 0..6" % (_name(at), pc))
        params = c["params"] = []
        for pi in range(pc):
            pat = ("capabilities[%d] (%s).params[%d]", (ci, c["name"], pi))
            p = {"name": r.str8(pat, ".name")}
            t = r.u8(pat, ".type")
            if t >= len(PARAM_TYPES):
                raise DescriptorError("%s.type: %d is not 0..3" % (_name(pat), t))
            p["type"] = PARAM_TYPES[t]
            p["min"] = _bound(p["type"], r.f32(pat, ".min_val"))
            p["max"] = _bound(p["type"], r.f32(pat, ".max_val"))
            p["unit"] = r.str8(pat, ".unit")
            params.append(p)
        caps.append(c)
    if r.pos != r.end:
        raise DescriptorError("%d bytes remain after the last field" % (r.end - r.pos))
    _check_rules(d)  # its shape is the reader's: str, int, list and number where they belong
    return d


def _str8(out, s):
    b = s.encode("utf-8")
    out.append(len(b))
    out.extend(b)


def encode_descriptor(d):
    """DESCRIPTOR payload bytes of a descriptor dict (validated first)."""
    validate_descriptor(d)
    out = bytearray()
    _str8(out, d["module_id"])
    _str8(out, d["module_type"])
    out.extend(struct.pack(">HHB", d["hw_version"], d["fw_version"], len(d["capabilities"])))
    for c in d["capabilities"]:
        _str8(out, c["name"])
        _str8(out, c["description"])
        out.append(EXEC_TYPES.index(c["exec_type"]))
        _str8(out, c["resource_group"])
        out.extend(struct.pack(">IB", c["max_duration_ms"], len(c["params"])))
        for p in c["params"]:
            _str8(out, p["name"])
            out.append(PARAM_TYPES.index(p["type"]))
            out.extend(struct.pack(">ff", p["min"], p["max"]))
            _str8(out, p["unit"])
    return bytes(out)
