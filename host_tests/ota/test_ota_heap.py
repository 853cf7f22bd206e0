# The master's heap in the virtual body: the whole body at 64 KB for data, a whole-role update committed there, plans beside an update at the measured need, an update streaming in (printed; within 8 KB of idle).
#
# `--heap N` gives a board N bytes for data beside its code (docs/sim.md): every module the role
# installs, and the simulated machine module, is imported before main.py and counted as code.
# At 64 KB the master serves the tour (menu, plans, status) with both organs on and takes an
# update alone; plans beside an update run whole from 80 KB (tools/sim.py's one line; at 64 KB
# one of them meets a 503: tools/bench_ota.py, docs/master.md).
import os
import threading
import time

from e2e_support import VirtualBody, one_step
from support import AT_64K
from deploy import ota as tool
from master.ota import service as ota

KEY = "5a" * 32
TOKEN = "heap-token"
HEAP = "64k"
ALL = ["announce", "chime", "led_blink", "led_off", "led_on", "speak"]


def _peak(vb, t0, t1):
    return max(
        [
            e["alloc"]
            for e in vb.events
            if e.get("event") == "heap" and e.get("src") == "master" and t0 <= e["t"] <= t1
        ]
        or [0]
    )


def _refused_bundle():
    # 256 KB through the whole path in 41 files, as many as the master role has, refused only
    # at its last file's hash (no reset): the role's 5 entry modules (empty) and 36 pads of
    # 7,282 B. The manifest is read back entry by entry (was 8 files: at 64 KB for data a
    # 13-file manifest's digests, 416 B, found no free block: docs/master.md)
    files = [(m + ".py", b"") for m in ota.ENTRY]
    files += [("master/pad%d.bin" % i, os.urandom(7282)) for i in range(36)]
    data = bytearray(tool.bundle(bytes.fromhex(KEY), files, "heap"))
    data[-1] ^= 1
    return bytes(data)


def _unsigned_nested():
    raw = b"[" + b",".join([b"[[[[[[[]]]]]]]"] * 409) + b"]"  # 6,136 bytes, 8 deep
    return ota.MAGIC + bytes([len(raw) >> 8, len(raw) & 255]) + bytes(32) + raw


def _push_once_more(vb, data):
    # the server's generic 503 (no block for the request yet, Retry-After: 1) is honoured once
    m = tool.Master("http://%s:%d" % vb.http, TOKEN)
    status, answer = m.push(data)
    if status == 503 and "right now, try again" in answer.get("error", ""):
        time.sleep(1.0)
        status, answer = m.push(data)
    return status, answer


def _body(tmp_path, heap):
    return VirtualBody(
        out_dir=str(tmp_path),
        heap=heap,
        heap_report_ms=100,
        master_config={"http": {"token": TOKEN}, "ota": {"key": KEY}},
    ).start()


@AT_64K
def test_the_whole_body_at_64k_serves_the_tour_and_an_update_is_taken_or_refused_whole(tmp_path):
    vb = _body(tmp_path, "64k")
    try:
        assert vb.wait_http(30), "master HTTP never came up: %s" % vb.failure()
        started = [e for e in vb.events if e.get("event") == "started"]
        assert {e["src"] for e in started} == {"master", "led", "speaker"}, started
        assert all(e["data"] == 65536 and e["heap"] > e["code"] + 65536 for e in started), started
        assert vb.wait_menu(ALL, 30, exact=True) == ALL, "menu at 64 KB: %s" % (
            vb.menu_refusal or vb.failure()
        )
        for action in ("led_on", "chime"):
            status, rep = vb.plan(one_step(action))
            assert status == 200 and rep["ok"], (action, status, rep)
        status, doc = vb.request("GET", "/status")
        online = [p for p in doc.get("ports", ()) if p.get("online")]
        assert status == 200 and len(online) == 2, (status, doc)
        # an unsigned 6 KB manifest of nested empty lists: 403 once its bytes are in, never
        # "short of memory" (it used to be parsed as it came, a few thousand lists: 503)
        status, answer = _push_once_more(vb, _unsigned_nested())
        assert status == 403 and "signature does not match" in answer["error"], (status, answer)
        before = vb.request("GET", "/ota")[1]["result"]  # that 403
        status, answer = tool.Master("http://%s:%d" % vb.http, TOKEN).push(_refused_bundle())
        # read whole and refused at the last hash, or refused at once for want of heap, with
        # the reason: by the update service, or (the heap fragmented by what came before: seen
        # once in a run beside another) by the server before the upload's handler took a byte,
        # when nothing of the update was written; either way the running code goes on
        if status == 503 and "right now, try again" in answer["error"]:
            ota = vb.request("GET", "/ota")[1]
            assert ota["state"] == "running" and ota["result"] == before, ota
        elif status == 503:
            assert "short of memory for the update" in answer["error"], answer
            assert "short of memory" in vb.request("GET", "/ota")[1]["result"]["reason"]
        else:
            assert status == 422 and "master/pad35.bin" in answer["error"], (status, answer)
        # the body goes on after the update: the next plan runs, at once or (the upload's
        # leftovers still in a 64 KB heap: seen once in a CI run) after the one 503 "try
        # again" with Retry-After: 1 that a client is asked to honour
        status, rep = vb.plan(one_step("led_off"))
        if status == 503 and "right now, try again" in rep.get("error", ""):
            time.sleep(1.0)
            status, rep = vb.plan(one_step("led_off"))
        assert status == 200 and rep["ok"], (status, rep)
        assert vb.failure() is None, vb.failure()
    finally:
        vb.stop()


