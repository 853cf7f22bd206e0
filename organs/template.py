# Organ template: copy this file to make a new organ; the example is a push button (button_wait).
from micropython import const

from organbus import log as eventlog
from organbus.ticks import ticks_add, ticks_diff
from organs.runtime import Organ

MODULE_ID = "BTN_001"
WAIT_MAX_MS = const(2000)  # the longest wait a COMMAND may ask for
_SCAN_MS = const(10)  # how often a waiting button looks at its pin
IDLE_MS = const(60000)  # what poll() answers when no wait runs: nothing due


def button_descriptor(module_id=MODULE_ID):
    """The contract (PROTOCOL.md section 4): what the organ can do, with hard limits."""
    return {
        "module_id": module_id,
        "module_type": "button",
        "hw_version": 0x0100,
        "fw_version": 0x0100,
        "capabilities": [
            {
                "name": "button_wait",
                "description": "Wait up to timeout_ms for a press of the button.",
                "exec_type": "continuous",
                "resource_group": "button",
                "max_duration_ms": WAIT_MAX_MS + 100,  # the timeout, a scan and the wire
                "params": [
                    {
                        "name": "timeout_ms",
                        "type": "int",
                        "min": 100,
                        "max": WAIT_MAX_MS,
                        "unit": "ms",
                    }
                ],
            },
            {
                "name": "button_cancel",
                "description": "Stop waiting for a press.",
                "exec_type": "immediate",
                "resource_group": "",
                "max_duration_ms": 0,
                "params": [],
            },
        ],
    }


class ButtonOrgan:
    """A button on a Pin that reads 0 when pressed (pull-up, e.g. the DevKitC-1's BOOT button).

    button_wait ends with EVENT status 0 on a press, 1 when the timeout passes or on
    button_cancel. The runtime has clamped timeout_ms to 100..2000 before the handler runs.
    """

    def __init__(self, pin, module_id=MODULE_ID, log=eventlog.write):
        self.pin = pin
        self.waiting = False
        self._until = 0
        handlers = {"button_wait": self.button_wait, "button_cancel": self.button_cancel}
        self.organ = Organ(button_descriptor(module_id), handlers, poll=self.poll, log=log)

    def button_wait(self, values, text, now):
        if self.waiting:
            self.organ.finish("button_wait", 1)  # a new wait replaces the old one
        self.waiting = True
        self._until = ticks_add(now, values[0])
        return 0  # started: the EVENT follows

    def button_cancel(self, values, text, now):
        if self.waiting:
            self.waiting = False
            self.organ.finish("button_wait", 1)
        return 0

    def poll(self, now):
        """Called by the runtime's timers (Organ.poll): ms until it is next due."""
        if not self.waiting:
            return IDLE_MS
        if self.pin.value() == 0:
            self.waiting = False
            self.organ.finish("button_wait", 0)
            return IDLE_MS
        if ticks_diff(now, self._until) >= 0:
            self.waiting = False
            self.organ.finish("button_wait", 1)
            return IDLE_MS
        return _SCAN_MS
