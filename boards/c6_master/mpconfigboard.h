// organbus master: ESP32-C6 DevKitC-1 with the UART REPL off, so UART(0) and UART(1) are both
// organ ports (PROTOCOL.md section 1). The REPL stays on USB-Serial-JTAG.

#define MICROPY_HW_BOARD_NAME               "organbus master (ESP32-C6 DevKitC-1)"
#define MICROPY_HW_MCU_NAME                 "ESP32C6"

// The stock ESP32_GENERIC_C6 build mirrors the REPL onto UART0; organ traffic there would be
// read as Python input and every print() would reach the organ. Off here.
#define MICROPY_HW_ENABLE_UART_REPL         (0)
