# Runs every test module marked `UNIX_PORT = True` a second time, on the real MicroPython unix port.
import os
import re

import pytest

from support import MICROPYPATH, ROOT, TESTS, run_micropython

MARK = re.compile(r"^UNIX_PORT = True", re.M)


def marked():
    """(tier, module) for every marked test module under host_tests/, in a stable order."""
    out = []
    for tier in sorted(os.listdir(TESTS)):
        d = os.path.join(TESTS, tier)
        if not os.path.isdir(d) or tier in ("helpers", "data"):
            continue
        for name in sorted(os.listdir(d)):
            if name.startswith("test_") and name.endswith(".py"):
                with open(os.path.join(d, name)) as f:
                    if MARK.search(f.read()):
                        out.append((tier, name[:-3]))
    return out


@pytest.mark.parametrize("tier,module", marked(), ids=lambda v: v)
def test_module_on_unix_port(tier, module):
    path = MICROPYPATH + ":" + os.path.join(TESTS, tier)
    r = run_micropython(["host_tests/helpers/mprun.py", module], path=path, timeout=600)
    assert r.returncode == 0, "unix port run of %s failed:\n%s%s" % (module, r.stdout, r.stderr)
    assert " 0 failed" in r.stdout and "FAIL" not in r.stdout, r.stdout
