# pytest set-up: the protocol core and the host shim on CPython's import path.
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for p in (
    os.path.join(ROOT, "tools", "shim"),
    ROOT,
    os.path.join(ROOT, "lib"),
    os.path.join(HERE, "helpers"),
):
    if p not in sys.path:
        sys.path.insert(0, p)
