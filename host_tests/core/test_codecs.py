# DESCRIPTOR, COMMAND and EVENT codecs: every validation rule with its reason, organ-side clamping, UTF-8.
from organbus import command
from organbus import descriptor

UNIX_PORT = True

NAN = float("nan")
INF = float("inf")


def _cap(
    name="led_blink", params=None, exec_type="continuous", group="led", max_ms=40000, desc=None
):
    if params is None:
        params = [
            {"name": "count", "type": "int", "min": 1, "max": 20, "unit": ""},
            {"name": "period_ms", "type": "int", "min": 100, "max": 2000, "unit": "ms"},
        ]
    return {
        "name": name,
        "description": desc if desc is not None else "Blink the light a number of times.",
        "exec_type": exec_type,
        "resource_group": group,
        "max_duration_ms": max_ms,
        "params": params,
    }


def _desc(caps=None, module_id="LED_001", module_type="led"):
    return {
        "module_id": module_id,
        "module_type": module_type,
        "hw_version": 0x0102,
        "fw_version": 0x0304,
        "capabilities": caps if caps is not None else [_cap()],
    }


def _text_param(lo=1, hi=240, name="text"):
    return {"name": name, "type": "string", "min": lo, "max": hi, "unit": ""}


def _path(reason):
    # "capabilities[1] (blink).params[0] (count).name: ..." -> "capabilities[1].params[0].name: ..."
    out = ""
    i = 0
    while i < len(reason):
        if reason[i] == " " and reason[i + 1 : i + 2] == "(":
            j = reason.find(")", i)
            if j > 0 and reason[j + 1 : j + 2] in (".", ":"):
                i = j + 1
                continue
        out += reason[i]
        i += 1
    return out


def _refused(d, field, why):
    """The descriptor must be refused by validate and by encode, with a reason naming the field."""
    for f in (descriptor.validate_descriptor, descriptor.encode_descriptor):
        try:
            f(d)
        except descriptor.DescriptorError as e:
            reason = _path(str(e))
            assert field in reason, "%s: reason %r does not name %s" % (why, reason, field)
            continue
        raise AssertionError("%s: %s accepted it" % (why, f.__name__))


def test_roundtrip_with_floats_and_utf8():
    caps = [
        _cap(
            "heat",
            [
                {"name": "level", "type": "float", "min": -1.5, "max": 2.25, "unit": "\u00b0C"},
                {"name": "loud", "type": "bool", "min": 0, "max": 1, "unit": ""},
                _text_param(0, 240),
            ],
            "periodic",
            "",
            0,
            "Heat it \u2014 gently, \u597d.",
        ),
        _cap("beep", [], "event_driven", "audio", 7),
        _cap("go", [], "immediate", "z_9", 0),
        _cap("long", [], "continuous", "z_9", 4294967295),
    ]
    d = _desc(caps, "Ab_9", "x_1")
    p = descriptor.encode_descriptor(d)
    back = descriptor.decode_descriptor(p)
    assert back == d, "round trip changed the descriptor:\n%r\n%r" % (d, back)
    back = descriptor.decode_descriptor(p + b"\x00\x00", len(p))
    assert back == d, "decode_descriptor(payload, n) must ignore bytes past n"


def test_limits_that_are_legal():
    caps = []
    for i in range(8):
        caps.append(_cap("c%d" % i, [], "immediate", "", 0, "d"))
    caps[0] = _cap("a" * 23, [], "immediate", "g" * 15, 0, "x" * 63)
    caps[1] = _cap(
        "six",
        [{"name": "p%d" % i, "type": "int", "min": 0, "max": 1, "unit": "u" * 7} for i in range(5)]
        + [_text_param(0, 240)],
    )
    d = _desc(caps, "M" * 15, "t" * 15)
    descriptor.validate_descriptor(d)
    back = descriptor.decode_descriptor(descriptor.encode_descriptor(d))
    assert back == d, "a descriptor at every upper limit must round-trip"


