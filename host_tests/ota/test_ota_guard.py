# What an update and a rollback may never do (issue 24): a replay, a rollback to failed, half-written or gone code, a refused upload's damage, an unsigned manifest parsed; both interpreters.
import gc
import sys

from master.ota import service as ota
from ota_rig import FILES, KEY, boot_module, booted, bundle, svc as _svc, tmp, tree, upload

UNIX_PORT = True
RV32 = False  # the RV32 image under QEMU has no writable file system
MP = sys.implementation.name == "micropython"


def _v(n):
    # the files of version n (each version's app differs, so a slot's files tell which it is)
    return [("master/app.py", b"print('app v%d')\n" % n)] + FILES[1:]


def _committed(d, versions):
    # versions [(name, seq)] uploaded and committed in turn: v1 in a, v2 in b, v3 in a ...
    s = _svc(d)[0]
    for name, seq in versions:
        r, _ = upload(s, bundle(_v(seq), name, seq=seq), 500)
        assert r["ok"], r
        s = booted(d)
    return s


def _choose(d):
    saved = list(sys.path)
    try:
        return boot_module().choose(d)
    finally:
        sys.path[:] = saved


def _app(d, slot):
    return tree(d + "/" + slot)["master/app.py"] if slot else None


def test_a_replayed_or_older_bundle_is_refused_409_with_both_numbers():
    d = tmp()
    v1 = bundle(_v(1), "v1", seq=1)
    v2 = bundle(_v(2), "v2", seq=2)
    s = _svc(d)[0]
    assert upload(s, v1, 500)[0]["ok"]
    s = booted(d)
    assert upload(s, v2, 500)[0]["ok"]
    s = booted(d)
    before = tree(d)
    for old, n in ((v1, 1), (v2, 2)):  # the captured bytes of either, pushed again
        r, _ = upload(s, old, 700)
        assert not r["ok"] and r["status"] == 409, r
        assert "sequence number %d is not newer than 2" % n in r["reason"], r
        assert tree(d) == before, "a refused replay changed the flash"
        doc = s.document()
        assert doc["version"] == "v2" and doc["state"] == "running" and doc["seq"] == 2, doc
        assert doc["highest_seq"] == 2 and doc["result"]["status"] == 409, doc
    # an explicit rollback to v1 lowers nothing: v2's bundle (seq 2) is no newer than that
    assert s.roll_back("asked") and _choose(d)[0] == "a"
    s = _svc(d)[0]
    assert s.document()["version"] == "v1" and s.document()["highest_seq"] == 2
    r, _ = upload(s, v2, 500)
    assert r["status"] == 409 and "2 is not newer than 2" in r["reason"], r
    # an older boot.py rewrites ota.json without the sequence numbers: the floor is its own file
    ota.write_state(d, {"slot": "a", "version": "v1", "previous": None, "state": "running"})
    s = _svc(d)[0]
    r, _ = upload(s, v1, 500)
    assert r["status"] == 409 and "1 is not newer than 2" in r["reason"], r
    # a newer one is taken, and the floor follows it
    r, _ = upload(s, bundle(_v(3), "v3", seq=3), 500)
    assert r["ok"] and s.document()["highest_seq"] == 3, (r, s.document())
    ota.rmtree(d)


