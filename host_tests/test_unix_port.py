# Runs every test module marked `UNIX_PORT = True` a second time, on the real MicroPython unix port.
import os
import re

import pytest

from support import ROOT, run_micropython

HERE = os.path.join(ROOT, "host_tests")
MARK = re.compile(r"^UNIX_PORT = True", re.M)


def _marked():
    out = []
    for name in sorted(os.listdir(HERE)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(HERE, name)) as f:
                if MARK.search(f.read()):
                    out.append(name[:-3])
    return out


@pytest.mark.parametrize("module", _marked())
def test_module_on_unix_port(module):
    r = run_micropython(["host_tests/mprun.py", module], timeout=600)
    assert r.returncode == 0, "unix port run of %s failed:\n%s%s" % (module, r.stdout, r.stderr)
    assert " 0 failed" in r.stdout and "FAIL" not in r.stdout, r.stdout
