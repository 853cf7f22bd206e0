# Start-up shared by the organ boards: board file, UART, refusal and crash lines, aiorepl, run.
import time

from organbus import boardfile, log
from organs import runtime


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


def poll_ms(cfg):
    """How the UART tasks wait (organs.runtime.Link): settings.poll_ms, default 1 ms polling
    (allocation-free; the esp32 port wakes on its 10 ms tick either way); 0 waits in the poller,
    which a host that wakes at once on bytes wants (the simulated boot sets it)."""
    return cfg.get("settings", {}).get("poll_ms", 1)


def repl_task(cfg, names):
    """With aiorepl installed and settings.repl not false, a REPL beside the organ (mpremote in,
    inspect `organ`)."""
    if not cfg.get("settings", {}).get("repl", True):
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
        cfg = boardfile.load(main_file)
        organ, tasks, names = build(cfg)
        uart = make_uart(machine, cfg)
    except (OSError, ValueError, KeyError, TypeError, ImportError) as e:
        log.emit("refused", [("reason", boardfile.refusal(e))])
        return
    tasks += repl_task(cfg, names)
    try:
        runtime.run(organ, uart, tasks=tasks, poll_ms=poll_ms(cfg))
    except Exception as e:  # a crash: say why, then reset and announce afresh
        log.crash(e)
        time.sleep_ms(1000)
        machine.reset()
