# Wiring of the running master: UART edges, the sans-IO body, event log, timer, HTTP links, console link or aiorepl.
import asyncio
import time

from organbus import log
from master.bus import body as _body
from master.bus.hub import EventLog
from master.edge import UartEdge

TICK_MS = 20  # longest timer sleep: decoder idle (50 ms rule), 1 s timeouts, 15 s offline

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


async def run(
    uarts,
    mode="two-port",
    note=None,
    http=None,
    http_config=None,
    console=None,
    max_steps=16,
    repl_globals=None,
    xiaozhi=None,
    ota_settings=None,
    config=None,
):
    """Run the master for ever. `http`: (host, port) or None; `console`: "link" puts the
    JSON-lines link on stdin/stdout, "repl" starts aiorepl when installed, None neither;
    `xiaozhi`: (config, ident, set_clock, reset) of the xiaozhi link (master/links/xiaozhi_link.py);
    `config`: the master's config (events, nudge_url, idle: master/links/sse.py, nudge.py, idle.py).
    """
    global body
    b, edges = build(uarts, mode, note, max_steps)
    body = b
    pairs = [("ports", sorted(uarts)), ("mode", mode)]
    if note:
        pairs.append(("note", note))
    log.emit("boot", pairs)
    start(b, edges)
    start_loops(b, config)
    svc = None
    if _ota_on(
        ota_settings, http_config
    ):  # the update over the air (master/ota/service.py), its trial
        from master.ota import routes as otalink

        o = dict(ota_settings)
        o["token"] = (http_config or {}).get("token")
        svc = otalink.service(b, o)
        trial_ms = o.get("trial_ms", 60000)
        asyncio.create_task(otalink.supervise(svc, http, trial_ms, time.ticks_ms, time.ticks_diff))
    if http:
        try:
            await start_http(b, http[0], http[1], http_config, config, svc)
        except Exception as e:  # the body keeps running without its HTTP link
            log.emit("http_failed", [("host", http[0]), ("port", http[1]), ("error", repr(e))])
    if xiaozhi:
        start_xiaozhi(b, *xiaozhi)
    if console == "link":
        from master.links import jsonlines

        await jsonlines.serve(b)
        return
    if console == "repl":
        try:
            import aiorepl
        except ImportError as e:
            if "aiorepl" not in str(e):
                raise  # a bug inside an installed aiorepl is not its absence
            aiorepl = None
            log.emit("repl", [("available", False), ("why", "aiorepl is not installed")])
        if aiorepl:
            g = repl_globals if repl_globals is not None else {}
            g["body"] = b
            asyncio.create_task(aiorepl.task(g))
    while True:
        await asyncio.sleep_ms(60000)


def _ota_on(ota_settings, http_config):
    # The update's routes and state cost heap: only with a token or a key configured, or when
    # an update already runs (its ota.json), never on a master that cannot take one.
    if ota_settings is None:
        return False
    if ota_settings.get("key") or (http_config or {}).get("token"):
        return True
    root = ota_settings.get("flash", "")
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
        from master.links import nudge

        try:
            n = nudge.Nudger(b, b.clock, config)
        except ValueError as e:
            log.emit("error", [("where", "nudge_url"), ("error", str(e))])
        else:
            nudges = n
            asyncio.create_task(n.run())
            out["nudges"] = n
    b.add_status_section("nudges", nudges.stats if nudges else _nudges_off)
    if config.get("idle") is not None:
        from master.bus import idle

        try:
            after = config.get("idle_after_s", 30)
            ok = isinstance(after, int) and not isinstance(after, bool)
            i = idle.Idle(b, config["idle"], after * 1000 if ok else -1)
        except (ValueError, TypeError) as e:
            log.emit("idle_refused", [("problems", [str(e)])])
        else:
            b.idle = i
            b.add_status_section("idle", i.stats)
            out["idle"] = i
    return out


def http_routes(b, config=None, ota_service=None):
    """Every HTTP route of the master: its own, the /events stream, MCP, Body Protocol, the
    update's. `config`: the master's config ("events": master/links/sse.py DEFAULTS)."""
    from master.links import bodyproto
    from master.links import mcp
    from master.links import routes
    from master.links import sse

    config = config or {}
    table = routes.routes(b)
    events = sse.Events(b, b.stamp, config.get("events"))
    b.add_status_section("events", events.stats)
    table.update(events.routes())
    table.update(mcp.routes(b))
    table.update(bodyproto.routes(b))
    if ota_service is not None:
        from master.ota import routes as otalink

        table.update(otalink.routes(ota_service))
    return table


async def start_http(b, host, port, http_config=None, config=None, ota_service=None):
    from master.links import httpd

    routes = http_routes(b, config, ota_service)
    server = await httpd.serve(routes, host, port, http_config or {})
    log.emit("http", [("host", host), ("port", getattr(server, "port", port))])
    return server


def start_xiaozhi(b, config, ident, set_clock=None, reset=None):
    """The xiaozhi link as its own task (never raises: a bad config is said on the event log)."""
    from master.links import mcp
    from master.links import xiaozhi_link

    try:
        link = xiaozhi_link.start(b, config, ident, mcp.SERVER_INFO["version"], set_clock, reset)
    except Exception as e:
        log.emit("xiaozhi", [("what", "refused"), ("reason", repr(e))])
        return None
    if link is not None:
        b.add_status_section("xiaozhi", link.status)
    return link
