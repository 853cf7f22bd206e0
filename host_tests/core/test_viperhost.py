# tools/shim/viperhost.py: viper's casts and addresses on CPython, which rxscan's one source runs over there.
import pytest

import viperhost


def test_addresses_step_compare_and_subtract_within_one_buffer():
    b = bytearray(range(16))
    a = viperhost.uint(b)
    q = a + 5
    assert q - a == 5 and q > a and a + 5 <= q and not q < a
    assert viperhost.ptr8(q)[0] == 5 and viperhost.ptr8(q - 2)[1] == 4
    with pytest.raises(ValueError):
        q - viperhost.uint(bytearray(16))


def test_words_and_halfwords_keep_their_low_bits_as_a_machine_store_does():
    b = bytearray(16)
    w = viperhost.ptr32(viperhost.uint(b) + 8)
    w[0] = 0x1_0000_0005  # past 32 bits: the low 32 stay
    w[1] = -1
    assert w[0] == 5 and w[1] == 0xFFFFFFFF and b[12:16] == b"\xff\xff\xff\xff"
    h = viperhost.ptr16(b)
    h[0] = 0x12345
    assert h[0] == 0x2345 and viperhost.ptr8(b)[0] in (0x45, 0x23)  # native order
    assert (
        viperhost.uint(-1) == 0xFFFFFFFF
        and viperhost.uint(viperhost.uint(b)) - viperhost.uint(b) == 0
    )
    with pytest.raises(ValueError):
        viperhost.ptr32(viperhost.uint(b) + 2)  # not at a multiple of its size


def test_a_pointer_over_a_typed_array_counts_bytes():
    from array import array

    t = array("H", range(512))
    t1 = viperhost.ptr16(viperhost.uint(viperhost.ptr16(t)) + 512)  # as rxscan's t1
    assert t1[0] == 256 and t1[255] == 511
