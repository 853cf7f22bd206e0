# The xiaozhi v1 device's discovery (section 2): its identity, the OTA/discovery request and answer.
#
# Sans-IO: master/links/xiaozhi_link.py POSTs the request and hands the answer's JSON in; a
# websocket.url or token that could not go on a request is refused here, naming the field.
from organbus import log
from master.net import http, jsonout


class XiaozhiError(Exception):
    """A discovery or session failure, with a reason naming the field or the step."""


def format_id(raw):
    """Device-Id: bytes (a MAC, or a board's unique id) as lower-case colon-separated hex."""
    return ":".join("%02x" % b for b in raw)


def new_client_id(rand16):
    """A version-4 UUID string from 16 random bytes."""
    b = bytearray(rand16)
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = "".join("%02x" % x for x in b)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def client_id(path, rand16):
    """The Client-Id kept in `path` (made once with `rand16` bytes); None path: not kept."""
    if path:
        try:
            with open(path) as f:
                cid = f.read().strip()
            if len(cid) == 36 and cid.count("-") == 4:
                return cid
        except OSError:
            pass
    cid = new_client_id(rand16)
    if path:
        try:
            with open(path, "w") as f:
                f.write(cid)
        except OSError as e:
            log.emit(
                "xiaozhi", [("what", "client_id_not_kept"), ("path", path), ("error", repr(e))]
            )
    return cid


def discovery_request(ident, role, version, language="en-US"):
    """(headers, body) of the OTA/discovery POST (section 2.1); the body in pieces."""
    headers = {
        "Activation-Version": "1",
        "Device-Id": ident["device_id"],
        "Client-Id": ident["client_id"],
        "User-Agent": "organbus-%s/%s" % (role, version),
        "Accept-Language": language,
        "Content-Type": "application/json",
    }
    info = {
        "version": 2,
        "language": language,
        "mac_address": ident["device_id"],
        "uuid": ident["client_id"],
        "chip_model_name": ident.get("chip", "esp32c6"),
        "application": {"name": "organbus-" + role, "version": version},
        "board": {"type": "organbus-" + role, "name": ident.get("board", "c6_master")},
    }
    return headers, jsonout.pieces(info)


def parse_discovery(obj):
    """The OTA answer -> {"url", "token", "server_time_ms", "tz_min", "firmware", "activation"};
    XiaozhiError when there is no usable websocket url."""
    if not isinstance(obj, dict):
        raise XiaozhiError("OTA answer is not a JSON object")
    w = obj.get("websocket")
    if not isinstance(w, dict):
        raise XiaozhiError("OTA answer has no websocket object (no server to connect to)")
    url = w.get("url")
    if not isinstance(url, str) or not (url.startswith("ws://") or url.startswith("wss://")):
        raise XiaozhiError("OTA answer websocket.url %r is not a ws:// or wss:// url" % (url,))
    try:  # what the upgrade request is built from: no control characters, a real host
        http.parse_url(url, ("ws", "wss"))
    except http.NetError as e:
        raise XiaozhiError("OTA answer websocket.%s" % e)
    token = w.get("token")
    if isinstance(token, str) and not http.request_field_ok(token):
        raise XiaozhiError("OTA answer websocket.token holds a control character: refused")
    out = {"url": url, "token": token if isinstance(token, str) and token else None}
    st = obj.get("server_time")
    out["server_time_ms"] = None
    out["tz_min"] = 0
    if isinstance(st, dict) and isinstance(st.get("timestamp"), (int, float)):
        out["server_time_ms"] = int(st["timestamp"])
        tz = st.get("timezone_offset")
        out["tz_min"] = int(tz) if isinstance(tz, (int, float)) else 0
    out["firmware"] = obj.get("firmware") if isinstance(obj.get("firmware"), dict) else None
    out["activation"] = obj.get("activation") if isinstance(obj.get("activation"), dict) else None
    return out
