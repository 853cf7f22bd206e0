# Board processes of the virtual body: one board's main.py on the unix port, its pin log followed.
import json
import os
import subprocess
import sys
import threading
import time

from vbody import launch


class BoardProc:
    """One board's main.py on the unix port, its events read from stdout as JSON lines.

    `on_event(role, dict)` gets every line (non-JSON lines arrive as {"event": "print"}); a
    process that calls machine.reset() is started again, as a board would reboot.
    """

    def __init__(
        self,
        role,
        out_dir,
        uarts=None,
        on_event=None,
        http=None,
        console=None,
        heap=None,
        heap_report_ms=None,
        stdin=None,
        stdout_passthrough=False,
        pinlog=None,
        wav=None,
        settings=None,
        xiaozhi=None,
    ):
        self.role = role
        self.settings = settings  # board settings over the host's (tools/vbody/launch.py)
        self.flash = os.path.join(out_dir, role + ".board")  # the board's flash folder
        self.xiaozhi = xiaozhi  # master: the xiaozhi OTA URL its link is pointed at
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        self.uarts = dict(uarts or {})
        self.on_event = on_event
        self.http = http
        self.console = console
        self.heap = heap
        self.heap_report_ms = heap_report_ms
        self.stdin = stdin
        self.stdout_passthrough = stdout_passthrough
        self.pinlog = pinlog or os.path.join(out_dir, role + ".pins.jsonl")
        self.wav = wav or os.path.join(out_dir, role + "-audio")
        self.stderr_path = os.path.join(out_dir, role + ".stderr")
        self.proc = None
        self.last_stderr = None  # the board's last words: a traceback's error line, a crash line
        self.boots = 0
        self.exit_code = None
        self.stopping = False
        self.lock = threading.Lock()

    def start(self):
        launch_ = launch.Launch(
            self.role,
            self.flash,
            self.uarts,
            http=self.http,
            console=self.console,
            heap=self.heap,
            heap_report_ms=self.heap_report_ms,
            pinlog=self.pinlog,
            wav=self.wav,
            settings=self.settings,
            xiaozhi=self.xiaozhi,
        )
        with self.lock:
            self.stopping = False
            self.exit_code = None
            self.boots += 1
            self.proc = launch_.popen(
                stdin=self.stdin if self.stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                # Ctrl-C belongs to the simulator, which stops the boards itself; a board
                # whose simulator died sees EOF on its cable and exits
                start_new_session=True,
            )
            proc = self.proc
        ev = {"event": "started", "pid": proc.pid, "boot": self.boots}
        if launch_.heap:
            ev.update(heap=launch_.heap, code=launch_.code)
        self._emit(ev)
        threading.Thread(target=self._read_stdout, args=(proc,), daemon=True).start()
        threading.Thread(target=self._read_stderr, args=(proc,), daemon=True).start()
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def failure(self):
        """Why the board is gone when nobody stopped it (None while it runs or was stopped)."""
        with self.lock:
            code, stopping = self.exit_code, self.stopping
        if code is None or stopping or code == launch.RESET_EXIT_CODE:
            return None
        return "exited with code %s: %s" % (code, self.last_stderr or "(nothing on stderr)")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _emit(self, obj):
        if self.on_event:
            self.on_event(self.role, obj)

    def _read_stdout(self, proc):
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if self.stdout_passthrough:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            obj = None
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    obj = None
            if not isinstance(obj, dict):
                obj = {"event": "print", "line": line}
                if line.strip():
                    self.last_stderr = line.strip()  # MicroPython prints tracebacks on stdout
            elif obj.get("event") in ("crash", "refused", "error"):
                self.last_stderr = "%s: %s" % (
                    obj["event"],
                    obj.get("reason") or obj.get("error") or obj,
                )
            self._emit(obj)
        code = proc.wait()
        with self.lock:
            if proc is not self.proc:
                return
            self.exit_code = code
            stopping = self.stopping
        if code == launch.RESET_EXIT_CODE and not stopping:
            self._emit({"event": "reboot"})
            self.start()
        else:
            self._emit({"event": "exit", "code": code, "expected": stopping})

    def _read_stderr(self, proc):
        with open(self.stderr_path, "ab") as f:
            for raw in iter(proc.stderr.readline, b""):
                f.write(raw)
                f.flush()
                text = raw.decode("utf-8", "replace").strip()
                if text:
                    self.last_stderr = text
                self._emit({"event": "stderr", "line": raw.decode("utf-8", "replace").rstrip()})

    def stop(self, power_cut=False, timeout=3.0):
        with self.lock:
            self.stopping = True
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if power_cut:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def power_cycle(self, off_s=0.2):
        self.stop(power_cut=True)
        time.sleep(off_s)
        self.start()


class PinLogTail:
    """Follows a board's pin log (written by tools/simhw) and reports each new JSON line."""

    def __init__(self, path, on_line, period=0.05):
        self.path = path
        self.on_line = on_line
        self.period = period
        self.stop_flag = False
        self.pos = os.path.getsize(path) if os.path.exists(path) else 0
        self.seen = time.monotonic()  # every line written before this was reported
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        buf = b""
        while not self.stop_flag:
            started = time.monotonic()
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.pos)
                    chunk = f.read()
                    self.pos += len(chunk)
            except FileNotFoundError:
                chunk = b""
            if chunk:
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    try:
                        self.on_line(json.loads(line))
                    except ValueError:
                        pass
            self.seen = started
            time.sleep(self.period)

    def stop(self):
        self.stop_flag = True
        self.seen = float("inf")  # nothing more will come
