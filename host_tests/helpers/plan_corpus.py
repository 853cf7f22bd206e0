# Plan corpora for the master's tests: positive plans, noted plans and the negative corpus.
import json
import sys

import master_rig as mf
from organbus.menu import build_menu

CAPS = mf.menu_caps(mf.led(), mf.speaker())  # what plan.check takes
MENU = build_menu(CAPS)
MENU_NAMES = "led_on, led_off, led_blink, speak, announce, chime"


def step(tid, action, params=None, priority=5, depends_on=()):
    return {
        "task_id": tid,
        "action": action,
        "params": {} if params is None else params,
        "priority": priority,
        "depends_on": list(depends_on),
    }


def plan(steps, **top):
    p = {"heard_req": 0, "steps": steps, "can_execute": True, "missing": [], "response": ""}
    for k in top:
        p[k] = top[k]
    return p


def text(p):
    return json.dumps(p)


SECTION8 = plan(
    [step("t1", "led_on"), step("t2", "speak", {"text": "Light is on."}, 5, ["t1"])],
    response="user-facing line",
)

# Valid plans: accepted with no notes, and valid against the menu's plan_schema.
POSITIVE = [
    SECTION8,
    plan([]),
    plan([], can_execute=False, missing=["a camera"], response="I cannot see."),
    plan([step("t1", "led_blink", {"count": 3, "period_ms": 200})]),
    plan([step("a", "chime"), step("b", "announce", {"text": "Hello"}, 9, ["a"])]),
    plan([step("t1", "led_blink", {"count": 20, "period_ms": 2000}, 0)]),
    plan([step("t1", "led_blink", {"count": 1, "period_ms": 100}, 9)]),
    plan([step("t%d" % i, "led_on" if i % 2 else "led_off") for i in range(16)]),
    plan(
        [
            step("t1", "led_on"),
            step("t2", "led_off", None, 1, ["t1"]),
            step("t3", "speak", {"text": "Ça marche — 好"}, 2, ["t1", "t2"]),
        ],
        response="Ça marche — 好",
    ),
    plan([step("x" * 15, "chime")], heard_req=3),
]

# Accepted, with these notes (plan text, [notes]).
NOTED = [
    (
        text(plan([step("t1", "led_blink", {"count": 50, "period_ms": 10})])),
        [
            "steps[0].params.count: 50 is outside 1..20; forwarded as given (the organ clamps)",
            "steps[0].params.period_ms: 10 is outside 100..2000; forwarded as given (the organ clamps)",
        ],
    ),
    (
        text(plan([step("t1", "LED_001.led_on")])),
        ['steps[0].action: "LED_001.led_on" taken as "led_on" (module id stripped)'],
    ),
    (
        text(plan([step("t1", "led_on")], response="Done.")),
        [
            "response: not spoken (no step speaks it while speak is on the menu); "
            "the body stays silent"
        ],
    ),
    (
        text(plan([step("t1", "speak", {"text": "é" * 150})])),
        ["steps[0].params.text: 300 bytes, clamped to 240 at a character boundary"],
    ),
    (
        text(plan([step("t1", "speak", {"text": ""})])),
        [
            "steps[0].params.text: 0 bytes is outside 1..240 bytes; forwarded as given "
            "(the organ enforces it)"
        ],
    ),
    (
        text(plan([step("t1", "led_blink", {"count": 1e39, "period_ms": -4 * 10**38})])),
        [
            "steps[0].params.count: 1e+39 is outside 1..20; forwarded as given (the organ "
            "clamps); beyond the wire's 32-bit float it travels as inf",
            "steps[0].params.period_ms: -4e+38 is outside 100..2000; forwarded as given (the "
            "organ clamps); beyond the wire's 32-bit float it travels as -inf",
        ],
    ),
    (
        text(plan([step("t1", "led_blink", {"count": 30.0, "period_ms": 200})])),
        ["steps[0].params.count: 30 is outside 1..20; forwarded as given (the organ clamps)"],
    ),
]

