# Firmware for the speaker organ board (optional: stock ESP32_GENERIC_C6 + tools/flash.py works too).
# Build from ports/esp32: make BOARD=ESP32_GENERIC_C6 FROZEN_MANIFEST=/path/to/boards/speaker_organ/manifest.py
# First, once per MicroPython tree: python3 /path/to/organbus/tools/mpy_tool_align.py /path/to/micropython
# (frozen native code must stay 2-aligned on the C6: boards/c6_master/README.md)
include("$(PORT_DIR)/boards/manifest.py")

include("../../lib/organbus/manifest.py")

# Only the protocol core is frozen. The organs package stays on the filesystem (tools/flash.py
# copies it): a frozen package cannot hold a subpackage from /lib, and organs/voice reads its
# lexicon and rules from files beside its modules.
