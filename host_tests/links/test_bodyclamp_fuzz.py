# The clamping body reader against the strict reader on random bodies (CPython, hypothesis): every refusal the same, every value the same but for long strings cut to a prefix.
from hypothesis import given, settings, strategies as st

from organbus import jsonread
from master.links.bodyclamp import Clamp

LIMIT = 24  # small, so the random strings cross it often

PARTS = [b'{"text": "', b'"', b'", "', b'": "', b'"}', b"{", b"}", b"[", b"]", b",", b":", b" ",
         b"\\n", b"\\u00e9", b"\\ud83d\\ude00", b"\\ud83d", b"\\ude00", b"\\x", b"\\u12", b"\\",
         b"\xc3\xa9", b"\xe6\x97\xa5", b"\xf0\x9f\x98\x80", b"\xff", b"\xe0\x41", b"\xc3", b"\x01",
         b"1", b"-2.5e3", b"true", b"null", b"abc", b"a" * 30, b"\xc3\xa9" * 13, b'\\"',
         b"\\u", b"\\ud800\\u", b"\\udc00", b"\\uDBFF\\uDFFF", b"\\u00", b"\xed\xa0\x80",
         b"\\/\\b\\f\\r\\t", b"\x1f", b"\\\xc3\xa9", b"\\\x01", b"\\u12\xe6\x97\xa5"]  # fmt: skip


def _cut_ok(full, got):
    """`got` is `full` with every string at most a prefix of its own (same keys cut alike)."""
    if isinstance(full, str):
        return isinstance(got, str) and full.startswith(got) and len(got.encode()) <= LIMIT
    if isinstance(full, jsonread.Lone):
        return isinstance(got, jsonread.Lone) and got.esc == full.esc
    if isinstance(full, list):
        return (
            isinstance(got, list)
            and len(got) == len(full)
            and all(_cut_ok(a, b) for a, b in zip(full, got))
        )
    if isinstance(full, dict):
        return (
            isinstance(got, dict)
            and len(got) <= len(full)
            and all(
                any(_cut_ok(k, gk) and _cut_ok(v, got[gk]) for k, v in full.items()) for gk in got
            )
        )
    return full == got and type(full) is type(got)


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(PARTS), max_size=40), st.integers(1, 64))
def test_random_bodies_read_like_the_strict_reader(parts, size):
    body = b"".join(parts)
    pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    try:
        full = jsonread.read(body)[0]
    except jsonread.JsonError as e:
        full = e
    try:
        got = Clamp(8192, LIMIT).read(pieces)[0]
    except jsonread.JsonError as e:
        got = e
    if isinstance(full, jsonread.JsonError):
        assert isinstance(got, jsonread.JsonError) and got.msg == full.msg, (body, full.msg, got)
    else:
        assert not isinstance(got, jsonread.JsonError), (body, got.msg)
        assert _cut_ok(full, got), (body, full, got)
