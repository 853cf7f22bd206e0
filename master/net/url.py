# URLs for every outgoing request: parsed, checked and percent-encoded before a byte goes out.
#
# A URL from the network (a discovery answer's websocket.url) is checked before it is used: a
# control character anywhere refuses it, the host must be a host name or an IP address, bytes a
# request-target cannot carry (a space, quotes, non-ASCII) are percent-encoded and the fragment
# is dropped. master/net/http.py builds the request head from what parse_url gives.
from micropython import const

MAX_URL = const(2048)  # characters of a URL
DEFAULT_PORT = {"http": 80, "https": 443, "ws": 80, "wss": 443}

_TARGET = b"!$&'()*+,;=:@/?-._~"  # what a request-target carries as it is, besides letters, digits


class NetError(Exception):
    """A URL, a request or an answer that cannot be used, with the reason."""


def alnum(c):
    """True for the byte of an ASCII letter or digit."""
    return 0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A


def hexdigit(c):
    """True for the byte of a hex digit (either case)."""
    return 0x30 <= c <= 0x39 or 0x41 <= c <= 0x46 or 0x61 <= c <= 0x66


def parse_url(url, schemes=("http", "https")):
    """(scheme, host, port, target) of an absolute URL with one of `schemes`; NetError naming
    what is wrong. The target is the path and query, percent-encoded where it must be."""
    if not isinstance(url, str):
        raise NetError("url must be a string, not %r" % (url,))
    show = url[:80]
    if len(url) > MAX_URL:
        raise NetError("url %r... is %d characters long, more than %d" % (show, len(url), MAX_URL))
    k = 0
    for ch in url:
        if ch < " " or ch == "\x7f":
            raise NetError("url %r holds the control character %r at %d: refused" % (show, ch, k))
        k += 1
    i = url.find("://")
    scheme = url[:i].lower() if i > 0 else ""
    if scheme not in schemes:
        starts = " or ".join(s + "://" for s in schemes)
        raise NetError("url %r must start with %s" % (show, starts))
    rest = url[i + 3 :]
    end = len(rest)
    for sep in "/?#":
        j = rest.find(sep)
        if 0 <= j < end:
            end = j
    auth = rest[:end]
    if "@" in auth:
        raise NetError("url %r: user info is not supported" % show)
    if auth.startswith("["):  # an IPv6 address
        j = auth.find("]")
        host, after = (auth[1:j], auth[j + 1 :]) if j > 0 else ("", "")
        good = "0123456789abcdefABCDEF:."
        if j < 0 or (after and after[0] != ":"):
            raise NetError("url %r: the host %r is not [an IPv6 address]" % (show, auth[:60]))
        port = after[1:] if after else None
    else:
        j = auth.rfind(":")
        host, port = (auth[:j], auth[j + 1 :]) if j >= 0 else (auth, None)
        good = "-._"
    for ch in host:
        c = ord(ch)
        if not (c < 0x80 and alnum(c) or ch in good):
            raise NetError("url %r: the host %r holds %r" % (show, host[:60], ch))
    if not host:
        raise NetError("url %r has no host" % show)
    if port:
        if len(port) > 5 or not port.isdigit():
            raise NetError("url %r: the port is not a number" % show)
        port = int(port)
        if not 0 < port < 65536:
            raise NetError("url %r: port %d out of range" % (show, port))
    else:
        port = DEFAULT_PORT[scheme]
    return scheme, host, port, _target(rest[end:])


def _target(tail):
    # path and query: the fragment dropped, a leading "/" ensured, the rest percent-encoded
    j = tail.find("#")
    if j >= 0:
        tail = tail[:j]
    if not tail.startswith("/"):
        tail = "/" + tail
    b = tail.encode()
    n = len(b)
    out = None
    for i in range(n):
        c = b[i]
        if alnum(c) or c in _TARGET or (c == 0x25 and _escape(b, i)):
            if out is not None:
                out.append(chr(c))
            continue
        if out is None:
            out = [chr(x) for x in b[:i]]
        out.append("%%%02X" % c)
    return tail if out is None else "".join(out)


def _escape(b, i):
    # b[i] is "%": a percent-encoded byte follows (kept as it is), else the "%" is encoded
    return i + 2 < len(b) and hexdigit(b[i + 1]) and hexdigit(b[i + 2])


def host_header(host, port, scheme):
    """The Host header's value: the port only when it is not the scheme's own."""
    h = "[%s]" % host if ":" in host else host
    return h if port == DEFAULT_PORT[scheme] else "%s:%d" % (h, port)
