# The clamping body reader (master/links/bodyclamp.py) against the strict reader: the same values with long strings cut, the same refusals at the same offsets; CPython, the unix port, RV32.
import json

from organbus import jsonread
from organbus.utf8 import clip_text
from master.links.bodyclamp import Clamp, Overflow

UNIX_PORT = True

LIMIT = 240


def _pieces(body, size):
    return [body[i : i + size] for i in range(0, len(body), size)] or [b""]


def _read(body, size=512, buf=1024):
    """Clamp's reading of `body` split in pieces of `size`: (value, cut) or ("error", msg)."""
    try:
        value, dups, cut = Clamp(buf, LIMIT).read(_pieces(body, size))
        return value, cut
    except jsonread.JsonError as e:
        return "error", e.msg


def _strict(body):
    try:
        return jsonread.read(body)[0]
    except jsonread.JsonError as e:
        return "error", e.msg


def test_a_long_text_is_cut_where_the_master_clamps_it_in_any_pieces():
    for text in ("a" * 3900, "h\u00e9llo w\u00f6rld " * 300, "\u65e5\u672c\u8a9e" * 500,
                 "\U0001f600" * 900, "ab\u00e9" * 100):  # fmt: skip
        body = b'{"text": "' + text.encode() + b'", "x": 1}'  # the text as UTF-8, unescaped
        want = clip_text(text, LIMIT)
        for size in (1, 7, 512):
            value, cut = _read(body, size)
            assert value == {"text": want, "x": 1}, (text[:10], size, value)
            assert cut == ([len(text.encode())] if want != text else []), (cut, size)


def test_escaped_text_keeps_its_characters_whole_and_pairs_together():
    # \\n and \\u escapes count as the bytes they stand for, and the JSON they take at most
    # 2 * 240 bytes; a surrogate pair is one character, never cut in two
    for text in ('line\n\t"q" \\ /' * 100, "\U0001f600x" * 200, "\u00e9" * 400, "\x01" * 300):
        body = json.dumps({"text": text}).encode()  # ensure_ascii: \\uXXXX and pairs
        value, cut = _read(body, 5)
        got = value["text"]
        assert text.startswith(got) and len(got.encode()) <= LIMIT, (text[:8], got[:20])
        raw = len(json.dumps(got)) - 2
        assert (
            raw <= 2 * LIMIT and raw > 2 * LIMIT - 13 or len(got.encode()) > LIMIT - 4
        ), "kept up to a limit: %d bytes of JSON, %d of text" % (raw, len(got.encode()))
        assert cut == [len(text.encode())], cut


def test_short_bodies_read_exactly_as_the_strict_reader_reads_them():
    for body in (b'{"text": "Hello."}', b'{"emotion": "happy"}', b"{}", b"[1, 2.5, null, true]",
                 b'{"text": "\\u00e9\\ud83d\\ude00", "a": {"b": ["c"]}}',
                 b'{"text": "\xc3\xa9\xf0\x9f\x98\x80"}', b'"' + b"x" * 240 + b'"',
                 b' {"a" : [ {} , [ ] ] } '):  # fmt: skip
        assert _read(body, 3) == (_strict(body), []), body


def test_refusals_are_the_strict_readers_at_the_whole_bodys_offsets():
    long = b"a" * 600
    bodies = [
        b'{"text": "' + long + b'\xff"}',  # invalid UTF-8 in the dropped part
        b'{"text": "' + long + b'\xe0\x41\x42"}',  # a sequence cut by a bad byte: all 3 named
        b'{"text": "' + long + b'\xc3"}',
        b'{"text": "' + long + b'\x01"}',  # control character in the dropped part
        b'{"text": "' + long + b'\\x"}',  # bad escape
        b'{"text": "' + long + b'\\u12G4"}',  # bad \\u escape
        b'{"text": "' + long + b"\\u12",  # body ends in an escape
        b'{"text": "' + long,  # body ends in the string
        b'{"text": "' + long + b'" "x"}',  # structure after a cut string
        b'{"text": "' + long + b'"}  trailing',
        b'{"text": "' + long + b'", "b": "' + long + b'\x1f"}',  # second string cut too
        b'{"text": "' + long + b'\\ud83d\\u12"}',  # a high then a bad \\u escape
        b'[1, 2 "' + long + b'"]',  # an error before the long string
        b'{"text": "' + long + b"\x01" + long + b'\xff"}',  # a bad byte after a bad character
    ]
    for body in bodies:
        want = _strict(body)
        assert want[0] == "error", body[-20:]
        for size in (1, 13, 512):
            assert _read(body, size) == want, (body[-24:], size, _read(body, size), want)


def test_a_lone_surrogate_anywhere_is_the_strict_readers_value():
    long = "a" * 600
    for tail in ("\\udc00", "\\ud800", "\\ud800x", "\\ud800\\n", "\\ud800\\ud800"):
        body = ('{"text": "%s%s"}' % (long, tail)).encode()
        want = _strict(body)
        value, cut = _read(body, 11)
        assert isinstance(value["text"], jsonread.Lone), (tail, value)
        assert value["text"].esc == want["text"].esc, (tail, value["text"].esc)


def test_a_body_whose_clamped_json_does_not_fit_is_refused_with_the_reason():
    body = json.dumps({"k%d" % i: "v" * 300 for i in range(8)}).encode()
    try:
        Clamp(1024, LIMIT).read(_pieces(body, 512))
        assert False, "read a body larger than the buffer once clamped"
    except Overflow as e:
        assert "over 1024 bytes" in str(e), e
    value, dups, cut = Clamp(4096, LIMIT).read(_pieces(body, 512))
    assert sorted(value) == ["k%d" % i for i in range(8)] and len(cut) == 8, (value, cut)
