# Guest side: where one scheduler step's instructions go: the same COMMAND_RESP fed with parts of the path cut off.
import gc
import json

from rv32count import count

from organbus import frame


def rig():
    from bench_master import registered_body

    body, out, _, _ = registered_body()
    return body, out


def best(fn, *a):
    b = None
    for _ in range(3):
        gc.collect()
        n, _ = count(fn, *a)
        b = n if b is None or n < b else b
    return b


def main():
    from bench_master import _plan16

    raw = json.dumps(_plan16())
    body, out = rig()
    p0 = body.ports[0]
    resp = frame.RESP_OK_FRAME
    # 1. the decoder alone
    d = frame.Decoder(lambda t, p, n: None)
    print("decoder.feed(RESP_OK) null callback", best(d.feed, resp, 0))
    # 2. the port with a registry that does nothing
    real = p0.organs

    class Null:
        def frame(self, port, ftype, payload, n, now):
            return None

    routes = p0.routes
    p0.routes = None  # a registered organ's COMMAND_RESP skips the registry
    p0.organs = Null()
    print("port.feed -> null registry", best(p0.feed, resp, 0))
    p0.organs = real
    p0.routes = routes
    # 3. a stray COMMAND_RESP (no step outstanding): port -> scheduler.on_resp
    sch = body.scheduler
    print("port.feed -> stray on_resp", best(p0.feed, resp, 0))
    # 4. dispatch with nothing to do, plan running
    kind, run = body.submit(raw)
    print("submitted", kind)
    print("_dispatch, one run, nothing ready", best(sch._dispatch, 0))
    # 5. the step path pieces on a live plan
    from master.bus import run as sm

    own = body.owners.owner("led_blink")
    print("command_frame led_blink", best(sm.command_frame, own[1], {"count": 2, "period_ms": 100}))
    print("sched._frame led_on", best(sch._frame, body.owners.owner("led_on")[1], {}))
    import master_fakes as mf

    ev = frame.encode(frame.EVENT, mf.command.encode_event("led_blink", 0))
    from organbus import command

    print("decode_event", best(command.decode_event, memoryview(ev)[5:], len(ev) - 8))
    print("port.command", best(p0.command, resp, 0))
    out.clear()


main()


def live():
    from bench_master import _plan16
    import master_fakes as mf

    raw = json.dumps(_plan16())
    body, out = rig()
    sch = body.scheduler
    reg = body.registry
    feeds = {p.index: p for p in body.ports}
    events = {}
    for mode in ("feed", "direct", "split", "nocollect"):
        rows = []
        out.clear()
        kind, run = body.submit(raw)
        while not run.finished:
            pi, f = out.pop(0)
            if f[2] != frame.COMMAND:
                continue
            port = feeds[pi]
            name = str(bytes(f[6 : 6 + f[5]]), "utf-8")
            ev = events.get(name)
            if ev is None and name in ("led_blink", "speak", "chime"):
                ev = events[name] = frame.encode(frame.EVENT, mf.command.encode_event(name, 0))
            if mode != "nocollect":
                gc.collect()
            if mode == "feed" or mode == "nocollect":
                n, _ = count(port.feed, frame.RESP_OK_FRAME, 0)
                m = count(port.feed, ev, 0)[0] if ev else 0
                rows.append((name, n, m))
            elif mode == "direct":
                n, _ = count(sch.on_resp, port, 0, 0)
                m = count(sch.on_event, port, name, 0, 0)[0] if ev else 0
                rows.append((name, n, m))
            else:
                # the answers without the next step's start: the step path (on_event's finish
                # and start in one) turned off (no sole run) and _dispatch stubbed, the finish
                # done the general way
                d = sch._dispatch
                solo = sch._solo
                sch._dispatch = lambda now: None
                sch._solo = None
                n, _ = count(sch.on_resp, port, 0, 0)
                m = count(sch.on_event, port, name, 0, 0)[0] if ev else 0
                sch._dispatch = d
                sch._solo = solo
                k, _ = count(d, 0)
                rows.append((name, n, m, k))
        print(mode, " ".join(str(r) for r in rows))
        if mode == "feed" or mode == "nocollect":
            per = sorted([r[1] + r[2] for r in rows])
            print("STEPS (%s) median" % mode, per[len(per) // 2], "sum", sum(per))


live()
