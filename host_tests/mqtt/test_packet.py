# master/links/mqtt/packet.py on the MicroPython unix port: build and parse round trips, the CONNECT flags.
UNIX_PORT = True  # also run by host_tests/ports/test_unix_port.py

from master.links.mqtt import packet as p


def test_publish_round_trip():
    b = p.publish("t", b"x" * 300, qos=1, pid=9)
    used, first, body = p.parse(bytearray(b), len(b), 1000)
    t, pl, q, r, pid = p.publish_fields(first, body)
    assert (used, t, len(pl), q, pid) == (len(b), "t", 300, 1, 9)


def test_connect_flags():
    c = p.connect("id", 30, "u", "pw", ("a", b"offline", 1, True))
    assert c[0] == p.CONNECT and c[9] == 0x80 | 0x40 | 0x20 | 0x08 | 0x04 | 0x02
    assert c[10:12] == b"\x00\x1e"


def test_parse_limit():
    try:
        p.parse(bytearray(b"\x30\xff\x01"), 3, 100)
    except ValueError as e:
        assert "over the limit" in str(e)
    else:
        raise AssertionError("no refusal")
