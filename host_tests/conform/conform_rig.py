# Runs tools/conform.py against boards under tools/sim.py board, or against the test fixtures.
import json
import os
import signal
import subprocess
import sys
import time

from support import ROOT, free_port

PY = sys.executable
CONFORM = os.path.join(ROOT, "tools", "conform.py")
SIM = os.path.join(ROOT, "tools", "sim.py")


class Kit:
    """tools/conform.py ROLE --uart listen:127.0.0.1:PORT --json ...; started() once it listens."""

    def __init__(self, role, port, args=(), spec=None):
        self.port = port
        spec = spec or "listen:127.0.0.1:%d" % port
        self.proc = subprocess.Popen(
            [PY, CONFORM, role, "--uart", spec, "--json"] + list(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        line = self.proc.stderr.readline()
        assert line.startswith(("conform: waiting on", "conform: opening on")), (
            "the kit did not start: %r" % line
        )

    def result(self, timeout=180):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError("the kit did not finish in %d s: %s" % (timeout, err[-2000:]))
        assert out.strip(), "the kit printed no report (exit %s): %s" % (
            self.proc.returncode,
            err[-2000:],
        )
        report = json.loads(out.strip().splitlines()[-1])
        report["exit"] = self.proc.returncode
        return report


def statuses(report):
    return {row["rule"]: row["status"] for row in report["rules"]}


def failed(report):
    return {row["rule"]: row["detail"] for row in report["rules"] if row["status"] == "fail"}


class SimBoard:
    """tools/sim.py board ROLE with its UART dialling the kit (the board powers up on the cable)."""

    def __init__(self, role, kit_port, out_dir, uart=1, http_port=None, more=()):
        """more: further (uart, kit_port) pairs (the master's second organ port)."""
        cmd = [PY, SIM, "board", role]
        for n, p in [(uart, kit_port)] + list(more):
            cmd += ["--uart", "%d=connect:127.0.0.1:%d" % (n, p)]
        cmd += ["--out", str(out_dir)]
        if http_port:
            cmd += ["--http", "127.0.0.1:%d" % http_port]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
        )

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stderr.close()


def wait_http(port, timeout=20):
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/menu" % port, timeout=2):
                return True
        except OSError:
            time.sleep(0.1)
    return False


__all__ = ["Kit", "SimBoard", "failed", "free_port", "statuses", "wait_http"]
