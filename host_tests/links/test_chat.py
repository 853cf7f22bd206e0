# tools/chat.py against a loopback stand-in for the model endpoint (a recorded completion) and the master's links.
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from support import ROOT
from fake_body import ServerThread

PLAN = {
    "heard_req": 0,
    "steps": [
        {"task_id": "t1", "action": "led_on", "params": {}, "priority": 5, "depends_on": []},
        {"task_id": "t2", "action": "speak", "params": {"text": "Light is on."},
         "priority": 5, "depends_on": ["t1"]},
    ],
    "can_execute": True,
    "missing": [],
    "response": "Light is on.",
}  # fmt: skip


def recorded_completion(content):
    """The shape an OpenAI-compatible server returns for a json_schema response format."""
    return {
        "id": "chatcmpl-rec0001",
        "object": "chat.completion",
        "created": 1764489600,
        "model": "stand-in-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 812, "completion_tokens": 96, "total_tokens": 908},
    }


class StandInModel:
    """Loopback model endpoint: records each request, answers with the queued reply."""

    def __init__(self, reply, status=200):
        self.requests = []
        owner = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                owner.requests.append(
                    {"path": self.path, "headers": dict(self.headers),
                     "body": json.loads(self.rfile.read(n))}
                )  # fmt: skip
                raw = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/v1" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run_chat(master_port, model_url, sentence, *extra, env_extra=None):
    env = dict(os.environ, OPENAI_API_KEY="sk-test-key", **(env_extra or {}))
    env.pop("OPENAI_MODEL", None)
    cmd = [sys.executable, os.path.join(ROOT, "tools", "chat.py"),
           "--master", "http://127.0.0.1:%d" % master_port, "--base-url", model_url,
           "--model", "stand-in-model", "--once", sentence] + list(extra)  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def master():
    s = ServerThread()
    yield s
    s.stop()


def test_chat_sends_menu_and_schema_and_the_plan_reaches_the_master(master):
    model = StandInModel(recorded_completion(json.dumps(PLAN)))
    try:
        r = run_chat(master.port, model.url, "Turn the light on and tell me.")
    finally:
        model.close()
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(model.requests) == 1, model.requests
    req = model.requests[0]
    assert req["path"] == "/v1/chat/completions", req["path"]
    assert req["headers"].get("Authorization") == "Bearer sk-test-key", req["headers"]
    body = req["body"]
    assert body["model"] == "stand-in-model"
    menu = master.body.menu()
    system = body["messages"][0]["content"]
    for c in menu["capabilities"]:
        assert '"%s"' % c["name"] in system and c["description"] in system, c["name"]
    assert body["messages"][1] == {"role": "user", "content": "Turn the light on and tell me."}
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["schema"] == menu["plan_schema"], rf
    assert master.body.executed == [PLAN], "the model's plan reached the master unchanged"
    assert "body: Light is on." in r.stdout, r.stdout
    assert "report: ok" in r.stdout and "t2 speak: done" in r.stdout, r.stdout


def test_refused_plan_is_shown_with_its_problems(master):
    bad = dict(PLAN, steps=[{"task_id": "t1", "action": "dance", "params": {},
                             "priority": 5, "depends_on": []}])  # fmt: skip
    model = StandInModel(recorded_completion(json.dumps(bad)))
    try:
        r = run_chat(master.port, model.url, "Dance!")
    finally:
        model.close()
    assert r.returncode == 1, r.stdout + r.stderr
    assert "plan refused by the master (422)" in r.stdout, r.stdout
    assert "dance" in r.stdout and "led_on" in r.stdout, "problems name the action and the menu"
    assert master.body.commands == []


def test_model_errors_are_reported_not_hidden(master):
    model = StandInModel({"error": {"message": "invalid api key"}}, status=401)
    try:
        r = run_chat(master.port, model.url, "hello")
    finally:
        model.close()
    assert r.returncode == 2 and "401" in r.stderr and "invalid api key" in r.stderr, r.stderr
    r = run_chat(master.port, "http://127.0.0.1:9/v1", "hello")
    assert r.returncode == 2 and "cannot reach" in r.stderr, r.stderr
    assert master.body.commands == []


def test_master_token_is_sent():
    s = ServerThread({"token": "master-tok"})
    model = StandInModel(recorded_completion(json.dumps(PLAN)))
    try:
        r = run_chat(s.port, model.url, "light", env_extra={"ORGANBUS_TOKEN": "master-tok"})
        assert r.returncode == 0, r.stdout + r.stderr
        assert s.body.executed == [PLAN]
        r = run_chat(s.port, model.url, "light", "--token", "nope")
        assert r.returncode == 2 and "401" in r.stderr, r.stderr
    finally:
        model.close()
        s.stop()
