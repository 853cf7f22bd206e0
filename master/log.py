# Event log lines of a running board (docs/DESIGN.md): one JSON object per line, key "event" first.
import json


def line(event, pairs=()):
    """The log line for `event` with (key, value) pairs, in that order on both interpreters."""
    parts = ['{"event": ' + json.dumps(event)]
    for k, v in pairs:
        parts.append(json.dumps(k) + ": " + json.dumps(v))
    return ", ".join(parts) + "}"


def emit(event, pairs=()):
    print(line(event, pairs))
