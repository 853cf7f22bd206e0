# Body Protocol v1 over HTTP (POST /status /speak /look /express) against the fake body: honest answers only.
import time

import pytest

from test_httpd import request
from fake_body import FakeBody, ServerThread


@pytest.fixture
def server():
    s = ServerThread(body=FakeBody(play_ms=3000))
    yield s
    s.stop()


def test_status_follows_the_speaker(server):
    code, _, out = request(server.port, "POST", "/status", {})
    assert (code, out) == (200, {"online": True}), (code, out)
    server.body.online = ["LED_001"]
    code, _, out = request(server.port, "POST", "/status", {})
    assert (code, out) == (200, {"online": False}), "no speaker, not online: %r" % out
    code, _, out = request(server.port, "POST", "/status")
    assert (code, out) == (200, {"online": False}), "an empty body is taken as {}"


def test_speak_answers_once_accepted_not_after_playing(server):
    t0 = time.monotonic()
    code, _, out = request(server.port, "POST", "/speak", {"text": "Light is on."})
    playing = server.body.playing
    took = time.monotonic() - t0
    assert (code, out) == (200, {}), (code, out)
    assert playing == 1, "answered on accept while the speech still plays"
    assert took < 2.5, "not after the 3 s of speech (%.2f s)" % took
    assert server.body.commands == [("speak", {"text": "Light is on."})], server.body.commands


def test_speak_without_speaker_is_503_and_sends_nothing(server):
    server.body.online = ["LED_001"]
    code, _, out = request(server.port, "POST", "/speak", {"text": "hello"})
    assert code == 503 and "speaker" in out["error"], (code, out)
    assert server.body.commands == [], server.body.commands


@pytest.mark.parametrize("outcome,want", [("refused", 502), ("timeout", 504), ("offline", 503)])
def test_speak_failure_is_not_a_fake_200(server, outcome, want):
    server.body.script = {"speak": outcome}
    code, _, out = request(server.port, "POST", "/speak", {"text": "hello"})
    assert code == want and "speak failed" in out["error"], (code, out)


def test_speak_bad_requests(server):
    for body in ({}, {"text": ""}, {"text": 5}, [1], {"words": "hi"}):
        code, _, out = request(server.port, "POST", "/speak", body)
        assert code == 400 and "text" in out["error"], (body, code, out)
    assert server.body.commands == []


def test_look_says_there_is_no_camera(server):
    code, _, out = request(server.port, "POST", "/look", {"question": "what is in front of you?"})
    assert code == 200 and "no camera" in out["text"] and set(out) == {"text"}, (code, out)


def test_express_without_an_ability_is_honest_501(server):
    for emotion in ("happy", "sad", "neutral"):
        code, _, out = request(server.port, "POST", "/express", {"emotion": emotion})
        assert code == 501 and emotion in out["error"], (code, out)
        assert out["abilities"] == ["led_on", "led_off", "led_blink", "speak", "chime"], out
    code, _, out = request(server.port, "POST", "/express", {})
    assert code == 400, (code, out)
    assert server.body.commands == [], "nothing was faked onto another ability"


def test_parallel_speaks_never_wait_for_the_speaker_nor_take_a_plans_slot(server):
    # issue 24 (10): 8 /speak at once waited for the speaker (0.4, 3.1, 5.7 s; 5 got 503) and a
    # plan beside them found no connection slot; now each is answered at the organ's accept or
    # queued (202) at once, and the plan is served
    import threading

    from test_httpd import PLAN

    results = []

    def speak(i):
        t0 = time.monotonic()
        code, _, out = request(server.port, "POST", "/speak", {"text": "line %d" % i}, timeout=10)
        results.append((code, out, time.monotonic() - t0))

    threads = []
    for i in range(8):
        t = threading.Thread(target=speak, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.03)
    code, _, rep = request(server.port, "POST", "/plan", PLAN)
    for t in threads:
        t.join(15)
    assert code == 200 and rep["ok"], "the plan beside them was served: %r" % ((code, rep),)
    codes = sorted(r[0] for r in results)
    assert codes == [200, 202, 202] + [503] * 5, "spoken, two queued, the rest told: %r" % results
    for code, out, _ in results:
        if code == 503:
            assert "2 requests wait for the organ already" in out["error"], out
        else:
            assert out in ({}, {"queued": True}), out
    assert max(r[2] for r in results) < 2.0, "no /speak waited for the speech: %r" % results
