# A small asyncio MQTT 3.1.1 client over master/links/mqtt/packet.py: keepalive, last will, QoS 0/1, backoff, bounded.
import asyncio

from micropython import const

from master.links.jsonout import json_length, write_json
from master.links.mqtt import packet

LIMIT = const(4608)  # the largest packet kept from the broker (a 4096-byte plan and its topic)
QUEUE = const(8)  # messages held while the broker is slow or away (and one per retained topic)
BACKOFF_MAX = const(16)  # seconds between two connection attempts at most (1, 2, 4, 8, 16)


class Client:
    """Connects and stays connected; `publish` never waits (it queues, bounded); `on_message(topic,
    payload)` is called for every PUBLISH received; `on_connect()` after each CONNACK.

    A payload is bytes, text or a JSON document (written piece by piece, jsonout.json_pieces, so
    the menu is never one string), or a function returning one, called when the packet is
    written (a retained document built then, from the live state, however long the broker was
    away). A retained publish replaces one still queued for its topic (so they are as many as
    the topics); of the others QUEUE are held, a full queue drops its oldest (`dropped`). A
    packet from the broker over LIMIT is skipped unread (`oversize`)."""

    def __init__(self, host, port, client_id, keepalive_s=30, user=None, password=None, will=None):
        self.host, self.port, self.client_id = host, port, client_id
        self.keepalive_s, self.user, self.password, self.will = keepalive_s, user, password, will
        self.on_message = None
        self.on_connect = None
        self.subscriptions = []  # (filter, qos), renewed on each connect
        self.connected = False
        self.retained = 0  # the retain flag of the PUBLISH on_message is called for
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
        held = 0  # messages not retained in the queue
        first = -1
        for i in range(len(q)):
            if q[i][3]:
                if retain and q[i][0] == topic:
                    q[i] = (topic, payload, qos, retain)
                    return
            else:
                held += 1
                if first < 0:
                    first = i
        if not retain and held >= QUEUE:
            q.pop(first)
            self.dropped += 1
        q.append((topic, payload, qos, retain))
        self._wake.set()

    async def run(self):
        backoff = 1
        while True:
            try:
                await self._session()
            except Exception as e:  # the broker, the network, the heap: try again later
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
        head = bytearray(5)  # a packet's fixed header: its type and up to 4 length bytes
        first, body = await asyncio.wait_for(self._read(reader, head), 10)
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
                    self._read(reader, head), self.keepalive_s * 3 // 2 + 1
                )
                if first & 0xF0 == packet.PUBLISH:
                    topic, payload, qos, retain, pid = packet.publish_fields(first, body)
                    if qos:
                        writer.write(packet.puback(pid))
                        self._wake.set()  # the writer task drains it (MicroPython buffers)
                    if self.on_message:
                        self.retained = retain  # (the callback's to look at)
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
                    if isinstance(payload, (bytes, bytearray)):
                        writer.write(packet.publish_head(topic, len(payload), qos, retain, pid))
                        writer.write(payload)
                    else:  # a document: its JSON written piece by piece (the menu, a config)
                        n = json_length(payload)
                        writer.write(packet.publish_head(topic, n, qos, retain, pid))
                        await write_json(writer, payload, self.keepalive_s)
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

    async def _read(self, reader, head):
        """(first byte, body bytes) of the next packet; its body is read at its own size (most
        are a few bytes: nothing of LIMIT is held between packets); one over LIMIT is skipped."""
        while True:
            head[0] = (await reader.readexactly(1))[0]
            n = 1
            while True:
                head[n] = (await reader.readexactly(1))[0]
                n += 1
                try:
                    got = packet.remaining(head, n)
                except ValueError:
                    self.refused += 1
                    raise
                if got:
                    break
            size = got[1]
            if size <= LIMIT:
                return head[0], (await reader.readexactly(size)) if size else b""
            self.oversize += 1
            while size:
                chunk = await reader.read(min(size, 512))
                if not chunk:
                    raise EOFError("broker closed")
                size -= len(chunk)
