# The /status ring kept as JSON text in one buffer taken at boot: newest entries in order, bounded in bytes, long entries cut as said.
import json

from master.bus.hub import Hub
from master.bus.recent import Recent

UNIX_PORT = True


class Clock:
    def __init__(self):
        self.t = 0

    def __call__(self):
        self.t += 1
        return self.t


def _ring(cap=1024, size=16):
    hub = Hub()
    return hub, Recent(hub, Clock(), size=size, cap=cap)


def test_the_newest_entries_in_order_within_the_buffer():
    hub, r = _ring(cap=1024, size=16)
    buf = r.buf
    sent = []
    for k in range(300):
        problems = ["p%d %s" % (k, "x" * (k * 7 % 150))]
        hub.publish("rejected", None, problems)
        sent.append(problems)
        items = r.items()
        assert [e["problems"] for e in items] == sent[len(sent) - len(items) :], k
        assert 1 <= len(items) <= 16
        assert sum(len(json.dumps(e)) for e in items) <= 1024 + 16 * 8  # separators aside
        assert [e["t_ms"] for e in items] == sorted(e["t_ms"] for e in items)
        assert r.buf is buf  # the one buffer, never grown
    assert r.dropped == 300 - len(r.items())
    assert r.last(2) == r.items()[-2:]


def test_size_bounds_the_count_and_short_entries_all_stay():
    hub, r = _ring(cap=4096, size=4)
    for k in range(10):
        hub.publish("rejected", None, ["p%d" % k])
    assert [e["problems"] for e in r.items()] == [["p6"], ["p7"], ["p8"], ["p9"]]
    assert r.dropped == 6


def test_an_entry_over_a_quarter_of_the_buffer_is_cut_and_says_so():
    hub, r = _ring(cap=512)
    hub.publish("rejected", None, ["y" * 400])
    e = r.items()[-1]
    assert e["event"] == "rejected" and e["cut"] == "all" and "problems" not in e, e


def test_bad_sizes_are_refused():
    for size, cap in ((0, 1024), (4, 100)):
        try:
            Recent(Hub(), Clock(), size=size, cap=cap)
        except ValueError as e:
            assert "recent ring" in str(e)
        else:
            raise AssertionError("accepted size %d cap %d" % (size, cap))


def test_organ_events_kept_as_tuples_beside_text_entries_in_order():
    hub, r = _ring(cap=512, size=8)
    want = []
    for k in range(60):
        if k % 3:
            hub.publish("event", k % 2, ("tick%d" % k, "done"))
            want.append(("event", "tick%d" % k))
        else:
            hub.publish("rejected", None, ["p%d %s" % (k, "z" * (k % 40))])
            want.append(("rejected", "p%d" % k))
        items = r.items()
        got = [
            (e["event"], e["name"] if e["event"] == "event" else e["problems"][0].split()[0])
            for e in items
        ]
        assert got == want[len(want) - len(got) :], k
        assert 1 <= len(items) <= 8
    e = [x for x in r.items() if x["event"] == "event"][-1]
    assert set(e) == {"t_ms", "event", "port", "name", "status"} and e["status"] == "done", e


def test_a_text_after_an_event_is_never_overwritten_while_listed():
    # an EVENT keeps no bytes: a text written after a wrap must still make room past the
    # oldest text behind it (it wrote over a listed report: /status was not JSON any more)
    hub, r = _ring(cap=3072, size=16)
    x = 12345
    want = []
    for k in range(3000):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        if x % 2:
            hub.publish("event", 1, ("tick%d" % k, "done"))
            want.append("tick%d" % k)
        else:
            hub.publish("rejected", None, ["p%d %s" % (k, "y" * (x % 700))])
            want.append("p%d" % k)
        if len(want) > 16:
            want.pop(0)
        texts = r.texts()
        got = []
        for t in texts:
            e = json.loads(bytes(t))  # every kept entry is whole (a view of the ring)
            got.append(e["name"] if e["event"] == "event" else e["problems"][0].split()[0])
        assert got == want[len(want) - len(got) :], (k, got)