def test_module_fields():
    _refused(_desc(module_id=""), "module_id", "empty module_id")
    _refused(_desc(module_id="LED.001"), "module_id", "module_id with a dot")
    _refused(_desc(module_id="M" * 16), "module_id", "module_id of 16 bytes")
    _refused(_desc(module_id="L\u00e9D"), "module_id", "non-ASCII module_id")
    _refused(_desc(module_type="Led"), "module_type", "upper-case module_type")
    _refused(_desc(module_type=""), "module_type", "empty module_type")
    _refused(_desc(module_type="t" * 16), "module_type", "module_type of 16 bytes")
    d = _desc()
    d["hw_version"] = 65536
    _refused(d, "hw_version", "hw_version over u16")
    d = _desc()
    d["fw_version"] = -1
    _refused(d, "fw_version", "negative fw_version")


def test_capability_count():
    _refused(_desc([]), "capability_count", "no capability")
    _refused(_desc([_cap("c%d" % i) for i in range(9)]), "capability_count", "nine capabilities")


def test_capability_fields():
    _refused(_desc([_cap("Led")]), "capabilities[0].name", "upper-case name")
    _refused(_desc([_cap("1led")]), "capabilities[0].name", "name starts with a digit")
    _refused(_desc([_cap("")]), "capabilities[0].name", "empty name")
    _refused(_desc([_cap("a" * 24)]), "capabilities[0].name", "name of 24 bytes")
    _refused(_desc([_cap("led-on")]), "capabilities[0].name", "name with a dash")
    _refused(_desc([_cap(desc="")]), "capabilities[0].description", "empty description")
    _refused(_desc([_cap(desc="x" * 64)]), "capabilities[0].description", "64-byte description")
    # 32 characters but 64 bytes of UTF-8: the limit is in bytes
    _refused(_desc([_cap(desc="\u00e9" * 32)]), "capabilities[0].description", "64 UTF-8 bytes")
    _refused(_desc([_cap(exec_type="sometimes")]), "capabilities[0].exec_type", "unknown exec_type")
    _refused(_desc([_cap(group="LED")]), "capabilities[0].resource_group", "upper-case group")
    _refused(_desc([_cap(group="g" * 16)]), "capabilities[0].resource_group", "16-byte group")
    _refused(_desc([_cap(max_ms=-1)]), "capabilities[0].max_duration_ms", "negative duration")
    _refused(_desc([_cap(max_ms=1 << 32)]), "capabilities[0].max_duration_ms", "duration over u32")
    _refused(_desc([_cap("a"), _cap("b"), _cap("a")]), "capabilities[2].name", "repeated name")


def test_param_fields():
    good = {"name": "count", "type": "int", "min": 1, "max": 20, "unit": ""}

    def with_(**kw):
        p = dict(good)
        for k in kw:
            p[k] = kw[k]
        return _desc([_cap("ok"), _cap("blink", [p])])

    f = "capabilities[1].params[0]"
    _refused(with_(name="Count"), f + ".name", "upper-case param name")
    _refused(with_(name=""), f + ".name", "empty param name")
    _refused(with_(name="c" * 16), f + ".name", "16-byte param name")
    _refused(with_(type="double"), f + ".type", "unknown param type")
    _refused(with_(min=5, max=4), f, "min greater than max")
    _refused(with_(min=NAN), f, "NaN min")
    _refused(with_(max=INF), f, "infinite max")
    _refused(with_(unit="u" * 8), f + ".unit", "8-byte unit")
    _refused(with_(type="bool", min=0, max=2), f, "bool max 2")
    _refused(with_(type="bool", min=-1, max=1), f, "bool min -1")
    _refused(
        _desc([_cap("blink", [good, dict(good)])]),
        "capabilities[0].params[1].name",
        "repeated param",
    )
    seven = []
    for i in range(7):
        p = dict(good)
        p["name"] = "p%d" % i
        seven.append(p)
    _refused(_desc([_cap("blink", seven)]), "capabilities[0].param_count", "7 params")


