#!/usr/bin/env python3
"""Certify a Protocol V3 organ or master over a cable (docs/conform.md).

  tools/conform.py organ  --uart SPEC [--json] [--only RULE] [--skip RULE]
  tools/conform.py master --uart SPEC [--uart SPEC2] [--http HOST:PORT] [--json] [--only RULE] ...
  tools/conform.py rules  [organ|master]

SPEC: listen:HOST:PORT or connect:HOST:PORT (loopback TCP, e.g. a board under tools/sim.py board)
or a serial port (--baud). Exit status 0 only when every applicable rule passed.
"""

import argparse
import sys

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from conform import master as master_rules
from conform import organ as organ_rules
from conform.cable import Cable
from conform.report import Report


def _args(argv):
    p = argparse.ArgumentParser(
        prog="conform.py",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    sub = p.add_subparsers(dest="role", required=True)
    for role, what in (("organ", "the kit plays the master"), ("master", "the kit plays an organ")):
        s = sub.add_parser(role, help="certify an %s (%s)" % (role, what))
        s.add_argument(
            "--uart",
            required=True,
            action="append",
            metavar="SPEC",
            help="listen:HOST:PORT, connect:HOST:PORT or a serial port"
            + ("; a second --uart: a second kit organ on another port" if role == "master" else ""),
        )
        s.add_argument("--baud", type=int, default=115200, help="serial baud rate (default 115200)")
        s.add_argument("--json", action="store_true", help="print the report as one JSON object")
        s.add_argument(
            "--only",
            action="append",
            default=[],
            metavar="RULE",
            help="run only this rule (repeatable)",
        )
        s.add_argument(
            "--skip",
            action="append",
            default=[],
            metavar="RULE",
            help="leave this rule out (repeatable)",
        )
        s.add_argument(
            "--connect-timeout",
            type=float,
            default=30.0,
            help="seconds to wait for the other side (default 30)",
        )
        if role == "organ":
            s.add_argument(
                "--event-budget-ms",
                type=int,
                default=5000,
                help="longest ability run the kit starts on purpose (default 5000)",
            )
        else:
            s.add_argument(
                "--http",
                metavar="HOST:PORT",
                help="the master's HTTP API (GET /menu, POST /plan), loopback",
            )
    r = sub.add_parser("rules", help="list the rules in their order")
    r.add_argument("which", nargs="?", choices=["organ", "master"])
    return p, p.parse_args(argv)


def main(argv=None):
    p, a = _args(sys.argv[1:] if argv is None else argv)
    if a.role == "rules":
        for role, mod in (("organ", organ_rules), ("master", master_rules)):
            if a.which in (None, role):
                for rule in mod.RULES:
                    print("%-28s section %-4s %s" % (rule.name, rule.section, rule.says))
        return 0
    rules = organ_rules.RULES if a.role == "organ" else master_rules.RULES
    specs = a.uart
    try:
        if a.role == "organ" and len(specs) > 1:
            raise ValueError("--uart: one organ at a time (given %d)" % len(specs))
        if len(specs) > 2:
            raise ValueError("--uart: at most two (the second carries a second kit organ)")
        report = Report(a.role, rules, " + ".join(specs), a.only, a.skip)
        cables = [Cable(spec, baud=a.baud) for spec in specs]
        http = master_rules.parse_http(a.http) if a.role == "master" and a.http else None
    except (ValueError, OSError) as e:
        p.error(str(e))
    for cable in cables:
        how = "waiting" if cable.mode == "listen" else "opening"
        sys.stderr.write("conform: %s on %s\n" % (how, cable.spec))
    sys.stderr.flush()
    try:
        for cable in cables:
            cable.open(a.connect_timeout)
    except (TimeoutError, OSError) as e:
        sys.stderr.write("conform: %s\n" % e)
        return 2
    cable = cables[0]
    try:
        if a.role == "organ":
            organ_rules.OrganRun(
                cable, report, boot_seen=cable.mode == "listen", event_budget_ms=a.event_budget_ms
            ).run()
        else:
            run = master_rules.MasterRun(
                cable, report, boot_seen=cable.mode == "listen", http=http, second=cables[1:]
            )
            run.run()
    except KeyboardInterrupt:
        pass
    finally:
        for cable in cables:
            cable.close()
    print(report.json() if a.json else report.text())
    sys.stdout.flush()
    return 0 if report.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
