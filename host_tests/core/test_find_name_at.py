# command.find_name_at: a str8 name at an offset (a COMMAND's at 0, an EVENT's at 1) found in a name table.
from organbus import command

UNIX_PORT = True


def test_event_names_are_found_at_offset_one():
    names = ["led_on", "led_off", "led_blink", "ü"]
    table = command.name_table(names)
    for i, name in enumerate(names):
        p = command.encode_event(name, 0)
        got = command.find_name_at(p, 1, len(p) - 1, table)
        assert got == i, "%s: found %d, expected %d" % (name, got, i)


def test_names_it_does_not_hold_or_that_do_not_fit():
    table = command.name_table(["led_on", "led_off"])
    p = command.encode_event("led_onx", 0)
    assert command.find_name_at(p, 1, len(p) - 1, table) == -1, "a longer name matched"
    p = command.encode_event("led_o", 0)
    assert command.find_name_at(p, 1, len(p) - 1, table) == -1, "a prefix matched"
    p = command.encode_event("led_on", 0)
    assert command.find_name_at(p, 1, len(p) - 2, table) == -1, "a name cut off by n matched"
    assert command.find_name_at(p, 1, 1, table) == -1, "no room for the length byte"
    assert command.find_name_at(p, -1, len(p), table) == -1, "a negative offset matched"
    empty = bytes([1, 0, 0])
    assert command.find_name_at(empty, 1, 2, table) == -1, "the empty name matched"
    assert command.find_name_at(p, 1, len(p) - 1, command.name_table([])) == -1


def test_a_command_name_at_offset_zero():
    names = ["a", "bb", "ccc"]
    table = command.name_table(names)
    for name in ("a", "bb", "ccc", "dd", ""):
        p = command.encode_command(name) if name else b"\x00"
        want = names.index(name) if name in names else -1
        assert command.find_name_at(p, 0, len(p), table) == want, name
