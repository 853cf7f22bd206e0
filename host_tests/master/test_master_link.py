# master/link.py on the unix port: a COMMAND sent while the reader sleeps in its idle poll wakes it.
from support import run_micropython

SCRIPT = """
import asyncio
import io
import micropython

from organbus import frame
from master.link import IDLE_POLL_MS, Link

busy = [False]


class Uart(io.IOBase):
    # pollable by asyncio through ioctl, like tools/simhw's UART when it holds bytes
    def __init__(self):
        self.data = None
        self.written = 0

    def ioctl(self, req, arg):
        if req == 3:  # MP_STREAM_POLL
            return (arg & 4) | (arg & 1 if self.data else 0)
        return -22  # no file descriptor: poll through this ioctl

    def readinto(self, buf):
        d = self.data
        if not d:
            return None
        self.data = None
        buf[0 : len(d)] = d
        return len(d)

    def write(self, b):
        self.written += len(b)
        return len(b)


class Registry:
    fed = 0

    def feed(self, index, buf, now, n):
        self.fed += n
        busy[0] = False  # the answer is in: the link is idle again


async def main():
    u = Uart()
    reg = Registry()
    link = Link(u, 0, reg, busy=lambda: busy[0])
    task = asyncio.create_task(link.reader())
    await asyncio.sleep_ms(0)
    await asyncio.sleep_ms(0)
    idle = link._task is not None  # asleep in its IDLE_POLL_MS poll
    cmd = frame.encode(frame.COMMAND, b"\\x06led_on")
    busy[0] = True  # the scheduler marks the step outstanding before it sends
    micropython.heap_lock()
    try:
        link.send(cmd)
    finally:
        micropython.heap_unlock()
    woken = link._task is None
    u.data = frame.RESP_OK_FRAME
    for _ in range(5):  # a few passes of the loop (into the poller, out with the bytes): far
        await asyncio.sleep_ms(0)  # less than IDLE_POLL_MS
    took = reg.fed
    task.cancel()
    print("RESULT", idle, woken, took, u.written, IDLE_POLL_MS)


asyncio.run(main())
"""


def test_command_wakes_the_idle_reader_without_allocating():
    r = run_micropython(["-c", SCRIPT])
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert r.returncode == 0 and lines, r.stdout + r.stderr
    _, idle, woken, took, written, poll_ms = lines[0].split()
    assert idle == "True", "the reader was not asleep in its idle poll: %s" % lines[0]
    assert woken == "True", "send() left the reader asleep: %s" % lines[0]
    assert int(written) == 15, "the COMMAND went out whole: %s" % lines[0]
    assert int(took) == 9, (
        "the COMMAND_RESP was not read within a few loop passes (the reader waited for its %s ms "
        "poll): %s" % (poll_ms, lines[0])
    )
