# Paths and launchers shared by the host tests (CPython side).
import os
import signal
import subprocess
import sys

import pytest

HELPERS = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HELPERS)
ROOT = os.path.dirname(TESTS)
DATA = os.path.join(TESTS, "data")
VECTORS = os.path.join(
    DATA, "v3_vectors.json"
)  # the Protocol V3 conformance vectors, kept in the repo
sys.path.insert(0, os.path.join(ROOT, "tools"))
# one launcher: the tests find the unix port and pick ports the way the simulator does
from vbody import launch  # noqa: E402
from vbody.launch import free_port, micropython_exe, mpy_cross_exe  # noqa: E402,F401

# the device tree without the simulated hardware, then the test helpers and tools/
MICROPYPATH = launch.micropypath(HELPERS, os.path.join(ROOT, "tools"), simhw=False)


# The 64 KB tests of the update and the tour: expected to fail, not strictly, while issue 28 is open.

AT_64K = pytest.mark.xfail(
    reason="issue 28 open (the whole master in 64 KB): this wave's links and splits left the 64 KB "
    "stand-in about 1.5 KB less free at idle (14.1 -> 12.6 KB on the 64-bit unix port) and its "
    "heap in small holes: a plan or an upload here meets 503 short of memory now and then; "
    "80 KB, the documented need, holds (docs/master.md)",
    strict=False,
)


def run_micropython(args, heapsize=None, path=MICROPYPATH, timeout=120, **kw):
    """Run the unix port with the project's import path; returns CompletedProcess."""
    cmd = [micropython_exe()]
    if heapsize:
        cmd += ["-X", "heapsize=%s" % heapsize]
    env = dict(os.environ, MICROPYPATH=path)
    return subprocess.run(
        cmd + list(args), env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw
    )


def popen_ctrl_c(args, **kw):
    """subprocess.Popen for a tool a test then stops with Ctrl-C (SIGINT).

    A process started while SIGINT is ignored keeps it ignored across exec, and Python then
    installs no KeyboardInterrupt handler: the tool would never stop. That is how a CI job run
    in the background of a script (bash sets SIGINT to ignored there) starts the suite. The tool
    is started as from a terminal: with SIGINT at its default.
    """
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # exec resets it to SIG_DFL
    try:
        return subprocess.Popen(args, **kw)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
