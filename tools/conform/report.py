# The kit's report: one line per rule (pass, fail with seen against expected, n/a with why).
import json

PASS = "pass"
FAIL = "fail"
NA = "n/a"


class Rule:
    __slots__ = ("name", "section", "says")

    def __init__(self, name, section, says):
        self.name = name
        self.section = section
        self.says = says


class Report:
    """Results of one run, kept in the order of `rules` (the fixed order of the kit)."""

    def __init__(self, role, rules, spec, only=(), skip=()):
        self.role = role
        self.rules = rules
        self.spec = spec
        names = [r.name for r in rules]
        for n in list(only) + list(skip):
            if n not in names:
                raise ValueError(
                    "unknown rule %r: the %s rules are %s" % (n, role, ", ".join(names))
                )
        self.only = set(only)
        self.skip = set(skip)
        self.results = {}  # name -> (status, detail)
        self.subject = None  # module_id / what was certified, when known

    def wanted(self, *names):
        """True when any of these rules is to be run (--only/--skip)."""
        for n in names:
            if n in self.skip:
                continue
            if not self.only or n in self.only:
                return True
        return False

    def set(self, name, status, detail=""):
        if name not in {r.name for r in self.rules}:
            raise KeyError(name)
        if not self.wanted(name):
            return
        if name in self.results and self.results[name][0] == FAIL and status != FAIL:
            return  # a rule failed once stays failed
        self.results[name] = (status, detail)

    def passed(self, name, detail=""):
        self.set(name, PASS, detail)

    def failed(self, name, detail):
        self.set(name, FAIL, detail)

    def na(self, name, why):
        self.set(name, NA, why)

    def rest_na(self, why):
        """Every wanted rule without a result yet is not applicable, for `why`."""
        for r in self.rules:
            if r.name not in self.results:
                self.na(r.name, why)

    def status(self, name):
        return self.results.get(name, (None, ""))[0]

    def rows(self):
        out = []
        for r in self.rules:
            if not self.wanted(r.name):
                continue
            status, detail = self.results.get(
                r.name, (FAIL, "not reached: the run stopped before this rule")
            )
            out.append(
                {
                    "rule": r.name,
                    "section": r.section,
                    "says": r.says,
                    "status": status,
                    "detail": detail,
                }
            )
        return out

    def ok(self):
        rows = self.rows()
        return (
            bool(rows)
            and all(row["status"] != FAIL for row in rows)
            and any(row["status"] == PASS for row in rows)
        )

    def summary(self):
        rows = self.rows()
        counts = {PASS: 0, FAIL: 0, NA: 0}
        for row in rows:
            counts[row["status"]] += 1
        return counts

    def text(self):
        lines = ["conform %s on %s%s" % (self.role, self.spec, self._subject())]
        width = max([len(r.name) for r in self.rules] + [10])
        for row in self.rows():
            line = "%-4s %-*s %-4s %s" % (
                row["status"],
                width,
                row["rule"],
                row["section"],
                row["says"],
            )
            if row["detail"]:
                line += ": " + row["detail"]
            lines.append(line)
        c = self.summary()
        lines.append(
            "%s: %d passed, %d failed, %d not applicable"
            % ("CERTIFIED" if self.ok() else "NOT CERTIFIED", c[PASS], c[FAIL], c[NA])
        )
        return "\n".join(lines)

    def _subject(self):
        return " (%s)" % self.subject if self.subject else ""

    def json(self):
        c = self.summary()
        return json.dumps(
            {
                "role": self.role,
                "spec": self.spec,
                "subject": self.subject,
                "ok": self.ok(),
                "passed": c[PASS],
                "failed": c[FAIL],
                "not_applicable": c[NA],
                "rules": self.rows(),
            }
        )
