# Property tests of the plan reader and validator (CPython, hypothesis): never a crash, always a verdict.
import json
import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from organbus import plan, utf8
from organbus.utf8 import clip_text
import plan_corpus as pc
from master.bus.run import command_frame

CAPS = {c["name"]: c for c in pc.MENU["capabilities"]}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4)
    | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


def _verdict(raw):
    out, problems, notes = plan.validate(raw, pc.CAPS)
    assert isinstance(problems, list) and all(isinstance(p, str) for p in problems), problems
    assert all(isinstance(n, str) for n in notes), notes
    if not problems:
        for s in out["steps"]:
            command_frame(CAPS[s["action"]], s["params"])  # an accepted plan always encodes
    return out, problems


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_get_a_verdict(raw):
    _verdict(raw)


@settings(max_examples=300, deadline=None)
@given(values)
def test_any_json_value_gets_a_verdict(v):
    _verdict(json.dumps(v))
    _verdict(v)


step_keys = st.sampled_from(plan.STEP_KEYS)
top_keys = st.sampled_from(plan.TOP_KEYS)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(pc.POSITIVE), st.integers(0, 15), step_keys, top_keys, values, st.booleans())
def test_mutated_plans_get_a_verdict(base, i, skey, tkey, v, in_step):
    p = json.loads(json.dumps(base))
    if in_step and p["steps"]:
        p["steps"][i % len(p["steps"])][skey] = v
    else:
        p[tkey] = v
    out, problems = _verdict(json.dumps(p))
    if not problems:
        assert len(out["steps"]) == len(p["steps"]), "steps lost"


@settings(max_examples=300, deadline=None)
@given(values)
def test_reader_agrees_with_json_module(v):
    text = json.dumps(v)
    got, dups = plan.parse(text)
    assert dups == [], dups
    assert got == v or (isinstance(v, float) and math.isclose(got, v)), (got, v)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_clip_text_is_a_prefix_on_a_boundary(s):
    t = clip_text(s, 240)
    n = len(s.encode())
    assert s.startswith(t) and len(t.encode()) <= 240
    if n > 240:
        assert len(t.encode()) > 236, "clamped more than one character too far"


# -- the classes of issue 17: invalid UTF-8 anywhere, numbers of any length, refusal words --

good_bodies = st.sampled_from(
    [pc.text(p).encode() for p in pc.POSITIVE] + [r.encode() for r, _ in pc.NOTED]
)
# ill-formed sequences: any lead byte, then continuation-looking or other bytes
bad_seqs = st.one_of(
    st.sampled_from(
        [b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xff", b"\x80"]
    ),
    st.binary(min_size=1, max_size=4).filter(lambda b: b[0] >= 0x80),
)


def _decode_error_at(b):
    # CPython's own strict decoder is the oracle: it refuses overlongs, surrogates, > U+10FFFF
    try:
        b.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return -1


@settings(max_examples=2000, deadline=None)
@given(st.binary(max_size=64))
def test_first_invalid_agrees_with_cpython(b):
    at = _decode_error_at(b)
    assert utf8.first_invalid(b) == at, (b, utf8.first_invalid(b), at)
    assert utf8.valid_utf8(b) == (at < 0), b


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200), st.integers(0, 200), bad_seqs)
def test_first_invalid_in_text_behind_ascii_runs(t, i, seq):
    b = t.encode()
    i = min(i, len(b))
    b = b[:i] + seq + b[i:]
    assert utf8.first_invalid(b) == _decode_error_at(b), b


@settings(max_examples=500, deadline=None)
@given(good_bodies, st.integers(0, 10**6), bad_seqs)
def test_invalid_utf8_anywhere_is_refused_at_its_offset(raw, i, seq):
    i = i % (len(raw) + 1)
    body = raw[:i] + seq + raw[i:]
    at = _decode_error_at(body)
    if at < 0:
        return  # the bytes happened to complete a character of the plan
    out, problems, notes = plan.validate(body, pc.CAPS)
    assert out is None and len(problems) == 1, problems
    assert re.match(
        r"^body: not JSON: invalid UTF-8 bytes? [0-9a-f ]+ at offset %d$" % at, problems[0]
    ), (
        body,
        problems,
    )


digits = st.text(alphabet="0123456789", min_size=1, max_size=5000)


@settings(max_examples=300, deadline=None)
@given(
    st.booleans(),
    digits,
    st.one_of(st.none(), digits),
    st.one_of(st.none(), digits),
    st.sampled_from(["heard_req", "count", "priority"]),
)
def test_numbers_of_any_length_get_a_verdict(neg, whole, frac, exp, field):
    whole = whole.lstrip("0") or "0"
    num = ("-" if neg else "") + whole
    if frac is not None:
        num += "." + frac
    if exp is not None:
        num += "e" + exp
    if field == "heard_req":
        body = pc.text(pc.plan([])).replace('"heard_req": 0', '"heard_req": ' + num)
    else:
        body = pc.text(pc.plan([pc.step("t1", "led_blink", {"count": 3, "period_ms": 200})]))
        body = body.replace(
            '"%s": %s' % (field, 3 if field == "count" else 5), '"%s": %s' % (field, num)
        )
    out, problems = _verdict(body)
    if len(body.encode()) > plan.MAX_PLAN_BYTES:
        assert problems == ["body: %d bytes, more than 4096" % len(body.encode())], problems
    elif len(num) > 40:
        at = body.index(num)
        assert problems == [
            "body: not JSON: number of %d characters, more than 40 at offset %d" % (len(num), at)
        ], problems


@settings(max_examples=500, deadline=None)
@given(
    good_bodies,
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 8), st.binary(max_size=6)),
        min_size=1,
        max_size=4,
    ),
)
def test_byte_mutations_of_good_plans_get_a_verdict(raw, edits):
    b = bytearray(raw)
    for i, cut, ins in edits:
        i = i % (len(b) + 1)
        b[i : i + cut] = ins
    out, problems = _verdict(bytes(b))
    for p in problems:
        if p.startswith("body: not JSON: "):
            assert re.search(r" at offset \d+$", p), p  # every parse refusal says where
