# The WebSocket client (master/net/ws.py) against `websockets`, on CPython and on the MicroPython unix port.
import asyncio
import os

import pytest

import ws_cases
from master.net import ws
from master.net import wsframe
from support import MICROPYPATH, run_micropython
from ws_rig import WsRig

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def rig():
    with WsRig(tls=True) as r:
        yield r


def test_mask_is_rfc6455_example():
    # RFC 6455 section 5.7: "Hello" with the key 37 fa 21 3d
    assert wsframe.mask(b"Hello", b"\x37\xfa\x21\x3d") == bytes.fromhex("7f9f4d5158")
    assert wsframe.mask(b"llo", b"\x37\xfa\x21\x3d", 2) == bytes.fromhex("4d5158"), "phase carries"


def test_accept_is_rfc6455_example():
    assert wsframe.accept_for("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize(
    "url,want",
    [
        ("ws://h:81/x?y=1", (False, "h", 81, "/x?y=1")),
        ("wss://h.example", (True, "h.example", 443, "/")),
        ("ws://h?q", (False, "h", 80, "/?q")),
    ],
)
def test_parse_url(url, want):
    assert ws.parse_url(url) == want


@pytest.mark.parametrize(
    "url,words",
    [
        ("http://h/", "must start with ws://"),
        ("ws://:80/", "no host"),
        ("ws://h:x/", "not a number"),
        ("ws://h:70000/", "out of range"),
        ("ws://u@h/", "user info"),
        (None, "must be a string"),
    ],
)
def test_parse_url_refuses_with_reason(url, words):
    with pytest.raises(ws.WsError, match=words):
        ws.parse_url(url)


@pytest.mark.parametrize("case", ws_cases.PLAIN, ids=lambda c: c.__name__[5:])
def test_cpython(rig, case):
    asyncio.run(asyncio.wait_for(case(rig.port), 30))


def test_cpython_wss(rig):
    asyncio.run(asyncio.wait_for(ws_cases.case_wss(rig.tls_port, rig.cert_der), 30))


def test_unix_port(rig, tmp_path):
    der = tmp_path / "cert.der"
    der.write_bytes(rig.cert_der)
    path = MICROPYPATH + ":" + HERE
    r = run_micropython(
        ["host_tests/xiaozhi/ws_cases.py", str(rig.port), str(rig.tls_port), str(der)],
        path=path,
        timeout=300,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    n = len(ws_cases.PLAIN) + 1
    assert "%d passed, 0 failed" % n in r.stdout, out
