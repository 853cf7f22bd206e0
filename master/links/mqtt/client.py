# A small asyncio MQTT 3.1.1 client over master/links/mqtt/packet.py: keepalive, last will, QoS 0/1, backoff, bounded.
import asyncio

from micropython import const

from master.links.mqtt import packet

LIMIT = const(4096)  # the largest packet taken from the broker; a larger one drops the connection
QUEUE = const(16)  # outgoing publishes held while the broker is slow or away; the oldest drops


class Client:
    """Connects and stays connected; `publish` never waits (it queues, bounded); `on_message(topic,
    payload)` is called for every PUBLISH received; `on_connect()` after each CONNACK."""

    def __init__(self, host, port, client_id, keepalive_s=30, user=None, password=None, will=None):
        self.host, self.port, self.client_id = host, port, client_id
        self.keepalive_s, self.user, self.password, self.will = keepalive_s, user, password, will
        self.on_message = None
        self.on_connect = None
        self.subscriptions = []  # (filter, qos), renewed on each connect
        self.connected = False
        self.dropped = 0  # publishes dropped from a full queue
        self.refused = 0  # bad packets from the broker (each drops the connection)
        self._queue = []
        self._wake = asyncio.Event()
        self._writer = None
        self._pid = 0

    def publish(self, topic, payload, qos=0, retain=False):
        if len(self._queue) >= QUEUE:
            self._queue.pop(0)
            self.dropped += 1
        self._queue.append((topic, payload, qos, retain))
        self._wake.set()

    async def run(self):
        backoff = 1
        while True:
            try:
                await self._session()
                backoff = 1
            except (OSError, ValueError, EOFError):
                pass
            self.connected = False
            if self._writer:
                try:
                    self._writer.close()
                except OSError:
                    pass
                self._writer = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30)

    async def _session(self):
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self._writer = writer
        writer.write(
            packet.connect(self.client_id, self.keepalive_s, self.user, self.password, self.will)
        )
        await writer.drain()
        buf = bytearray(LIMIT + 5)
        state = [0]
        first, body = await asyncio.wait_for(self._read(reader, buf, state), 10)
        if first != packet.CONNACK or len(body) < 2 or body[1] != 0:
            raise ValueError("connection refused by the broker")
        self.connected = True
        if self.subscriptions:
            writer.write(packet.subscribe(self._next_pid(), self.subscriptions))
        if self.on_connect:
            self.on_connect()
        sender = asyncio.create_task(self._send(writer))
        try:
            while True:
                first, body = await asyncio.wait_for(
                    self._read(reader, buf, state), self.keepalive_s * 3 // 2 + 1
                )
                if first & 0xF0 == packet.PUBLISH:
                    topic, payload, qos, retain, pid = packet.publish_fields(first, body)
                    if qos:
                        writer.write(packet.puback(pid))
                    if self.on_message:
                        self.on_message(topic, bytes(payload))
        finally:
            sender.cancel()

    async def _send(self, writer):
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.keepalive_s / 2)
            except asyncio.TimeoutError:
                writer.write(packet.pingreq())
            self._wake.clear()
            while self._queue:
                topic, payload, qos, retain = self._queue.pop(0)
                pid = self._next_pid() if qos else 0
                writer.write(packet.publish(topic, payload, qos, retain, pid))
            await writer.drain()

    def _next_pid(self):
        self._pid = self._pid % 65535 + 1
        return self._pid

    async def _read(self, reader, buf, state):
        while True:
            try:
                got = packet.parse(buf, state[0], LIMIT)
            except ValueError:
                self.refused += 1
                raise
            if got:
                used, first, body = got
                out = first, bytes(body)
                n = state[0]
                buf[: n - used] = buf[used:n]
                state[0] = n - used
                return out
            chunk = await reader.read(len(buf) - state[0])
            if not chunk:
                raise EOFError("broker closed")
            buf[state[0] : state[0] + len(chunk)] = chunk
            state[0] += len(chunk)
