# Flash and deploy one organbus board: firmware (esptool), board checks, mpy-cross, mpremote, verify.
"""Put a role on a board: `python tools/flash.py --help` (the text is tools/deploy/cli.py's USAGE)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from deploy.cli import main  # noqa: E402  (the code is the package tools/deploy/)

if __name__ == "__main__":
    sys.exit(main())
