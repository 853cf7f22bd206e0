# Issue 17 items 2, 3, 6 in the core: invalid UTF-8, numbers of any length and the words of every refusal, on both interpreters.
import re

import master_rig as mf
import plan_corpus as pc
from organbus import plan

UNIX_PORT = True

# (bytes, how the refusal shows them): overlongs, encoded surrogates, above U+10FFFF, bytes that
# start nothing, sequences cut short by the next byte
BAD = [
    (b"\xc0\xaf", "byte c0"),  # overlong "/"
    (b"\xc1\xbf", "byte c1"),
    (b"\xe0\x80\xaf", "bytes e0 80 af"),  # overlong "/", 3 bytes
    (b"\xf0\x80\x80\xaf", "bytes f0 80 80 af"),  # overlong, 4 bytes
    (b"\xed\xa0\x80", "bytes ed a0 80"),  # U+D800
    (b"\xed\xbf\xbf", "bytes ed bf bf"),  # U+DFFF
    (b"\xf4\x90\x80\x80", "bytes f4 90 80 80"),  # U+110000
    (b"\xf5\x80\x80\x80", "byte f5"),
    (b"\xff", "byte ff"),
    (b"\x80", "byte 80"),  # a continuation byte alone
    (b"\xe2\x82", None),  # "€" cut short: the byte after it shows
    (b"\xf0\x9f\x98", None),  # "😀" cut short
]
# where the bad bytes go: a string value, a key, between tokens, inside a number's place
PLACES = [
    b'{"heard_req": 0, "steps": [], "can_execute": true, "missing": [], "response": "a@b"}',
    b'{"heard_req": 0, "steps": [], "can_execute": true, "missing": [], "resp@onse": ""}',
    b'{"heard_req": 0,@ "steps": []}',
    b'{"heard_req": @}',
    b'[1, 2, "@"]',
]


def _refusal(raw):
    out, problems, notes = plan.validate(raw, pc.CAPS)
    assert out is None and len(problems) == 1 and notes == [], (raw, problems)
    return problems[0]


def test_invalid_utf8_refused_with_its_bytes_and_offset():
    n = 0
    for seq, shown in BAD:
        for place in PLACES:
            at = place.index(b"@")
            raw = place[:at] + seq + place[at + 1 :]
            here = shown
            if here is None:
                # a cut sequence: the lead claims the next byte too, which shows
                k = {0xE2: 3, 0xF0: 4}[seq[0]]
                here = "bytes " + " ".join("%02x" % c for c in raw[at : at + k])
            want = "body: not JSON: invalid UTF-8 %s at offset %d" % (here, at)
            assert _refusal(raw) == want, (raw, _refusal(raw), want)
            n += 1
    assert n == len(BAD) * len(PLACES)


def test_invalid_utf8_cut_by_the_end_of_the_body():
    for seq, shown in ((b"\xe2\x82", "bytes e2 82"), (b"\xf0\x9f\x98", "bytes f0 9f 98")):
        raw = b'{"response": "' + seq
        want = "body: not JSON: invalid UTF-8 %s at offset 14" % shown
        assert _refusal(raw) == want, (raw, _refusal(raw))


def test_valid_utf8_still_read():
    for text in ("é", "€", "好", "😀", "\u07ff", "\uffff", "\U0010ffff", "\ue000"):
        raw = ('{"response": "%s"}' % text).encode()
        v, dups = plan.parse(raw)
        assert v == {"response": text}, (text, v)


def test_the_issue_reproduction_sends_nothing():
    # issue 17 item 2: a task_id "t1\xc0\xaf" was accepted on MicroPython, ran, and was echoed
    rig = mf.standard_rig()
    raw = pc.text(pc.plan([pc.step("t1", "led_on")])).encode().replace(b'"t1"', b'"t1\xc0\xaf"')
    status, obj = mf.submit(rig, raw)
    at = raw.index(b"\xc0")
    assert status == 400, status
    assert obj["problems"] == ["body: not JSON: invalid UTF-8 byte c0 at offset %d" % at], obj
    rig.advance(100)
    assert rig.commands_sent() == 0, "a COMMAND left the master"


def test_str_with_a_lone_surrogate_named_like_its_bytes():
    # CPython: a str may hold U+D800 (its encode() refuses it); MicroPython: the literal's
    # str holds the bytes ed a0 80. Either way the refusal names those bytes.
    want = "body: not JSON: invalid UTF-8 bytes ed a0 80 at offset 14"
    assert _refusal('{"response": "\ud800"}') == want


def _not_text(prefix):
    # a str that is not UTF-8 text, built the way each interpreter allows
    try:
        return str(prefix + b"\xc0\xaf", "utf-8")  # MicroPython keeps the bytes
    except UnicodeError:
        return str(prefix, "utf-8") + "\ud800"  # CPython: a lone surrogate


def test_built_plans_with_strings_that_are_not_text():
    bad = _not_text(b"t1")
    got = "expected a string, got a string that is not UTF-8 text"
    cases = [
        (pc.plan([pc.step(bad, "led_on")]), "steps[0].task_id: " + got),
        (pc.plan([pc.step("t1", bad)]), "steps[0].action: " + got),
        (pc.plan([pc.step("t1", "speak", {"text": bad})]), "steps[0].params.text: " + got),
        (pc.plan([pc.step("t1", "led_on", None, 5, [bad])]), "steps[0].depends_on[0]: " + got),
        (pc.plan([], response=bad), "response: " + got),
        (pc.plan([], can_execute=False, missing=[bad]), "missing[0]: " + got),
        (
            pc.plan([pc.step("t1", "led_on", {bad: 1})]),
            "steps[0].params: a key that is not UTF-8 text",
        ),
        (pc.plan([], **{bad: 1}), "plan: a key that is not UTF-8 text"),
    ]
    step = pc.step("t1", "led_on")
    step[bad] = 1
    cases.append((pc.plan([step]), "steps[0]: a key that is not UTF-8 text"))
    rig = mf.standard_rig()
    for obj, want in cases:
        out, problems, notes = plan.check(obj, pc.CAPS)
        assert problems == [want], (want, problems)
        status, reply = mf.submit(rig, obj)
        assert status == 422 and reply["problems"] == [want], (status, reply)
    rig.advance(100)
    assert rig.commands_sent() == 0, "a COMMAND left the master"
    out, problems, notes = plan.check(bad, pc.CAPS)
    assert problems == ["plan: expected an object, got a string that is not UTF-8 text"], problems


