# A small asyncio MQTT 3.1.1 client over master/links/mqtt/packet.py: keepalive, last will, QoS 0/1, backoff, bounded.
import asyncio

from micropython import const

from master.links.mqtt import packet

LIMIT = const(4608)  # the largest packet kept from the broker (a 4096-byte plan and its topic)
QUEUE = const(16)  # publishes held while the broker is slow or away (retained: one per topic)
BACKOFF_MAX = const(16)  # seconds between two connection attempts at most (1, 2, 4, 8, 16)


class Client:
    """Connects and stays connected; `publish` never waits (it queues, bounded); `on_message(topic,
    payload)` is called for every PUBLISH received; `on_connect()` after each CONNACK.

    A payload may be a function returning the bytes, called when the packet is written (a retained
    document built once, from the live state, however long the broker was away). A retained
    publish replaces one still queued for its topic; a full queue drops its oldest message that
    is not retained (`dropped`). A packet over LIMIT is skipped unread (`oversize`)."""

    def __init__(self, host, port, client_id, keepalive_s=30, user=None, password=None, will=None):
        self.host, self.port, self.client_id = host, port, client_id
        self.keepalive_s, self.user, self.password, self.will = keepalive_s, user, password, will
        self.on_message = None
        self.on_connect = None
        self.subscriptions = []  # (filter, qos), renewed on each connect
        self.connected = False
        self.connects = 0  # CONNACKs taken
        self.dropped = 0  # publishes dropped from a full queue
        self.refused = 0  # bad packets from the broker (each drops the connection)
        self.oversize = 0  # packets over LIMIT, skipped
        self.last_error = None
        self._queue = []
        self._wake = asyncio.Event()
        self._writer = None
        self._pid = 0

    def publish(self, topic, payload, qos=0, retain=False):
        q = self._queue
        if retain:
            for i in range(len(q)):
                if q[i][3] and q[i][0] == topic:
                    q[i] = (topic, payload, qos, retain)
                    return
        if len(q) >= QUEUE:
            k = 0
            for i in range(len(q)):
                if not q[i][3]:
                    k = i
                    break
            q.pop(k)
            self.dropped += 1
        q.append((topic, payload, qos, retain))
        self._wake.set()

    async def run(self):
        backoff = 1
        while True:
            try:
                await self._session()
            except (OSError, ValueError, EOFError, asyncio.TimeoutError) as e:
                self.last_error = repr(e)
            if self.connected:
                backoff = 1  # a session that got its CONNACK: the next attempt starts over
            self.connected = False
            self._close()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _close(self):
        w = self._writer
        self._writer = None
        if w:
            try:
                w.close()
            except OSError:
                pass

    async def _session(self):
        reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), 10)
        self._writer = writer
        writer.write(
            packet.connect(self.client_id, self.keepalive_s, self.user, self.password, self.will)
        )
        await writer.drain()
        buf = bytearray(LIMIT + 5)
        state = [0, 0]  # bytes held in buf, bytes of an oversize packet still to skip
        first, body = await asyncio.wait_for(self._read(reader, buf, state), 10)
        if first != packet.CONNACK or len(body) < 2 or body[1] != 0:
            raise ValueError("connection refused by the broker: %r" % (body,))
        self.connected = True
        self.connects += 1
        self.last_error = None
        if self.subscriptions:
            writer.write(packet.subscribe(self._next_pid(), self.subscriptions))
        if self.on_connect:
            self.on_connect()
        self._wake.set()
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
                        self.on_message(topic, payload)
        finally:
            sender.cancel()

    async def _send(self, writer):
        try:
            while True:
                try:
                    await asyncio.wait_for(self._wake.wait(), self.keepalive_s / 2)
                except asyncio.TimeoutError:
                    writer.write(packet.pingreq())
                self._wake.clear()
                if writer is not self._writer:
                    return  # its session is over (a cancel can be lost inside wait_for)
                while self._queue:
                    topic, payload, qos, retain = self._queue.pop(0)
                    if callable(payload):
                        payload = payload()
                    if isinstance(payload, str):
                        payload = payload.encode()
                    pid = self._next_pid() if qos else 0
                    writer.write(packet.publish_head(topic, len(payload), qos, retain, pid))
                    writer.write(payload)
                    payload = None
                    await asyncio.wait_for(writer.drain(), self.keepalive_s)
                await asyncio.wait_for(writer.drain(), self.keepalive_s)
        except Exception as e:  # a broker that takes nothing: the session ends, the reader with it
            self.last_error = repr(e)
            if writer is self._writer:
                self._close()

    def _next_pid(self):
        self._pid = self._pid % 65535 + 1
        return self._pid

    async def _read(self, reader, buf, state):
        while True:
            n = state[0]
            if state[1]:  # the rest of an oversize packet: dropped as it comes
                k = min(state[1], n)
                buf[: n - k] = buf[k:n]
                state[0] = n = n - k
                state[1] -= k
            if not state[1]:
                try:
                    got = packet.parse(buf, n, LIMIT)
                except packet.Oversize as e:
                    self.oversize += 1
                    state[1] = e.size
                    continue
                except ValueError:
                    self.refused += 1
                    raise
                if got:
                    used, first, body = got
                    out = first, bytes(body)
                    buf[: n - used] = buf[used:n]
                    state[0] = n - used
                    return out
            chunk = await reader.read(len(buf) - n)
            if not chunk:
                raise EOFError("broker closed")
            buf[n : n + len(chunk)] = chunk
            state[0] = n + len(chunk)