def test_string_param_rules():
    n = {"name": "count", "type": "int", "min": 1, "max": 20, "unit": ""}
    f = "capabilities[0].params"
    _refused(_desc([_cap("say", [_text_param(), _text_param()])]), f, "two text params")
    _refused(_desc([_cap("say", [_text_param(name="words")])]), f + "[0]", "string not named text")
    _refused(_desc([_cap("say", [_text_param(), n])]), f + "[0]", "text not last")
    _refused(_desc([_cap("say", [_text_param(1, 241)])]), f + "[0]", "text max 241")
    descriptor.validate_descriptor(_desc([_cap("say", [n, _text_param(0, 240)])]))


def test_decode_refusals_name_the_field():
    good = descriptor.encode_descriptor(_desc())
    for cut in (0, 1, 5, 9, 12, len(good) - 1):
        try:
            descriptor.decode_descriptor(good[:cut])
        except descriptor.DescriptorError as e:
            assert len(str(e)) > 8, "truncation at %d: reason %r is not specific" % (cut, str(e))
            continue
        raise AssertionError("a descriptor cut at %d bytes was accepted" % cut)
    try:
        descriptor.decode_descriptor(good + b"\x00")
    except descriptor.DescriptorError as e:
        assert "trailing" in str(e) or "remain" in str(e) or "extra" in str(e), "reason %r" % str(e)
    else:
        raise AssertionError("a trailing byte was accepted")
    bad = bytearray(good)
    bad[1] = ord(".")  # module_id "L.D_001"
    try:
        descriptor.decode_descriptor(bad)
    except descriptor.DescriptorError as e:
        assert "module_id" in str(e), "reason %r does not name module_id" % str(e)
    else:
        raise AssertionError("module_id with a dot was accepted")


def test_decode_refuses_invalid_utf8_description():
    d = descriptor.encode_descriptor(_desc([_cap(desc="abc")]))
    i = d.find(b"abc")
    bad = d[:i] + b"a\xffc" + d[i + 3 :]
    try:
        descriptor.decode_descriptor(bad)
    except descriptor.DescriptorError as e:
        assert "description" in str(e), "reason %r does not name the description" % str(e)
    else:
        raise AssertionError("invalid UTF-8 in a description was accepted")


# ---- COMMAND


def _err(f, why, *args):
    try:
        r = f(*args)
    except command.CommandError as e:
        assert isinstance(e, ValueError), "CommandError must be a ValueError"
        assert len(str(e)) > 5, "%s: reason %r is not specific" % (why, str(e))
        return str(e)
    raise AssertionError("%s: accepted, gave %r" % (why, r))


BLINK = _cap()
SAY = _cap("speak", [_text_param()], "continuous", "audio", 30000)
MIX = _cap(
    "mix",
    [{"name": "level", "type": "float", "min": -1.0, "max": 1.0, "unit": ""}, _text_param(0, 10)],
)


def test_command_roundtrip():
    p = command.encode_command("mix", [0.25], "h\u00e9")
    assert p == b"\x03mix\x3e\x80\x00\x00\x03h\xc3\xa9", "encode_command(mix) gave %r" % p
    assert command.command_name(p, len(p)) == "mix", "command_name"
    values, text = command.decode_command(p, len(p), MIX)
    assert list(values) == [0.25] and text == "h\u00e9", "decode_command(mix) gave %r %r" % (
        values,
        text,
    )
    buf = bytearray(p + b"\xee\xee")
    values, text = command.decode_command(memoryview(buf), len(p), MIX)
    assert text == "h\u00e9", "decode_command must stop at n"


def test_command_text_longer_than_max_is_decoded_not_refused():
    # the organ truncates; decoding hands over what came
    p = command.encode_command("mix", [0.0], "x" * 20)
    values, text = command.decode_command(p, len(p), MIX)
    assert text == "x" * 20, "long text must reach the organ for truncation"


def test_command_wrong_length():
    p = command.encode_command("led_blink", [3, 250])
    _err(command.decode_command, "one byte missing", p[:-1], len(p) - 1, BLINK)
    _err(command.decode_command, "one byte extra", p + b"\x00", len(p) + 1, BLINK)
    q = command.encode_command("speak", [], "hi")
    _err(command.decode_command, "text cut short", q[:-1], len(q) - 1, SAY)
    _err(command.decode_command, "byte after text", q + b"!", len(q) + 1, SAY)
    r = command.encode_command("speak", [])
    _err(command.decode_command, "text missing", r, len(r), SAY)


