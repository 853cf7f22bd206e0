# A board's own main.py on the unix port with simulated machine, its UART on a test's socket.
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

from organbus import frame
from support import ROOT, launch


class DirectBoard:
    """A copy of a board's main.py and edited board.json, run on the unix port with simulated
    machine, its UART on this test's socket (no cable in between). `without_voice` installs
    the organs package without organs/voice, as a speaker board without the voice engine."""

    def __init__(self, role_dir, edit=None, without_voice=False, wav_dir=False, timeout=5):
        self.tmp = tempfile.mkdtemp(prefix="organ-direct-")
        shutil.copy(os.path.join(ROOT, "boards", role_dir, "main.py"), self.tmp)
        with open(os.path.join(ROOT, "boards", role_dir, "board.json")) as f:
            cfg = json.load(f)
        if edit:
            edit(cfg)
        with open(os.path.join(self.tmp, "board.json"), "w") as f:
            json.dump(cfg, f)
        uart = "connect:127.0.0.1:%d"  # filled in once the test's socket listens
        with open(os.path.join(self.tmp, "settings.json"), "w") as f:
            json.dump(launch.host_settings({1: uart}), f)
        path = [launch.SIMHW, launch.micropypath(os.path.join(ROOT, "tools"), simhw=False)]
        if without_voice:
            lib = os.path.join(self.tmp, "lib")
            shutil.copytree(
                os.path.join(ROOT, "organs"),
                os.path.join(lib, "organs"),
                ignore=shutil.ignore_patterns("voice", "__pycache__"),
            )
            path.insert(1, lib)
        self.pinlog = os.path.join(self.tmp, "pins.jsonl")
        # a folder gets one WAV per take, a file every take appended
        self.wav = os.path.join(self.tmp, "wav" if wav_dir else "audio.wav")
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.ls.settimeout(20)
        env = launch.sim_env(
            {1: uart % self.ls.getsockname()[1]}, self.pinlog, self.wav, path=":".join(path)
        )
        self.proc = subprocess.Popen(
            [launch.micropython_exe(), os.path.join(self.tmp, "main.py")],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.conn, _ = self.ls.accept()
        self.conn.settimeout(timeout)
        self.got = []
        self.dec = frame.Decoder(lambda t, p, n: self.got.append((t, bytes(p[:n]))))

    def wait(self, ftype):
        while True:
            for i, (t, p) in enumerate(self.got):
                if t == ftype:
                    del self.got[: i + 1]
                    return p
            data = self.conn.recv(1024)
            assert data, "the board closed its UART"
            self.dec.feed(data)

    def command(self, payload):
        self.conn.sendall(frame.encode(frame.COMMAND, payload))
        p = self.wait(frame.COMMAND_RESP)
        assert len(p) == 1, p
        return p[0]

    def stop(self):
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=10)
        self.ls.close()
        self.conn.close()
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        return lines, err

    def remove(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