@AT_64K
def test_a_whole_role_update_is_taken_and_commits_at_64k(tmp_path):
    # the real master role's files, as `tools/flash.py master --ota` builds and signs them
    # (about 40 files, a 4.7 KB manifest): read back from the flash entry by entry, it is
    # taken at 64 KB for data (was 503 "short of memory ... reading its manifest", at 80 KB
    # too), the board resets into its trial and commits, and the tour's plans run after it
    vb = _body(tmp_path, "64k")
    key_file = os.path.join(str(tmp_path), "ota.key")
    with open(key_file, "w") as f:
        f.write(KEY + "\n")
    try:
        assert vb.wait_http(30), "master HTTP never came up: %s" % vb.failure()
        assert vb.wait_menu(ALL, 30, exact=True) == ALL, "menu at 64 KB: %s" % (
            vb.menu_refusal or vb.failure()
        )
        status, rep = vb.plan(one_step("led_on"))
        assert status == 200 and rep["ok"], (status, rep)
        built = []

        def count(files, arch, stage):
            built.append(files)
            return files

        url = "http://%s:%d" % vb.http
        assert tool.update(url, TOKEN, key_file, None, "whole", 90, count) == 0, vb.request(
            "GET", "/ota"
        )
        files = built[0]
        paths = [p for p, _ in files]
        assert len(files) >= 30, paths
        assert all(m + ".mpy" in paths or m + ".py" in paths for m in ota.ENTRY), paths
        doc = vb.request("GET", "/ota")[1]
        assert doc["version"] == "whole" and doc["state"] == "running", doc
        assert doc["result"]["ok"] and "committed" in doc["result"]["reason"], doc
        slot = os.path.join(vb.board("master").flash, doc["slot"])
        for p, data in files:  # the slot holds exactly what was signed
            with open(os.path.join(slot, p), "rb") as f:
                assert f.read() == data, p
        for action in ("led_off", "chime"):  # the new code serves the tour
            status, rep = vb.plan(one_step(action))
            if status == 503 and "right now, try again" in rep.get("error", ""):
                time.sleep(1.0)
                status, rep = vb.plan(one_step(action))
            assert status == 200 and rep["ok"], (action, status, rep)
        assert vb.failure() is None, vb.failure()
    finally:
        vb.stop()


@AT_64K
def test_heap_during_an_upload_stays_within_8k_of_idle(tmp_path):
    vb = _body(tmp_path, HEAP)
    try:
        assert vb.wait_http(30), "master HTTP never came up: %s" % vb.failure()
        assert vb.wait_menu(ALL, 30) is not None, "organs never on the menu: %s" % vb.failure()
        assert vb.plan(one_step("led_on"))[0] == 200
        t_idle = time.monotonic()
        time.sleep(2.0)
        t_up = time.monotonic()
        data = _refused_bundle()
        status, answer = tool.Master("http://%s:%d" % vb.http, TOKEN).push(
            data, lambda sent, total: time.sleep(0.02), chunk=2048  # >= 2.6 s: plans overlap it
        )
        time.sleep(0.3)
        t_end = time.monotonic()
        assert status == 422 and "master/pad35.bin" in answer["error"], (status, answer)
        # the refusal removed its stage and the manifest's scratch (a listing of the stage's
        # 36 pads at once found no block at 64 KB: the generic 503, the stage left behind)
        flash = vb.board("master").flash
        assert not os.path.exists(os.path.join(flash, ota.STAGE)), os.listdir(flash)
        assert not os.path.exists(os.path.join(flash, ota.SCRATCH)), os.listdir(flash)
        idle, during = _peak(vb, t_idle, t_up), _peak(vb, t_up, t_end)
        print(
            "ota heap (unix port, %s for data, both organs on): idle %d B, during a %d-byte"
            " upload %d B, +%d B" % (HEAP, idle, len(data), during, during - idle)
        )
        assert idle and during, "no heap reports from the master"
        assert during - idle <= 8192, "the upload took %d bytes above idle" % (during - idle)
    finally:
        vb.stop()