def test_no_rollback_to_a_slot_that_failed_its_trial():
    d = tmp()
    s = _committed(d, [("v1", 1)])  # v1 in a, the USB install before it
    # v2 (in b) fails at boot: boot.py finds its trial booted already and goes back to v1
    assert upload(s, bundle(_v(2), "v2", seq=2), 500)[0]["ok"]
    assert _choose(d)[0] == "b"
    slot, note = _choose(d)
    assert slot == "a" and "did not commit" in note, (slot, note)
    s = _svc(d)[0]
    assert not s.roll_back("asked") and _choose(d)[0] == "a", "went back to the failed slot"
    doc = s.document()
    assert doc["version"] == "v1" and doc["previous"] is None and doc["previous_slot"] is None, doc
    why = s.rollback_refusal()
    assert "no known-good code to go back to" in why, why
    # the same when the trial's supervisor gives up (organs missing at the deadline)
    assert upload(s, bundle(_v(3), "v3", seq=3), 500)[0]["ok"]
    assert _choose(d)[0] == "b"
    s = _svc(d)[0]
    s.fail_trial("trial of 8000 ms ended: organs not registered again: led")
    assert s.st["slot"] == "a" and s.target() is None and not s.roll_back("asked"), s.st
    # an older boot.py's rollback names the failed slot as previous, without previous_ok
    ota.write_state(
        d,
        {
            "slot": "a",
            "version": "v1",
            "previous": "b",
            "previous_version": "v3",
            "state": "rolled_back",
            "result": {"ok": False, "reason": "rolled back: the trial of v3 did not commit"},
        },
    )
    s = _svc(d)[0]
    assert s.document()["previous"] is None and not s.roll_back("asked")
    assert "did not commit its trial" in s.rollback_refusal(), s.rollback_refusal()
    assert _choose(d)[0] == "a"
    ota.rmtree(d)


