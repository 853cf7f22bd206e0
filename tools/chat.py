# Chat bridge: a sentence in, a plan from an OpenAI-compatible model (menu's plan_schema as response format), the master runs it.
"""Type a sentence; the model answers with a plan for exactly this body; the master runs it.

    python tools/chat.py --master http://127.0.0.1:8080 --model gpt-4o-mini
    python tools/chat.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5 --once "blink twice"

Each sentence: GET {master}/menu, POST {base-url}/chat/completions with the menu in the
system prompt and the menu's `plan_schema` as a `json_schema` response format, POST the
model's plan to {master}/plan as it came, print the plan's `response` line and the master's
report (or the problems when the master refuses the plan). Nothing in the plan is changed
here: the master validates it whole.

Options fall back to the environment: ORGANBUS_MASTER, ORGANBUS_TOKEN (the master's bearer
token), OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_API_KEY. Standard library only.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

DEFAULT_MASTER = "http://127.0.0.1:8080"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

PROMPT = """You drive a small robot body through its master controller. The body can do only \
what its menu lists; each ability has hard limits. Answer every request with ONE JSON plan \
that matches the response schema.

Rules:
- Use only actions from the menu, with exactly the params each one declares, inside their min/max.
- Steps run when everything in their depends_on has finished well; higher priority (0..9) first.
- If the request needs an ability the menu does not have, set can_execute to false, list what \
is missing in `missing`, and do not invent actions.
- `response` is the one line the person will see. The body says nothing unless a step speaks: \
to say something out loud, add a speak step with the words (only if speak is on the menu).
- heard_req is 0. Use short task ids such as t1, t2.

The menu (JSON):
%s
"""


class ChatError(Exception):
    pass


def _http(method, url, payload=None, headers=None, timeout=60):
    """(status, parsed JSON or text) for any HTTP status; ChatError when unreachable."""
    data = None
    hdrs = dict(headers or {})
    if payload is not None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        hdrs.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        raise ChatError("cannot reach %s: %s" % (url, getattr(e, "reason", e)))
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def _auth(token):
    return {"Authorization": "Bearer " + token} if token else {}


def get_menu(master, token=None):
    status, menu = _http("GET", master.rstrip("/") + "/menu", headers=_auth(token))
    if status != 200 or not isinstance(menu, dict):
        raise ChatError("the master answered GET /menu with %s: %s" % (status, menu))
    return menu


def completion_request(model, menu, sentence, strict=False):
    """The chat-completions body: the menu in the prompt, its plan_schema as response format."""
    shown = dict(menu)
    schema = shown.pop("plan_schema", None)
    if schema is None:
        raise ChatError("the master's menu has no plan_schema")
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": PROMPT % json.dumps(shown, indent=1)},
            {"role": "user", "content": sentence},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "organbus_plan", "schema": schema, "strict": bool(strict)},
        },
        "temperature": 0,
    }


def ask_model(base_url, api_key, body, timeout=120):
    """The plan text the model wrote (its message content, unchanged)."""
    url = base_url.rstrip("/") + "/chat/completions"
    status, out = _http("POST", url, body, _auth(api_key), timeout)
    if status != 200 or not isinstance(out, dict):
        raise ChatError("the model endpoint answered %s: %s" % (status, str(out)[:500]))
    try:
        msg = out["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ChatError(
            "the model endpoint answered without choices[0].message: %s" % str(out)[:500]
        )
    if msg.get("refusal"):
        raise ChatError("the model refused: %s" % msg["refusal"])
    content = msg.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ChatError("the model returned no plan (empty message content)")
    return content


def post_plan(master, token, plan_text):
    return _http("POST", master.rstrip("/") + "/plan", plan_text.encode(), _auth(token))


def describe(plan_text, status, out):
    """Lines to print for one exchange."""
    lines = []
    try:
        plan = json.loads(plan_text)
    except ValueError:
        plan = None
    if isinstance(plan, dict):
        if plan.get("response"):
            lines.append("body: %s" % plan["response"])
        if plan.get("can_execute") is False:
            lines.append(
                "model says it cannot: missing %s" % ", ".join(map(str, plan.get("missing", [])))
            )
    if status == 200 and isinstance(out, dict):
        lines.append("report: %s" % ("ok" if out.get("ok") else "NOT ok"))
        for s in out.get("steps", []):
            line = "  %s %s: %s" % (s.get("task_id"), s.get("action"), s.get("status"))
            if "ms" in s:
                line += " (%s ms)" % s["ms"]
            if s.get("reason"):
                line += " - " + s["reason"]
            lines.append(line)
        for n in out.get("notes", []):
            lines.append("  note: %s" % n)
    elif isinstance(out, dict) and "problems" in out:
        lines.append("plan refused by the master (%s):" % status)
        for p in out["problems"]:
            lines.append("  - %s" % p)
    else:
        lines.append("the master answered %s: %s" % (status, out))
    return lines


def exchange(opts, sentence, out=sys.stdout):
    """One sentence through model and master; True when the report is ok."""
    menu = get_menu(opts.master, opts.token)
    body = completion_request(opts.model, menu, sentence, opts.strict)
    plan_text = ask_model(opts.base_url, opts.api_key, body)
    if opts.show_plan:
        print("plan: %s" % plan_text, file=out)
    status, report = post_plan(opts.master, opts.token, plan_text)
    for line in describe(plan_text, status, report):
        print(line, file=out)
    return status == 200 and isinstance(report, dict) and bool(report.get("ok"))


def parse_args(argv=None):
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default=env("ORGANBUS_MASTER", DEFAULT_MASTER))
    ap.add_argument("--token", default=env("ORGANBUS_TOKEN"), help="the master's bearer token")
    ap.add_argument("--base-url", default=env("OPENAI_BASE_URL", DEFAULT_BASE_URL))
    ap.add_argument("--model", default=env("OPENAI_MODEL"))
    ap.add_argument("--api-key", default=env("OPENAI_API_KEY"))
    ap.add_argument("--strict", action="store_true", help='send "strict": true with the schema')
    ap.add_argument("--once", metavar="SENTENCE", help="run one sentence and exit")
    ap.add_argument("--show-plan", action="store_true", help="print the model's plan too")
    opts = ap.parse_args(argv)
    if not opts.model:
        ap.error("no model: pass --model or set OPENAI_MODEL")
    return opts


def main(argv=None):
    opts = parse_args(argv)
    if opts.once is not None:
        try:
            return 0 if exchange(opts, opts.once) else 1
        except ChatError as e:
            print("error: %s" % e, file=sys.stderr)
            return 2
    print("organbus chat: master %s, model %s at %s (Ctrl-D to quit)" % (
        opts.master, opts.model, opts.base_url))  # fmt: skip
    while True:
        try:
            sentence = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if not sentence:
            continue
        try:
            exchange(opts, sentence)
        except ChatError as e:
            print("error: %s" % e)


if __name__ == "__main__":
    sys.exit(main())
