# MQTT 3.1.1 packets, sans-IO: build the client's packets into bytes and parse the broker's from a bounded buffer.
from micropython import const

CONNECT = const(0x10)
CONNACK = const(0x20)
PUBLISH = const(0x30)
PUBACK = const(0x40)
SUBSCRIBE = const(0x82)
SUBACK = const(0x90)
PINGREQ = const(0xC0)
PINGRESP = const(0xD0)
DISCONNECT = const(0xE0)
MAX_REMAINING = const(268435455)  # the largest remaining length four bytes can say


def _length(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | 0x80 if n else b)
        if not n:
            return out


def _str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return bytes((len(b) >> 8, len(b) & 0xFF)) + b


def _packet(first, body):
    return bytes((first,)) + _length(len(body)) + body


def connect(client_id, keepalive_s, user=None, password=None, will=None, clean=True):
    """CONNECT; `will` is (topic, payload, qos, retain) or None."""
    flags = 0x02 if clean else 0
    body = _str(client_id)
    if will:
        topic, payload, qos, retain = will
        flags |= 0x04 | (qos << 3) | (0x20 if retain else 0)
        body += _str(topic) + _str(payload)
    if user is not None:
        flags |= 0x80
        body += _str(user)
    if password is not None:
        flags |= 0x40
        body += _str(password)
    head = _str("MQTT") + bytes((4, flags, keepalive_s >> 8, keepalive_s & 0xFF))
    return _packet(CONNECT, head + body)


def publish(topic, payload, qos=0, retain=False, pid=0, dup=False):
    if isinstance(payload, str):
        payload = payload.encode()
    return publish_head(topic, len(payload), qos, retain, pid, dup) + payload


def publish_head(topic, n, qos=0, retain=False, pid=0, dup=False):
    """A PUBLISH's fixed and variable header for a payload of `n` bytes written after it (a
    large payload is never copied into the packet)."""
    first = PUBLISH | (qos << 1) | (1 if retain else 0) | (0x08 if dup else 0)
    var = _str(topic)
    if qos:
        var += bytes((pid >> 8, pid & 0xFF))
    return bytes((first,)) + _length(len(var) + n) + var


def subscribe(pid, topics):
    """SUBSCRIBE to [(filter, qos), ...]."""
    body = bytes((pid >> 8, pid & 0xFF))
    for t, q in topics:
        body += _str(t) + bytes((q,))
    return _packet(SUBSCRIBE, body)


def puback(pid):
    return bytes((PUBACK, 2, pid >> 8, pid & 0xFF))


def pingreq():
    return bytes((PINGREQ, 0))


def disconnect():
    return bytes((DISCONNECT, 0))


class Oversize(ValueError):
    """A packet whose remaining length is over the limit; `size`: the whole packet's bytes."""

    def __init__(self, msg, size):
        super().__init__(msg)
        self.size = size


def remaining(buf, n):
    """(header bytes, remaining length) of the packet at buf[:n], or None when its length
    bytes are not all there yet; ValueError for more than 4 of them."""
    size = 0
    shift = 0
    i = 1
    while True:
        if i >= n:
            return None
        b = buf[i]
        size |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return i, size
        shift += 7
        if shift > 21:
            raise ValueError("remaining length over 4 bytes")


def parse(buf, n, limit):
    """One packet from buf[:n]: (used, first, body) or None when incomplete.

    Raises ValueError when the remaining length is malformed, Oversize (a ValueError) when it is
    over `limit` bytes."""
    got = remaining(buf, n)
    if got is None:
        return None
    i, size = got
    if size > limit:
        raise Oversize("packet of %d bytes over the limit %d" % (size, limit), i + size)
    if n < i + size:
        return None
    return i + size, buf[0], memoryview(buf)[i : i + size]


def publish_fields(first, body):
    """A received PUBLISH: (topic str, payload memoryview, qos, retain, pid)."""
    tl = (body[0] << 8) | body[1]
    topic = bytes(body[2 : 2 + tl]).decode()
    qos = (first >> 1) & 3
    i = 2 + tl
    pid = 0
    if qos:
        pid = (body[i] << 8) | body[i + 1]
        i += 2
    return topic, body[i:], qos, first & 1, pid
