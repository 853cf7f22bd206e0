# master/edge.py's command: straight to the driver with nothing queued, behind the queue otherwise, a partial write kept as the tail.
from organbus import frame

from master.edge import UartEdge

UNIX_PORT = True


class ScriptedUart:
    """Takes `takes[i]` bytes at the i-th write (all of them once the script ends)."""

    def __init__(self, takes=()):
        self.takes = list(takes)
        self.out = bytearray()
        self.writes = 0

    def write(self, b):
        self.writes += 1
        k = self.takes.pop(0) if self.takes else len(b)
        k = min(k, len(b))
        self.out += bytes(b[:k])
        return k if k else None


def _cmd(i):
    return frame.encode(frame.COMMAND, b"\x01\x00" + bytes([i]))


def test_a_command_with_nothing_queued_goes_straight_to_the_driver():
    u = ScriptedUart()
    edge = UartEdge(u)
    c = _cmd(1)
    edge.command(c)
    assert bytes(u.out) == c, u.out
    assert u.writes == 1 and edge.written == 1 and edge.pending() == 0, (u.writes, edge.written)
    assert not edge.ready.is_set(), "nothing left for the writer task"


def test_a_command_queues_behind_a_tail_and_goes_in_order():
    u = ScriptedUart([3, 0])  # the first frame cut after 3 bytes, the retry takes nothing
    edge = UartEdge(u)
    a = frame.HEARTBEAT_FRAME
    c = _cmd(2)
    edge.send(a)
    assert edge.pending() == 1 and edge.ready.is_set(), edge.pending()
    edge.command(c)  # behind a's tail: flush finishes a first, then c
    assert bytes(u.out) == a + c, u.out
    assert edge.written == 2 and edge.pending() == 0 and edge.dropped == 0, edge.written


def test_a_commands_partial_write_is_its_tail():
    u = ScriptedUart([4, 2])  # 4 bytes, then the retry takes 2: the rest waits for the writer
    edge = UartEdge(u)
    c = _cmd(3)
    edge.command(c)
    assert bytes(u.out) == c[:6], u.out
    assert edge.written == 0 and edge.pending() == 1 and edge.ready.is_set(), edge.pending()
    edge.flush()  # what the writer task does once woken
    assert bytes(u.out) == c and edge.written == 1 and edge.pending() == 0, u.out
    h = frame.HEARTBEAT_FRAME
    edge.command(h)  # nothing queued again: straight to the driver
    assert bytes(u.out) == c + h and edge.written == 2, u.out
