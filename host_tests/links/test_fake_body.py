# The links tests' scripted stand-in body (helpers/fake_body.py) keeps its own contract.
import asyncio

from master.bus.outcome import CODE

from fake_body import FakeBody

UNIX_PORT = True


def test_fake_body_menu_and_refusal():
    b = FakeBody()
    names = [c["name"] for c in b.menu()["capabilities"]]
    assert names == ["led_on", "led_off", "led_blink", "speak", "chime"], names
    plan = {"steps": [{"task_id": "t1", "action": "nope", "params": {}}]}
    kind, out = asyncio.run(b.execute(plan))
    code = CODE[kind]
    assert code == 422 and "nope" in out["problems"][0], (code, out)
    assert b.commands == [], "a refused plan sent nothing: %r" % b.commands
