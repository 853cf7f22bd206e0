# Wiring of the running master: links, registry, scheduler, Body, HTTP, console link or aiorepl.
import asyncio
import time

from organbus import log
from master.body import Body
from master.link import Link
from master.registry import Registry
from master.scheduler import Scheduler

TICK_MS = 20  # timer granularity: decoder idle (50 ms rule), 1 s timeouts, 15 s offline

body = None  # the live Body, for a developer at the REPL: `from master.app import body`


def build(uarts, mode="two-port", note=None, max_steps=16):
    """The Body and its Links for `uarts` ({port number: UART with timeout=0})."""
    links = {}

    def send(port, f):
        links[port].send(f)

    reg = Registry(sorted(uarts), send)
    sched = Scheduler(reg.owner, send)
    b = Body(reg, sched, time.ticks_ms, mode, max_steps, note)
    for i in sorted(uarts):
        links[i] = Link(uarts[i], i, reg, busy=_busy(sched, i))
    return b, links


def _busy(sched, port):
    def busy():
        return port in sched.outstanding

    return busy


async def _timer(b, links):
    while True:
        try:
            now = time.ticks_ms()
            for link in links.values():
                link.drain(now)
            b.tick(now)
        except Exception as e:  # keep the timers alive; the error is on the log
            log.emit("error", [("where", "timer"), ("error", repr(e))])
        await asyncio.sleep_ms(TICK_MS)


async def run(
    uarts,
    mode="two-port",
    note=None,
    http=None,
    http_config=None,
    console=None,
    max_steps=16,
    repl_globals=None,
):
    """Run the master for ever. `http`: (host, port) or None; `console`: "link" puts the
    JSON-lines link on stdin/stdout, "repl" starts aiorepl when installed, None neither."""
    global body
    b, links = build(uarts, mode, note, max_steps)
    body = b
    pairs = [("ports", sorted(uarts)), ("mode", mode)]
    if note:
        pairs.append(("note", note))
    log.emit("boot", pairs)
    for link in links.values():
        link.tasks()
    b.registry.start(time.ticks_ms())
    asyncio.create_task(_timer(b, links))
    if http:
        try:
            await start_http(b, http[0], http[1], http_config)
        except Exception as e:  # the body keeps running without its HTTP link
            log.emit("http_failed", [("host", http[0]), ("port", http[1]), ("error", repr(e))])
    if console == "link":
        from master import console as _console

        await _console.serve(b)
        return
    if console == "repl":
        try:
            import aiorepl
        except ImportError:
            aiorepl = None
            log.emit("repl", [("available", False), ("why", "aiorepl is not installed")])
        if aiorepl:
            g = repl_globals if repl_globals is not None else {}
            g["body"] = b
            asyncio.create_task(aiorepl.task(g))
    while True:
        await asyncio.sleep_ms(60000)


async def start_http(b, host, port, config=None):
    from master import bodyproto, httpd, mcp

    routes = b.routes()
    routes.update(mcp.routes(b))
    routes.update(bodyproto.routes(b))
    server = await httpd.serve(routes, host, port, config or {})
    log.emit("http", [("host", host), ("port", getattr(server, "port", port))])
    return server