def test_plans_run_to_completion_while_an_update_uploads_at_the_measured_need(tmp_path):
    # at launch.DATA_NEEDS (80 KB; 64 KB still meets a 503 beside an upload: docs/master.md)
    from vbody import launch

    heap = "%dk" % (launch.DATA_NEEDS["master"] // 1024)
    vb = _body(tmp_path, heap)
    try:
        assert vb.wait_http(30), "master HTTP never came up: %s" % vb.failure()
        assert vb.wait_menu(ALL, 30) is not None, "organs never on the menu: %s" % vb.failure()
        idle = []
        for i in range(6):
            t0 = time.monotonic()
            idle.append(
                (vb.plan(one_step("led_on" if i % 2 else "led_off")), time.monotonic() - t0)
            )
        data = _refused_bundle()
        result = {}

        def upload():
            result["push"] = tool.Master("http://%s:%d" % vb.http, TOKEN).push(
                data, lambda sent, total: time.sleep(0.04), chunk=2048  # >= 5.2 s: plans overlap it
            )

        t = threading.Thread(target=upload)
        t_up = time.monotonic()
        t.start()
        during = []
        i = 0
        while t.is_alive():
            t0 = time.monotonic()
            during.append(
                (vb.plan(one_step("led_on" if i % 2 else "led_off")), time.monotonic() - t0)
            )
            i += 1
        t.join(60)
        upload_s = time.monotonic() - t_up
        status, answer = result["push"]
        assert status == 422 and "master/pad35.bin" in answer["error"], (status, answer)
        assert all(p[0] == 200 and p[1]["ok"] for p, _ in idle), idle
        bad = [p for p, _ in during if p[0] != 200 or not p[1].get("ok")]
        assert not bad, "plans refused or failed during the upload at %s: %s" % (heap, bad[:3])
        assert len(during) >= 5, "the upload was too short to overlap plans: %d" % len(during)
        worst_idle = max(dt for _, dt in idle)
        worst = max(dt for _, dt in during)
        print(
            "ota at %s: %d one-COMMAND plans during a %d-byte upload, slowest %.0f ms (idle %.0f)"
            % (heap, len(during), len(data), worst * 1000, worst_idle * 1000)
        )
        # no plan waits for the upload (the 100 ms is a speed target, measured by
        # tools/bench_ota.py, not a timed test): plans keep their pace, with a loaded machine's
        # slack (beside another suite run one plan in hundreds lost the CPU for 620..974 ms: the
        # 95th percentile, not the maximum), and none waits for a large part of the upload, as
        # a held bus would make one do
        dts = sorted(dt for _, dt in during)
        p95 = dts[int(0.95 * (len(dts) - 1))]
        assert p95 - worst_idle < 0.5, "plans took %.0f ms during the upload (95th pct)" % (
            p95 * 1000
        )
        assert worst < max(2.0, upload_s / 4), "a plan took %.0f ms of a %.0f ms upload" % (
            worst * 1000,
            upload_s * 1000,
        )
        assert vb.failure() is None, vb.failure()
    finally:
        vb.stop()


def test_the_simulator_says_in_one_line_what_the_master_needs():
    from vbody import launch

    note = launch.heap_note("master", "64k")
    assert note and "80 KB for data" in note and "\n" not in note, note
    assert (
        launch.heap_note("master", "80k") is None
        and launch.heap_note("master", "72k")
        and launch.heap_note("led", "64k") is None
    )
    for code in (1, 4096, 250000, 262144):  # the code, its GC tables (3 bits a 16-byte block)
        share = launch.code_share(code)
        need = code + code * 3 / 128
        assert share % 256 == 0 and need <= share < need + 256, (code, share)
    # the simulated UARTs' receive buffers are the machine's (a C6's driver keeps them outside
    # the heap): board.json's rxbuf of each UART wired
    assert launch.uart_share("master", {0: "a", 1: "b"}) == 2048
    assert launch.uart_share("master", {1: "b"}) == 1024
