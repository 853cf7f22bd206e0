# Simulated `network` for the unix port: a station interface that is always up on loopback.
STA_IF = 0
AP_IF = 1
STAT_GOT_IP = 1010


class WLAN:
    def __init__(self, interface=STA_IF):
        self._active = False

    def active(self, on=None):
        if on is None:
            return self._active
        self._active = bool(on)

    def connect(self, ssid=None, key=None, **kw):
        self._active = True

    def disconnect(self):
        pass

    def isconnected(self):
        return self._active

    def status(self, param=None):
        return STAT_GOT_IP if self._active else 0

    def ifconfig(self, cfg=None):
        return ("127.0.0.1", "255.0.0.0", "127.0.0.1", "127.0.0.1")

    def ipconfig(self, name=None, **kw):
        return "127.0.0.1" if name == "addr4" else None

    def config(self, *args, **kw):
        return None


def hostname(name=None):
    return "organbus-sim"
