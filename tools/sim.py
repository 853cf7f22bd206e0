#!/usr/bin/env python3
# The virtual body: boards as MicroPython unix-port processes on simulated hardware, joined by the paced bus.
"""organbus simulator.

  tools/sim.py                      master + LED organ + speaker organ on the paced bus, console
  tools/sim.py --plan FILE          the same, runs one plan, prints the report JSON, stops
  tools/sim.py --script FILE        the same, runs console lines from FILE, stops
  tools/sim.py --config FILE        the master's /config.json, as on a board (token, update key, ...)
  tools/sim.py board ROLE [...]     one board (master, led, speaker) alone, its UARTs on TCP

Type `help` in the console for its commands. The code is the package tools/vbody/.
"""

import sys

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from vbody.cli import main

if __name__ == "__main__":
    sys.exit(main())
