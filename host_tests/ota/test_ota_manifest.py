# The update's manifest read as it streams in (master/ota/service.py ManifestReader): the strict reader's values from any split, and its refusals.
import hashlib
import json

from master.ota import service as ota
from organbus import jsonread

UNIX_PORT = True


def _manifest(n):
    files = []
    for i in range(n):
        d = b"file %d" % i
        files.append({"path": "master/m%d.mpy" % i, "size": len(d), "sha256": _hex(d)})
    return json.dumps({"version": "v1-\u00e9", "seq": 7, "files": files}).encode()


def _hex(data):
    return "".join("%02x" % b for b in hashlib.sha256(data).digest())


def _read(raw, step):
    r = ota.ManifestReader()
    for i in range(0, len(raw), step):
        r.feed(memoryview(raw)[i : i + step])
    return r.finish()


def test_values_as_the_strict_reader_gives_them_from_any_split():
    samples = [
        _manifest(1),
        _manifest(40),
        b' { "a" : [ 1, -2, 0, true, false, null, "x\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9" ], "b": {} } ',
        b'{"version": "1", "version": "2", "files": [[], {"k": 1, "k": 2}]}',
    ]
    for raw in samples:
        want = jsonread.read(raw)
        for step in (1, 2, 7, 64, len(raw)):
            doc, dups = _read(raw, step)
            assert doc == want[0], (raw[:60], step, doc)
            assert [k for _, k in dups] == [k for _, k in want[1]], (dups, want[1])


def test_manifest_of_a_streamed_manifest():
    version, seq, files = ota.manifest_of(*_read(_manifest(3), 5))
    assert (
        version == "v1-\u00e9"
        and seq == 7
        and [f[0] for f in files]
        == [
            "master/m0.mpy",
            "master/m1.mpy",
            "master/m2.mpy",
        ]
    )
    assert files[1][1] == 6 and files[1][2] == hashlib.sha256(b"file 1").digest()


def test_refusals_name_the_byte():
    for raw, words in (
        (b'{"a": 1} x', "data after the manifest's value"),
        (b'{"a": 1', "ends inside its value"),
        (b'{"a": "x', "ends inside its value"),
        (b'{"a" 1}', "where a colon belongs"),
        (b'{"a": 1 "b": 2}', "where a comma or the end belongs"),
        (b"{1: 2}", "where a key belongs"),
        (b'{"a": ]}', "where a value belongs"),
        (b'{"a": 01}', "is not a number"),
        (b'{"a": 1.5}', "is not a number"),
        (b'{"a": tru}', "is not a number"),
        (b'{"a": "\x01"}', "control character"),
        (b'{"a": "\\q"}', "bad escape"),
        (b'{"a": "\\u12g4"}', "bad \\u escape"),
        (b'{"a": "\\ud800"}', "surrogate"),
        (b'{"a": "\xff"}', "not UTF-8"),
        (b'{"a": "' + b"x" * 200 + b'"}', "longer than 128 bytes"),
        (b"[" * 9 + b"]" * 9, "nested deeper than 8"),
    ):
        for step in (1, 3, len(raw)):
            try:
                _read(raw, step)
                assert False, "read %r" % raw
            except ValueError as e:
                assert words in str(e) and " at byte " in str(e), (raw, str(e))


def test_a_manifest_is_never_held_whole():
    # a 40-file manifest (4.5 KB, the whole role's size) streams through one 128-byte token:
    # what the reader keeps is its values, never a buffer of the manifest's size
    raw = _manifest(40)
    r = ota.ManifestReader()
    assert len(r.tok) == 128 and len(raw) > 4000
    for i in range(0, len(raw), 256):
        r.feed(memoryview(raw)[i : i + 256])
    doc, dups = r.finish()
    assert len(doc["files"]) == 40 and not dups
    assert not [
        k
        for k in r.__dict__
        if isinstance(getattr(r, k), (bytes, bytearray)) and len(getattr(r, k)) > 128
    ]


def test_entries_are_handed_out_one_at_a_time_from_any_split():
    raw = _manifest(5)
    want = json.loads(raw)
    for step in (1, 3, 64, len(raw)):
        r = ota.ManifestReader(True)
        got = []
        for i in range(0, len(raw), step):
            piece = memoryview(raw)[i : i + step]
            k = 0
            while k < len(piece):
                k += r.feed(piece[k:])
                if r.ready:  # it stopped after the byte that ended the entry
                    assert raw[r.at - 1 : r.at] == b"}", (step, r.at)
                    got.append(r.entry)
                    r.ready = False
                    r.entry = None
        doc, dups = r.finish()
        assert got == want["files"] and doc["files"] == [] and not dups, (step, got)
        assert doc["version"] == want["version"] and doc["seq"] == 7
    # only the top object's files: a files list deeper down is kept whole
    r = ota.ManifestReader(True)
    r.feed(b'{"x": {"files": [{"a": 1}]}, "files": [[1], 2]}')
    assert r.ready and r.entry == [1]
