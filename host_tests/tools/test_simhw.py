# Simulated hardware (tools/simhw) on the real unix port: UART over loopback TCP, Pin log, I2S WAV, reset.
import json
import os
import socket
import subprocess
import textwrap
import threading
import time
import wave

from support import ROOT, free_port, launch, micropython_exe

SIMHW = launch.SIMHW
PATH = launch.micropypath()


def run_mp(code, env=None, timeout=30, tmp=None):
    script = os.path.join(tmp, "t.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(code))
    e = launch.sim_env(path=PATH)
    e.update(env or {})
    return subprocess.run(
        [micropython_exe(), script], env=e, capture_output=True, text=True, timeout=timeout, cwd=tmp
    )


class Peer:
    """A loopback TCP listener playing the other end of the cable; handler(conn) in a thread."""

    def __init__(self, handler):
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(1)
        self.port = self.s.getsockname()[1]
        self.result = {}
        self.t = threading.Thread(target=self._run, args=(handler,), daemon=True)
        self.t.start()

    def _run(self, handler):
        c, _ = self.s.accept()
        c.settimeout(10)
        try:
            handler(c, self.result)
        finally:
            c.close()
            self.s.close()

    @property
    def spec(self):
        return "connect:127.0.0.1:%d" % self.port


def test_uart_refuses_non_loopback_address(tmp_path):
    r = run_mp(
        """
        import machine
        try:
            machine.UART(1)
            print("constructed")
        except ValueError as e:
            print("refused:", e)
        """,
        {"ORGANBUS_SIM_UART1": "connect:192.168.1.7:7001"},
        tmp=str(tmp_path),
    )
    assert "refused:" in r.stdout and "loopback" in r.stdout, r.stdout + r.stderr


def test_uart_asyncio_round_trip_and_eof_powers_off(tmp_path):
    def echo_upper(c, res):
        got = b""
        while len(got) < 6:
            got += c.recv(100)
        res["got"] = got
        c.sendall(got.upper())
        time.sleep(0.3)  # then the cable goes away: the board process must exit

    peer = Peer(echo_upper)
    r = run_mp(
        """
        import asyncio, machine
        u = machine.UART(1, 115200, rxbuf=256, timeout=0)
        assert u.read() is None, "nothing waiting: read() is None"
        async def main():
            r = asyncio.StreamReader(u)
            u.write(b"abc")
            u.write(b"def")
            buf = bytearray(16)
            got = b""
            while len(got) < 6:
                n = await r.readinto(buf)
                got += buf[:n]
            print("reply", got)
            while True:
                await r.readinto(buf)  # EOF: machine.UART exits the process
        asyncio.run(main())
        print("not reached")
        """,
        {"ORGANBUS_SIM_UART1": peer.spec},
        tmp=str(tmp_path),
    )
    peer.t.join(5)
    assert peer.result.get("got") == b"abcdef", peer.result
    assert "reply b'ABCDEF'" in r.stdout, r.stdout + r.stderr
    assert "not reached" not in r.stdout and r.returncode == 0, r.stdout + r.stderr
    assert "powered off" in r.stderr, r.stderr


def test_uart_any_and_readinto_allocate_nothing_under_heap_lock(tmp_path):
    def feed(c, res):
        c.recv(100)  # the board says it is ready
        for _ in range(20):
            c.sendall(b"0123456789")
            time.sleep(0.01)
        res["echo"] = b""
        c.settimeout(2)
        try:
            while len(res["echo"]) < 200:
                res["echo"] += c.recv(1000)
        except socket.timeout:
            pass

    peer = Peer(feed)
    r = run_mp(
        """
        import machine, micropython, time
        import neopixel
        u = machine.UART(1, rxbuf=64)
        p = machine.Pin(8, machine.Pin.OUT, value=0)
        px = neopixel.NeoPixel(machine.Pin(9), 1)
        ON = (32, 32, 32)
        OFF = (0, 0, 0)
        buf = bytearray(10)
        u.write(b"go")
        got = 0
        loops = 0
        deadline = time.ticks_add(time.ticks_ms(), 5000)
        micropython.heap_lock()
        try:
            while got < 200 and time.ticks_diff(deadline, time.ticks_ms()) > 0:
                loops += 1
                if u.any():
                    n = u.readinto(buf)
                    if n:
                        got += n
                        u.write(buf if n == 10 else b"")
                        p.value(loops & 1)
                        px[0] = ON if loops & 1 else OFF
                        px.write()
                else:
                    time.sleep_ms(1)
        finally:
            micropython.heap_unlock()
        print("received", got)
        """,
        {"ORGANBUS_SIM_UART1": peer.spec, "ORGANBUS_SIM_PINLOG": str(tmp_path / "pins.jsonl")},
        tmp=str(tmp_path),
    )
    assert "received 200" in r.stdout, r.stdout + r.stderr
    peer.t.join(5)
    assert len(peer.result.get("echo", b"")) == 200, peer.result


def test_pin_log_records_level_changes_with_epoch_times(tmp_path):
    log = tmp_path / "pins.jsonl"
    before = int(time.time() * 1000)
    r = run_mp(
        """
        import machine, micropython
        led = machine.Pin(8, machine.Pin.OUT, value=0)
        led.value(0)          # no change: not logged
        led.on()
        sw = machine.Pin(3, machine.Pin.IN, machine.Pin.PULL_UP)
        assert sw.value() == 1, "pull-up input reads 1"
        micropython.heap_lock()
        led.off()             # under heap_lock: kept in the ring, written later
        led.value(1)
        micropython.heap_unlock()
        led.toggle()
        print("done")
        """,
        {"ORGANBUS_SIM_PINLOG": str(log)},
        tmp=str(tmp_path),
    )
    after = int(time.time() * 1000)
    assert "done" in r.stdout, r.stdout + r.stderr
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(d["pin"], d["value"]) for d in lines] == [
        (8, 0),
        (8, 1),
        (8, 0),
        (8, 1),
        (8, 0),
    ], lines
    ts = [d["t_ms"] for d in lines]
    assert ts == sorted(ts) and before - 5 <= ts[0] and ts[-1] <= after + 5, (before, ts, after)


