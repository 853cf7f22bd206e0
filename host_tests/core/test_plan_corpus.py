# Plan validation against the section 8 rules: positive, noted and negative corpora, on both interpreters.
from organbus import frame
import master_rig as mf
from organbus import plan
import plan_corpus as pc

UNIX_PORT = True


def test_negative_corpus_is_big_enough():
    assert len(pc.NEGATIVE) >= 40, "negative corpus has %d cases" % len(pc.NEGATIVE)


def test_positive_plans_accepted_without_notes():
    for p in pc.POSITIVE:
        out, problems, notes = plan.validate(pc.text(p), pc.CAPS)
        assert problems == [], "refused %r: %r" % (p, problems)
        assert notes == [] or p["response"], "unexpected notes %r" % notes
        assert len(out["steps"]) == len(p["steps"]), "steps lost: %r" % out


def test_positive_plans_as_objects():
    for p in pc.POSITIVE:
        out, problems, notes = plan.validate(p, pc.CAPS)
        assert problems == [], "refused object %r: %r" % (p, problems)


def test_noted_plans_accepted_with_exact_notes():
    for raw, want in pc.NOTED:
        out, problems, notes = plan.validate(raw, pc.CAPS)
        assert problems == [], "refused %s: %r" % (raw, problems)
        assert notes == want, "notes for %s:\n%r\nwanted\n%r" % (raw, notes, want)


def test_negative_corpus_exact_problems():
    for name, raw, want, _ in pc.NEGATIVE:
        out, problems, notes = plan.validate(raw, pc.CAPS)
        assert problems == want, "%s: got\n%r\nwanted\n%r" % (name, problems, want)


def test_negative_corpus_sends_no_command():
    rig = mf.standard_rig()
    before = rig.commands_sent()
    for name, raw, want, _ in pc.NEGATIVE:
        status, obj = mf.submit(rig, raw)
        assert status in (400, 413, 422), "%s: status %r" % (name, status)
        assert obj["problems"] == want, "%s: body gave %r" % (name, obj["problems"])
        rig.advance(30)
        assert rig.commands_sent() == before, "%s: a COMMAND left the master" % name
    assert rig.body.refused == len(pc.NEGATIVE), "refusals counted: %d" % rig.body.refused


def test_status_codes():
    rig = mf.standard_rig()
    for name, raw, want, _ in pc.NEGATIVE:
        status, obj = mf.submit(rig, raw)
        if want[0].startswith("body: ") and "more than" in want[0]:
            assert status == 413, "%s: %d" % (name, status)
        elif want[0].startswith("body: "):
            assert status == 400, "%s: %d" % (name, status)
        else:
            assert status == 422, "%s: %d" % (name, status)


def test_text_clamped_at_character_boundary():
    p = pc.plan([pc.step("t1", "speak", {"text": "a" + "好" * 100})])
    out, problems, notes = plan.validate(pc.text(p), pc.CAPS)
    t = out["steps"][0]["params"]["text"]
    b = t.encode()
    assert len(b) == 238, "clamped to %d bytes" % len(
        b
    )  # 1 + 79 * 3: the 80th char would cross 240
    assert t == "a" + "好" * 79, "clamped text %r" % t
    assert notes == [
        "steps[0].params.text: 301 bytes, clamped to 240 at a character boundary"
    ], notes


def test_module_prefix_stripped_in_plan():
    out, problems, notes = plan.validate(pc.NOTED[1][0], pc.CAPS)
    assert out["steps"][0]["action"] == "led_on", "action %r" % out["steps"][0]["action"]


def test_numbers_forwarded_as_given():
    out, problems, notes = plan.validate(pc.NOTED[0][0], pc.CAPS)
    assert out["steps"][0]["params"] == {"count": 50, "period_ms": 10}, out["steps"][0]


def test_empty_menu_lists_nothing():
    m = []
    out, problems, notes = plan.validate(pc.text(pc.plan([pc.step("t1", "led_on")])), m)
    assert problems == ['steps[0].action: "led_on" is not on the menu (menu: empty)'], problems
    out, problems, notes = plan.validate(pc.text(pc.plan([], response="hi")), m)
    assert problems == [] and notes == [], "silence on an empty menu: %r %r" % (problems, notes)


def test_object_input_with_non_finite_number():
    p = pc.plan([pc.step("t1", "led_blink", {"count": float("inf"), "period_ms": 200})])
    out, problems, notes = plan.validate(p, pc.CAPS)
    assert problems == ["steps[0].params.count: expected an int, got a non-finite number"], problems


def test_parse_keeps_values():
    v, dups = plan.parse('{"a": [1, -2.5e1, true, false, null, "x\\u00e9\\ud83d\\ude00\\n"]}')
    assert v == {"a": [1, -25.0, True, False, None, "x\u00e9\U0001f600\n"]}, v
    assert dups == [], dups


def test_commands_only_for_accepted_plans():
    rig = mf.standard_rig()
    status, run = mf.submit(rig, pc.text(pc.SECTION8))
    assert status == 200, "section 8 plan refused: %r" % (run,)
    rig.advance(500)
    assert rig.commands_sent() == 2, "commands sent: %d" % rig.commands_sent()
    assert frame.COMMAND in rig.sent_types(0), "no COMMAND on the LED port"
