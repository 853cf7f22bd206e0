# HTTP's /status: the ring's entries written as their kept JSON text, the same document as the objects, in less heap.
import gc
import json

from bench_master import registered_body
from organbus import frame
import master_rig as mf

from master.links.jsonout import json_length, json_pieces

UNIX_PORT = True

PLAN = json.dumps(
    {
        "heard_req": 0,
        "steps": [
            {"task_id": "t1", "action": "led_on", "params": {}, "priority": 5, "depends_on": []},
            {"task_id": "t2", "action": "chime", "params": {}, "priority": 5, "depends_on": ["t1"]},
        ],
        "can_execute": True,
        "missing": [],
        "response": "",
    }
)


def _body(plans):
    # the sans-IO master with both organs, `plans` two-step plans run (one EVENT each)
    body, out, reg, now = registered_body()
    done = frame.encode(frame.EVENT, mf.command.encode_event("chime", 0))
    for _ in range(plans):
        out.clear()
        kind, run = body.submit(PLAN)
        assert kind == "accepted", run
        while not run.finished:
            port, f = out.pop(0)
            if f[2] == frame.COMMAND:
                reg.feeds[port](frame.RESP_OK_FRAME, now[0])
                if port == 1:
                    now[0] += 40
                    reg.feed(port, done, now[0])
        now[0] += 100
    return body


def _text(doc):
    # bytes() of each piece: MicroPython's join takes no memoryview (the ring's entries are)
    return b"".join([bytes(p) for p in json_pieces(doc)])


def test_the_text_document_is_the_objects_document():
    for plans in (0, 3, 20):
        body = _body(plans)
        doc = body.status()
        text = body.status(text=True)
        assert json.loads(_text(text)) == json.loads(json.dumps(doc)), plans
        assert json_length(text) == len(_text(text))
        kinds = [e["event"] for e in doc["recent"]]
        ring = text["recent"]  # views of the ring's bytes
        assert all(type(e) in (bytes, memoryview) for e in ring) and len(ring) == len(kinds)
        if plans:
            assert "event" in kinds and "plan" in kinds, kinds
    assert len(doc["recent"]) == 16  # the ring full: its 16 newest entries


def test_a_full_ring_costs_less_heap_as_text():
    if not hasattr(gc, "mem_alloc"):
        return  # CPython: no heap figure; the unix port and RV32 run this
    body = _body(20)
    held = []
    for text in (False, True):
        gc.collect()
        gc.disable()
        a = gc.mem_alloc()
        doc = body.status(text)
        held.append(gc.mem_alloc() - a)
        gc.enable()
        doc = None
    # measured: the unix port (64-bit objects) 12,256 B as objects, 8,672 B as text; RV32
    # (32-bit, as the C6) 7,024 B and 5,488 B
    assert held[1] * 100 < held[0] * 85, held
