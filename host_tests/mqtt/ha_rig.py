# Home Assistant's side of the MQTT tests, played by paho-mqtt: every message kept, waited for by topic.
import threading
import time

import paho.mqtt.client as paho


class HA:
    """A paho client subscribed to `filters`; `msgs` is [(t, topic, payload, retain)]."""

    def __init__(self, port, filters=("homeassistant/#", "organbus/#"), cid="ha"):
        self.msgs = []
        self.cond = threading.Condition()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid)
        self.c.on_message = self._on
        self.c.on_connect = lambda cl, ud, fl, rc, pr: [cl.subscribe(f, 1) for f in filters]
        self.c.reconnect_delay_set(0.2, 1)
        self.c.connect("127.0.0.1", port, 30)
        self.c.loop_start()

    def _on(self, client, userdata, m):
        with self.cond:
            self.msgs.append((time.monotonic(), m.topic, bytes(m.payload), bool(m.retain)))
            self.cond.notify_all()

    def mark(self):
        with self.cond:
            return len(self.msgs)

    def wait(self, topic, pred=None, timeout=10, since=0):
        """The first message on `topic` from index `since` whose payload satisfies pred."""
        end = time.monotonic() + timeout
        i = since
        with self.cond:
            while True:
                while i < len(self.msgs):
                    m = self.msgs[i]
                    i += 1
                    if m[1] == topic and (pred is None or pred(m[2])):
                        return m
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def last(self, topic):
        with self.cond:
            for m in reversed(self.msgs):
                if m[1] == topic:
                    return m
        return None

    def publish(self, topic, payload, qos=1):
        self.c.publish(topic, payload, qos=qos).wait_for_publish(5)

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()