def test_built_plans_with_keys_that_are_not_strings():
    p = pc.plan([pc.step("t1", "led_blink", {1: 2, "count": 2, "period_ms": 100})])
    p[7] = "x"
    out, problems, notes = plan.check(p, pc.CAPS)
    assert problems == [
        "plan: a key that is an int, not a string",
        "steps[0].params: a key that is an int, not a string",
    ], problems


def test_built_plans_nested_deep_get_a_verdict():
    v = []
    for _ in range(5000):  # no recursion over values the validator does not read
        v = [v]
    out, problems, notes = plan.check(pc.plan([], missing=[v]), pc.CAPS)
    assert problems == ["missing[0]: expected a string, got an array"], problems


def _number_body(num):
    return (
        b'{"heard_req": '
        + num
        + b', "steps": [], "can_execute": true, "missing": [], "response": ""}'
    )


def test_numbers_of_any_length_refused_by_length():
    # issue 17 item 3: CPython raised ValueError past 4,300 digits; now any number token
    # longer than 40 characters is refused, unread, at its offset, on both interpreters
    for num in (
        b"1" * 41,
        b"-" + b"1" * 40,
        b"1" * 4300,
        b"1" * 4301,
        b"9" * 4000,
        b"0." + b"1" * 100,
        b"1." + b"0" * 2000 + b"1",
        b"1e" + b"9" * 50,
        b"1e-" + b"9" * 50,
        b"-0.0e+" + b"0" * 60,
        b"12345678901234567890.12345678901234567890e12",
    ):
        if len(num) > 4000:
            num = num[: 4000 - 100]  # stay under the body limit; still far past 40
        want = "body: not JSON: number of %d characters, more than 40 at offset 14" % len(num)
        assert _refusal(_number_body(num)) == want, (num[:20], _refusal(_number_body(num)))


def test_5000_digit_int_refused():
    # a 5,000-digit int overruns the body limit too; the size limit speaks first, unread
    raw = _number_body(b"7" * 5000)
    assert _refusal(raw) == "body: %d bytes, more than 4096" % len(raw)
    # in a body that fits, the number is refused by length
    raw = b"[" + b"7" * 4000 + b"]"
    assert _refusal(raw) == "body: not JSON: number of 4000 characters, more than 40 at offset 1"


def test_numbers_up_to_the_length_are_read():
    for num, value in (
        (b"1" * 40, int("1" * 40)),
        (b"-" + b"9" * 39, -int("9" * 39)),
        (b"0." + b"5" * 38, float("0." + "5" * 38)),
        (b"1e" + b"0" * 38, 1.0),
        (b"1e-999", 0.0),
        (b"-0", 0),
    ):
        v, dups = plan.parse(_number_body(num))
        assert v["heard_req"] == value, (num, v["heard_req"], value)
    assert _refusal(_number_body(b"1e999")) == "body: not JSON: number out of range at offset 14"
    assert _refusal(_number_body(b"-1e" + b"9" * 37)) == (
        "body: not JSON: number out of range at offset 14"
    )


def test_every_refusal_of_a_body_names_cause_and_offset():
    # issue 17 item 6: each "body:" refusal says what is wrong and where (or the size)
    shape = re.compile(r"^body: (not JSON: .+ at offset \d+|\d+ bytes, more than 4096)$")
    n = 0
    for name, raw, want, _ in pc.NEGATIVE:
        if want[0].startswith("body:"):
            assert shape.match(want[0]), (name, want[0])
            n += 1
    assert n >= 15, "only %d body refusals in the corpus" % n


def test_the_nan_body_names_its_character():
    assert _refusal('{"heard_req": NaN}') == 'body: not JSON: unexpected character "N" at offset 14'
    assert _refusal('{"heard_req": -Infinity}') == "body: not JSON: bad number at offset 15"
    assert _refusal('{"heard_req": é}') == 'body: not JSON: unexpected character "é" at offset 14'


def test_first_invalid_on_both_interpreters():
    # the viper ASCII scan (MicroPython) and the pure one (CPython) give the same offsets
    from organbus.utf8 import first_invalid

    a = b"x" * 100
    for buf, start, end, want in (
        (b"", 0, -1, -1),
        (a, 0, -1, -1),
        (a + "é好😀".encode() + a, 0, -1, -1),
        (a + b"\xc0\xaf" + a, 0, -1, 100),
        (b"\xff" + a, 0, -1, 0),
        (a + b"\xe2\x82", 0, -1, 100),
        (a + b"\xe2\x82\xac", 0, 102, 100),  # the end cuts the sequence
        (a + b"\xe2\x82\xac", 0, 103, -1),
        (b"\xff" + a + b"\xff", 1, 101, -1),
        (b"\xff" + a + b"\xff", 1, -1, 101),
        (a + b"\xed\xa0\x80" + b"\xc0", 50, -1, 100),
    ):
        assert first_invalid(buf, start, end) == want, (buf[-8:], start, end, want)
