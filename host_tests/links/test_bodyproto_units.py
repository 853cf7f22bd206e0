# Body Protocol handlers without sockets (express mapping, accept-then-answer), on CPython and the unix port.
try:
    import asyncio
except ImportError:  # pragma: no cover
    import uasyncio as asyncio

import json

from master.links import bodyproto
from master.links.httpd import Request
from fake_body import FakeBody

UNIX_PORT = True


def Req(msg):
    """The HTTP server's own Request with `msg` as its JSON body."""
    r = Request("POST", "/speak", "", {}, "127.0.0.1")
    r.content = json.dumps(msg).encode()
    return r


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
    busy = (
        503,
        {"error": "speak: 2 requests wait for the organ already, the most this body queues"},
    )
    assert outs == [(200, {})] + [(202, {"queued": True})] * 2 + [busy] * 5, outs
    assert took < 800, "no answer waited for the speaker: 8 answers in %d ms" % took
    assert said == [("speak", {"text": "line 0"})], said
    assert later[:2] == [("speak", {"text": "line 0"}), ("speak", {"text": "line 1"})], (
        "the queued ones are spoken in order after it: %r" % later
    )
    assert bp.queued == 2 and bp.busy == 5, (bp.queued, bp.busy)


def _body_of(text_bytes, key=b"text"):
    r = Request("POST", "/speak", "", {}, "127.0.0.1")
    r.pieces = [b'{"' + key + b'": "' + text_bytes + b'"}']
    return r


def test_a_long_text_under_the_body_limit_is_spoken_as_the_master_clamps_it():
    # issue 24 (10): a 3.9 KB /speak body, under the 4 KB limit, got 503 at 80 KB (its string
    # was cut out whole); now a body over 512 bytes is read through the clamping reader
    from organbus.utf8 import clip_text

    for text in ("a" * 600, "word " * 400, "\u00e9t\u00e9 " * 700, "a" * 4080):
        body = FakeBody()
        bp = bodyproto.BodyProtocol(body)
        code, out, _ = asyncio.run(bp.speak(_body_of(text.encode())))
        assert code == 200, (len(text), code, out)
        assert body.commands == [("speak", {"text": clip_text(text, 240)})], body.commands[0][1]
        n = len(text.encode())
        assert out["notes"] == [
            "a string of %d bytes was cut to 240 at a character boundary as the body came (the "
            "master forwards 240 bytes of a text)" % n
        ], out


def test_long_bodies_that_are_not_json_or_do_not_fit_are_refused_with_the_reason():
    from master.links.httpd import HttpError

    bp = bodyproto.BodyProtocol(FakeBody())
    for raw, status, words in (
        (b"a" * 600 + b"\xff", 400, "body: not JSON: invalid UTF-8 byte ff at offset 610"),
        (b"a" * 600 + b"\x01", 400, "body: not JSON: control character in a string at offset 610"),
        (b"a" * 600 + b'", "b": [1 2]', 400, "body: not JSON: expected ',' or ']' at offset 621"),
    ):  # fmt: skip
        try:
            asyncio.run(bp.speak(_body_of(raw)))
            assert False, "read %r" % raw[-12:]
        except HttpError as e:
            assert e.status == status and e.reason.startswith(words), (e.status, e.reason)
    r = Request("POST", "/speak", "", {}, "127.0.0.1")
    r.pieces = [b'{"t%d": "%s",' % (i, b"x" * 300) for i in range(10)] + [b'"text": "hi"}']
    try:
        asyncio.run(bp.speak(r))
        assert False, "read a body over the buffer once clamped"
    except HttpError as e:
        assert e.status == 413 and "over 512 bytes" in e.reason, e.reason
    # and /express: a long emotion is read too, and found on no ability (501, not 503)
    body = FakeBody()
    code, out, _ = asyncio.run(
        bodyproto.BodyProtocol(body).express(_body_of(b"h" * 3900, b"emotion"))
    )
    assert code == 501 and body.commands == [], (code, out)
