# The paced, faulty bus (tools/vbody/bus.py): pacing, order, faults and their counters, unplug, reconnects.
import os
import socket
import sys
import time

import pytest

from support import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
from vbody import bus  # noqa: E402


def _pair(seed=1):
    c = bus.Cable("t", "listen:127.0.0.1:0", "listen:127.0.0.1:0", seed=seed).start()
    a = socket.create_connection(("127.0.0.1", c.a.port))
    b = socket.create_connection(("127.0.0.1", c.b.port))
    assert c.a.connected.wait(2) and c.b.connected.wait(2), "ends never attached"
    a.settimeout(3)
    b.settimeout(3)
    return c, a, b


def _recv(s, n, quiet=0.3):
    """Up to n bytes, stopping after `quiet` seconds without any."""
    got = b""
    s.settimeout(quiet)
    try:
        while len(got) < n:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except socket.timeout:
        pass
    return got


def test_spec_parsing_refuses_non_loopback_and_bad_forms():
    assert bus.parse_spec("listen:127.0.0.1:7001") == ("listen", "127.0.0.1", 7001)
    assert bus.parse_spec("connect:localhost:9") == ("connect", "127.0.0.1", 9)
    for bad, why in [
        ("connect:10.0.0.2:7001", "loopback"),
        ("listen:0.0.0.0:7001", "loopback"),
        ("dial:127.0.0.1:1", "listen:HOST:PORT"),
        ("listen:127.0.0.1", "listen:HOST:PORT"),
        ("connect:127.0.0.1:x", "not a number"),
        ("connect:127.0.0.1:0", "port 0"),
        ("listen:127.0.0.1:70000", "out of range"),
    ]:
        with pytest.raises(ValueError, match=why):
            bus.parse_spec(bad)


def test_paced_at_115200_8n1_in_order():
    c, a, b = _pair()
    try:
        data = bytes(range(256)) * 9  # 2304 bytes = 0.2 s of wire time
        t = time.monotonic()
        a.sendall(data)
        got = b""
        while len(got) < len(data):
            got += b.recv(65536)
        dt = time.monotonic() - t
        assert got == data, "bytes reordered or changed"
        assert dt >= len(data) * bus.BYTE_S * 0.99, "delivered faster than the wire: %.3f s" % dt
        assert dt < len(data) * bus.BYTE_S + 0.5, "far slower than the wire: %.3f s" % dt
        # the other direction is a wire of its own, and both directions run at once
        t = time.monotonic()
        a.sendall(data)
        b.sendall(data)
        ga = gb = b""
        while len(ga) < len(data) or len(gb) < len(data):
            if len(gb) < len(data):
                gb += b.recv(65536)
            if len(ga) < len(data):
                ga += a.recv(65536)
        dt = time.monotonic() - t
        assert ga == data and gb == data
        assert dt < 2 * len(data) * bus.BYTE_S, "directions not independent: %.3f s" % dt
        k = c.counters()
        assert k["a>b"]["sent"] == k["a>b"]["delivered"] == 2 * len(data), k
    finally:
        c.close()


def test_flip_and_drop_faults_are_counted():
    c, a, b = _pair(seed=3)
    try:
        c.set_faults("a>b", flip=0.01)
        a.sendall(bytes(2000))
        got = _recv(b, 2000)
        changed = sum(1 for x in got if x)
        k = c.counters()["a>b"]
        assert len(got) == 2000 and changed > 0, "no byte changed at a 1e-2 bit rate"
        assert k["flipped"] >= changed and k["dropped"] == 0, k
        c.set_faults("a>b", flip=0, drop=0.05)
        a.sendall(bytes(2000))
        got = _recv(b, 2000)
        k = c.counters()["a>b"]
        assert k["dropped"] > 0 and len(got) == 2000 - k["dropped"], (len(got), k)
        # the other direction was left alone
        c.set_faults("a>b", drop=0)
        b.sendall(b"clean" * 100)
        assert _recv(a, 500) == b"clean" * 100
        assert c.counters()["b>a"]["flipped"] == 0 and c.counters()["b>a"]["dropped"] == 0
        with pytest.raises(ValueError, match="between 0 and 1"):
            c.set_faults(flip=2)
    finally:
        c.close()


def test_junk_and_split_writes():
    c, a, b = _pair(seed=4)
    try:
        c.junk(20, "b>a")
        assert len(_recv(a, 20)) == 20 and c.counters()["b>a"]["junk"] == 20
        assert _recv(b, 1, quiet=0.1) == b"", "junk went the wrong way"
        c.set_faults(split=True)
        # what the bus handed over, and when: a reader descheduled for 5 ms on a loaded machine
        # reads both pieces at once, so the pieces are seen where the bus delivers them
        handed = []
        c.ab.delivered_taps.append(lambda t, data: handed.append((t, data)))
        a.sendall(b"0123456789" * 3)
        got = _recv(b, 100)
        assert got == b"0123456789" * 3, "split changed the bytes"
        assert len(handed) == 2 and 0 < len(handed[0][1]) < 30, "not split: %r" % handed
        gap = handed[1][0] - handed[0][0]
        assert gap >= c.ab.split_gap_s, "the pieces came %.1f ms apart" % (gap * 1000)
        assert c.counters()["a>b"]["splits"] == 1
    finally:
        c.close()


