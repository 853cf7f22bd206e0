# The update's sans-IO core (master/ota/service.py) and the boot step (boards/c6_master/boot.py), on both interpreters.
import gc
import hashlib
import json
import sys

from master.ota import service as ota
from ota_rig import FILES, KEY, boot_module as _boot, bundle, hexd as _hex, svc as _svc
from ota_rig import tmp as _tmp, tree as _tree, upload as _upload

UNIX_PORT = True
RV32 = False  # the RV32 image under QEMU has no writable file system (no VfsLfs2, no VfsFat)
MP = sys.implementation.name == "micropython"


def test_hmac_rfc4231_case2():
    got = ota.hmac_sha256(b"Jefe", b"what do ya want for nothing?")
    want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert _hex(got) == want, _hex(got)
    long_key = ota.hmac_sha256(b"k" * 100, b"m")
    assert len(long_key) == 32 and long_key != ota.hmac_sha256(b"k" * 64, b"m")


def test_good_bundle_goes_to_the_inactive_slot_in_any_pieces():
    for step in (1, 7, 1000, 100000):
        d = _tmp()
        before = _tree(d)
        svc, lines = _svc(d)
        result, rx = _upload(svc, bundle(FILES), step)
        assert result["ok"], result
        t = _tree(d)
        for p, data in FILES:
            assert t["a/" + p] == data, (step, p)
        for k in before:
            assert t[k] == before[k], "running code changed: " + k
        st = json.loads(t["ota.json"])
        assert st["state"] == "trial" and st["slot"] == "a" and st["version"] == "2.0", st
        assert st["previous"] == "" and st["organs"] == ["led"] and st["boots"] == 0, st
        assert lines[-1][0] == "ota" and ("result", "trial") in lines[-1][1], lines
        assert svc.document()["state"] == "trial"
        ota.rmtree(d)


def _refused(data, status, words, token="t", key=KEY, cut=None):
    d = _tmp()
    before = _tree(d)
    svc, lines = _svc(d, token, key)
    length = len(data)
    if cut is not None:
        data = data[:cut]
    try:
        result, rx = _upload(svc, data, 64, length)
    except ota.OtaError as e:  # refused before any byte (the token)
        svc.refuse(e.status, e.reason)
        result = svc.last
    assert not result["ok"] and result["status"] == status, (result, status)
    assert words in result["reason"], (result["reason"], words)
    assert _tree(d) == before, "something was written: %r" % sorted(_tree(d))
    doc = svc.document()
    assert doc["state"] == "running" and doc["result"]["reason"] == result["reason"], doc
    assert lines and ("result", "refused") in lines[-1][1], lines
    ota.rmtree(d)


def test_wrong_hash_refused_with_the_reason_slot_removed():
    bad = ["0" * 64] + [_hex(hashlib.sha256(data).digest()) for _, data in FILES[1:]]
    _refused(bundle(FILES, digests=bad), 422, "master/app.py: SHA-256 does not match")


def test_bad_signature_403_nothing_written():
    _refused(bundle(FILES, key=b"another key, not the board's one"), 403, "signature")
    _refused(bundle(FILES), 403, "no update key", key=None)


def test_missing_token_401_nothing_written():
    _refused(bundle(FILES), 401, "bearer token", token=None)


def test_cut_upload_leaves_the_old_code():
    data = bundle(FILES)
    _refused(data, 400, "upload ended after 20 bytes, in its head", cut=20)
    _refused(data, 400, "inside master/app.py", cut=len(data) - 300)


def test_manifest_refusals():
    _refused(b"NOTOTA" + bytes(200), 400, "no OBOTA1 magic")
    n = ota.MAX_MANIFEST + 1
    big = ota.MAGIC + bytes([n >> 8, n & 255]) + bytes(32) + bytes(100)
    _refused(big, 413, "manifest of %d bytes, the limit is %d" % (n, ota.MAX_MANIFEST))
    _refused(bundle([("../boot.py", b"x")]), 400, "may not hold . or ..")
    _refused(bundle([("/abs", b"x")]), 400, "must be relative")
    _refused(bundle([("main.py", b"x")]), 400, "root file")
    _refused(bundle([("a b", b"x")]), 400, "has the character")
    _refused(bundle([("x", b"1"), ("x", b"1")]), 400, "listed twice")
    _refused(bundle(FILES) + b"extra", 400, "the manifest makes")
    raw = b'{"version": "1", "version": "2", "files": []}'
    _refused(ota.bundle_head(KEY, raw) + raw, 400, "duplicate key")
    raw = b'{"version": "1", "seq": 1, "files": []}'
    _refused(ota.bundle_head(KEY, raw) + raw, 400, "files must be a list of 1 to 96")
    for seq in (b"", b', "seq": 0', b', "seq": true', b', "seq": "5"', b', "seq": 2147483648'):
        raw = b'{"version": "1"' + seq + b', "files": [{"path": "x", "size": 0, "sha256": "'
        raw += b"0" * 64 + b'"}]}'
        _refused(ota.bundle_head(KEY, raw) + raw, 400, "seq (the update's sequence number)")


