# organbus master firmware: ESP32-C6, UART REPL off, lib/ + master/ + aiorepl frozen.
# Build from ports/esp32 of a MicroPython checkout (v1.28 or newer):
#   make BOARD_DIR=/path/to/organbus/boards/c6_master
set(IDF_TARGET esp32c6)

set(SDKCONFIG_DEFAULTS
    boards/sdkconfig.base
    ${SDKCONFIG_IDF_VERSION_SPECIFIC}
    boards/sdkconfig.ble
    ${MICROPY_BOARD_DIR}/sdkconfig.board
)

set(MICROPY_FROZEN_MANIFEST ${MICROPY_BOARD_DIR}/manifest.py)
