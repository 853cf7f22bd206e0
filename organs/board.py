# Start-up shared by the organ boards: board.json, UART, refusal and crash lines, aiorepl, run.
import json
import time

from organs import runtime


def load_config(main_file):
    """board.json next to the entry point (the board's root: /board.json), else /board.json."""
    here = main_file.rsplit("/", 1)[0] + "/" if "/" in main_file else ""
    for path in (here + "board.json", "/board.json"):
        try:
            f = open(path)
        except OSError:
            continue
        try:
            return json.load(f)
        except ValueError as e:
            raise ValueError("%s is not valid JSON (%s)" % (path, e))
        finally:
            f.close()
    raise OSError("board.json not found next to main.py nor at /board.json")


def refuse(e):
    """The board cannot start: say why, as a lifecycle event line."""
    if isinstance(e, KeyError):
        why = "board.json: missing key %s" % e
    else:
        why = "%s: %s" % (type(e).__name__, e)
    print('{"event": "refused", "reason": %s}' % json.dumps(why))


def make_uart(machine, cfg):
    """The organ's one link: the first UART of board.json, non-blocking."""
    uid, u = sorted(cfg["uarts"].items())[0]
    return machine.UART(
        int(uid),
        baudrate=u.get("baudrate", 115200),
        tx=u["tx"],
        rx=u["rx"],
        rxbuf=u.get("rxbuf", 1024),
        timeout=0,
    )


def poll_ms(machine, cfg):
    """How the UART tasks wait (organs.runtime.Link): settings.poll_ms, else 1 ms polling on a
    board (allocation-free; the esp32 port wakes on its 10 ms tick either way) and the IO wait
    in simulation (a host wakes at once on bytes, so the paced cable runs at wire speed)."""
    return cfg.get("settings", {}).get("poll_ms", 0 if getattr(machine, "SIM", None) else 1)


def repl_task(machine, names):
    """On a board with aiorepl installed, a REPL beside the organ (mpremote in, inspect `organ`)."""
    if getattr(machine, "SIM", None):
        return ()
    try:
        import aiorepl
    except ImportError:
        return ()
    return (aiorepl.task(names),)


def main(machine, build, main_file):
    """Run an organ board. `build(cfg) -> (organ, tasks, repl_names)` makes the organ and its
    hardware from board.json; anything it cannot apply is refused and the board stops."""
    try:
        cfg = load_config(main_file)
        organ, tasks, names = build(cfg)
        uart = make_uart(machine, cfg)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as e:
        refuse(e)
        return
    tasks += repl_task(machine, names)
    try:
        runtime.run(organ, uart, tasks=tasks, poll_ms=poll_ms(machine, cfg))
    except Exception as e:  # a crash: say why, then reset and announce afresh
        print('{"event": "crash", "reason": %s}' % json.dumps("%s: %s" % (type(e).__name__, e)))
        time.sleep_ms(1000)
        machine.reset()
