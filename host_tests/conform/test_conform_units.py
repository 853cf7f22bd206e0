# The kit's own parts: SPEC parsing, the report (order, --only/--skip, exit), the invalid DESCRIPTORs.
import json
import os
import subprocess
import sys

import pytest

from organbus.descriptor import DescriptorError, decode_descriptor

from conform import master, organ, wire
from conform.cable import parse_spec
from conform.report import Report
from support import ROOT

CONFORM = os.path.join(ROOT, "tools", "conform.py")


def test_spec_takes_loopback_and_serial_ports_only():
    assert parse_spec("listen:127.0.0.1:7001") == ("listen", "127.0.0.1", 7001)
    assert parse_spec("connect:localhost:7002") == ("connect", "127.0.0.1", 7002)
    assert parse_spec("/dev/ttyUSB0") == ("serial", "/dev/ttyUSB0", 0)
    for bad, why in (
        ("connect:10.0.0.5:7001", "loopback"),
        ("listen:127.0.0.1", "expected"),
        ("listen:127.0.0.1:http", "not a number"),
        ("connect:127.0.0.1:0", "1..65535"),
        ("listen:127.0.0.1:70000", "1..65535"),
        ("tcp:127.0.0.1:7001", "expected"),
    ):
        with pytest.raises(ValueError) as e:
            parse_spec(bad)
        assert why in str(e.value), (bad, str(e.value))


def test_rule_names_are_unique_and_carry_their_section():
    for rules, prefix in ((organ.RULES, "organ."), (master.RULES, "master.")):
        names = [r.name for r in rules]
        assert len(set(names)) == len(names), names
        for r in rules:
            assert r.name.startswith(prefix) and r.section and r.says, r.name


def test_report_keeps_the_order_and_passes_only_when_every_applicable_rule_passed():
    r = Report("organ", organ.RULES, "listen:127.0.0.1:1")
    r.na("organ.text", "no text param")
    r.passed("organ.nan", "ok")
    r.passed("organ.descriptor", "ok")
    rows = r.rows()
    assert [x["rule"] for x in rows] == [x.name for x in organ.RULES], "fixed order"
    assert not r.ok(), "rules never reached are not a pass"
    assert r.status("organ.values") is None and "not reached" in r.text()
    for rule in organ.RULES:
        if r.status(rule.name) is None:
            r.passed(rule.name)
    assert r.ok()
    r.failed("organ.values", "led_on answered 1, expected 0")
    r.passed("organ.values", "a later pass does not undo a failure")
    assert not r.ok() and r.status("organ.values") == "fail"
    assert "NOT CERTIFIED: 16 passed, 1 failed, 1 not applicable" in r.text()
    j = json.loads(r.json())
    assert j["ok"] is False and j["failed"] == 1 and j["rules"][7]["detail"].startswith("led_on")


def test_only_and_skip_choose_rules_and_refuse_unknown_ones():
    r = Report("organ", organ.RULES, "x", only=["organ.nan"])
    assert r.wanted("organ.nan") and not r.wanted("organ.values")
    r.passed("organ.values")  # not wanted: not reported
    assert [x["rule"] for x in r.rows()] == ["organ.nan"]
    r = Report("master", master.RULES, "x", skip=["master.offline"])
    assert not r.wanted("master.offline") and r.wanted("master.ack")
    with pytest.raises(ValueError) as e:
        Report("organ", organ.RULES, "x", only=["organ.nope"])
    assert "organ.boot_wait" in str(e.value), "the refusal lists the rules"


def test_every_invalid_descriptor_class_is_invalid_and_the_kit_organ_is_valid():
    d = decode_descriptor(wire.good_descriptor())
    assert [c["name"] for c in d["capabilities"]] == [
        "cf_on",
        "cf_hold",
        "cf_set",
        "cf_run",
        "cf_say",
    ]
    classes = wire.invalid_descriptors()
    assert len(classes) >= 20
    for cls, payload, _ in classes:
        with pytest.raises(DescriptorError):
            decode_descriptor(payload)
            raise AssertionError("%s: the core accepts it" % cls)


def _cli(*args):
    return subprocess.run(
        [sys.executable, CONFORM] + list(args), capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_the_cli_refuses_bad_input_with_a_reason():
    r = _cli("organ", "--uart", "connect:192.168.1.2:7001")
    assert r.returncode == 2 and "only loopback" in r.stderr, r.stderr
    r = _cli("master", "--uart", "listen:127.0.0.1:0", "--only", "master.nope")
    assert r.returncode == 2 and "unknown rule 'master.nope'" in r.stderr, r.stderr
    r = _cli("master", "--uart", "listen:127.0.0.1:0", "--http", "10.1.1.1:80")
    assert r.returncode == 2 and "loopback" in r.stderr, r.stderr
    r = _cli("organ", "--uart", "listen:127.0.0.1:0", "--uart", "listen:127.0.0.1:0")
    assert r.returncode == 2 and "one organ at a time" in r.stderr, r.stderr
    r = _cli("master", *["--uart", "listen:127.0.0.1:0"] * 3)
    assert r.returncode == 2 and "at most two" in r.stderr, r.stderr
    r = _cli("organ", "--uart", "connect:127.0.0.1:1", "--connect-timeout", "0.3")
    assert r.returncode == 2 and "could not connect" in r.stderr, r.stderr


def test_the_cli_lists_the_rules_in_order():
    r = _cli("rules")
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert names == [x.name for x in organ.RULES + master.RULES], r.stdout
