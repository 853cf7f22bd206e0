# The MQTT tier's broker: Debian's Mosquitto on a free loopback port, with a config file the test writes (MQTT_TIER_OFF=1: as if absent).
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

MOSQUITTO = (
    None
    if os.getenv("MQTT_TIER_OFF")
    else shutil.which("mosquitto")
    or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
)


class Broker:
    def __init__(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.dir = tempfile.mkdtemp()
        self.conf = os.path.join(self.dir, "mosquitto.conf")
        with open(self.conf, "w") as f:
            f.write("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n" % self.port)
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            [MOSQUITTO, "-c", self.conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not listen on %d" % self.port)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


NOT_RUN = "mosquitto not installed (apt-get install mosquitto): the MQTT tier was not run"
STATS = {"broker_tests": 0}


def pytest_terminal_summary(terminalreporter):
    # the tier's line in pytest's summary, as the RV32 tier's: a broker that was not there is
    # said, never counted as passed
    if STATS["broker_tests"] and MOSQUITTO is None:
        line = "mqtt tier NOT RUN: %d tests on a broker skipped: %s" % (
            STATS["broker_tests"],
            NOT_RUN,
        )
        terminalreporter.write_line(line, yellow=True)


@pytest.fixture
def broker():
    STATS["broker_tests"] += 1
    if MOSQUITTO is None:
        pytest.skip(NOT_RUN)
    b = Broker()
    yield b
    b.stop()
    shutil.rmtree(b.dir)
