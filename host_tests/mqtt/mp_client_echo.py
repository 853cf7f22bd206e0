# master/links/mqtt/client.py on the unix port against the test's broker: connect, subscribe, QoS 1 echo.
import sys
import asyncio
from master.links.mqtt.client import Client

port = int(sys.argv[1])
got = []


async def main():
    c = Client("127.0.0.1", port, "mp1", 2, will=("mp1/avail", b"offline", 1, True))
    c.subscriptions = [("mp1/in", 1)]
    c.on_message = lambda t, p: got.append((t, p))
    c.on_connect = lambda: c.publish("mp1/in", b"echo", 1)
    t = asyncio.create_task(c.run())
    for _ in range(50):
        await asyncio.sleep(0.1)
        if got:
            break
    print("connected", c.connected, got)


asyncio.run(main())
