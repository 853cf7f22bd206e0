# Firmware for the speaker organ board (optional: stock ESP32_GENERIC_C6 + tools/flash.py works too).
# Build from ports/esp32: make BOARD=ESP32_GENERIC_C6 FROZEN_MANIFEST=/path/to/boards/speaker_organ/manifest.py
include("$(PORT_DIR)/boards/manifest.py")

include("../../lib/organbus/manifest.py")

# Only the protocol core is frozen. The organs package stays on the filesystem (tools/flash.py
# copies it): a frozen package cannot hold a subpackage from /lib, and organs/voice reads its
# lexicon and rules from files beside its modules.
