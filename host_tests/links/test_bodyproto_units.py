# Body Protocol handlers without sockets (express mapping, accept-then-answer), on CPython and the unix port.
try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

from master import bodyproto
from fake_body import FakeBody

UNIX_PORT = True


class Req:
    def __init__(self, msg):
        self.json = msg
        self.headers = {}


def cap(name, params=()):
    return {"name": name, "description": "", "exec_type": "immediate", "resource_group": "face",
            "max_duration_ms": 0, "params": list(params)}  # fmt: skip


def test_express_maps_only_exact_abilities():
    menu = {"capabilities": [cap("led_on"), cap("express_happy")]}
    assert bodyproto.express_action(menu, "happy") == ("express_happy", {})
    assert bodyproto.express_action(menu, "sad") is None, "no nearest-ability guessing"
    text = {"name": "emotion", "type": "string", "min": 1, "max": 16, "unit": ""}
    menu = {"capabilities": [cap("express", [text])]}
    assert bodyproto.express_action(menu, "sleepy") == ("express", {"emotion": "sleepy"})
    menu = {"capabilities": [cap("express", [dict(text, name="mood")])]}
    assert bodyproto.express_action(menu, "sleepy") is None, "only an emotion param is taken"


def test_speak_answers_on_accept_and_playing_goes_on():
    body = FakeBody(play_ms=300)
    bp = bodyproto.BodyProtocol(body)

    async def go():
        code, out, _ = await bp.speak(Req({"text": "Hi."}))
        running = body.playing
        await asyncio.sleep(0.5)
        return code, out, running, body.playing

    code, out, running, after = asyncio.run(go())
    assert (code, out) == (200, {}), (code, out)
    assert running == 1 and after == 0, "the plan played on after the answer: %r" % (
        (running, after),
    )
    assert bp.last_report[0] == 200 and bp.last_report[1]["ok"], bp.last_report


def test_express_runs_the_exact_ability():
    body = FakeBody()
    extra = cap("express_happy")
    orig = body.menu

    def menu():
        m = orig()
        m["capabilities"].append(extra)
        return m

    body.menu = menu
    bp = bodyproto.BodyProtocol(body)
    code, out, _ = asyncio.run(bp.express(Req({"emotion": "happy"})))
    assert (code, out) == (200, {}), (code, out)
    assert body.commands == [("express_happy", {})], body.commands


def _ms():
    import time

    if hasattr(time, "ticks_ms"):
        return time.ticks_ms()
    return int(time.monotonic() * 1000)


def test_speak_behind_an_utterance_is_queued_202_at_once_and_spoken_after_it():
    # issue 24 (10): each /speak waited for the speaker without bound (0.4, 3.1, 5.7 s), holding
    # its connection slot; now one behind another utterance is answered at once, queued
    body = FakeBody(play_ms=1000)
    bp = bodyproto.BodyProtocol(body)

    async def go():
        t0 = _ms()
        outs = []
        for i in range(8):
            outs.append((await bp.speak(Req({"text": "line %d" % i})))[:2])
        took = _ms() - t0
        said = list(body.commands)
        await asyncio.sleep(1.3)
        return outs, took, said, list(body.commands)

    outs, took, said, later = asyncio.run(go())
    assert outs == [(200, {})] + [(202, {"queued": True})] * 7, outs
    assert took < 800, "no answer waited for the speaker: 8 answers in %d ms" % took
    assert said == [("speak", {"text": "line 0"})], said
    assert later[:2] == [("speak", {"text": "line 0"}), ("speak", {"text": "line 1"})], (
        "the queued ones are spoken in order after it: %r" % later
    )
    assert bp.queued == 7, bp.queued
