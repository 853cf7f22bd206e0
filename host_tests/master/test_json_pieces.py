# The HTTP server's JSON answers written in pieces through one small buffer (a fragmented heap still serves the menu).
import asyncio
import json

from master.links import httpd, jsonout
from organbus import menu

UNIX_PORT = True

LONG = "x" * 700  # one scalar longer than the buffer


class Writer:
    def __init__(self):
        self.writes = []
        self.drains = 0

    def write(self, data):
        self.writes.append(bytes(data))

    async def drain(self):
        self.drains += 1


def _menu():
    p = {"name": "ms", "type": "int", "min": 0, "max": 5000, "unit": "ms"}
    caps = []
    for i in range(6):
        caps.append(
            {
                "name": "act%d" % i,
                "description": "an ability with a description of some length " * 2,
                "exec_type": "duration",
                "resource_group": "g%d" % (i % 2),
                "max_duration_ms": 5000,
                "params": [p],
                "module_id": "MOD_%03d" % i,
            }
        )
    return menu.build_menu(caps, 16)


SAMPLES = [
    None,
    True,
    0,
    -7,
    2.5,
    "text",
    "caf\u00e9 \u2603",
    [],
    {},
    (1, 2),
    {"a": [1, {"b": None}], "c": "d", 3: "int key"},
    {"long": LONG, "list": [LONG, 1]},
]


def test_pieces_join_to_json_dumps():
    for obj in SAMPLES + [_menu()]:
        got = b"".join(jsonout.json_pieces(obj))
        want = json.dumps(obj).encode()
        assert got == want, (obj, got[:80], want[:80])
        assert jsonout.json_length(obj) == len(want), obj


def test_write_json_gives_the_socket_at_most_one_buffer_at_a_time():
    m = _menu()
    want = json.dumps(m).encode()
    assert len(want) > 4 * 512, "the menu of this test must be several buffers long"
    w = Writer()
    asyncio.run(jsonout.write_json(w, m, 5))
    assert b"".join(w.writes) == want
    assert max(len(x) for x in w.writes) <= 512, [len(x) for x in w.writes]
    assert len(w.writes) >= len(want) // 512 and w.drains >= len(w.writes)
    w = Writer()
    obj = {"long": LONG, "list": [LONG, 1]}
    asyncio.run(jsonout.write_json(w, obj, 5))
    assert b"".join(w.writes) == json.dumps(obj).encode()
    assert [len(x) for x in w.writes if len(x) > 512] == [702, 702], "long scalars go as they are"


def test_the_menu_in_pieces_is_the_menu_and_holds_one_entry_at_a_time():
    # GET /menu's document (routes.menu_pieces) writes exactly Body.menu()'s JSON, for both
    # organs and for none, and its entries are built only as they are written
    from master.links import routes
    from master_rig import Rig, standard_rig

    for rig in (standard_rig(), Rig(start=False)):
        whole = rig.body.menu()
        lazy = routes.menu_pieces(rig.body)
        text = b"".join(jsonout.json_pieces(lazy))
        assert json.loads(text) == whole, text[:200]
        assert text == json.dumps(whole).encode()
        assert jsonout.json_length(lazy) == len(text)
    rig = standard_rig()
    built = []
    entry = routes._entry

    def counting(c):
        built.append(c["name"])
        return entry(c)

    lazy = routes.menu_pieces(rig.body)
    lazy["capabilities"].fn = counting
    assert built == [], "nothing built before the answer is written"
    names = [d["name"] for d in lazy["capabilities"]]
    assert names == built and len(names) == len(rig.body.menu()["capabilities"]) > 2, names


def test_out_of_memory_after_the_head_cuts_the_answer_never_appends_a_503():
    # A MemoryError while the body is written (a fragmented heap) must not write a whole
    # 503 answer after the 200 head already sent: the connection is closed instead.
    srv = httpd.HttpServer({})
    real = httpd.write_json

    async def runs_out(writer, obj, timeout_s, buf=None):
        writer.write(b'{"a": [1, ')
        raise MemoryError

    w = Writer()
    httpd.write_json = runs_out
    try:
        asyncio.run(srv._send(w, 200, {"a": [1, 2, 3], "b": "c"}))
    except OSError:
        pass
    else:
        assert False, "an answer that ran out of memory went on as if complete"
    finally:
        httpd.write_json = real
    sent = b"".join(w.writes)
    assert sent.startswith(b"HTTP/1.1 200 "), sent
    assert b"503" not in sent and sent.count(b"HTTP/1.1") == 1, sent
    assert srv.low_memory == 1