def test_neopixel_logs_colour_changes(tmp_path):
    log = tmp_path / "pins.jsonl"
    r = run_mp(
        """
        import machine, neopixel
        px = neopixel.NeoPixel(machine.Pin(8), 1)
        px[0] = (32, 16, 8); px.write()
        px.write()  # same colour: not logged again
        assert px[0] == (32, 16, 8), px[0]
        px.fill((0, 0, 0)); px.write()
        print("done")
        """,
        {"ORGANBUS_SIM_PINLOG": str(log)},
        tmp=str(tmp_path),
    )
    assert "done" in r.stdout, r.stdout + r.stderr
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(d["value"], d["rgb"]) for d in lines] == [(1, [32, 16, 8]), (0, [0, 0, 0])], lines


I2S_SCRIPT = """
import asyncio, machine, time
i2s = machine.I2S(0, sck=machine.Pin(1), ws=machine.Pin(2), sd=machine.Pin(3), mode=machine.I2S.TX,
                  bits=16, format=machine.I2S.MONO, rate=8000, ibuf=1600)
tone = bytearray(800)  # 400 samples = 50 ms at 8 kHz
for i in range(0, 800, 2):
    v = 8000 if (i // 2) % 20 < 10 else -8000
    tone[i] = v & 0xFF
    tone[i + 1] = (v >> 8) & 0xFF
async def play(n):
    w = asyncio.StreamWriter(i2s, {})
    for _ in range(n):
        w.write(tone)
        await w.drain()
async def main():
    t = time.ticks_ms()
    await play(20)                      # 1.0 s of audio through a 0.1 s buffer
    print("take1_ms", time.ticks_diff(time.ticks_ms(), t))
    await asyncio.sleep_ms(1200)        # the buffer runs dry: the next write is a new take
    i2s.write(tone)                     # blocking write
    print("done")
asyncio.run(main())
"""


def test_i2s_paces_at_the_sample_rate_and_writes_wav_takes(tmp_path):
    out = tmp_path / "audio"
    log = tmp_path / "pins.jsonl"
    r = run_mp(
        I2S_SCRIPT,
        {"ORGANBUS_SIM_WAV": str(out), "ORGANBUS_SIM_PINLOG": str(log)},
        tmp=str(tmp_path),
    )
    assert "done" in r.stdout, r.stdout + r.stderr
    take_ms = int(r.stdout.split("take1_ms ")[1].split()[0])
    assert take_ms >= 850, "1 s of audio queued in %d ms: not paced" % take_ms
    files = sorted(os.listdir(out))
    assert files == ["i2s0_001.wav", "i2s0_002.wav"], files
    with wave.open(str(out / files[0])) as w:
        assert (w.getframerate(), w.getsampwidth(), w.getnchannels()) == (8000, 2, 1)
        assert w.getnframes() == 8000, w.getnframes()
    with wave.open(str(out / files[1])) as w:
        assert w.getnframes() == 400, w.getnframes()
    takes = [json.loads(x) for x in log.read_text().splitlines()]
    assert [t["wav"] for t in takes] == [str(out / f) for f in files], takes


def test_i2s_single_wav_file_appends_every_take(tmp_path):
    dest = tmp_path / "all.wav"
    r = run_mp(I2S_SCRIPT, {"ORGANBUS_SIM_WAV": str(dest)}, tmp=str(tmp_path))
    assert "done" in r.stdout, r.stdout + r.stderr
    with wave.open(str(dest)) as w:
        assert w.getnframes() == 8400, w.getnframes()


