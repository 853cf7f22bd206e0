# The MQTT link's package: the sans-IO MQTT 3.1.1 packet codec (packet.py); client, discovery and link to come.
