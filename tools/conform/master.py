# The master rules: the kit plays an organ against a master under test (PROTOCOL.md 2, 4, 5, 7, 8).
from conform.report import Rule

RULES = []


def parse_http(s):
    host, _, port = s.rpartition(":")
    if not host.startswith("127.") and host != "localhost":
        raise ValueError("--http %r: only loopback addresses" % s)
    return ("127.0.0.1" if host == "localhost" else host), int(port)


class MasterRun:
    pass
