# Property tests of the plan reader and validator (CPython, hypothesis): never a crash, always a verdict.
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from organbus import plan
from organbus.utf8 import clip_text
import plan_corpus as pc
from master.scheduler import command_frame

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
