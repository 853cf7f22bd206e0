# The MQTT tier's broker: Debian's Mosquitto on a free loopback port, with a config file the test writes.
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

MOSQUITTO = shutil.which("mosquitto") or (
    "/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None
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


@pytest.fixture
def broker():
    if MOSQUITTO is None:
        pytest.skip(
            "mosquitto not installed (apt-get install mosquitto): the MQTT tier was not run"
        )
    b = Broker()
    yield b
    b.stop()
    shutil.rmtree(b.dir)
