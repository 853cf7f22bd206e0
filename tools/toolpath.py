# The one sys.path bootstrap of every tool (CPython and the unix port): the tree, lib/, tools/, the shim.
"""A tool's first import is `import toolpath`: the tool's own folder, tools/, is sys.path[0] on
both interpreters (and any module of tools/ is importable only with tools/ on the path), so this
module is always found. It puts the tree's root, lib/ and tools/ on sys.path, and on CPython
tools/shim (the host's stand-in for the `micropython` module), right after sys.path[0] so the
interpreter's own folders (".frozen", site-packages) stay after them. `toolpath.ROOT` and
`toolpath.TOOLS` name the folders (absolute, from any working directory)."""

import sys

MP = sys.implementation.name == "micropython"


def _abs_dir(p):
    """The folder holding p, absolute and without "." or ".." (the unix port has no os.path)."""
    if not p.startswith("/"):
        import os

        p = os.getcwd() + "/" + p
    parts = []
    for s in p.split("/"):
        if s == "..":
            if parts:
                parts.pop()
        elif s and s != ".":
            parts.append(s)
    return "/" + "/".join(parts[:-1])


TOOLS = _abs_dir(__file__)
ROOT = _abs_dir(TOOLS)
LIB = ROOT + "/lib"
PATHS = (ROOT, LIB, TOOLS) if MP else (ROOT, LIB, TOOLS, TOOLS + "/shim")


def _install():
    at = 1 if sys.path else 0
    for p in PATHS:
        if p not in sys.path:
            sys.path.insert(at, p)
            at += 1


_install()
