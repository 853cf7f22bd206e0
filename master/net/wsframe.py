# WebSocket framing (RFC 6455, client side), sans-IO: opcodes, close codes, masking, a frame's head.
#
# What master/net/ws.py puts on and reads off the stream: no socket, no clock. Masks and keys
# come from 16 random bits at a time (small ints on RV32 too).
import sys

import binascii
import hashlib
import os
import random

import micropython
from micropython import const

_MP = sys.implementation.name == "micropython"

CONT = const(0)
TEXT = const(1)
BINARY = const(2)
CLOSE = const(8)
PING = const(9)
PONG = const(10)

NORMAL = const(1000)
GOING_AWAY = const(1001)
PROTOCOL_ERROR = const(1002)
BAD_DATA = const(1007)
TOO_BIG = const(1009)
NO_STATUS = const(1005)
ABNORMAL = const(1006)

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def close_code_ok(code):
    """A close code a peer may send (RFC 6455 section 7.4, and 1012-1014 of IANA's registry)."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


def accept_for(key):
    """Sec-WebSocket-Accept the server must answer for `key` (bytes or str)."""
    if isinstance(key, str):
        key = key.encode()
    return binascii.b2a_base64(hashlib.sha1(key + _GUID).digest()).strip().decode()


if _MP:

    @micropython.viper
    def _mask_mp(buf: ptr8, n: int, key: ptr8, k: int):
        i = 0
        while i < n:
            buf[i] = buf[i] ^ key[(k + i) & 3]
            i += 1

    def mask_into(mv, n, key, k):
        _mask_mp(mv, n, key, k)

else:

    def mask_into(mv, n, key, k):
        if n <= 0:
            return
        rot = bytes(key[(k + i) & 3] for i in range(4))
        full = rot * (n // 4 + 1)
        x = int.from_bytes(mv[:n], "little") ^ int.from_bytes(full[:n], "little")
        mv[:n] = x.to_bytes(n, "little")


def mask(data, key, k=0):
    """`data` XOR the 4-byte `key` starting at key phase `k` (tests and the stand-in server)."""
    b = bytearray(data)
    mask_into(memoryview(b), len(b), key, k)
    return bytes(b)


def random_into(buf, n):
    """n random bytes into buf (the mask keys and the handshake key)."""
    for i in range(0, n, 2):
        r = random.getrandbits(16)
        buf[i] = r & 0xFF
        if i + 1 < n:
            buf[i + 1] = r >> 8


def seed():
    """The random generator seeded from os.urandom where the port has it."""
    try:
        random.seed(int.from_bytes(os.urandom(4), "little"))
    except Exception:  # no urandom: the port's own seed stands
        pass


def put_head(tx, op, n):
    """A client frame's head (FIN set, masked) for opcode `op` and `n` payload bytes into tx;
    its length (the 4-byte mask key follows it)."""
    tx[0] = 0x80 | op
    if n < 126:
        tx[1] = 0x80 | n
        return 2
    if n < 65536:
        tx[1] = 0x80 | 126
        tx[2] = n >> 8
        tx[3] = n & 0xFF
        return 4
    tx[1] = 0x80 | 127
    for i in range(8):
        tx[2 + i] = (n >> (8 * (7 - i))) & 0xFF
    return 10