def test_heap_bounded_while_streaming():
    data = bundle([("master/big.py", bytes(range(256)) * 256), FILES[0]] + FILES[3:])
    d = _tmp()
    svc, _ = _svc(d)
    rx = svc.receiver(len(data))
    chunk = bytearray(1024)
    mv = memoryview(data)
    if MP:
        gc.collect()
        base = gc.mem_alloc()
        peak = 0
        for i in range(0, len(data), 1024):
            n = min(1024, len(data) - i)
            chunk[:n] = mv[i : i + n]
            rx.feed(memoryview(chunk)[:n])
            gc.collect()  # what the update keeps alive (its garbage goes at the next collect)
            peak = max(peak, gc.mem_alloc() - base)
    else:
        import tracemalloc

        tracemalloc.start()
        for i in range(0, len(data), 1024):
            n = min(1024, len(data) - i)
            chunk[:n] = mv[i : i + n]
            rx.feed(memoryview(chunk)[:n])
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    rx.finish()
    print("ota heap: peak %d bytes above the start while streaming %d bytes" % (peak, len(data)))
    assert peak < 8192, "streaming took %d bytes of heap" % peak
    assert svc.ended(rx)["ok"]
    ota.rmtree(d)


def test_trial_gets_one_boot_then_rolls_back():
    boot = _boot()
    d = _tmp()
    svc, _ = _svc(d)
    assert _upload(svc, bundle(FILES), 500)[0]["ok"]
    saved = list(sys.path)
    try:
        slot, note = boot.choose(d)
        assert slot == "a" and note is None and sys.path[0].endswith(d + "/a"), (slot, sys.path[0])
        assert ota.read_state(d)["boots"] == 1
        slot, note = boot.choose(d)  # booted again before a commit: back to the root's code
        assert slot == "" and "did not commit" in note and "2.0" in note, (slot, note)
        st = ota.read_state(d)
        assert st["state"] == "rolled_back" and st["version"] is None, st
        # the slot that failed its trial is never a rollback target
        assert st["previous"] is None and not st["previous_ok"] and not st["result"]["ok"], st
    finally:
        sys.path[:] = saved
    ota.rmtree(d)


def test_commit_then_next_update_goes_to_the_other_slot_and_rollback_returns():
    boot = _boot()
    d = _tmp()
    svc, _ = _svc(d)
    assert _upload(svc, bundle(FILES, "2.0"), 500)[0]["ok"]
    saved = list(sys.path)
    try:
        boot.choose(d)
        svc = _svc(d)[0]
        assert svc.trial_check(False) == "the HTTP server has not answered"
        assert svc.trial_check(True) == ""
        svc.commit("test")
        assert boot.choose(d) == ("a", None) and ota.read_state(d)["state"] == "running"
        r, rx = _upload(svc, bundle(FILES, "3.0"), 500)
        assert r["ok"] and rx.writer.dir == d + "/b", rx.writer.dir
        assert boot.choose(d)[0] == "b"
        svc = _svc(d)[0]
        svc.commit("test")
        assert svc.roll_back("asked")
        st = ota.read_state(d)
        assert st["slot"] == "a" and st["version"] == "2.0" and st["state"] == "rolled_back", st
        assert boot.choose(d)[0] == "a"
    finally:
        sys.path[:] = saved
    ota.rmtree(d)


def test_no_upload_during_a_trial():
    d = _tmp()
    svc, _ = _svc(d)
    assert _upload(svc, bundle(FILES), 500)[0]["ok"]
    try:
        svc.receiver(10)
        raise AssertionError("an upload started during a trial")
    except ota.OtaError as e:
        assert e.status == 409 and "on trial" in e.reason
    ota.rmtree(d)
