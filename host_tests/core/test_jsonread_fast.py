# The strict JSON reader's fast path (scan + json.loads) against the reader itself: the same values, duplicate keys and refusal words.
import json

from organbus import jsonread
from bench_master import _plan16

UNIX_PORT = True

# Texts the scan must pass to json.loads, and texts it must leave to the reader (every refusal,
# duplicate keys, surrogate escapes, exponents): read() gives exactly what _read() gives.
CORPUS = [
    b"0",
    b" -0 ",
    b"-0.5",
    b"12345678901234567890",
    b"1.25",
    b"1e5",
    b"1E+2",
    b"-2.5e-3",
    b"1e39",
    b"-1e39",
    b'"abc"',
    b'"\\u00e9\\n\\t\\"\\\\\\/\\b\\f\\r"',
    b'"\\u0000"',
    b'"\\ud83d\\ude00"',
    b'"\\ud800"',
    b'"\\udc00x"',
    b'{"\\ud800": 1}',
    b'"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"',
    b"true",
    b"false",
    b"null",
    b"[]",
    b"{}",
    b"[[]]",
    b'{"a": {}, "b": [], "c": [{}]}',
    b'{"a":1,"a":2}',
    b'{"a": {"b": 1, "b": 2}, "c": [{"d": 1, "d": 1}]}',
    b'{"a": 1, "b": {"a": 1}}',
    b'{"a": {"b": 1}, "b": 2}',
    b'{"a": {"b": 1}, "a": 2}',
    b'{"a": [{"a": 1}, {"a": 2}], "b": {"a": {"a": 3}}}',
    b'{"a": 1, "ab": 2, "b": 3, "ba": 4, "": 5}',
    b'{"": 1, "": 2}',
    b'{"a": 1, "\\u0061": 2}',
    b'{"\\u0061": 1, "a": 2}',
    b'{"\\n": 1, "\\n": 2}',
    b'{"caf\xc3\xa9": 1, "caf\\u00e9": 2}',
    b"{" + b", ".join(b'"k%d": %d' % (i, i) for i in range(60)) + b"}",
    b"{" + b", ".join(b'"k%d": %d' % (i % 55, i) for i in range(60)) + b"}",
    b"{" + b", ".join(b'"k%d": %d' % (i % 30, i) for i in range(60)) + b"}",
    b"[" + b", ".join(b'{"a": 1, "b": 2}' for i in range(40)) + b"]",
    b"\t\n\r [1,2 , 3]\n",
    b"",
    b"   ",
    b"[1,]",
    b"[,1]",
    b'{"a":1,}',
    b'{"a" 1}',
    b'{"a":}',
    b"{1: 2}",
    b'{"a": 1 "b": 2}',
    b"[1 2]",
    b"[1}",
    b'{"a": 1]',
    b"[",
    b"{",
    b'"abc',
    b'"a\\',
    b'"a\\x"',
    b'"\\u12"',
    b'"\\u12g4"',
    b'"a\x01b"',
    b'"a\nb"',
    b"01",
    b"-",
    b"-a",
    b"1.",
    b"1.e3",
    b"1e",
    b"1e+",
    b".5",
    b"+1",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"tru",
    b"nul",
    b"falsey",
    b"true false",
    b"1 2",
    b"[1] x",
    b"\xef\xbb\xbf[1]",
    b"\x0b[1]",
    b"[1]\x0c",
    b"\xc0\xaf",
    b'"\xed\xa0\x80"',
    b"1" * 40,
    b"1" * 41,
    b"-" + b"1" * 39,
    b"-" + b"1" * 40,
    b"0." + b"1" * 38,
    b"0." + b"1" * 39,
    b"[" * 12 + b"1" + b"]" * 12,
    b'{"a": ' * 12 + b"[]" + b"}" * 12,
]

# At and past the nesting limit: read by json.loads, or refused with the reader's words by the scan
# itself (the reader recursing 16-17 objects deep overflowed the RV32 image's 10 KB stack check:
# RuntimeError, not a value or a refusal).
_O = b'{"a": ' * 16
DEEP = [
    (b'{"a": ' * 17 + b"1" + b"}" * 17, "nested deeper than 16 levels at offset 101"),
    (_O + b"[ 1]" + b"}" * 16, "nested deeper than 16 levels at offset 98"),
    (_O + b'{"b":1}' + b"}" * 16, "nested deeper than 16 levels at offset 101"),
    (_O + b'{"b":', "unexpected end at offset 101"),
    (_O + b"[ ", "unexpected end at offset 98"),
    (_O + b"[", "unexpected end at offset 97"),
    (b"[" * 16 + b'{"b": [2]}' + b"]" * 16, "nested deeper than 16 levels at offset 21"),
    (b"[" * 17 + b"1" + b"]" * 17, "nested deeper than 16 levels at offset 17"),
    (b"[" * 20 + b"]" * 20, "nested deeper than 16 levels at offset 17"),
    (b"[" * 16 + b"]" * 16, None),
    (b"[" * 16 + b"1" + b"]" * 16, None),
    (b"[" * 17 + b"]" * 17, None),
    (_O + b"1" + b"}" * 16, None),
    (_O + b"{}" + b"}" * 16, None),
    (_O + b"[]" + b"}" * 16, None),
]
# Refused or read by the reader itself 16-17 objects deep (a malformed key of the 17th object,
# a duplicate key 16 deep): the reader's recursion, which the RV32 image's 10 KB stack check
# (the C6 has 16 KB) does not take (tools/rv32 DEVICE_DIFFERENCES).
DEEP_READER = [
    (_O + b'{"b" 1}' + b"}" * 16, "expected ':' at offset 101"),
    (_O + b"{1}" + b"}" * 16, "expected a key string at offset 97"),
    (b'{"a": ' * 15 + b'{"a": 1, "a": 2}' + b"}" * 15, None),
]


