# The kit catches each deliberately broken organ and master (one defect each) and names the rule.
#
# Every run is started at once and judged by its own test: the kit mostly waits on the protocol's
# timers, so the runs share the wall clock (about 25 s for all) instead of adding up.
import pytest

import fixture_masters
import fixture_organs
from conform_rig import Kit, failed, free_port

# The 15 s offline rule runs only where it is the point; --skip/--only keep the others short.
NO_OFFLINE = ["--skip", "master.offline", "--skip", "master.rediscover"]
MASTER_ARGS = {
    "good": NO_OFFLINE,
    "rewrites_numbers": NO_OFFLINE,
    "never_discovers": NO_OFFLINE,
    "forwards_offline": ["--only", "master.ack", "--only", "master.offline"],
}


@pytest.fixture(scope="module")
def reports():
    started = []
    for defect in fixture_organs.DEFECTS:
        port = free_port()
        kit = Kit("organ", port)
        started.append((("organ", defect), kit, fixture_organs.SocketOrgan(defect, port)))
    for defect, args in MASTER_ARGS.items():
        port = free_port()
        master = fixture_masters.TinyMaster(defect, port)
        kit = Kit("master", port, ["--http", "127.0.0.1:%d" % master.http_port] + args)
        started.append((("master", defect), kit, master))
    port = free_port()
    kit = Kit("organ", port, ["--only", "organ.unknown_name"])
    started.append((("organ", "alias_only"), kit, fixture_organs.SocketOrgan("alias", port)))
    serial = fixture_organs.PtyOrgan("good")
    kit = Kit("organ", 0, spec=serial.path)
    started.append((("organ", "serial"), kit, serial))
    port = free_port()
    master = fixture_masters.TinyMaster("good", port)
    kit = Kit("master", port, ["--only", "master.ack", "--only", "master.values"])
    started.append((("master", "no_http"), kit, master))
    out = {}
    try:
        for key, kit, peer in started:
            try:
                out[key] = kit.result()
            except AssertionError as e:
                out[key] = e
    finally:
        for _, _, peer in started:
            peer.stop()
    return out


def _report(reports, key):
    r = reports[key]
    if isinstance(r, Exception):
        raise r
    return r


@pytest.mark.parametrize("defect", [d for d in fixture_organs.DEFECTS if d != "good"])
def test_the_kit_names_the_broken_organ_rule(reports, defect):
    rule = fixture_organs.DEFECTS[defect][2]
    report = _report(reports, ("organ", defect))
    assert not report["ok"] and report["exit"] == 1, "the %s organ was certified" % defect
    assert set(failed(report)) == {rule}, "%s organ: expected only %s to fail, got %s" % (
        defect,
        rule,
        failed(report),
    )


def test_the_fixture_organ_without_a_defect_passes(reports):
    report = _report(reports, ("organ", "good"))
    assert report["ok"] and report["exit"] == 0, failed(report)


@pytest.mark.parametrize("defect", [d for d in MASTER_ARGS if d != "good"])
def test_the_kit_names_the_broken_master_rule(reports, defect):
    report = _report(reports, ("master", defect))
    expect = {fixture_masters.DEFECTS[defect]}
    if defect == "never_discovers":
        expect.add("master.discover_boot")  # the same defect, seen at boot too
    assert not report["ok"] and report["exit"] == 1, "the %s master was certified" % defect
    assert set(failed(report)) == expect, "%s master: expected %s to fail, got %s" % (
        defect,
        expect,
        failed(report),
    )


def test_the_fixture_master_without_a_defect_passes(reports):
    report = _report(reports, ("master", "good"))
    assert report["ok"] and report["exit"] == 0, failed(report)


def test_without_http_the_rules_that_need_a_plan_are_not_applicable(reports):
    report = _report(reports, ("master", "no_http"))
    rows = {r["rule"]: r for r in report["rules"]}
    assert sorted(rows) == ["master.ack", "master.values"], "--only keeps just these"
    assert rows["master.ack"]["status"] == "pass", rows
    assert rows["master.values"]["status"] == "n/a" and "--http" in rows["master.values"]["detail"]
    assert report["ok"] and report["exit"] == 0, "n/a rules do not fail a run"


def test_a_serial_port_certifies_too(reports):
    # the fixture organ on a pseudo-terminal, the kit on its other end through pyserial
    report = _report(reports, ("organ", "serial"))
    rows = {r["rule"]: r for r in report["rules"]}
    assert report["ok"] and report["exit"] == 0, failed(report)
    assert rows["organ.boot_wait"]["status"] == "n/a", "a serial port does not show the power-up"
    assert rows["organ.heartbeat"]["status"] == "pass" and rows["organ.resync"]["status"] == "pass"


def test_only_reports_just_that_rule(reports):
    report = _report(reports, ("organ", "alias_only"))
    assert [r["rule"] for r in report["rules"]] == ["organ.unknown_name"], report["rules"]
    assert report["failed"] == 1 and report["exit"] == 1, report
    assert "'BUTTON_CANCEL' answered 0, expected 1" in report["rules"][0]["detail"], report
