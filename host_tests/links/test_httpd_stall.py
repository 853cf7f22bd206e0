# Issue 17's 300-connection stall: bursts of concurrent clients against the virtual body's master (unix port), every one answered.
#
# The cause was the listen backlog (MicroPython's asyncio default, 5): in a burst the accept
# queue overflowed, Linux dropped the clients' final ACKs, and those clients, connected in
# their own view, waited for SYN-ACK retransmissions (1, 3, 7, 15, 31 s) before the server saw
# them. tools/bench_stall.py measures it (20 runs, figures in docs/links.md); this test runs a
# few bursts with a generous bound for a loaded 2-core machine (measured: under 0.5 s; before
# the fix, 48 to 99 of 300 clients had no answer after 30 s in each of 3 runs).
import asyncio
import os
import sys

import pytest

from support import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
from bench_stall import burst, listen_counters  # noqa: E402
from vbody.body import VirtualBody  # noqa: E402

sys.path.insert(0, ROOT)
from master.links import httpd  # noqa: E402

CLIENTS = 300
RUNS = 3
BOUND_S = 15.0  # each client's answer (status line) within this; measured under 0.7 s


@pytest.fixture(scope="module")
def body(tmp_path_factory):
    b = VirtualBody(out_dir=str(tmp_path_factory.mktemp("stall"))).start()
    try:
        assert b.wait_http(20), "the master's HTTP port did not open"
        yield b
    finally:
        b.stop()


def test_every_client_of_a_300_connection_burst_is_answered(body):
    host, port = body.http
    for k in range(RUNS):
        c0 = listen_counters()
        res = asyncio.run(burst(host, port, CLIENTS, BOUND_S))
        c1 = listen_counters()
        silent = [(why, round(t, 1)) for s, t, why in res if s is None]
        statuses = sorted(set(s for s, _, _ in res if s is not None))
        over = None if c0 is None else c1[0] - c0[0]
        assert not silent, (
            "run %d: %d of %d clients got no answer within %.0f s: %r (listen "
            % (
                k + 1,
                len(silent),
                CLIENTS,
                BOUND_S,
                silent[:8],
            )
            + "overflows %s)" % over
        )
        # 408: under heavy load (the whole suite on 2 cores) a served connection whose head the
        # loop had not read within reclaim_ms can be reclaimed for a newer client; an answer
        # all the same (docs/links.md)
        assert set(statuses) <= {200, 408, 429, 503}, statuses
        assert 200 in statuses and 503 in statuses, "some served, the rest over the bound"


@pytest.mark.parametrize("bad", [0, -1, "64", True, 2.5])
def test_backlog_must_be_a_positive_whole_number(bad):
    async def go():
        await httpd.serve({}, "127.0.0.1", 0, {"backlog": bad})

    with pytest.raises(ValueError, match="backlog must be a whole number"):
        asyncio.run(go())


def test_backlog_reaches_the_listening_socket():
    # Linux reports a listening socket's backlog as its Send-Q in `ss -ltn`
    import shutil
    import subprocess

    if not shutil.which("ss"):
        pytest.skip("no ss(8) here to read the listen backlog")

    async def go():
        s = await httpd.serve({}, "127.0.0.1", 0, {"backlog": 37})
        try:
            out = subprocess.run(
                ["ss", "-ltnH", "sport = :%d" % s.port], capture_output=True, text=True
            ).stdout
        finally:
            s.close()
            await s.wait_closed()
        return out

    fields = asyncio.run(go()).split()
    assert fields[:3] == ["LISTEN", "0", "37"], fields
