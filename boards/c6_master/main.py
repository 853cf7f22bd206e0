# Entry point of the ESP32-C6 master (also run on the unix port by `tools/sim.py board master`).
import asyncio
import json
import sys
import time

import machine

from organbus import boardfile, log

try:
    from master import app
except Exception as _e:  # code that cannot even load: reset (boot.py rolls an update's trial back)
    log.crash(_e)
    time.sleep_ms(1000)
    machine.reset()

ONE_PORT_NOTE = (
    "one-port mode: stock firmware mirrors the REPL on UART0, so only UART(1) is an organ "
    "port; flash the two-UART build to use UART(0) too"
)


def _config(path):
    # A missing file is no config; a corrupt one is said on the event log, never skipped silently.
    try:
        with open(path) as f:
            return json.loads(f.read())
    except OSError:
        return {}
    except ValueError as e:
        log.emit("error", [("file", path), ("error", "not valid JSON: %s" % e)])
        return {}


def _ports(board, settings):
    """(organ ports, mode, note): settings.ports when given (a host's simulated UARTs), else two
    ports only on the firmware with the UART REPL off."""
    if "ports" in settings:
        ports = sorted(int(n) for n in settings["ports"])
    elif getattr(sys.implementation, "_build", "") in board.get("two_port_builds", ()):
        ports = [0, 1]
    else:
        ports = [1]
    if len(ports) > 1:
        return ports, "two-port", None
    return ports, "one-port", ONE_PORT_NOTE


def _uarts(board, ports):
    out = {}
    for n in ports:
        u = board["uarts"][str(n)]
        out[n] = machine.UART(
            n,
            baudrate=u.get("baudrate", 115200),
            tx=u["tx"],
            rx=u["rx"],
            rxbuf=u.get("rxbuf", 1024),
            txbuf=u.get("txbuf", 1024),
            timeout=0,
        )
    return out


def _wifi(config):
    # Station mode from /config.json (never committed); the body runs whether or not it connects.
    w = config.get("wifi") or {}
    if not w.get("ssid"):
        return None
    try:
        import network

        sta = network.WLAN(network.STA_IF)
        sta.active(True)
        sta.connect(w["ssid"], w.get("password", ""))
        return sta
    except Exception as e:
        log.emit("wifi", [("error", str(e))])
        return None


async def _wifi_watch(sta):
    # Say where the HTTP API is once the station has an address (and again after a reconnect).
    shown = None
    while True:
        ip = sta.ifconfig()[0] if sta.isconnected() else None
        if ip != shown:
            shown = ip
            log.emit("wifi", [("connected", ip is not None), ("ip", ip)])
        await asyncio.sleep_ms(2000)


def _xiaozhi(config, settings, sta, setup):
    # The xiaozhi link's board part ({"ident", "set_clock", "reset"}) when a server is named.
    # settings.xiaozhi (an OTA URL) overrides /config.json's, settings.xiaozhi_endpoint (a relay's
    # ws:// URL) is added to it; settings.xiaozhi_id_file is where
    # the Client-Id is kept (a host keeps it beside its logs); settings.set_clock false leaves
    # the clock alone (a host's is right already).
    if settings.get("xiaozhi"):
        config["xiaozhi"] = {"ota_url": settings["xiaozhi"]}
    if settings.get("xiaozhi_endpoint"):  # the relay's tool side (a host: tools/sim.py)
        xz = {}
        xz.update(config.get("xiaozhi") or {})
        xz["mcp_endpoint"] = settings["xiaozhi_endpoint"]
        config["xiaozhi"] = xz
    if not config.get("xiaozhi"):
        return
    import os

    from master.links import xiaozhi_link

    mac = None
    try:
        mac = sta.config("mac") if sta is not None else None
    except Exception:
        mac = None
    keep = settings.get("xiaozhi_id_file", "/xiaozhi_client_id")
    ident = xiaozhi_link.identity(mac, machine.unique_id(), keep, os.urandom(16))
    clock = _set_clock if settings.get("set_clock", True) else None
    setup["xiaozhi"] = {"ident": ident, "set_clock": clock, "reset": machine.reset}


def _set_clock(epoch_ms, tz_min):
    # The RTC from the server's time (UTC); ports whose epoch is 2000 get their own seconds.
    s = epoch_ms // 1000 - (946684800 if time.gmtime(0)[0] == 2000 else 0)
    t = time.gmtime(s)
    machine.RTC().datetime((t[0], t[1], t[2], t[6], t[3], t[4], t[5], 0))


async def _run(sta, uarts, config, setup):
    if sta is not None:
        asyncio.create_task(_wifi_watch(sta))
    await app.run(uarts, config, setup)


def _http(settings, config):
    """((host, port) of the HTTP API or None, join Wi-Fi?): settings.http "HOST:PORT" (a host's
    loopback) or "off" (no HTTP), neither with Wi-Fi; else every interface on config's or
    settings' http_port, over Wi-Fi."""
    if settings.get("http") == "off":
        return None, False
    if settings.get("http"):
        host, _, port = settings["http"].rpartition(":")
        return (host, int(port)), False
    return ("0.0.0.0", config.get("http_port", settings.get("http_port", 80))), True


def main():
    try:
        board = boardfile.load(globals().get("__file__") or "")
    except (OSError, ValueError) as e:
        why = "%s: no organ port can be opened" % boardfile.refusal(e)
        log.emit("error", [("file", "board.json"), ("error", why)])
        return
    settings = board.get("settings", {})
    config = _config(settings.get("config", "/config.json"))
    ports, mode, note = _ports(board, settings)
    uarts = _uarts(board, ports)
    http, wifi = _http(settings, config)
    sta = _wifi(config) if wifi else None
    console = settings.get("console", config.get("console", "repl"))  # "link", "repl" or "none"
    setup = {  # what app.run needs of the board and host (master/app.py BOARD)
        "mode": mode,
        "note": note,
        "http": http,
        "console": console,
        "max_steps": settings.get("max_steps", 16),
        "repl_globals": globals(),
        "flash": settings.get("flash", ""),  # the update's flash root and trial from settings
        "reset": machine.reset,
        "trial_ms": settings.get("ota_trial_ms", 60000),
        "uid": machine.unique_id(),  # names the body where its config does not (MQTT)
    }
    try:
        _xiaozhi(config, settings, sta, setup)
        asyncio.run(_run(sta, uarts, config, setup))
    except Exception as e:  # a crash: say why, then reset and announce afresh, as an organ does
        log.crash(e)
        time.sleep_ms(1000)
        machine.reset()
    if console == "link":  # app.run returns only when the link's input has ended
        log.emit("stop", [("why", "the console link's input ended (stdin at end of file)")])


main()
