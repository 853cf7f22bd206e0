# The MQTT link (config "mqtt"): packets (packet.py), client (client.py), HA discovery (discovery.py), the link (link.py).