def test_no_rollback_while_an_upload_runs():
    d = tmp()
    s = _committed(d, [("v1", 1), ("v2", 2)])  # v2 in b, v1 in a its rollback target
    data = bundle(_v(3), "v3", seq=3)
    rx = s.receiver(len(data))
    rx.feed(data[: len(data) // 2])
    assert not s.roll_back("asked"), "a rollback was taken during an upload"
    assert s.st["slot"] == "b" and s.st["state"] == "running", s.st
    assert _choose(d)[0] == "b", "a rollback during the upload switched slots"
    why = s.rollback_refusal()
    assert "an update is uploading" in why, why
    rx.feed(data[len(data) // 2 :])
    rx.finish()
    assert s.ended(rx)["ok"] and s.st["slot"] == "a" and s.st["previous"] == "b", s.st
    assert _app(d, "a") == b"print('app v3')\n"
    ota.rmtree(d)


def test_a_refused_upload_leaves_the_rollback_target():
    d = tmp()
    s = _committed(d, [("v1", 1), ("v2", 2)])  # v2 runs in b; a (v1) is the rollback target
    keep = tree(d + "/a")
    # the next upload goes to slot a, the rollback target: refused at a file's hash, cut, or
    # unsigned, it leaves a whole
    good = bundle(_v(3), "v3", seq=3)
    bad = good[:-1] + bytes([good[-1] ^ 1])
    for data, cut, status in ((bad, None, 422), (good, len(good) - 40, 400)):
        r, _ = upload(s, data if cut is None else data[:cut], 300, len(data))
        assert r["status"] == status, r
        assert tree(d + "/a") == keep, "a refused upload changed the rollback target's files"
        doc = s.document()
        assert doc["previous"] == "v1" and doc["previous_slot"] == "a", doc
    assert not [k for k in tree(d) if k.startswith("new/") or k == ota.SCRATCH], tree(d)
    assert s.roll_back("asked") and _choose(d)[0] == "a"
    assert _app(d, "a") == b"print('app v1')\n", "the rollback ran other code than v1's"
    ota.rmtree(d)


def test_get_ota_never_names_a_version_whose_files_are_gone():
    d = tmp()
    s = _committed(d, [("v1", 1), ("v2", 2)])
    assert s.document()["previous"] == "v1"
    ota.rmtree(d + "/a")  # gone by other means (a hand on the REPL, a damaged file system)
    s = _svc(d)[0]
    doc = s.document()
    assert doc["previous"] is None and doc["previous_slot"] is None, doc
    assert "has no files" in s.rollback_refusal() and not s.roll_back("asked")
    # the running slot gone: boot.py runs the USB install and the state says so
    ota.rmtree(d + "/b")
    slot, note = _choose(d)
    assert slot == "" and "has no files" in note, (slot, note)
    doc = _svc(d)[0].document()
    assert doc["slot"] == "" and doc["version"] is None and doc["previous"] is None, doc
    ota.rmtree(d)


def test_a_bundle_without_the_roles_entry_modules_is_refused():
    d = tmp()
    s = _svc(d)[0]
    before = tree(d)
    r, _ = upload(s, bundle([("master/x.py", b"X = 1\n")], "one"), 500)
    assert r["status"] == 400 and "entry modules are missing" in r["reason"], r
    for m in ota.ENTRY:
        assert m in r["reason"], (m, r["reason"])
    without = [f for f in FILES if not f[0].startswith("master/ota/routes")]
    r, _ = upload(s, bundle(without, "no-otalink"), 500)
    assert r["status"] == 400 and r["reason"].endswith(": master/ota/routes"), r
    assert tree(d) == before and s.document()["version"] is None
    assert upload(s, bundle(FILES, "whole"), 500)[0]["ok"]  # .py or .mpy (master/ota/service.mpy)
    ota.rmtree(d)


def _nested_manifest(limit=ota.MAX_MANIFEST):
    # empty containers nested 8 deep, as many as fit: a few thousand lists once parsed
    item = b"[[[[[[[]]]]]]]"
    n = (limit - 2) // (len(item) + 1)
    return b"[" + b",".join([item] * n) + b"]"


def _peak_while(feed):
    if MP:
        gc.collect()
        base = gc.mem_alloc()
        peak = 0
        for _ in feed():
            gc.collect()  # what the upload keeps alive
            peak = max(peak, gc.mem_alloc() - base)
        return peak
    import tracemalloc

    tracemalloc.start()
    for _ in feed():
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_the_manifest_is_not_parsed_before_its_signature_matches():
    raw = _nested_manifest()
    assert 6000 < len(raw) <= ota.MAX_MANIFEST
    for sig in (bytes(32), ota.hmac_sha256(b"another key, not the board's", raw)):
        data = ota.MAGIC + bytes([len(raw) >> 8, len(raw) & 255]) + sig + raw
        d = tmp()
        s, _ = _svc(d)
        before = tree(d)
        rx = s.receiver(len(data))
        err = []

        def feed():
            try:
                for i in range(0, len(data), 256):
                    rx.feed(memoryview(data)[i : i + 256])
                    yield i
            except ota.OtaError as e:
                err.append(e)

        peak = _peak_while(feed)
        assert err and err[0].status == 403 and "signature" in err[0].reason, err
        s.ended(rx, err[0])
        print("unsigned 6 KB manifest of nested lists: peak %d bytes while it came" % peak)
        assert peak < 4096, "an unsigned manifest took %d bytes of heap (parsed?)" % peak
        assert tree(d) == before, "the refused manifest left something on the flash"
        ota.rmtree(d)


def test_a_file_and_a_folder_of_one_name_are_refused():
    for pair in (
        [("q", b"1"), ("q/y.py", b"2")],
        [("q/y.py", b"2"), ("q", b"1")],
        [("m/q", b"1"), ("m/q/r/s.py", b"2")],
    ):
        d = tmp()
        s = _svc(d)[0]
        before = tree(d)
        r, _ = upload(s, bundle(FILES + pair, "clash"), 500)
        assert r["status"] == 400 and "is a file and the folder of" in r["reason"], (pair, r)
        assert tree(d) == before and not s.busy
        ota.rmtree(d)


def _many(n):
    # the role's entry modules and n more small modules: a manifest of the whole role's size
    return FILES + [("m/f%02d.mpy" % i, b"m%d" % i) for i in range(n)]


def test_the_heap_does_not_grow_with_the_number_of_files():
    # the manifest is read back from the flash entry by entry, at its check and as each file
    # comes: a bundle of 52 files keeps a few bytes a file more than one of 8 (the list of
    # entries, or its paths and digests, was 1.9 KB for 8 and 9 KB for 40: 503 at 64 KB)
    peaks = []
    for n in (1, 45):
        data = bundle(_many(n), "many")
        m = (data[6] << 8) | data[7]
        assert 4700 < m <= ota.MAX_MANIFEST if n > 1 else m < 1000, m
        d = tmp()
        s = _svc(d)[0]
        rx = s.receiver(len(data))

        def feed():
            for i in range(0, len(data), 256):
                rx.feed(memoryview(data)[i : i + 256])
                yield i

        peaks.append(_peak_while(feed))
        rx.finish()
        assert s.ended(rx)["ok"], s.document()
        got = tree(d + "/a")
        assert all(got[p] == b for p, b in _many(n)) and len(got) == len(_many(n)), sorted(got)
        ota.rmtree(d)
    print("peak heap while a bundle comes: 8 files %d B, 52 files %d B" % tuple(peaks))
    assert peaks[1] - peaks[0] <= 44 * 16, "44 files more took %d bytes more" % (
        peaks[1] - peaks[0]
    )


def test_paths_of_one_hash_are_compared_exactly():
    # two paths of one 24-bit hash (the check keeps only the paths' hashes; a match is read
    # again from the flash): found by a search over "m/c%d.py"
    a, b = "m/c161499.py", "m/c200154.py"
    assert a != b and ota.path_hash(a) == ota.path_hash(b)
    for extra in ([(a, b"1"), (b, b"2")], [(a, b"1"), (b + "/z.py", b"2")]):
        d = tmp()
        s = _svc(d)[0]
        r, _ = upload(s, bundle(FILES + extra, "hash"), 300)
        assert r["ok"], (extra, r)
        assert [tree(d + "/a")[p] for p, _ in extra] == [v for _, v in extra]
        ota.rmtree(d)
    for extra, words in (
        ([(a, b"1"), (a, b"2")], "%r is listed twice" % a),
        ([(a + "/z.py", b"1"), (a, b"2")], "%r is a file and the folder of" % a),
    ):
        d = tmp()
        s = _svc(d)[0]
        r, _ = upload(s, bundle(FILES + extra, "hash"), 300)
        assert r["status"] == 400 and words in r["reason"], (extra, r)
        ota.rmtree(d)


def test_the_manifests_refusals_keep_their_order_when_read_entry_by_entry():
    for raw, words in (
        # the JSON first, though an entry before the error is wrong
        (b'{"version": "1", "seq": 1, "files": [{"path": "/x"}, {"path": ', "not JSON"),
        # the head (after the files here) before its entries
        (b'{"files": [{"path": "/x"}], "version": 5, "seq": 1}', "version must be a string"),
        (b'{"files": [{"path": "/x"}], "version": "1"}', "seq (the update's sequence number)"),
        (b'{"version": "1", "seq": 1, "files": [' + b",".join([b"{}"] * 97) + b"]}", "1 to 96"),
        (b'{"version": "1", "seq": 1, "files": {"path": "x"}}', "files must be a list"),
        (b'{"version": "1", "seq": 1, "files": [5]}', "each file must be an object"),
        (b'{"version": "1", "seq": 1, "files": [{"path": "x", "size": -1}]}', "size must be"),
        (b'{"version": "1", "seq": 1, "files": [{"path": "x", "path": "y"}]}', "duplicate key"),
    ):
        d = tmp()
        s = _svc(d)[0]
        data = ota.bundle_head(KEY, raw) + raw
        r, _ = upload(s, data, 200)
        assert r["status"] == 400 and words in r["reason"], (raw[:60], r)
        ota.rmtree(d)


def test_a_flash_error_reading_a_files_entry_says_where():
    data = bundle(FILES, "entry")
    m = (data[6] << 8) | data[7]
    d = tmp()
    s = _svc(d)[0]
    before = tree(d)
    rx = s.receiver(len(data))
    rx.feed(data[: 40 + m + len(FILES[0][1])])  # the manifest and file 1; file 2 is open

    def broken():
        raise OSError(5)

    rx.writer.manifest = broken  # the flash fails as file 3's entry is read again
    try:
        rx.feed(data[40 + m + len(FILES[0][1]) :])
        raise AssertionError("the flash's error was lost")
    except OSError:
        pass
    assert rx.where() == "reading the entry of file 3 of %d" % len(FILES), rx.where()
    r = s.ended(rx, ota.OtaError(500, "flash: " + rx.where()))
    assert r["status"] == 500 and not s.busy
    assert not ota._is_dir(d + "/new") and tree(d) == before, tree(d)
    ota.rmtree(d)
