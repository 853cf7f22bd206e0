# DESCRIPTOR payloads built byte by byte: the kit organ's good one and one per invalid class.
#
# Written without the core's encoder on purpose: the encoder validates, and the invalid classes
# must reach the master exactly as broken as section 4 describes them.
import struct

_TYPES = {"int": 0, "float": 1, "string": 2, "bool": 3}
_EXEC = {"immediate": 0, "continuous": 1, "periodic": 2, "event_driven": 3}


def str8(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return bytes([len(b)]) + b


def param(name, ptype, lo, hi, unit=""):
    return str8(name) + bytes([_TYPES[ptype]]) + struct.pack(">ff", lo, hi) + str8(unit)


def cap(name, desc, exec_type, group, max_ms, params=()):
    out = str8(name) + str8(desc) + bytes([_EXEC[exec_type]]) + str8(group)
    out += struct.pack(">I", max_ms) + bytes([len(params)])
    for p in params:
        out += p
    return out


def descriptor(caps, module_id="CONFORM_01", module_type="conform", count=None):
    out = str8(module_id) + str8(module_type) + struct.pack(">HH", 0x0100, 0x0100)
    out += bytes([len(caps) if count is None else count])
    for c in caps:
        out += c
    return out


def kit_caps():
    """The kit organ's abilities (docs/conform.md): names no real organ uses."""
    return [
        cap("cf_on", "Conformance: an immediate ability.", "immediate", "cf", 0),
        cap("cf_hold", "Conformance: answered late.", "immediate", "cf_hold", 0),
        cap(
            "cf_set",
            "Conformance: numbers to forward.",
            "immediate",
            "",
            0,
            [
                param("level", "int", 0, 100),
                param("gain", "float", 0.5, 2.0, "x"),
                param("on", "bool", 0, 1),
            ],
        ),
        cap(
            "cf_run",
            "Conformance: a continuous ability.",
            "continuous",
            "cf",
            3000,
            [param("ms", "int", 100, 3000, "ms")],
        ),
        cap(
            "cf_say",
            "Conformance: text to forward.",
            "continuous",
            "cf_voice",
            2000,
            [param("text", "string", 1, 240)],
        ),
    ]


def good_descriptor():
    return descriptor(kit_caps())


def second_descriptor():
    """The second kit organ: cf_on again (a duplicate: it stays with the first) and cf_two."""
    caps = [
        kit_caps()[0],
        cap("cf_two", "Conformance: the second organ's own.", "immediate", "", 0),
    ]
    return descriptor(caps, module_id="CONFORM_02")


def invalid_descriptors():
    """[(class, payload, capability name it would add)]: each breaks one rule of section 4."""
    one = lambda name, *a, **k: cap(name, "Refused.", "immediate", "", 0, *a, **k)  # noqa: E731
    cases = [
        ("module_id charset (a space)", descriptor([one("bad_id")], module_id="BAD ID"), "bad_id"),
        ("module_id empty", descriptor([one("bad_idlen")], module_id=""), "bad_idlen"),
        (
            "module_type upper case",
            descriptor([one("bad_type")], module_type="Conform"),
            "bad_type",
        ),
        ("capability name upper case", descriptor([one("Bad_name")]), "Bad_name"),
        ("capability name 24 bytes", descriptor([one("bad_" + "n" * 20)]), "bad_" + "n" * 20),
        ("description empty", descriptor([cap("bad_desc", "", "immediate", "", 0)]), "bad_desc"),
        (
            "exec_type 7",
            descriptor([one("bad_exec")[:-7] + b"\x07" + one("bad_exec")[-6:]]),
            "bad_exec",
        ),
        ("capability_count 0", descriptor([], count=0), None),
        ("capability_count 9", descriptor([one("bad_c%d" % i) for i in range(9)]), "bad_c0"),
        ("bytes after the last field", descriptor([one("bad_tail")]) + b"\x00", "bad_tail"),
        ("payload cut short", descriptor([one("bad_short")])[:-3], "bad_short"),
        ("capability name repeated", descriptor([one("bad_dup"), one("bad_dup")]), "bad_dup"),
        (
            "param name repeated",
            descriptor([one("bad_pdup", [param("x", "int", 0, 1), param("x", "int", 0, 1)])]),
            "bad_pdup",
        ),
        ("min > max", descriptor([one("bad_minmax", [param("x", "int", 5, 1)])]), "bad_minmax"),
        (
            "min not finite (NaN)",
            descriptor([one("bad_nan", [param("x", "float", float("nan"), 1)])]),
            "bad_nan",
        ),
        (
            "max not finite (inf)",
            descriptor([one("bad_inf", [param("x", "float", 0, float("inf"))])]),
            "bad_inf",
        ),
        ("bool param 0..2", descriptor([one("bad_bool", [param("x", "bool", 0, 2)])]), "bad_bool"),
        (
            "two string params",
            descriptor(
                [one("bad_two", [param("text", "string", 1, 10), param("text2", "string", 1, 10)])]
            ),
            "bad_two",
        ),
        (
            "string param not named text",
            descriptor([one("bad_sname", [param("words", "string", 1, 10)])]),
            "bad_sname",
        ),
        (
            "string param not last",
            descriptor(
                [one("bad_slast", [param("text", "string", 1, 10), param("x", "int", 0, 1)])]
            ),
            "bad_slast",
        ),
        (
            "text max 241",
            descriptor([one("bad_tmax", [param("text", "string", 1, 241)])]),
            "bad_tmax",
        ),
        (
            "param type 9",
            descriptor(
                [
                    one(
                        "bad_ptype",
                        [param("x", "int", 0, 1)[:2] + b"\x09" + param("x", "int", 0, 1)[3:]],
                    )
                ]
            ),
            "bad_ptype",
        ),
        (
            "7 params",
            descriptor([one("bad_pcount", [param("p%d" % i, "int", 0, 1) for i in range(7)])]),
            "bad_pcount",
        ),
        (
            "unit 8 bytes",
            descriptor([one("bad_unit", [param("x", "int", 0, 1, "u" * 8)])]),
            "bad_unit",
        ),
    ]
    return [(c, p, n) for c, p, n in cases]
