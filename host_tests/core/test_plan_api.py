# The plan path's API: parse/TooLarge, check on capability lists, validate, one_step, param_schema.
from organbus import jsonread, menu, plan
import plan_corpus as pc

UNIX_PORT = True


def _raises(exc, fn, *args):
    try:
        fn(*args)
    except exc as e:
        return e
    raise AssertionError("%s%r did not raise %s" % (fn.__name__, args, exc.__name__))


def test_one_size_limit():
    assert plan.MAX_PLAN_BYTES == 4096, plan.MAX_PLAN_BYTES
    ok = b'"' + b"a" * (plan.MAX_PLAN_BYTES - 2) + b'"'
    v, dups = plan.parse(ok)
    assert len(v) == plan.MAX_PLAN_BYTES - 2 and dups == [], "a body at the limit parses"
    e = _raises(plan.TooLarge, plan.parse, ok + b" ")
    assert isinstance(e, plan.ParseError), "TooLarge is a ParseError"
    assert e.msg == "body: 4097 bytes, more than 4096", e.msg
    assert not hasattr(e, "status"), "the core chooses no HTTP status"


def test_size_counts_bytes_of_a_str():
    s = '"' + "é" * 2048 + '"'  # 2,050 characters, 4,098 bytes
    e = _raises(plan.TooLarge, plan.parse, s)
    assert e.msg == "body: 4098 bytes, more than 4096", e.msg


def test_parse_error_has_no_status():
    e = _raises(plan.ParseError, plan.parse, b'{"heard_req": NaN}')
    assert not isinstance(e, plan.TooLarge)
    assert e.msg == 'body: not JSON: unexpected character "N" at offset 14', e.msg
    assert not hasattr(e, "status"), "the core chooses no HTTP status"


def test_parse_refuses_a_non_body():
    e = _raises(TypeError, plan.parse, {"steps": []})
    assert str(e) == "plan.parse: expected bytes or str, got dict", str(e)


def test_jsonread_error_names_cause_and_offset():
    e = _raises(jsonread.JsonError, jsonread.read, b'{"heard_req": NaN}')
    assert isinstance(e, ValueError)
    assert e.msg == 'unexpected character "N" at offset 14', e.msg
    assert (e.cause, e.offset) == ('unexpected character "N"', 14), (e.cause, e.offset)


def test_jsonread_dups_are_paths_and_keys():
    v, dups = jsonread.read(b'{"a": 1, "b": {"c": [{"d": 1, "d": 2}]}, "a": 3}')
    assert v == {"a": 3, "b": {"c": [{"d": 2}]}}, v
    assert dups == [("b.c[0]", "d"), ("", "a")], dups


def test_check_takes_the_capability_list():
    p = pc.plan([pc.step("t1", "led_blink", {"count": 3, "period_ms": 200})])
    out, problems, notes = plan.check(p, pc.CAPS)
    assert problems == [] and notes == [], (problems, notes)
    assert out["steps"][0]["params"] == {"count": 3, "period_ms": 200}, out
    e = _raises(TypeError, plan.check, p, pc.MENU)
    assert "capability list" in str(e), str(e)


def test_check_reports_dups_first():
    obj, dups = plan.parse(b'{"a": 1, "a": 2}')
    out, problems, notes = plan.check(obj, pc.CAPS, dups)
    assert problems[0] == 'plan: duplicate key "a"', problems
    assert "a: unknown key" in problems[1], problems


def test_max_steps_is_a_parameter():
    p = pc.plan([pc.step("t%d" % i, "led_on") for i in range(3)])
    out, problems, notes = plan.validate(pc.text(p), pc.CAPS, 2)
    assert problems == ["steps: 3 steps, more than max_steps 2"], problems
    out, problems, notes = plan.validate(p, pc.CAPS, 3)
    assert problems == [], problems


def test_validate_takes_bytes_str_memoryview_and_objects():
    raw = pc.text(pc.SECTION8)
    for body in (raw, raw.encode(), bytearray(raw.encode()), memoryview(raw.encode()), pc.SECTION8):
        out, problems, notes = plan.validate(body, pc.CAPS)
        assert problems == [], (type(body), problems)
        assert [s["action"] for s in out["steps"]] == ["led_on", "speak"], out
    out, problems, notes = plan.validate(b"{", pc.CAPS)
    assert (out, problems, notes) == (None, ["body: not JSON: unexpected end at offset 1"], [])


def test_one_step_is_the_plan_envelope():
    p = plan.one_step("led_blink", {"count": 2, "period_ms": 100})
    assert p == {
        "heard_req": 0,
        "steps": [
            {
                "task_id": "t1",
                "action": "led_blink",
                "params": {"count": 2, "period_ms": 100},
                "priority": 5,
                "depends_on": [],
            }
        ],
        "can_execute": True,
        "missing": [],
        "response": "",
    }, p
    out, problems, notes = plan.check(p, pc.CAPS)
    assert problems == [] and notes == [], (problems, notes)
    p = plan.one_step("speak", {"text": "Hi."}, task_id="say", response="Hi.")
    assert p["steps"][0]["task_id"] == "say" and p["response"] == "Hi.", p
    out, problems, notes = plan.check(p, pc.CAPS)
    assert problems == [] and notes == [], (problems, notes)
    assert plan.one_step("led_on", None)["steps"][0]["params"] == {}


def test_one_step_with_wrong_params_gets_problems():
    out, problems, notes = plan.check(plan.one_step("led_blink", {"count": "3"}), pc.CAPS)
    assert problems == [
        "steps[0].params.count: expected an int, got a string",
        "steps[0].params.period_ms: missing",
    ], problems


def test_param_schema_is_the_one_mapping():
    def p(t, lo=0, hi=1, unit=""):
        return {"name": "x", "type": t, "min": lo, "max": hi, "unit": unit}

    assert menu.param_schema(p("int", 1, 20)) == {"type": "integer", "minimum": 1, "maximum": 20}
    s = menu.param_schema(p("float", 0, 1, "V"))
    assert s == {"type": "number", "minimum": 0, "maximum": 1, "description": "unit: V"}, s
    assert menu.param_schema(p("bool")) == {"type": "boolean"}
    s = menu.param_schema(p("string", 1, 240))
    assert s == {"type": "string", "minLength": 1, "maxLength": 240}, s
    e = _raises(ValueError, menu.param_schema, p("text", 1, 240))
    assert str(e) == "param x: type 'text' is not a protocol type (int, float, bool, string)", e


def test_plan_schema_uses_param_schema():
    s = pc.MENU["plan_schema"]
    branches = s["properties"]["steps"]["items"]["anyOf"]
    blink = [b for b in branches if b["properties"]["action"]["enum"] == ["led_blink"]][0]
    props = blink["properties"]["params"]["properties"]
    want = menu.param_schema([c for c in pc.CAPS if c["name"] == "led_blink"][0]["params"][1])
    assert props["period_ms"] == want and want["description"] == "unit: ms", props
