# The DESCRIPTOR decoder's quick read against the reader: the same dict (values and types) whenever it takes a payload, and never a payload the reader refuses.
import master_fakes as mf
from organbus import descriptor

from bench import Rand

UNIX_PORT = True


def _odd():
    # the forms the quick read leaves to the reader beside the common ones: float bounds, a
    # fraction, -0.0, a big whole number, bool and text params, UTF-8 text, upper-case ids
    def p(name, t, lo, hi, unit=""):
        return {"name": name, "type": t, "min": lo, "max": hi, "unit": unit}

    return {
        "module_id": "Odd_9",
        "module_type": "odd_1",
        "hw_version": 0xFFFF,
        "fw_version": 0,
        "capabilities": [
            {
                "name": "tune",
                "description": "Réglage fin, à chaud.",
                "exec_type": "periodic",
                "resource_group": "",
                "max_duration_ms": 0xFFFFFFFF,
                "params": [
                    p("gain", "float", -1.5, 0.1, "dB"),
                    p("frac", "int", 0.5, 3),
                    p("zero", "int", -0.0, 0),
                    p("big", "int", -(1 << 30), 1 << 30, "µs"),
                    p("on", "bool", 0, 1),
                    p("text", "string", 0, 240),
                ],
            },
            {
                "name": "x",
                "description": "x",
                "exec_type": "event_driven",
                "resource_group": "g_2",
                "max_duration_ms": 5,
                "params": [p("n", "int", -16777216, 16777216)],
            },
        ],
    }


def _form(x):
    # a value with the type of every part, for a comparison that tells 1 from 1.0
    if isinstance(x, dict):
        return sorted((k, _form(v)) for k, v in x.items())
    if isinstance(x, list):
        return [_form(v) for v in x]
    return (type(x).__name__, repr(x))


def _read(p, n):
    try:
        return descriptor._read(p, n)
    except descriptor.DescriptorError:
        return None


def _check(p, what):
    n = len(p)
    q = descriptor._quick(p, n)
    r = _read(p, n)
    if q is not None:
        assert r is not None, "%s: the quick read took what the reader refuses" % what
        assert _form(q) == _form(r), "%s: %r, the reader %r" % (what, q, r)
    return q is not None


def test_the_quick_read_takes_the_organs_and_gives_the_readers_dict():
    for d in (mf.led(), mf.speaker(), _odd()):
        p = descriptor.encode_descriptor(d)
        quick = d["module_id"] != "Odd_9"
        assert _check(p, d["module_id"]) == quick, d["module_id"]
        assert _check(memoryview(bytearray(p + b"\x00\x00"))[: len(p)], "view") == quick
        assert _form(descriptor.decode_descriptor(p)) == _form(_read(p, len(p)))


def test_the_quick_read_on_changed_and_cut_payloads():
    taken = 0
    for d in (mf.led(), mf.speaker(), _odd()):
        base = descriptor.encode_descriptor(d)
        for i in range(len(base)):
            b = bytearray(base)
            for v in (0, 1, 0x41, 0x7F, 0x80, 0xFF, base[i] ^ 1, (base[i] + 1) & 0xFF):
                b[i] = v
                taken += _check(bytes(b), "%s byte %d = %d" % (d["module_id"], i, v))
            taken += _check(base[:i], "%s cut to %d" % (d["module_id"], i))
        taken += _check(base + b"\x00", "%s and a byte" % d["module_id"])
        rnd = Rand(len(base))
        for k in range(60):
            b = bytearray(base)
            for _ in range(1 + rnd.below(3)):
                b[rnd.below(len(b))] = rnd.below(256)
            taken += _check(bytes(b), "%s random %d" % (d["module_id"], k))
    assert taken > 300, taken  # (most changes of a name's letter or a number are still legal)
