# Wiring only: build the bus, start the UART edges and the timer, then start each configured link.
#
# `run(uarts, config, board)`: `config` is the master's /config.json (the links' sections:
# http, events, nudge_url, idle, ota, xiaozhi, mqtt); `board` is what the entry point knows of the
# hardware and the host (its keys: BOARD below). Every link has one entry, `start(body, config)`,
# given the Body (master/bus/body.py, the one interface a link gets) and the config with the
# board under "board"; a link that serves HTTP returns its routes. A link whose section is not
# configured is never imported, so a master without xiaozhi or an update key never loads them.
import asyncio
import sys
import time

from organbus import log
from master.bus import body as _body
from master.bus.hub import EventLog
from master.edge import UartEdge

TICK_MS = 20  # longest timer sleep: decoder idle (50 ms rule), 1 s timeouts, 15 s offline

# board: what the entry point passes (boards/c6_master/main.py), each with its default
BOARD = {
    "mode": "two-port",  # or "one-port", with its `note`
    "note": None,
    "http": None,  # (host, port) of the HTTP API, or None
    "console": None,  # "link": the JSON-lines link on stdin/stdout; "repl": aiorepl; None
    "max_steps": 16,
    "repl_globals": None,
    "flash": "",  # the update's flash root
    "reset": None,  # machine.reset
    "trial_ms": 60000,  # an update's trial
    "xiaozhi": None,  # {"ident", "set_clock", "reset"} when config names a xiaozhi server
    "uid": None,  # machine.unique_id(): the MQTT link's client id when its config has none
}

body = None  # the live Body, for a developer at the REPL: `from master.app import body`


def build(uarts, mode="two-port", note=None, max_steps=16, emit=log.emit):
    """(Body, {port: UartEdge}) for `uarts` ({port number: UART with timeout=0}); `emit`
    writes the event log (None: no log)."""
    edges = {}
    for i in sorted(uarts):
        edges[i] = UartEdge(uarts[i])
    b = _body.build(edges, time.ticks_ms, mode, max_steps, note)
    if emit is not None:
        EventLog(b.hub, emit)
    return b, edges


def start(b, edges):
    """The edges' reader and writer tasks, the boot DISCOVERs and the timer task."""
    for p in b.ports:
        edges[p.index].tasks(p)
    b.start(time.ticks_ms())
    return asyncio.create_task(_timer(b))


async def _timer(b):
    while True:
        wait = TICK_MS
        try:
            w = b.poll(time.ticks_ms())
            if w < wait:
                wait = w
        except Exception as e:  # keep the timers alive; the error is on the log
            log.emit("error", [("where", "timer"), ("error", repr(e))])
        await asyncio.sleep_ms(wait)


def with_board(config, board=None):
    """The links' config: the master's config with the board's keys (BOARD) under "board"."""
    brd = dict(BOARD)
    brd.update(board or {})
    cfg = dict(config or {})
    cfg["board"] = brd
    return cfg


async def run(uarts, config=None, board=None):
    """Run the master for ever (or, with the console link, until its input ends)."""
    global body
    cfg = with_board(config, board)
    brd = cfg["board"]
    b, edges = build(uarts, brd["mode"], brd["note"], brd["max_steps"])
    body = b
    pairs = [("ports", sorted(uarts)), ("mode", brd["mode"])]
    if brd["note"]:
        pairs.append(("note", brd["note"]))
    log.emit("boot", pairs)
    start(b, edges)
    start_loops(b, cfg)
    extra = None
    if ota_on(cfg):  # the update over the air (master/ota/), its trial
        ota_routes = _link("ota", "routes")
        if ota_routes:
            extra = ota_routes.start(b, cfg)
    if brd["http"]:
        host, port = brd["http"]
        try:
            await start_http(b, cfg, extra)
        except Exception as e:  # the body keeps running without its HTTP link
            log.emit("http_failed", [("host", host), ("port", port), ("error", repr(e))])
    if cfg.get("xiaozhi") and brd["xiaozhi"]:
        xiaozhi_link = _link("links", "xiaozhi_link")
        if xiaozhi_link:
            xiaozhi_link.start(b, cfg)
    if cfg.get("mqtt"):  # the MQTT link: a broker, Home Assistant (master/links/mqtt/)
        mqtt = _link("links.mqtt", "link")
        if mqtt:
            mqtt.start(b, cfg)
    if brd["console"] == "link":
        jsonlines = _link("links", "jsonlines")
        if jsonlines:
            await jsonlines.start(b, cfg)
            return
    if brd["console"] == "repl":
        _repl(b, brd["repl_globals"])
    while True:
        await asyncio.sleep_ms(60000)


def _link(room, name):
    """master.<room>.<name>, or None when the board lacks it: a link its config names but
    tools/flash.py did not install (it installs those the config it writes names) is said on
    the event log, and the body runs without it."""
    full = "master.%s.%s" % (room, name)
    try:
        __import__(full)
        return sys.modules[full]
    except ImportError as e:
        if name not in str(e):
            raise  # a bug inside an installed link is not its absence
        why = "configured but not installed: %s (flash the master again with the option "
        log.emit(
            "error", [("where", "%s.%s" % (room, name)), ("error", why % e + "that names it)")]
        )
        return None


def _repl(b, g):
    try:
        import aiorepl
    except ImportError as e:
        if "aiorepl" not in str(e):
            raise  # a bug inside an installed aiorepl is not its absence
        log.emit("repl", [("available", False), ("why", "aiorepl is not installed")])
        return
    g = g if g is not None else {}
    g["body"] = b
    asyncio.create_task(aiorepl.task(g))


def ota_on(config):
    """Whether the update runs: a key or a token configured, or an update under way (its
    ota.json): its routes and state cost heap, never on a master that cannot take one."""
    if (config.get("ota") or {}).get("key") or (config.get("http") or {}).get("token"):
        return True
    root = config["board"]["flash"]
    try:
        open((root + "/" if root else "") + "ota.json").close()
        return True
    except OSError:
        return False


def _nudges_off():
    return {"url": None, "sent": 0, "failed": 0, "dropped": 0}


def start_loops(b, config=None):
    """The body's own tasks from the master's config: nudges (nudge_url), the idle loop
    (idle). Returns {name: object} of those started; a bad section is said on the event log."""
    config = config or {}
    out = {}
    nudges = None
    if config.get("nudge_url"):
        nudge = _link("links", "nudge")
        nudges = nudge.start(b, config) if nudge else None
        if nudges is not None:
            out["nudges"] = nudges
    if nudges is None:
        b.add_status_section("nudges", _nudges_off)
    if config.get("idle") is not None:
        from master.bus import idle

        i = idle.start(b, config)
        if i is not None:
            out["idle"] = i
    return out


def http_routes(b, config=None, extra=None):
    """Every HTTP route of the master: its own, the /events stream, MCP, Body Protocol, and
    `extra` (the update's)."""
    from master.links import bodyproto, mcp, routes, sse

    config = config or {}
    table = routes.start(b, config)
    table.update(sse.start(b, config))
    table.update(mcp.start(b, config))
    table.update(bodyproto.start(b, config))
    if extra:
        table.update(extra)
    return table


async def start_http(b, config, extra=None):
    from master.links import httpd

    host, port = config["board"]["http"]
    server = await httpd.serve(http_routes(b, config, extra), host, port, config.get("http") or {})
    log.emit("http", [("host", host), ("port", getattr(server, "port", port))])
    return server
