# Flash and deploy one organbus board: firmware (esptool), board checks, mpy-cross, mpremote, verify.
"""Put a role on a board: `python tools/flash.py --help` (the text is tools/deploy/cli.py's USAGE)."""

import sys

import toolpath  # noqa: F401  (the tree, lib/ and tools/ on sys.path)
from deploy.cli import main  # (the code is the package tools/deploy/)

if __name__ == "__main__":
    sys.exit(main())
