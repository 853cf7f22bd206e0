# Organ link: a COMMAND_RESP goes into the UART in the reader step that decoded its COMMAND, before the event line.
from organbus import frame
from organbus.command import encode_command
from organs.led import LedOrgan, Light
from organs.runtime import Link

UNIX_PORT = True

ON = frame.encode(frame.COMMAND, encode_command("led_on"))
BLINK = frame.encode(frame.COMMAND, encode_command("led_blink", (1.0, 100.0)))


class Pin:
    def value(self, x=None):
        return 0


class Uart:
    """timeout=0 UART: readinto takes what was injected; write records (frame type, lines so far)."""

    def __init__(self, log, take=None):
        self.rx = None
        self.log = log
        self.take = take  # bytes the driver accepts per write (None: all)
        self.writes = []

    def readinto(self, buf):
        d = self.rx
        if d is None:
            return None
        self.rx = None
        buf[0 : len(d)] = d
        return len(d)

    def write(self, f):
        n = len(f) if self.take is None else min(self.take, len(f))
        self.writes.append((bytes(f[:n]), len(self.log)))
        return n


def _organ(log):
    led = LedOrgan(Light(pin=Pin()), log=log.append)
    assert led.organ.start(0), led.organ.refusal
    led.organ.feed(frame.ACK_FRAME, 1)
    return led


def test_resp_leaves_in_the_reader_step_before_the_event_line():
    for poll_ms in (1, 0):  # board polling, simulation's IO wait: the same rule
        log = []
        led = _organ(log)
        uart = Uart(log)
        link = Link(led.organ, uart, poll_ms=poll_ms)
        uart.rx = ON
        lines = len(log)
        link.read_once(10)  # the reader alone: no writer step, no timer
        assert len(uart.writes) == 1, "poll_ms=%d: %r" % (poll_ms, uart.writes)
        f, logged = uart.writes[0]
        assert f == frame.RESP_OK_FRAME, "poll_ms=%d: wrote %r" % (poll_ms, f)
        assert logged == lines, "poll_ms=%d: the event line came before the RESP" % poll_ms
        assert len(log) == lines + 1 and '"command"' in log[-1], log[lines:]


def test_event_from_a_timer_goes_out_at_once():
    log = []
    led = _organ(log)
    uart = Uart(log)
    link = Link(led.organ, uart, poll_ms=1)
    uart.rx = BLINK
    link.read_once(10)
    assert [w[0] for w in uart.writes] == [frame.RESP_OK_FRAME], uart.writes
    led.poll(10 + 100)  # the blink's last phase ends: EVENT done, written by its poll itself
    types = [w[0][2] for w in uart.writes]
    assert types == [frame.COMMAND_RESP, frame.EVENT], "frames written: %r" % uart.writes


def test_partial_write_is_finished_in_order_by_the_writer():
    log = []
    led = _organ(log)
    uart = Uart(log, take=4)
    link = Link(led.organ, uart, poll_ms=1)
    uart.rx = ON
    link.read_once(10)
    assert uart.writes[0][0] == frame.RESP_OK_FRAME[:4], uart.writes
    uart.take = None
    link.write_once(11)
    got = b"".join(w[0] for w in uart.writes)
    assert got == frame.RESP_OK_FRAME, "the rest of the RESP, once and in order: %r" % got


def test_a_held_up_reader_loses_no_frame():
    # Half a COMMAND is read, then the board is busy for 200 ms while the rest waits in the
    # UART; the writer's timers run first. They drain the UART before the quiet-line rule, so
    # the COMMAND is taken and answered, not abandoned as a frame cut by a quiet line.
    log = []
    led = _organ(log)
    uart = Uart(log)
    link = Link(led.organ, uart, poll_ms=1)
    uart.rx = ON[:6]
    link.read_once(10)
    uart.rx = ON[6:]
    link.write_once(210)
    assert [f for f, _ in uart.writes] == [frame.RESP_OK_FRAME], "answered: %r" % uart.writes
    c = led.organ.counters()
    assert c["abandoned"] == 0 and c["frames"] == 2, c
