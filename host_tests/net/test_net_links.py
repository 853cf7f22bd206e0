# Every outgoing HTTP user (WebSocket upgrade, xiaozhi discovery, nudges) against a rogue loopback server, on CPython and the unix port.
import asyncio
import os

import pytest

import net_cases
from rogue import Rogue
from support import MICROPYPATH, run_micropython

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def rogue():
    with Rogue() as r:
        r.answers = [
            (url % r.port if "%d" in url else url, tok) for url, tok, _, _ in net_cases.INJECTIONS
        ]
        yield r


def _request_lines(heads):
    return [h.split(b"\r\n", 1)[0].decode() for h in heads]


def _no_injected_line(heads):
    for h in heads:
        lines = h.split(b"\r\n")
        assert lines[-2:] == [b"", b""], h  # one blank line: the end of the head
        assert len(lines[0].split(b" ")) == 3, "the request line has 3 parts: %r" % lines[0]
        for line in lines[1:-2]:
            assert b": " in line and b"Injected" not in line, (line, h)


@pytest.mark.parametrize("case", net_cases.PORT_CASES, ids=lambda c: c.__name__[5:])
def test_cpython(rogue, case):
    before = len(rogue.heads)
    asyncio.run(asyncio.wait_for(case(rogue.port), 120))
    if case is net_cases.case_discovery_cannot_inject_headers:
        heads = rogue.heads[before:]
        sent = [w for _, _, what, w in net_cases.INJECTIONS if what == "sent"]
        assert _request_lines(heads) == sent, _request_lines(heads)
        _no_injected_line(heads)


def test_unix_port(rogue):
    before = len(rogue.heads)
    r = run_micropython(
        ["host_tests/net/net_cases.py", str(rogue.port)],
        path=MICROPYPATH + ":" + HERE,
        # the modules are compiled from source at import; the heap-bound case: test_xiaozhi_heap
        heapsize="1m",
        timeout=300,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "%d passed, 0 failed" % len(net_cases.PORT_CASES) in r.stdout, out
    heads = rogue.heads[before:]
    sent = [w for _, _, what, w in net_cases.INJECTIONS if what == "sent"]
    assert _request_lines(heads) == sent, _request_lines(heads)
    _no_injected_line(heads)
