# Body Protocol over the real master Body with scripted fake organs on a fake clock (both interpreters).
try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

import master_rig as mf
import json

from master.links import bodyproto
from master.links.httpd import Request

UNIX_PORT = True


def Req(msg):
    """The HTTP server's own Request with `msg` as its JSON body."""
    r = Request("POST", "/speak", "", {}, "127.0.0.1")
    r.content = json.dumps(msg).encode()
    return r


def rig_with(led=True, speaker=True, voice=True, resp=0, event_ms=300):
    rig = mf.Rig(start=False)
    if led:
        rig.attach(0, mf.FakeOrgan(mf.led()))
    if speaker:
        rig.attach(1, mf.FakeOrgan(mf.speaker(voice=voice), resp=resp, event_ms=event_ms))
    rig.body.start(rig.now)
    rig.advance(200)
    return rig


def run_with_clock(rig, coro):
    """Run `coro` while a task moves the rig's fake clock 10 ms per loop turn."""
    state = {"go": True, "ms": 0}

    async def clock():
        while state["go"]:
            rig.advance(10)
            state["ms"] += 10
            await asyncio.sleep(0)

    async def main():
        t = asyncio.create_task(clock())
        try:
            return await coro
        finally:
            state["go"] = False
            await t

    out = asyncio.run(main())
    return out, state["ms"]


def test_status_is_true_only_with_a_speaking_speaker():
    rig = rig_with()
    bp = bodyproto.BodyProtocol(rig.body)
    out, _ = run_with_clock(rig, bp.status(Req({})))
    assert out[:2] == (200, {"online": True}), out
    for rig, why in ((rig_with(speaker=False), "no speaker"),
                     (rig_with(voice=False), "a speaker with chime only")):  # fmt: skip
        bp = bodyproto.BodyProtocol(rig.body)
        out, _ = run_with_clock(rig, bp.status(Req({})))
        assert out[:2] == (200, {"online": False}), "%s: %r" % (why, out)


def test_speak_answers_on_accept_before_the_speech_ends():
    rig = rig_with(event_ms=5000)
    bp = bodyproto.BodyProtocol(rig.body)
    out, ms = run_with_clock(rig, bp.speak(Req({"text": "Light is on."})))
    assert out[:2] == (200, {}), out
    assert ms < 1000, "answered on COMMAND_RESP, not after the 5 s of speech (%d ms)" % ms
    names = [c[1] for c in rig.organs[1].commands]
    assert names == ["speak"], names


def test_speak_refused_or_silent_organ_is_not_a_200():
    rig = rig_with(resp=1)
    bp = bodyproto.BodyProtocol(rig.body)
    out, _ = run_with_clock(rig, bp.speak(Req({"text": "hello"})))
    assert out[0] == 502 and "SPK_001 answered 1" in out[1]["error"], out
    rig = rig_with(resp=None)
    bp = bodyproto.BodyProtocol(rig.body)
    out, ms = run_with_clock(rig, bp.speak(Req({"text": "hello"})))
    assert out[0] == 504 and "no COMMAND_RESP" in out[1]["error"], out
    assert ms >= 1000, "the 1 s COMMAND_RESP timeout ran out first (%d ms)" % ms


def test_speak_without_speak_on_the_menu_sends_nothing():
    rig = rig_with(voice=False)
    bp = bodyproto.BodyProtocol(rig.body)
    out, _ = run_with_clock(rig, bp.speak(Req({"text": "hello"})))
    assert out[0] == 503, out
    assert rig.commands_sent() == 0, "no COMMAND left the master"


def test_express_has_no_ability_here():
    rig = rig_with()
    bp = bodyproto.BodyProtocol(rig.body)
    out, _ = run_with_clock(rig, bp.express(Req({"emotion": "happy"})))
    assert out[0] == 501 and "speak" in out[1]["abilities"], out
    assert rig.commands_sent() == 0


def test_speak_behind_a_playing_utterance_is_202_queued_and_sent_when_it_ends():
    rig = rig_with(event_ms=3000)
    bp = bodyproto.BodyProtocol(rig.body)

    async def both():
        first = await bp.speak(Req({"text": "one"}))
        t0 = rig.now
        second = await bp.speak(Req({"text": "two"}))
        return first, second, rig.now - t0

    (first, second, waited), _ = run_with_clock(rig, both())
    assert first[:2] == (200, {}) and second[:2] == (202, {"queued": True}), (first, second)
    assert waited < 100, "the second was answered at once, not after the speech: %d ms" % waited
    assert [c[3] for c in rig.organs[1].commands] == ["one"], rig.organs[1].commands
    rig.advance(3500)
    assert [c[3] for c in rig.organs[1].commands] == ["one", "two"], rig.organs[1].commands
    rig.advance(3500)
    assert (
        bp.last_report[1]["ok"] and bp.last_report[1]["steps"][0]["status"] == "done"
    ), bp.last_report