def test_reset_exits_with_the_restart_code(tmp_path):
    r = run_mp(
        """
        import machine
        print(machine.unique_id(), machine.reset_cause() == machine.PWRON_RESET)
        print(hasattr(machine, "SIM"))
        machine.reset()
        print("not reached")
        """,
        launch.sim_env(role="led"),
        tmp=str(tmp_path),
    )
    assert r.returncode == 75, (r.returncode, r.stdout, r.stderr)
    want = ["b'SIM-led' True", "False", '{"event": "reset"}']
    assert r.stdout.splitlines() == want, "no machine.SIM for a board to sniff: " + r.stdout


def test_uart_with_nothing_attached_swallows_writes(tmp_path):
    r = run_mp(
        """
        import machine, network
        u = machine.UART(0)
        print(u.write(b"into the void"), u.read(), u.any())
        w = network.WLAN(network.STA_IF)
        w.active(True)
        print(w.isconnected(), w.ifconfig()[0])
        """,
        tmp=str(tmp_path),
    )
    assert r.stdout.split() == ["13", "None", "0", "True", "127.0.0.1"], r.stdout + r.stderr


def test_uart_listen_mode_accepts_the_other_end(tmp_path):
    port = free_port()
    p = subprocess.Popen(
        [
            micropython_exe(),
            "-c",
            textwrap.dedent("""
            import asyncio, machine
            u = machine.UART(1)
            print("ready")
            async def main():
                r = asyncio.StreamReader(u)
                buf = bytearray(8)
                got = b""
                while len(got) < 4:
                    n = await r.readinto(buf)
                    if n:  # None right after the accept, before bytes arrive: not an error
                        got += buf[:n]
                u.write(got.upper())
            asyncio.run(main())
            """),
        ],
        env=launch.sim_env({1: "listen:127.0.0.1:%d" % port}),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline().strip() == "ready"
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(b"wxyz")
        assert c.recv(10) == b"WXYZ"
        c.close()
    finally:
        p.kill()
        p.wait()


def test_i2s_takes_of_a_rebooted_board_do_not_overwrite_earlier_ones(tmp_path):
    out = tmp_path / "audio"
    for _ in range(2):
        r = run_mp(
            """
            import machine
            i2s = machine.I2S(0, mode=machine.I2S.TX, bits=16, format=machine.I2S.MONO, rate=8000, ibuf=1600)
            i2s.write(bytearray(160))
            print("done")
            """,
            {"ORGANBUS_SIM_WAV": str(out)},
            tmp=str(tmp_path),
        )
        assert "done" in r.stdout, r.stdout + r.stderr
    assert sorted(os.listdir(out)) == ["i2s0_001.wav", "i2s0_002.wav"], os.listdir(out)


def test_i2s_blocking_write_larger_than_its_buffer_is_paced(tmp_path):
    r = run_mp(
        """
        import machine, time
        i2s = machine.I2S(0, mode=machine.I2S.TX, bits=16, format=machine.I2S.MONO, rate=8000, ibuf=1600)
        pcm = bytearray(8000)  # 0.5 s through a 0.1 s buffer, in one blocking write
        t = time.ticks_ms()
        print(i2s.write(pcm), i2s.write(pcm))
        print("ms", time.ticks_diff(time.ticks_ms(), t))
        """,
        {"ORGANBUS_SIM_WAV": str(tmp_path / "a.wav")},
        tmp=str(tmp_path),
    )
    assert r.stdout.splitlines()[0] == "8000 8000", r.stdout + r.stderr
    ms = int(r.stdout.split("ms ")[1])
    assert ms >= 850, "1 s of audio queued in %d ms through a 0.1 s buffer" % ms
    with wave.open(str(tmp_path / "a.wav")) as w:
        assert w.getnframes() == 8000, w.getnframes()


def test_i2s_survives_ticks_wrapping_while_idle(tmp_path):
    r = run_mp(
        """
        import machine, time
        i2s = machine.I2S(0, mode=machine.I2S.TX, bits=16, format=machine.I2S.MONO, rate=8000, ibuf=1600)
        i2s.write(bytearray(160))
        # what a 10-minute pause looks like after ticks_us wrapped: the old end seems far ahead
        i2s._end_us = time.ticks_add(time.ticks_us(), 300000000)
        t = time.ticks_ms()
        i2s.write(bytearray(160))
        print("ms", time.ticks_diff(time.ticks_ms(), t))
        """,
        {"ORGANBUS_SIM_WAV": str(tmp_path / "audio")},
        tmp=str(tmp_path),
    )
    assert "ms" in r.stdout and int(r.stdout.split("ms ")[1]) < 100, r.stdout + r.stderr
    assert sorted(os.listdir(tmp_path / "audio")) == ["i2s0_001.wav", "i2s0_002.wav"]
