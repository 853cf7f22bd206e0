# pytest set-up: the protocol core, the host shim, the test helpers and the tools on CPython's import path.
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (
    os.path.join(ROOT, "tools", "shim"),
    ROOT,
    os.path.join(ROOT, "lib"),
    os.path.join(HERE, "helpers"),
    os.path.join(ROOT, "tools"),
):
    if p not in sys.path:
        sys.path.insert(0, p)
