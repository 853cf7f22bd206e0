# master/links/mqtt/packet.py against a real Mosquitto on loopback: connect, subscribe, QoS 0 and 1, retain, last will.
import socket

import pytest

from master.links.mqtt import packet as p


def _read(sock, buf, state):
    while True:
        got = p.parse(buf, state[0], 4096)
        if got:
            used, first, body = got
            out = (first, bytes(body))
            buf[: state[0] - used] = buf[used : state[0]]
            state[0] -= used
            return out
        k = sock.recv_into(memoryview(buf)[state[0] :])
        assert k, "broker closed"
        state[0] += k


def _client(port, cid, will=None, keepalive=60):
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.sendall(p.connect(cid, keepalive, will=will))
    buf, st = bytearray(8192), [0]
    first, body = _read(s, buf, st)
    assert first == p.CONNACK and body == b"\x00\x00"
    return s, buf, st


def test_qos1_retain_and_will(broker):
    a, abuf, ast = _client(broker.port, "a", will=("body/a/avail", b"offline", 1, True))
    a.sendall(p.publish("body/a/menu", b'{"led_on":1}', qos=1, retain=True, pid=7))
    first, body = _read(a, abuf, ast)
    assert first == p.PUBACK and body == b"\x00\x07"
    b, bbuf, bst = _client(broker.port, "b")
    b.sendall(p.subscribe(1, [("body/#", 1)]))
    first, body = _read(b, bbuf, bst)
    assert first == p.SUBACK and body == b"\x00\x01\x01"
    first, body = _read(b, bbuf, bst)
    topic, payload, qos, retain, pid = p.publish_fields(first, memoryview(body))
    assert (topic, bytes(payload), qos, retain) == ("body/a/menu", b'{"led_on":1}', 1, 1)
    b.sendall(p.puback(pid))
    b.sendall(p.pingreq())
    assert _read(b, bbuf, bst) == (p.PINGRESP, b"")
    a.close()  # no DISCONNECT: the broker sends the will
    first, body = _read(b, bbuf, bst)
    topic, payload, qos, retain, pid = p.publish_fields(first, memoryview(body))
    assert (topic, bytes(payload)) == ("body/a/avail", b"offline")


def test_parse_bounds():
    assert p.parse(bytearray(b"\x30"), 1, 100) is None
    assert p.parse(bytearray(b"\x30\x05ab"), 4, 100) is None
    with pytest.raises(ValueError, match="over the limit"):
        p.parse(bytearray(b"\x30\xff\x01"), 3, 100)
    with pytest.raises(ValueError, match="over 4 bytes"):
        p.parse(bytearray(b"\x30\xff\xff\xff\xff\x01"), 6, 1 << 30)
    big = p.publish("t", b"x" * 300)
    used, first, body = p.parse(bytearray(big), len(big), 1000)
    assert used == len(big) and first == p.PUBLISH and len(body) == 3 + 300
