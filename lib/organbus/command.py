# COMMAND and EVENT payload codecs (PROTOCOL.md sections 5 and 6) and the organ-side limit rules.
import math
import struct

import micropython

from organbus.utf8 import MAX_TEXT, clip_text, truncate_utf8, valid_utf8  # noqa: F401 (re-exported)

EVENT_DONE = 1


class CommandError(ValueError):
    pass


def _takes_text(capability):
    params = capability["params"]
    return bool(params) and params[-1]["type"] == "string"


def _f32_bytes(v):
    # IEEE rounding: a number beyond the f32 range travels as infinity (the organ clamps it);
    # CPython's struct refuses it, MicroPython's gives inf: this makes both give inf
    try:
        return struct.pack(">f", v)
    except OverflowError:
        return b"\x7f\x80\x00\x00" if v > 0 else b"\xff\x80\x00\x00"


def encode_command(name, values=(), text=None):
    """COMMAND payload: str8 name, one f32 per non-string param, str8 text if declared."""
    b = name.encode("utf-8")
    out = bytearray([len(b)])
    out.extend(b)
    for v in values:
        out.extend(_f32_bytes(v))
    if text is not None:
        t = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if len(t) > 255:
            raise CommandError("text: %d bytes do not fit a str8" % len(t))
        out.append(len(t))
        out.extend(t)
    return bytes(out)


def command_name(payload, n):
    """The capability name of a COMMAND payload, as str; CommandError when malformed."""
    if n < 1 or payload[0] + 1 > n:
        raise CommandError("name: truncated")
    if not valid_utf8(payload, 1, 1 + payload[0]):
        raise CommandError("name: not valid UTF-8")
    return str(bytes(payload[1 : 1 + payload[0]]), "utf-8")


def name_table(names):
    """Capability names as one table for find_name_at: str8 after str8, then a 0 byte."""
    out = bytearray()
    for name in names:
        b = name.encode("utf-8")
        out.append(len(b))
        out.extend(b)
    out.append(0)
    return bytes(out)


@micropython.viper
def find_name_at(payload: ptr8, off: int, n: int, table: ptr8) -> int:
    """Index in name_table(names) of the str8 name at payload[off] within payload[:n], or -1:
    a COMMAND's name is at 0 (the organ's dispatch), an EVENT's at 1 (the master's registry).
    One call, no allocation; viper on a board, the same lines on CPython (the shim's ptr8)."""
    if off < 0 or off >= n:
        return -1
    k = int(payload[off])
    if off + k >= n:
        return -1
    idx = 0
    p = 0
    while True:
        m = int(table[p])
        if m == 0:
            return -1
        if m == k:
            i = 0
            while i < k and payload[off + 1 + i] == table[p + 1 + i]:
                i += 1
            if i == k:
                return idx
        p += m + 1
        idx += 1


def name_is(payload, n, name_bytes):
    """True when the COMMAND in payload[:n] names exactly name_bytes (no allocation)."""
    k = len(name_bytes)
    if n < k + 1 or payload[0] != k:
        return False
    for i in range(k):
        if payload[1 + i] != name_bytes[i]:
            return False
    return True


def expected_length(capability):
    """Payload length of a COMMAND for capability, without its text bytes."""
    nums = sum(1 for p in capability["params"] if p["type"] != "string")
    return (
        1
        + len(capability["name"].encode("utf-8"))
        + 4 * nums
        + (1 if _takes_text(capability) else 0)
    )


def decode_command(payload, n, capability):
    """(raw float values, text or None) of a COMMAND for capability; CommandError with a reason."""
    base = expected_length(capability)
    if not name_is(payload, n, capability["name"].encode("utf-8")):
        raise CommandError("COMMAND does not name %r" % capability["name"])
    pos = 1 + payload[0]
    values = []
    for p in capability["params"]:
        if p["type"] == "string":
            continue
        if pos + 4 > n:
            raise CommandError("%s: payload of %d bytes is too short" % (capability["name"], n))
        v = struct.unpack(">f", bytes(payload[pos : pos + 4]))[0]
        if math.isnan(v):
            raise CommandError("%s: NaN" % p["name"])
        values.append(v)
        pos += 4
    text = None
    if _takes_text(capability):
        if pos >= n or pos + 1 + payload[pos] != n:
            raise CommandError(
                "%s: payload of %d bytes does not end with its text" % (capability["name"], n)
            )
        k = payload[pos]
        if not valid_utf8(payload, pos + 1, n):
            raise CommandError("text: not valid UTF-8")
        text = str(bytes(payload[pos + 1 : n]), "utf-8")
    elif n != base:
        raise CommandError("%s: payload of %d bytes, expected %d" % (capability["name"], n, base))
    return values, text


def clamp_value(param, x):
    """The organ's rule: clamp to [min, max]; int rounds half away from zero; bool is x >= 0.5."""
    if math.isnan(x):
        raise CommandError("%s: NaN" % param["name"])
    lo, hi = param["min"], param["max"]
    if x < lo:
        x = lo
    elif x > hi:
        x = hi
    t = param["type"]
    if t == "int":
        return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))
    if t == "bool":
        return x >= 0.5
    return float(x)


def clamp_text(param, text):
    """Text cut to the param's max length in UTF-8 bytes, at a character boundary."""
    return clip_text(text, int(param["max"]))


def encode_event(name, status, kind=EVENT_DONE):
    b = name.encode("utf-8")
    return bytes([kind, len(b)]) + b + bytes([status])


def decode_event(payload, n=-1):
    """(kind, name, status) of an EVENT payload; CommandError when malformed."""
    if n < 0:
        n = len(payload)
    if n < 3 or 2 + payload[1] + 1 != n:
        raise CommandError("EVENT: payload of %d bytes is malformed" % n)
    k = payload[1]
    if not valid_utf8(payload, 2, 2 + k):
        raise CommandError("EVENT name: not valid UTF-8")
    return payload[0], str(bytes(payload[2 : 2 + k]), "utf-8"), payload[2 + k]
