# Entry point of the ESP32-C6 master (also run on the unix port by `tools/sim.py board master`).
import asyncio
import json
import sys

import machine

from master import app


def _here(name):
    f = globals().get("__file__") or ""
    d = f.rsplit("/", 1)[0] if "/" in f else "."
    return d + "/" + name


def _load(path, default=None):
    # A missing file is the default; a corrupt one is said on the event log, never skipped silently.
    try:
        with open(path) as f:
            return json.loads(f.read())
    except OSError:
        return default
    except ValueError as e:
        print(json.dumps({"event": "error", "file": path, "error": "not valid JSON: %s" % e}))
        return default


def _ports(board, sim):
    """(organ ports, mode, note): two ports only on the firmware with the UART REPL off."""
    if sim is not None:
        import os

        two = bool(os.getenv("ORGANBUS_SIM_UART0"))
    else:
        two = getattr(sys.implementation, "_build", "") in board.get("two_port_builds", ())
    if two:
        return [0, 1], "two-port", None
    note = (
        "one-port mode: stock firmware mirrors the REPL on UART0, so only UART(1) is an organ "
        "port; flash the two-UART build to use UART(0) too"
    )
    return [1], "one-port", note


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
        print(json.dumps({"event": "wifi", "error": str(e)}))
        return None


async def _wifi_watch(sta):
    # Say where the HTTP API is once the station has an address (and again after a reconnect).
    shown = None
    while True:
        ip = sta.ifconfig()[0] if sta.isconnected() else None
        if ip != shown:
            shown = ip
            print(json.dumps({"event": "wifi", "connected": ip is not None, "ip": ip}))
        await asyncio.sleep_ms(2000)


def _xiaozhi(config, sim, sta):
    # (config, ident, set_clock, reset) of the xiaozhi link, or None when it is not configured.
    cfg = config.get("xiaozhi")
    if sim is not None:
        cfg = {"ota_url": sim["xiaozhi"]} if sim.get("xiaozhi") else None
    if not cfg:
        return None
    import os

    from master import xiaozhi_link

    mac = None
    try:
        mac = sta.config("mac") if sta is not None else None
    except Exception:
        mac = None
    keep = "/xiaozhi_client_id"
    if sim is not None:  # the simulated board keeps it beside its logs, not in the host's /
        keep = (
            sim["pinlog"].rsplit("/", 1)[0] + "/master-xiaozhi-client-id"
            if sim.get("pinlog")
            else None
        )
    ident = xiaozhi_link.identity(mac, machine.unique_id(), keep, os.urandom(16))
    return cfg, ident, None if sim is not None else _set_clock, machine.reset


def _set_clock(epoch_ms, tz_min):
    # The RTC from the server's time (UTC); ports whose epoch is 2000 get their own seconds.
    import time

    s = epoch_ms // 1000 - (946684800 if time.gmtime(0)[0] == 2000 else 0)
    t = time.gmtime(s)
    machine.RTC().datetime((t[0], t[1], t[2], t[6], t[3], t[4], t[5], 0))


async def _run(sta, *args):
    if sta is not None:
        asyncio.create_task(_wifi_watch(sta))
    await app.run(*args)


def main():
    board = _load(_here("board.json")) or _load("/board.json")
    if not board:
        why = "missing or invalid: no organ port can be opened"
        print(json.dumps({"event": "error", "file": "board.json", "error": why}))
        return
    settings = board.get("settings", {})
    sim = getattr(machine, "SIM", None)
    config = _load(settings.get("config", "/config.json"), {}) or {}
    ports, mode, note = _ports(board, sim)
    uarts = _uarts(board, ports)
    sta = None
    if sim is not None:
        http = None
        if sim.get("http"):
            host, _, port = sim["http"].rpartition(":")
            http = (host, int(port))
        console = "link" if sim.get("console") == "link" else None
    else:
        sta = _wifi(config)
        http = ("0.0.0.0", config.get("http_port", settings.get("http_port", 80)))
        console = config.get("console", "repl")
    asyncio.run(
        _run(
            sta,
            uarts,
            mode,
            note,
            http,
            config.get("http", {}),
            console,
            settings.get("max_steps", 16),
            globals(),
            _xiaozhi(config, sim, sta),
        )
    )


main()