def _same(a, b):
    # equal and of the same types all the way down (1 is not 1.0, True is not 1)
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        if list(a) != list(b):
            return False
        for k in a:
            if not _same(a[k], b[k]):
                return False
        return True
    if type(a) is list:
        if len(a) != len(b):
            return False
        for i in range(len(a)):
            if not _same(a[i], b[i]):
                return False
        return True
    if type(a) is jsonread.Lone:
        return a.esc == b.esc
    return a == b


def _outcome(fn, raw, *args):
    try:
        return "ok", fn(raw, *args)
    except jsonread.JsonError as e:
        return "refused", e.msg


def _check(raw, max_depth=jsonread.MAX_DEPTH, max_number=jsonread.MAX_NUMBER_LEN):
    fast = _outcome(jsonread.read, raw, max_depth, max_number)
    strict = _outcome(jsonread.read_strict, raw, max_depth, max_number)
    assert fast[0] == strict[0], "%r: fast %r, reader %r" % (raw[:60], fast, strict)
    if fast[0] == "refused":
        assert fast[1] == strict[1], "%r: fast %r, reader %r" % (raw[:60], fast[1], strict[1])
    else:
        (v1, d1), (v2, d2) = fast[1], strict[1]
        assert _same(v1, v2), "%r: fast %r, reader %r" % (raw[:60], v1, v2)
        assert d1 == d2, "%r: duplicate keys %r, reader %r" % (raw[:60], d1, d2)


def test_corpus_reads_as_the_reader_reads():
    for raw in CORPUS:
        _check(raw)
        _check(raw.decode("utf-8", "replace"))  # a str is read as its UTF-8 bytes


def test_limits_other_than_the_defaults():
    for raw in (
        b"[[[1]]]",
        b"[[[]]]",
        b"[[1]]",
        b"[ [ {} ] ]",
        b'[{"a": {"b": []}}]',
        b'[{"a": {"b": [1]}}]',
        b'{"a": {"b": {"c": 1}}}',
        b"12345",
        b"123456",
        b'{"a": [[0.25]]}',
    ):
        for depth in (0, 1, 2, 3, 4):
            for number in (4, 5, 6):
                _check(raw, depth, number)
    for raw in (b"[[1]]", b'{"a": {"a": 1, "a": 2}}', b"[[[[[]]]]]"):
        _check(raw, 40, 40)  # deeper than the scan's stack: the reader alone


def _deep(table):
    for raw, words in table:
        try:
            v, dups = jsonread.read(raw)
            got = None
        except jsonread.JsonError as e:
            got = e.msg
        assert got == words, "%r: %r, want %r" % (raw[-20:], got, words)
        if words is None:
            assert v == json.loads(raw), raw[-20:]


def test_deep_texts_are_refused_with_the_readers_words():
    _deep(DEEP)


def test_deep_texts_the_reader_reads():
    _deep(DEEP_READER)
    r, dups = jsonread.read(DEEP_READER[-1][0])
    assert dups == [("a.a.a.a.a.a.a.a.a.a.a.a.a.a.a", "a")], dups


def test_the_plan_takes_the_fast_path():
    raw = json.dumps(_plan16()).encode()
    k = jsonread._scan(raw, len(raw), jsonread._STACK, jsonread._KEYAT, jsonread.MAX_DEPTH, 40)
    v = json.loads(raw)
    assert k >= 0 and not k & 3, "the scan left the 16-step plan to the reader: %d" % k
    assert jsonread._members(v) == k >> 2, "members %d, scan %d" % (jsonread._members(v), k >> 2)
    _check(raw)


class _Rand:
    # a small LCG: the same texts on every interpreter
    def __init__(self, seed):
        self.x = seed

    def below(self, n):
        self.x = (self.x * 1103515245 + 12345) & 0x7FFFFFFF
        return (self.x >> 8) % n


_ATOMS = (b"0", b"-1", b"2.5", b"1e3", b"true", b"false", b"null", b'"s"', b'"\\u00e9"', b'""')
_KEYS = (b'"a"', b'"b"', b'"task_id"', b'"\\u0061"', b'"\xc3\xa9"')
_NOISE = b' \t\n,:{}[]"\\0-1e.x\x01\xff'


def _value(r, depth):
    k = r.below(4) if depth < 5 else 0
    if k == 0 or k == 1:
        return _ATOMS[r.below(len(_ATOMS))]
    if k == 2:
        return b"[" + b", ".join(_value(r, depth + 1) for _ in range(r.below(4))) + b"]"
    items = [_KEYS[r.below(len(_KEYS))] + b": " + _value(r, depth + 1) for _ in range(r.below(4))]
    return b"{" + b", ".join(items) + b"}"


def test_random_texts_and_their_mutations_read_as_the_reader_reads():
    r = _Rand(28)
    for _ in range(300):
        raw = _value(r, 0)
        _check(raw)
        b = raw
        for _ in range(1 + r.below(3)):
            op = r.below(3)
            i = r.below(len(b) + 1)
            if op == 0:
                b = b[:i] + b[i + 1 :]  # a byte gone
            elif op == 1:
                j = r.below(len(_NOISE))
                b = b[:i] + _NOISE[j : j + 1] + b[i:]  # a byte more
            else:
                b = b[:i]  # cut short
        _check(b)
