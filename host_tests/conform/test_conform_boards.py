# The kit certifies the project's own boards under tools/sim.py board: LED, speaker, the template, the master.
#
# The four runs share the wall clock (started together, each judged by its own test).
import pytest

from conform_rig import Kit, SimBoard, failed, free_port, statuses

ORGANS = ["led", "speaker", "button"]  # button: boards/template_organ, the organ template
MUST = {
    "organ.boot_wait",
    "organ.descriptor",
    "organ.announce",
    "organ.ack",
    "organ.heartbeat",
    "organ.redescribe",
    "organ.answers",
    "organ.values",
    "organ.unknown_name",
    "organ.payload_length",
    "organ.event",
    "organ.resource_groups",
    "organ.resync",
    "organ.discover",
    "organ.command_before_ack",
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("conform-boards")
    started = []
    for role in ORGANS:
        port = free_port()
        kit = Kit("organ", port)
        started.append((role, kit, SimBoard(role, port, out_dir / role)))
    # the master with a kit organ on each of its two ports (master.duplicate needs the second)
    port, port2, http = free_port(), free_port(), free_port()
    kit = Kit(
        "master", port, ["--uart", "listen:127.0.0.1:%d" % port2, "--http", "127.0.0.1:%d" % http]
    )
    board = SimBoard("master", port, out_dir / "master", 0, http, more=[(1, port2)])
    started.append(("master", kit, board))
    out = {}
    try:
        for role, kit, board in started:
            try:
                out[role] = kit.result(timeout=240)
            except AssertionError as e:
                out[role] = e
    finally:
        for _, _, board in started:
            board.stop()
    return out


def _report(reports, role):
    r = reports[role]
    if isinstance(r, Exception):
        raise r
    return r


@pytest.mark.parametrize("role", ORGANS)
def test_the_kit_certifies_our_organs(reports, role):
    report = _report(reports, role)
    assert report["ok"] and report["exit"] == 0, "%s organ not certified: %s" % (
        role,
        failed(report),
    )
    s = statuses(report)
    assert {r for r in MUST if s[r] != "pass"} == set(), s
    if role == "speaker":
        assert s["organ.text"] == "pass", s  # speak and announce take text
    else:
        assert s["organ.clamp"] == "pass" and s["organ.nan"] == "pass", s


def test_the_kit_certifies_our_master(reports):
    report = _report(reports, "master")
    assert report["ok"] and report["exit"] == 0, "master not certified: %s" % failed(report)
    assert set(statuses(report).values()) == {"pass"}, statuses(report)
