# A cable's SPEC and its pace, shared by the virtual body's bus (vbody/) and the kit (conform/).
"""`parse_spec`: 'listen:HOST:PORT' / 'connect:HOST:PORT' (loopback TCP only), and for the kit a
serial port. `Pacer`: when the next write may start so that nothing goes faster than the wire
(a write starts once the previous one's last byte has left; n bytes take n * byte_s)."""

BAUD = 115200
BYTE_S = 10.0 / BAUD  # start + 8 data + stop bits


def parse_spec(spec, what="address", serial=False):
    """'listen:127.0.0.1:7001' -> ('listen', '127.0.0.1', 7001). Loopback only, else ValueError
    naming `what`. With `serial` (the kit's --uart) any other SPEC is a serial device path:
    ('serial', path, 0); the kit keeps its own words for a port out of range."""
    if serial and not spec.startswith(("listen:", "connect:")):
        if ":" in spec and not spec.startswith("/"):
            raise ValueError(
                "%s %r: expected listen:HOST:PORT, connect:HOST:PORT or a serial port"
                % (what, spec)
            )
        return "serial", spec, 0
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] not in ("listen", "connect"):
        raise ValueError("%s %r: expected listen:HOST:PORT or connect:HOST:PORT" % (what, spec))
    mode, host, port = parts
    if host == "localhost":
        host = "127.0.0.1"
    if not host.startswith("127."):
        raise ValueError("%s %r: only loopback addresses (127.x.x.x) are allowed" % (what, spec))
    try:
        port = int(port)
    except ValueError:
        raise ValueError("%s %r: port %r is not a number" % (what, spec, port)) from None
    if serial and not (0 if mode == "listen" else 1) <= port <= 65535:
        raise ValueError("%s %r: port must be 1..65535 (listen: 0 picks one)" % (what, spec))
    if not 0 <= port <= 65535:
        raise ValueError("%s %r: port %d out of range" % (what, spec, port))
    if mode == "connect" and port == 0:
        raise ValueError("%s %r: cannot connect to port 0" % (what, spec))
    return mode, host, port


class Pacer:
    """The wire's pace for one direction: `start(now)` is when a write may begin, `sent(t, n)`
    books n bytes begun at t, `t_free` is when the last booked byte has left."""

    def __init__(self, byte_s=BYTE_S):
        self.byte_s = byte_s
        self.t_free = 0.0

    def start(self, now):
        return self.t_free if self.t_free > now else now

    def sent(self, t, n):
        self.t_free = t + n * self.byte_s
        return self.t_free

    def wire_s(self, n):
        """Seconds n bytes take on the wire."""
        return n * self.byte_s
