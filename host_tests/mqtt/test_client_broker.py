# master/links/mqtt/client.py on a real Mosquitto: subscribe and receive, QoS 1, the will, reconnect after the broker left.
import asyncio
import queue
import time

import paho.mqtt.client as paho

from master.links.mqtt.client import Client


def _ha(port, topic):
    """Home Assistant's side, played by paho-mqtt: every message on `topic` into a queue."""
    got = queue.Queue()
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="ha")
    c.on_message = lambda cl, ud, m: got.put((m.topic, m.payload, m.retain))
    c.on_connect = lambda cl, ud, fl, rc, pr: cl.subscribe(topic, 1)
    c.connect("127.0.0.1", port, 30)
    c.loop_start()
    return c, got


def _wait(got, timeout=5):
    return got.get(timeout=timeout)


def test_publish_receive_will_and_reconnect(broker):
    ha, got = _ha(broker.port, "b1/#")
    time.sleep(0.3)
    received = []

    async def main():
        c = Client("127.0.0.1", broker.port, "b1", 2, will=("b1/avail", b"offline", 1, True))
        c.subscriptions = [("b1/in", 1)]
        c.on_message = lambda t, p: received.append((t, p))
        c.on_connect = lambda: c.publish("b1/avail", b"online", 1, True)
        task = asyncio.create_task(c.run())
        await asyncio.sleep(0.5)
        ha.publish("b1/in", b"hello", qos=1)
        await asyncio.sleep(0.5)
        assert received == [("b1/in", b"hello")]
        broker.stop()
        await asyncio.sleep(0.5)
        assert not c.connected
        c.publish("b1/out", b"queued", 1, True)  # held while the broker is away
        broker.start()
        for _ in range(100):
            if c.connected:
                break
            await asyncio.sleep(0.1)
        assert c.connected
        await asyncio.sleep(3)  # past the keepalive: pings kept it up
        assert c.connected
        await asyncio.sleep(2)  # paho (Home Assistant's side) is back too
        task.cancel()
        c._writer.transport.abort()  # no DISCONNECT: the broker sends the will

    asyncio.run(main())
    msgs = []
    try:
        while True:
            msgs.append(_wait(got, 3))
    except queue.Empty:
        pass
    ha.loop_stop()
    topics = [(t, p) for t, p, r in msgs]
    assert ("b1/avail", b"online") in topics and ("b1/out", b"queued") in topics
    assert topics[-1] == ("b1/avail", b"offline")


def test_unix_port_client_echo(broker):
    from helpers.support import run_micropython

    r = run_micropython(
        ["host_tests/mqtt/mp_client_echo.py", str(broker.port)], heapsize="64k", timeout=60
    )
    assert "connected True [('mp1/in', b'echo')]" in r.stdout, r.stdout + r.stderr


def test_oversize_packet_skipped_session_goes_on(broker):
    ha, got = _ha(broker.port, "b3/#")
    time.sleep(0.3)
    received = []

    async def main():
        c = Client("127.0.0.1", broker.port, "b3", 30)
        c.subscriptions = [("b3/in", 1)]
        c.on_message = lambda t, p: received.append((t, bytes(p)))
        task = asyncio.create_task(c.run())
        for _ in range(50):
            if c.connected:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)
        ha.publish("b3/in", b"x" * 6000, qos=1)  # over LIMIT: skipped, the session goes on
        ha.publish("b3/in", b"after", qos=1)
        await asyncio.sleep(1.0)
        assert received == [("b3/in", b"after")], received
        assert c.oversize == 1 and c.connected and c.connects == 1, (c.oversize, c.connects)
        task.cancel()

    asyncio.run(main())
    ha.loop_stop()