def test_command_nan_refused():
    p = command.encode_command("led_blink", [NAN, 250])
    _err(command.decode_command, "NaN value", p, len(p), BLINK)


def test_command_invalid_utf8_refused():
    for bad in (b"\xff", b"a\xc3", b"\xc0\x80", b"\xed\xa0\x80", b"\x80abc"):
        p = b"\x05speak" + bytes([len(bad)]) + bad
        _err(command.decode_command, "text %r" % bad, p, len(p), SAY)


def test_command_name_malformed():
    _err(command.command_name, "empty payload", b"", 0)
    _err(command.command_name, "name longer than payload", b"\x09led", 4)


def test_clamp_int_rounding():
    count = BLINK["params"][0]
    cases = (
        (0.0, 1),
        (25.0, 20),
        (2.5, 3),
        (3.5, 4),
        (2.4999, 2),
        (1.5, 2),
        (20.4, 20),
        (INF, 20),
        (-INF, 1),
    )
    for x, want in cases:
        got = command.clamp_value(count, x)
        assert got == want and type(got) is int, "clamp_value(count, %r) = %r, want %d" % (
            x,
            got,
            want,
        )
    sym = {"name": "v", "type": "int", "min": -10, "max": 10, "unit": ""}
    for x, want in ((-2.5, -3), (-2.4, -2), (-0.5, -1), (0.5, 1), (0.49, 0), (-10.6, -10)):
        got = command.clamp_value(sym, x)
        assert got == want, "clamp_value(int -10..10, %r) = %r, want %d (half away from zero)" % (
            x,
            got,
            want,
        )


def test_clamp_float_and_bool():
    level = MIX["params"][0]
    for x, want in ((0.25, 0.25), (3.0, 1.0), (-7.5, -1.0), (-1.0, -1.0)):
        got = command.clamp_value(level, x)
        assert got == want, "clamp_value(float, %r) = %r" % (x, got)
    flag = {"name": "loud", "type": "bool", "min": 0, "max": 1, "unit": ""}
    for x, want in (
        (0.0, False),
        (0.49, False),
        (0.5, True),
        (1.0, True),
        (7.0, True),
        (-3.0, False),
    ):
        got = command.clamp_value(flag, x)
        assert got is want, "clamp_value(bool, %r) = %r, want %r" % (x, got, want)


def test_clamp_nan_refused():
    for p in (
        BLINK["params"][0],
        MIX["params"][0],
        {"name": "b", "type": "bool", "min": 0, "max": 1, "unit": ""},
    ):
        try:
            got = command.clamp_value(p, NAN)
        except ValueError:
            continue
        raise AssertionError("clamp_value(%s, NaN) gave %r" % (p["type"], got))


def test_truncate_utf8():
    s = "\u00c7a marche \u2014 \u597d".encode()  # C3 87 'a marche ' E2 80 94 ' ' E5 A5 BD
    n = len(s)
    assert command.truncate_utf8(s, n, 240) == n, "text under the limit is kept whole"
    assert command.truncate_utf8(s, n, n) == n, "text at the limit is kept whole"
    assert command.truncate_utf8(s, n, 1) == 0, "cutting inside the first character keeps nothing"
    assert command.truncate_utf8(s, n, 2) == 2, "cut after a whole character"
    dash = s.find(b"\xe2")
    for lim in (dash + 1, dash + 2):
        assert command.truncate_utf8(s, n, lim) == dash, "cut inside the dash at %d" % lim
    assert command.truncate_utf8(s, n, n - 1) == n - 3, "cut inside the last CJK character"
    emoji = b"ab\xf0\x9f\x98\x80"
    for lim in (2, 3, 4, 5):
        assert command.truncate_utf8(emoji, 6, lim) == 2, (
            "cut inside a 4-byte character at %d" % lim
        )


