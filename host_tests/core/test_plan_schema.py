# The menu's plan_schema checked with the jsonschema package (CPython): positives pass, expressible negatives fail.
import json

import jsonschema
import plan_corpus as pc
from organbus.menu import build_menu, plan_schema

import master_rig as mf

VALIDATOR = jsonschema.Draft202012Validator


def _schema():
    s = pc.MENU["plan_schema"]
    VALIDATOR.check_schema(s)
    return s


def test_schema_is_draft_2020_12():
    s = _schema()
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["properties"]["steps"]["maxItems"] == 16


def test_positive_corpus_valid():
    v = VALIDATOR(_schema())
    for p in pc.POSITIVE:
        errors = list(v.iter_errors(p))
        assert not errors, "schema refuses %r: %s" % (p, [e.message for e in errors])


def test_expressible_negatives_invalid():
    v = VALIDATOR(_schema())
    n = 0
    for name, raw, want, expressible in pc.NEGATIVE:
        if not expressible:
            continue
        n += 1
        obj = json.loads(raw)
        assert not v.is_valid(obj), "schema accepts negative case %r" % name
    assert n >= 30, "only %d schema-expressible negatives" % n


def test_out_of_range_and_prefixed_refused_by_schema():
    # the validator only notes these; a model held to the schema never produces them
    v = VALIDATOR(_schema())
    for raw, notes in pc.NOTED[:2]:
        assert not v.is_valid(json.loads(raw)), "schema accepts %s" % raw


def test_action_enum_is_exactly_the_menu():
    s = _schema()
    actions = [
        b["properties"]["action"]["enum"] for b in s["properties"]["steps"]["items"]["anyOf"]
    ]
    assert actions == [[c["name"]] for c in pc.MENU["capabilities"]], actions


def test_strict_mode_shape():
    # OpenAI strict structured output: every object closed and listing all its keys as required
    def walk(node, path):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, path
                assert sorted(node["required"]) == sorted(node["properties"]), path
            for k, v in node.items():
                walk(v, path + "/" + k)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, "%s/%d" % (path, i))

    walk(_schema(), "")


def test_param_types_and_bounds():
    m = build_menu(mf.menu_caps(mf.gadget()))
    s = m["plan_schema"]
    VALIDATOR.check_schema(s)
    branch = s["properties"]["steps"]["items"]["anyOf"][0]["properties"]["params"]
    assert branch["properties"]["angle"] == {
        "type": "number",
        "minimum": -90.0,
        "maximum": 90.0,
        "description": "unit: deg",
    }
    assert branch["properties"]["fast"] == {"type": "boolean"}
    good = pc.plan([pc.step("t1", "arm_move", {"angle": 10, "fast": True})])
    assert VALIDATOR(s).is_valid(good)
    bad = pc.plan([pc.step("t1", "arm_move", {"angle": 10, "fast": 1})])
    assert not VALIDATOR(s).is_valid(bad)


def test_empty_menu_schema_allows_only_silence():
    s = plan_schema([], 16)
    VALIDATOR.check_schema(s)
    assert VALIDATOR(s).is_valid(pc.plan([]))
    assert not VALIDATOR(s).is_valid(pc.plan([pc.step("t1", "led_on")]))