_GOOD_STEP = '{"task_id": "t1", "action": "led_on", "params": {}, "priority": 5, "depends_on": []}'
_TOP = '"heard_req": 0, "can_execute": true, "missing": [], "response": ""'
_ALLOWED_STEP = "(allowed: task_id, action, params, priority, depends_on)"
_ALLOWED_TOP = "(allowed: heard_req, steps, can_execute, missing, response)"


def _with_step(**changes):
    s = step("t1", "led_on")
    for k in changes:
        if changes[k] is _DROP:
            del s[k]
        else:
            s[k] = changes[k]
    return text(plan([s]))


_DROP = object()
# 1 MB on CPython; the unix port's default heap cannot hold that, so it gets 16 KB (same rule)
BIG = 1048576 if sys.implementation.name != "micropython" else 16384

# (name, plan text, exact problems, schema can express it)
NEGATIVE = [
    ("empty body", "", ["body: not JSON: empty at offset 0"], False),
    ("whitespace only", "  \n ", ["body: not JSON: empty at offset 4"], False),
    ("truncated", text(SECTION8)[:40], ["body: not JSON: unexpected end at offset 40"], False),
    (
        "trailing garbage",
        text(plan([])) + " x",
        ["body: not JSON: trailing data at offset %d" % (len(text(plan([]))) + 1)],
        False,
    ),
    (
        "two objects",
        text(plan([])) + text(plan([])),
        ["body: not JSON: trailing data at offset %d" % len(text(plan([])))],
        False,
    ),
    (
        "single quotes",
        "{'steps': []}",
        ["body: not JSON: expected a key string at offset 1"],
        False,
    ),
    ("NaN", '{"heard_req": NaN}', ['body: not JSON: unexpected character "N" at offset 14'], False),
    (
        "Infinity literal",
        '{"heard_req": 1e999}',
        ["body: not JSON: number out of range at offset 14"],
        False,
    ),
    (
        "leading zero",
        '{"heard_req": 01}',
        ["body: not JSON: expected ',' or '}' at offset 15"],
        False,
    ),
    (
        "trailing comma",
        '{"steps": [],}',
        ["body: not JSON: expected a key string at offset 13"],
        False,
    ),
    (
        "control char in string",
        '{"response": "a\nb"}',
        ["body: not JSON: control character in a string at offset 15"],
        False,
    ),
    ("bad escape", '{"response": "\\x41"}', ["body: not JSON: bad escape \\x at offset 15"], False),
    (
        "not utf-8",
        b'{"response": "\xff"}',
        ["body: not JSON: invalid UTF-8 byte ff at offset 14"],
        False,
    ),
    ("1 MB body", b'"' + b"a" * (BIG - 2) + b'"', ["body: %d bytes, more than 4096" % BIG], False),
    (
        "too deep",
        "[" * 40 + "]" * 40,
        ["body: not JSON: nested deeper than 16 levels at offset 17"],
        False,
    ),
    ("array not object", "[]", ["plan: expected an object, got an array"], True),
    ("string not object", '"plan"', ["plan: expected an object, got a string"], True),
    ("null", "null", ["plan: expected an object, got null"], True),
    (
        "duplicate top key",
        '{"heard_req": 0, "steps": [], "steps": [], "can_execute": true, "missing": [],'
        ' "response": ""}',
        ['plan: duplicate key "steps"'],
        False,
    ),
    (
        "duplicate param key",
        '{"heard_req": 0, "steps": [{"task_id": "t1", "action": "led_blink", "params": '
        '{"count": 2, "count": 3, "period_ms": 200}, "priority": 5, "depends_on": []}], '
        '"can_execute": true, "missing": [], "response": ""}',
        ['steps[0].params: duplicate key "count"'],
        False,
    ),
    (
        "unknown top key",
        text(plan([], mood="happy")),
        ["mood: unknown key " + _ALLOWED_TOP],
        True,
    ),
    (
        "missing top keys",
        '{"steps": []}',
        ["heard_req: missing", "can_execute: missing", "missing: missing", "response: missing"],
        True,
    ),
    (
        "wrong top types",
        text({"heard_req": "0", "steps": {}, "can_execute": 1, "missing": "x", "response": None}),
        [
            "heard_req: expected an int, got a string",
            "steps: expected an array, got an object",
            "can_execute: expected true or false, got an int",
            "missing: expected an array, got a string",
            "response: expected a string, got null",
        ],
        True,
    ),
    (
        "fractional heard_req",
        text(plan([], heard_req=0.5)),
        ["heard_req: expected an int, got a number with a fraction"],
        True,
    ),
    (
        "17 steps",
        text(plan([step("t%d" % i, "led_on") for i in range(17)])),
        ["steps: 17 steps, more than max_steps 16"],
        True,
    ),
    (
        "step not object",
        text(plan(["led_on"])),
        ["steps[0]: expected an object, got a string"],
        True,
    ),
    (
        "unknown step key",
        _with_step(colour="red"),
        ["steps[0].colour: unknown key " + _ALLOWED_STEP],
        True,
    ),
    ("missing priority", _with_step(priority=_DROP), ["steps[0].priority: missing"], True),
    (
        "missing everything in a step",
        text(plan([{}])),
        [
            "steps[0].task_id: missing",
            "steps[0].action: missing",
            "steps[0].params: missing",
            "steps[0].priority: missing",
            "steps[0].depends_on: missing",
        ],
        True,
    ),
    ("empty task_id", _with_step(task_id=""), ["steps[0].task_id: empty"], True),
    (
        "long task_id",
        _with_step(task_id="t" * 16),
        ["steps[0].task_id: 16 bytes, more than 15"],
        True,
    ),
    (
        "task_id 15 chars but 16 bytes",
        _with_step(task_id="é" + "t" * 14),
        ["steps[0].task_id: 16 bytes, more than 15"],
        False,
    ),
    (
        "task_id not string",
        _with_step(task_id=1),
        ["steps[0].task_id: expected a string, got an int"],
        True,
    ),
    (
        "repeated task_id",
        text(plan([step("t1", "led_on"), step("t1", "led_off")])),
        ['steps[1].task_id: "t1" repeats steps[0]'],
        False,
    ),
    (
        "unknown action",
        _with_step(action="led_toggle"),
        ['steps[0].action: "led_toggle" is not on the menu (menu: %s)' % MENU_NAMES],
        True,
    ),
    (
        "nearly a name",
        _with_step(action="LED_ON"),
        ['steps[0].action: "LED_ON" is not on the menu (menu: %s)' % MENU_NAMES],
        True,
    ),
    (
        "module prefix of an unknown name",
        _with_step(action="LED_001.led_toggle"),
        ['steps[0].action: "LED_001.led_toggle" is not on the menu (menu: %s)' % MENU_NAMES],
        True,
    ),
    (
        "two dots",
        _with_step(action="A.LED_001.led_on"),
        ['steps[0].action: "A.LED_001.led_on" is not on the menu (menu: %s)' % MENU_NAMES],
        True,
    ),
    (
        "action not string",
        _with_step(action=["led_on"]),
        ["steps[0].action: expected a string, got an array"],
        True,
    ),
    (
        "undeclared param",
        _with_step(params={"brightness": 5}),
        ["steps[0].params.brightness: not a param of led_on (it takes none)"],
        True,
    ),
    (
        "missing params",
        text(plan([step("t1", "led_blink", {"count": 3})])),
        ["steps[0].params.period_ms: missing"],
        True,
    ),
    (
        "extra and missing params",
        text(plan([step("t1", "led_blink", {"times": 3, "period_ms": 200})])),
        [
            "steps[0].params.times: not a param of led_blink (params: count, period_ms)",
            "steps[0].params.count: missing",
        ],
        True,
    ),
    (
        "fractional int",
        text(plan([step("t1", "led_blink", {"count": 2.5, "period_ms": 200})])),
        ["steps[0].params.count: expected an int, got a number with a fraction"],
        True,
    ),
    (
        "string for int",
        text(plan([step("t1", "led_blink", {"count": "3", "period_ms": 200})])),
        ["steps[0].params.count: expected an int, got a string"],
        True,
    ),
    (
        "bool for int",
        text(plan([step("t1", "led_blink", {"count": True, "period_ms": 200})])),
        ["steps[0].params.count: expected an int, got a bool"],
        True,
    ),
    (
        "number for text",
        text(plan([step("t1", "speak", {"text": 42})])),
        ["steps[0].params.text: expected a string, got an int"],
        True,
    ),
    (
        "lone surrogate in text",
        '{"heard_req": 0, "steps": [{"task_id": "t1", "action": "speak", "params": '
        '{"text": "hi \\ud800"}, "priority": 5, "depends_on": []}], "can_execute": true, '
        '"missing": [], "response": ""}',
        ["steps[0].params.text: expected a string, got a string with a lone surrogate \\ud800"],
        False,
    ),
    (
        "params not object",
        _with_step(params=[]),
        ["steps[0].params: expected an object, got an array"],
        True,
    ),
    ("priority too high", _with_step(priority=10), ["steps[0].priority: 10 is outside 0..9"], True),
    ("priority negative", _with_step(priority=-1), ["steps[0].priority: -1 is outside 0..9"], True),
    (
        "priority string",
        _with_step(priority="high"),
        ["steps[0].priority: expected an int 0..9, got a string"],
        True,
    ),
    (
        "depends_on string",
        _with_step(depends_on="t0"),
        ["steps[0].depends_on: expected an array, got a string"],
        True,
    ),
    (
        "depends_on number",
        _with_step(depends_on=[1]),
        ["steps[0].depends_on[0]: expected a string, got an int"],
        True,
    ),
    (
        "self dependency",
        _with_step(depends_on=["t1"]),
        ['steps[0].depends_on[0]: "t1" is the step itself'],
        False,
    ),
    (
        "dangling dependency",
        _with_step(depends_on=["t9"]),
        ['steps[0].depends_on[0]: "t9" names no task in the plan'],
        False,
    ),
    (
        "two-step cycle",
        text(plan([step("t1", "led_on", None, 5, ["t2"]), step("t2", "led_off", None, 5, ["t1"])])),
        ["steps[0].depends_on: cycle t1 -> t2 -> t1"],
        False,
    ),
    (
        "three-step cycle behind a good step",
        text(
            plan(
                [
                    step("t0", "chime"),
                    step("a", "led_on", None, 5, ["t0", "c"]),
                    step("b", "led_off", None, 5, ["a"]),
                    step("c", "led_on", None, 5, ["b"]),
                ]
            )
        ),
        ["steps[1].depends_on: cycle a -> c -> b -> a"],
        False,
    ),
    (
        "can_execute false, missing empty",
        text(plan([], can_execute=False)),
        ["missing: empty while can_execute is false (name what is missing)"],
        False,
    ),
    (
        "missing item not string",
        text(plan([], can_execute=False, missing=[3])),
        ["missing[0]: expected a string, got an int"],
        True,
    ),
    (
        "many problems at once",
        text(
            {
                "heard_req": 0,
                "steps": [
                    step("t1", "fly", {"height": 3}, 12),
                    step("t1", "led_blink", {"count": 1.5}, 5, ["t1", "zz"]),
                ],
                "can_execute": True,
                "missing": [],
                "response": "",
                "extra": 1,
            }
        ),
        [
            "extra: unknown key " + _ALLOWED_TOP,
            'steps[0].action: "fly" is not on the menu (menu: %s)' % MENU_NAMES,
            "steps[0].priority: 12 is outside 0..9",
            "steps[1].params.count: expected an int, got a number with a fraction",
            "steps[1].params.period_ms: missing",
            'steps[1].task_id: "t1" repeats steps[0]',
            'steps[1].depends_on[0]: "t1" is the step itself',
            'steps[1].depends_on[1]: "zz" names no task in the plan',
        ],
        True,
    ),
]