def test_valid_utf8():
    good = (
        b"",
        b"plain",
        "\u00e9\u2014\u597d".encode(),
        b"\xf0\x9f\x98\x80",
        b"\xf4\x8f\xbf\xbf",
        b"\xef\xbf\xbf",
    )
    for g in good:
        assert command.valid_utf8(g, 0, len(g)), "%r is valid UTF-8" % g
    bad = (
        b"\x80",
        b"\xc3",
        b"\xc3\x28",
        b"\xc0\x80",
        b"\xc1\xbf",
        b"\xe0\x80\x80",
        b"\xed\xa0\x80",
        b"\xf0\x80\x80\x80",
        b"\xf4\x90\x80\x80",
        b"\xf5\x80\x80\x80",
        b"\xff",
        b"\xe2\x80",
        b"ok\xe5\xa5",
    )
    for b in bad:
        assert not command.valid_utf8(b, 0, len(b)), "%r is not valid UTF-8" % b
    assert command.valid_utf8(b"\xffabc\xff", 1, 4), "valid_utf8 must look only at start..end"


def test_event_roundtrip():
    p = command.encode_event("led_blink", 0)
    assert p == b"\x01\x09led_blink\x00", "encode_event gave %r" % p
    assert command.decode_event(p, len(p)) == (command.EVENT_DONE, "led_blink", 0), "decode_event"
    q = command.encode_event("speak", 1)
    kind, name, status = command.decode_event(q + b"\xee", len(q))
    assert (kind, name, status) == (1, "speak", 1), "decode_event must stop at n"


def test_event_malformed():
    p = command.encode_event("speak", 0)
    for bad, why in (
        (p[:-1], "no status"),
        (p + b"\x00", "trailing byte"),
        (b"", "empty"),
        (b"\x01\x09spe", "short name"),
    ):
        try:
            got = command.decode_event(bad, len(bad))
        except ValueError:
            continue
        raise AssertionError("EVENT %s accepted: %r" % (why, got))


def _f32(x):
    import struct

    return struct.unpack(">f", struct.pack(">f", x))[0]


def test_float_bounds_survive_decode_and_encode():
    import struct

    for bits in (0x3F800001, 0x3DCCCCCD, 0x4B7FFFFF, 0x33D6BF95, 0xC2F6E979, 0x00000001):
        x = struct.unpack(">f", struct.pack(">I", bits))[0]
        p = {"name": "level", "type": "float", "min": -abs(x), "max": abs(x), "unit": ""}
        first = descriptor.encode_descriptor(_desc([_cap("dial", [p])]))
        d = descriptor.decode_descriptor(first)
        again = descriptor.encode_descriptor(d)
        assert again == first, "bound 0x%08X changed on its way through decode: %r" % (
            bits,
            d["capabilities"][0]["params"][0],
        )
        got = d["capabilities"][0]["params"][0]["max"]
        assert _f32(got) == abs(x), "decoded bound %r is not the f32 sent" % got
    d = descriptor.decode_descriptor(
        descriptor.encode_descriptor(
            _desc(
                [
                    _cap(
                        "dial",
                        [{"name": "level", "type": "float", "min": 0.1, "max": 2.5, "unit": ""}],
                    )
                ]
            )
        )
    )
    assert d["capabilities"][0]["params"][0]["min"] == float("0.1"), "0.1 reads back as 0.1"


def test_bounds_beyond_f32_refused():
    p = {"name": "big", "type": "float", "min": 0.0, "max": 1e39, "unit": ""}
    _refused(_desc([_cap("dial", [p])]), "capabilities[0].params[0]", "max beyond f32")


def test_wrong_shapes_are_refused_with_reasons():
    d = _desc()
    del d["hw_version"]
    _refused(d, "hw_version", "missing hw_version")
    d = _desc()
    d["fw_version"] = "1.0"
    _refused(d, "fw_version", "fw_version as a string")
    d = _desc()
    d["hw_version"] = True
    _refused(d, "hw_version", "hw_version as a bool")
    d = _desc()
    d["capabilities"] = "led_on"
    _refused(d, "capabilities", "capabilities as a string")
    c = _cap()
    del c["params"]
    _refused(_desc([c]), "capabilities[0].params", "missing params")
    c = _cap()
    c["max_duration_ms"] = 1.5
    _refused(_desc([c]), "capabilities[0].max_duration_ms", "duration as a float")
    c = _cap()
    c["params"][1]["max"] = "2000"
    _refused(_desc([c]), "capabilities[0].params[1].max", "max as a string")
    c = _cap()
    c["params"][0] = ["count"]
    _refused(_desc([c]), "capabilities[0].params[0]", "param as a list")
    _refused(["not", "a", "dict"], "descriptor", "a list")