def test_unplug_loses_bytes_and_replug_restores():
    c, a, b = _pair()
    try:
        c.unplug()
        a.sendall(b"lost in the air")
        assert _recv(b, 100, quiet=0.2) == b""
        assert c.counters()["a>b"]["unplugged"] == 15 and not c.counters()["plugged"]
        c.replug()
        a.sendall(b"back")
        assert _recv(b, 4) == b"back"
    finally:
        c.close()


def test_listen_end_takes_a_new_connection_after_the_old_one_closes():
    c, a, b = _pair()
    try:
        b.close()  # a board powered off ...
        deadline = time.monotonic() + 2
        while c.b.sock is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        a.sendall(b"nobody")
        time.sleep(0.1)
        assert c.counters()["a>b"]["no_receiver"] == 6
        b2 = socket.create_connection(("127.0.0.1", c.b.port))  # ... and booted again
        assert c.b.connected.wait(2)
        a.sendall(b"hello again")
        assert _recv(b2, 11) == b"hello again"
        b2.close()
    finally:
        c.close()


def test_connect_end_redials():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.listen(1)  # listening, but the cable dials before and after each disconnect
    c = bus.Cable("t", "listen:127.0.0.1:0", "connect:127.0.0.1:%d" % port).start()
    try:
        a = socket.create_connection(("127.0.0.1", c.a.port))
        srv.settimeout(3)
        s1, _ = srv.accept()
        assert c.b.connected.wait(2)
        a.sendall(b"one")
        assert _recv(s1, 3) == b"one"
        s1.close()
        s2, _ = srv.accept()  # the cable redials
        assert c.b.connected.wait(2)
        time.sleep(0.05)
        a.sendall(b"two")
        assert _recv(s2, 3) == b"two"
        s2.close()
        a.close()
    finally:
        c.close()
        srv.close()


def test_end_joining_another_simulator_gets_the_bytes_written_before_it_attached():
    # a restarted `sim.py board master` writes its boot DISCOVER before the organ's simulator
    # has redialled: the wire is plugged in all along, only the TCP plumbing lags behind
    c = bus.Cable("t", "listen:127.0.0.1:0", "listen:127.0.0.1:0", hold_first="b").start()
    try:
        a = socket.create_connection(("127.0.0.1", c.a.port))
        assert c.a.connected.wait(2), "board end never attached"
        a.sendall(b"discover")
        time.sleep(0.3)
        b = socket.create_connection(("127.0.0.1", c.b.port))
        assert _recv(b, 8) == b"discover", "bytes written before the first connection were lost"
        k = c.counters()["a>b"]
        assert k["delivered"] == 8 and k["no_receiver"] == 0, k
        # after that first connection a missing peer is a board that is off: bytes are lost
        b.close()
        deadline = time.monotonic() + 2
        while c.b.sock is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        a.sendall(b"nobody")
        time.sleep(0.1)
        assert c.counters()["a>b"]["no_receiver"] == 6, c.counters()["a>b"]
        a.close()
    finally:
        c.close()


def test_first_connection_wait_is_bounded():
    c = bus.Cable("t", "listen:127.0.0.1:0", "listen:127.0.0.1:0", hold_first="b").start()
    try:
        a = socket.create_connection(("127.0.0.1", c.a.port))
        assert c.a.connected.wait(2), "board end never attached"
        a.sendall(b"into the void")
        deadline = time.monotonic() + bus.FIRST_ATTACH_S + 2
        while c.counters()["a>b"]["no_receiver"] < 13 and time.monotonic() < deadline:
            time.sleep(0.05)
        k = c.counters()["a>b"]
        assert k["no_receiver"] == 13 and k["delivered"] == 0, k
        a.close()
    finally:
        c.close()


def test_a_late_pacer_catches_up_instead_of_drifting():
    # Bytes are due at start + k * 86.8 us, whatever happened before: a pacer that could not run
    # for 150 ms (a busy machine) hands over everything due at once when it runs again, so the
    # write still ends on time instead of 150 ms late, and nothing is reordered.
    c, a, b = _pair()
    try:
        data = bytes(range(256)) * 9  # 2304 bytes = 0.2 s of wire time
        wire_s = len(data) * bus.BYTE_S
        t = time.monotonic()
        a.sendall(data)
        time.sleep(0.02)
        with c.ab.cond:  # the pacer cannot hand anything over while this is held
            time.sleep(0.15)
        got = b""
        while len(got) < len(data):
            got += b.recv(65536)
        dt = time.monotonic() - t
        assert got == data, "bytes reordered or changed"
        assert dt >= wire_s * 0.99, "delivered faster than the wire: %.3f s" % dt
        assert dt < wire_s + 0.1, "a late pacer drifted: %.3f s for %.3f s of wire" % (dt, wire_s)
        k = c.counters()["a>b"]
        assert k["stalls"] >= 1 and k["late_max_ms"] >= 100, k
    finally:
        c.close()
