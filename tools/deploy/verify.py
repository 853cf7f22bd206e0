# Verify: the deployed code's descriptor, its boot line and the master's status after a soft reset.
import json
import time

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path: the host's protocol core)
from deploy.base import DESC_TAG, FlashError, mpremote_cmd, run, say

DESCRIPTOR_CODE = {
    "led": "from organs.led import led_descriptor as _make\n_kw = {}\n",
    "speaker": (
        "from organs.speaker import speaker_descriptor as _make\n"
        "try:\n import organs.voice\n _kw = {'voice': True}\n"
        "except ImportError:\n _kw = {'voice': False}\n"
    ),
}
DESCRIPTOR_TAIL = """
import json, binascii
from organbus import boardfile, frame, descriptor
_s = boardfile.load('/main.py').get('settings', {})
if 'module_id' in _s:
    _kw['module_id'] = _s['module_id']
_d = _make(**_kw)
descriptor.validate_descriptor(_d)
print(%r, binascii.hexlify(frame.encode(frame.DESCRIPTOR, descriptor.encode_descriptor(_d))).decode())
"""


def _decode_frames(data):
    """Legal frames in a byte string, with the host's copy of the protocol core."""
    from organbus import frame

    out = []
    dec = frame.Decoder(lambda t, payload, n: out.append((t, bytes(payload[:n]))))
    dec.feed(data, 0)
    dec.idle(1000)
    return out


def describe(payload):
    from organbus.descriptor import decode_descriptor

    return decode_descriptor(payload)


def descriptor_on_board(port, role):
    code = DESCRIPTOR_CODE[role] + DESCRIPTOR_TAIL % DESC_TAG
    p = run(
        mpremote_cmd(port, "resume", "exec", code), "descriptor read-back", capture=True, timeout=60
    )
    for line in p.stdout.splitlines():
        if line.startswith(DESC_TAG + " "):
            frames = _decode_frames(bytes.fromhex(line.split()[1]))
            if len(frames) == 1 and frames[0][0] == 1:
                return describe(frames[0][1])
    raise FlashError(
        "the deployed %s code did not build its descriptor on the board:\n%s"
        % (role, (p.stdout + p.stderr).strip())
    )


def console_run(port, seconds, want=None, uart=None, uart_seconds=8.0):
    """Soft-reset into main.py and collect its JSON event lines (and, with `uart`, the frames
    that come out of the organ's UART). Returns (events, other lines, frames)."""
    import serial

    events, other, frames = [], [], []
    try:
        s = serial.serial_for_url(port, 115200, timeout=0.1)
    except (OSError, serial.SerialException) as e:
        raise FlashError("cannot open %s for the run check: %s" % (port, e))
    try:
        s.write(b"\r\x03\x03\r\x02")
        time.sleep(0.2)
        s.reset_input_buffer()
        s.write(b"\x04")  # soft reset at the friendly prompt: boot.py, then main.py
        buf = b""
        end = time.monotonic() + seconds
        wire = None
        wire_end = None
        raw = b""
        while time.monotonic() < end:
            buf += s.read(512)
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                text = line.decode("utf-8", "replace").strip()
                if text.startswith("{"):
                    try:
                        ev = json.loads(text)
                    except ValueError:
                        other.append(text)
                        continue
                    events.append(ev)
                elif text:
                    other.append(text)
            if uart and wire is None:
                try:
                    wire = serial.serial_for_url(uart, 115200, timeout=0.05)
                    wire_end = time.monotonic() + uart_seconds
                    end = max(end, wire_end)
                except (OSError, serial.SerialException):
                    pass
            if wire is not None:
                try:
                    raw += wire.read(1024)
                except (OSError, serial.SerialException):
                    pass
                frames = _decode_frames(raw)
                if any(t == 1 for t, _ in frames) or time.monotonic() > wire_end:
                    uart = None
            if want and want(events) and not uart:
                break
        if wire is not None:
            wire.close()
    finally:
        try:
            s.dtr = False
            s.rts = False
        except (OSError, serial.SerialException):
            pass
        s.close()
    return events, other, frames


def http_status(host, port, token):
    import urllib.request

    req = urllib.request.Request("http://%s:%s/status" % (host, port))
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def verify(args, role, board, dry, head, runnable, cfg):
    if role in DESCRIPTOR_CODE:
        head("read back the descriptor the deployed code builds on the board (raw REPL)")
        if not dry and not runnable:
            say(
                "   skipped: this virtual board cannot run %s native code"
                % (args.arch or board["arch"])
            )
        elif not dry:
            d = descriptor_on_board(args.port, role)
            say("   descriptor (built on the board): " + json.dumps(d))
    head(
        "soft-reset into main.py and watch the console for %.0f s%s"
        % (
            args.verify_seconds,
            "; read the DESCRIPTOR frame off " + args.uart_port if args.uart_port else "",
        )
    )
    if dry:
        return 0
    if not runnable:
        say(
            "   skipped: this virtual board cannot run %s native code"
            % (args.arch or board["arch"])
        )
        return 0
    if role == "master":
        want = _master_reachable
    else:
        want = lambda evs: any(e.get("event") in ("boot", "refused") for e in evs)  # noqa: E731
    events, other, frames = console_run(args.port, args.verify_seconds, want, args.uart_port)
    for e in events:
        if e.get("event") in ("boot", "refused", "http", "registered", "wifi", "repl", "voice"):
            say("   console: " + json.dumps(e))
    errors = [ln for ln in other if "Error" in ln or "Traceback" in ln]
    if any(e.get("event") == "refused" for e in events) and role != "master":
        raise FlashError("the organ refused its own descriptor (see the refused line above)")
    if not any(e.get("event") == "boot" for e in events):
        raise FlashError(
            "main.py did not report its boot within %.0f s; console said:\n  %s"
            % (args.verify_seconds, "\n  ".join(other[-12:]) or "(nothing)")
        )
    if errors:
        say("   console errors: " + " | ".join(errors[-4:]))
    if role != "master" and args.uart_port:
        descs = [p for t, p in frames if t == 1]
        if not descs:
            raise FlashError(
                "no DESCRIPTOR frame came out of the organ's UART on %s (%d frames seen): check the "
                "wiring (organ TX to the adapter's RX, shared ground)"
                % (args.uart_port, len(frames))
            )
        say("   descriptor (read off the UART): " + json.dumps(describe(descs[0])))
    if role == "master":
        host, port = _master_address(events)
        if host:
            token = (cfg or {}).get("http", {}).get("token")
            try:
                st = http_status(host, port, token)
                say("   status: " + json.dumps(st)[:2000])
            except (OSError, ValueError) as e:
                say("   status: http://%s:%s/status did not answer (%s)" % (host, port, e))
        else:
            say(
                "   status: not reachable yet (Wi-Fi not configured, or still joining): "
                "GET http://<board-ip>/status once the console shows its wifi line"
            )
    return 0


def _master_address(events):
    """(host, port) where the master's HTTP answers, from its event lines, or (None, None). A
    board binds 0.0.0.0: its address is the Wi-Fi line's ip."""
    http = [e for e in events if e.get("event") == "http"]
    if not http:
        return None, None
    host, port = http[-1].get("host"), http[-1].get("port", 80)
    if host in (None, "", "0.0.0.0"):
        ips = [e.get("ip") for e in events if e.get("event") == "wifi" and e.get("ip")]
        host = ips[-1] if ips else None
    return host, port


def _master_reachable(events):
    return _master_address(events)[0] is not None