def test_encode_command_beyond_f32_is_infinity():
    p = command.encode_command("led_blink", [1e39, -1e39])
    assert p[-8:] == b"\x7f\x80\x00\x00\xff\x80\x00\x00", "out-of-range numbers travel as +-inf"
    values, _ = command.decode_command(p, len(p), BLINK)
    assert [command.clamp_value(BLINK["params"][i], values[i]) for i in (0, 1)] == [
        20,
        100,
    ], "the organ clamps infinities to the bounds"


def test_decode_command_checks_the_name():
    p = command.encode_command("led_blonk", [3, 250])
    _err(command.decode_command, "another capability's name", p, len(p), BLINK)
    _err(command.decode_command, "empty payload", b"", 0, BLINK)


def test_f32_max_bound_is_legal():
    import struct

    top = struct.unpack(">f", b"\x7f\x7f\xff\xff")[0]
    p = {"name": "level", "type": "float", "min": -top, "max": top, "unit": ""}
    first = descriptor.encode_descriptor(_desc([_cap("dial", [p])]))
    d = descriptor.decode_descriptor(first)
    assert descriptor.encode_descriptor(d) == first, "the largest f32 is a legal bound"


def test_negative_zero_bound_round_trips():
    # Issue 17 item 7: a -0.0 bound (80 00 00 00) of an int, bool or string param stays -0.0,
    # so encode(decode(p)) == p; +0.0 still reads as the int 0.
    import struct

    neg = struct.pack(">f", -0.0)
    assert neg == b"\x80\x00\x00\x00", "the f32 -0.0 is 80000000: %r" % neg
    for kind, hi in (("int", 5), ("bool", 1), ("string", 240), ("float", 2.5)):
        name = "text" if kind == "string" else "level"
        for lo in (-0.0, 0.0):
            p = {"name": name, "type": kind, "min": lo, "max": hi, "unit": ""}
            first = descriptor.encode_descriptor(_desc([_cap("dial", [p])]))
            bounds = struct.pack(">ff", lo, hi)
            assert bounds in first, "%s: min %r is sent as %r" % (kind, lo, bounds[:4])
            d = descriptor.decode_descriptor(first)
            got = d["capabilities"][0]["params"][0]["min"]
            assert struct.pack(">f", got) == struct.pack(">f", lo), "%s: min %r read as %r" % (
                kind,
                lo,
                got,
            )
            again = descriptor.encode_descriptor(d)
            assert again == first, "%s min %r: decode then encode changed the bytes" % (kind, lo)
            if kind != "float" and struct.pack(">f", lo) != neg:
                assert got == 0 and isinstance(got, int), "%s: +0.0 reads as the int 0" % kind
        p = {"name": name, "type": kind, "min": -0.0, "max": -0.0, "unit": ""}
        first = descriptor.encode_descriptor(_desc([_cap("dial", [p])]))
        again = descriptor.encode_descriptor(descriptor.decode_descriptor(first))
        assert again == first, "%s: -0.0..-0.0 changed on its way through decode" % kind


def test_find_name_in_a_name_table():
    table = command.name_table(["led_on", "led_off", "led_blink", "x"])
    for i, name in enumerate(("led_on", "led_off", "led_blink", "x")):
        p = command.encode_command(name)
        assert command.find_name_at(p, 0, len(p), table) == i, "%s is name %d" % (name, i)
    for bad in (b"", b"\x06led_o", b"\x06led_of", b"\x03led", b"\x07led_onn", b"\x01y"):
        assert command.find_name_at(bad, 0, len(bad), table) == -1, "%r names nothing" % bad
    p = command.encode_command("led_off") + b"\x00"
    assert command.find_name_at(p, 0, 3, table) == -1, "a name cut off by n is not found"
