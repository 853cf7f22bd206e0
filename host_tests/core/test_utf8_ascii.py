# organbus.utf8.ascii_str (the plan checks' shortcut past encode()): True exactly for all-ASCII strs, on every interpreter.
import json

from organbus.utf8 import ascii_str

UNIX_PORT = True


def test_ascii_strs_of_every_making():
    made = json.loads(b'["plain", "caf\\u00e9", "\\u0000x", "tab\\t", "\xe2\x82\xac", ""]')
    cases = [
        ("abc", True),
        ("", True),
        ("a\x00", True),
        ("\x00", True),
        ("x" * 300, True),
        ("abcdef"[2:], True),
        ("é", False),
        ("aé"[:1], True),
        ("aé"[1:], False),
        ("€uro", False),
        ("ok😀", False),
        (str(b"bytes", "utf-8"), True),
        (str(b"caf\xc3\xa9", "utf-8"), False),
        ("%s-%d" % ("t", 12), True),
    ]
    for s, want in zip(made, (True, False, True, True, False, True)):
        cases.append((s, want))
    for s, want in cases:
        assert ascii_str(s) is want, "%r: %r" % (s, ascii_str(s))
        assert want == all(ord(c) < 128 for c in s), s
