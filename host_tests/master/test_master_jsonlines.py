# The JSON-lines link's request handling (master/links/jsonlines.py), both interpreters.
import asyncio
import json

import master_rig as mf
import plan_corpus as pc
from master.links import jsonlines

UNIX_PORT = True


def _ask(body, line):
    return asyncio.run(jsonlines.handle(body, line))


def test_menu_and_status_ops():
    rig = mf.standard_rig()
    r = _ask(rig.body, '{"op": "menu", "id": 1}')
    assert r["op"] == "menu" and r["status"] == 200 and r["id"] == 1, r
    assert len(r["reply"]["capabilities"]) == 6, r["reply"]
    r = _ask(rig.body, b'{"op": "status"}\n')
    assert r["status"] == 200 and r["reply"]["mode"] == "two-port" and "id" not in r, r


def test_plan_op_refused_and_silence():
    rig = mf.standard_rig()
    line = json.dumps({"op": "plan", "plan": pc.plan([pc.step("t1", "fly")])})
    r = _ask(rig.body, line)
    assert r["status"] == 422, r
    assert r["reply"]["problems"] == [
        'steps[0].action: "fly" is not on the menu (menu: %s)' % pc.MENU_NAMES
    ], r
    r = _ask(rig.body, json.dumps({"op": "plan", "plan": pc.plan([])}))
    assert r["status"] == 200 and r["reply"] == {"ok": True, "steps": [], "notes": []}, r
    assert rig.commands_sent() == 0, "a COMMAND left the master"


def test_plan_as_text_is_read_strictly():
    rig = mf.standard_rig()
    raw = '{"heard_req": 0, "heard_req": 0, "steps": [], "can_execute": true, "missing": [], "response": ""}'
    r = _ask(rig.body, json.dumps({"op": "plan", "plan": raw}))
    assert r["status"] == 422 and r["reply"]["problems"] == ['plan: duplicate key "heard_req"'], r
    r = _ask(rig.body, json.dumps({"op": "plan", "plan": "{"}))
    assert r["status"] == 400, r


def test_bad_lines():
    rig = mf.standard_rig()
    r = _ask(rig.body, "not json")
    assert r["status"] == 400 and r["reply"]["problems"] == ["line: not JSON"], r
    r = _ask(rig.body, "[1]")
    assert r["status"] == 400, r
    r = _ask(rig.body, '{"op": "dance"}')
    assert r["status"] == 400 and r["op"] == "dance", r
    assert r["reply"]["problems"] == ['op: unknown "dance" (ops: menu, plan, status)'], r
    r = _ask(rig.body, '{"op": "plan"}')
    assert r["status"] == 400, r
    r = _ask(rig.body, "x" * (jsonlines.MAX_LINE + 1))
    assert r["status"] == 413, r


def test_a_duplicate_key_in_the_plan_object_is_a_problem_of_the_plan():
    # The line is read strictly: a repeated key inside "plan" is refused as over HTTP (before,
    # the console's stock json kept the last value unseen); one outside it is a bad line.
    rig = mf.standard_rig()
    line = (
        '{"op": "plan", "plan": {"heard_req": 0, "steps": [{"task_id": "a", "action": "led_on",'
        ' "action": "led_off", "params": {}, "priority": 5, "depends_on": []}],'
        ' "can_execute": true, "missing": [], "response": ""}}'
    )
    r = _ask(rig.body, line)
    assert r["status"] == 422, r
    assert r["reply"]["problems"] == ['steps[0]: duplicate key "action"'], r
    r = _ask(rig.body, '{"op": "menu", "op": "status"}')
    assert r["status"] == 400 and r["reply"]["problems"] == ['line: duplicate key "op"'], r
    assert rig.commands_sent() == 0, "a COMMAND left the master"
