# The DESCRIPTOR decoder's refusals word for word: every field's name and rule as the decoder of 2026-12-02 wrote them (its names are now formatted only for a refusal).
import json

import master_fakes as mf
from organbus import descriptor

UNIX_PORT = True

# [organ, "cut" | "set", i, v, words]: the organ's DESCRIPTOR payload cut to i bytes (with a
# 0 byte more when i is past its end), or its byte i set to v; words: the refusal the decoder
# gave then (None: decoded). Made by that decoder from these payloads, one case per refusal
# form (the numbers in it aside); refusals showing a float's repr are left out (f32 on RV32).
_DATA = "host_tests/data/descriptor_refusals.json"


def _payload(organ, op, i, v, base):
    p = base[organ]
    if op == "cut":
        return p[:i] if i <= len(p) else p + b"\x00"
    b = bytearray(p)
    b[i] = v
    return bytes(b)


def test_every_refusal_has_the_words_it_had():
    with open(_DATA) as f:
        cases = json.load(f)
    base = {
        "led": mf.encode_descriptor(mf.led()),
        "speaker": mf.encode_descriptor(mf.speaker()),
    }
    assert len(cases) > 300, len(cases)
    for organ, op, i, v, words in cases:
        p = _payload(organ, op, i, v, base)
        try:
            descriptor.decode_descriptor(p)
            got = None
        except descriptor.DescriptorError as e:
            got = str(e)
        assert got == words, "%s %s %d %d: %r, was %r" % (organ, op, i, v, got, words)
        if op == "set":  # the same bytes as a memoryview (the decoder's payload) read alike
            try:
                descriptor.decode_descriptor(memoryview(bytearray(p)), len(p))
                got = None
            except descriptor.DescriptorError as e:
                got = str(e)
            assert got == words, "%s %s %d %d (memoryview): %r" % (organ, op, i, v, got)
