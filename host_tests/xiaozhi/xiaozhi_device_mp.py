# A xiaozhi device on the unix port: the Link over the fake facade until the server says reboot (test_xiaozhi_link).
import json
import sys

import asyncio

from master.links import xiaozhi
from master.links import xiaozhi_link
from xiaozhi_fakes import Facade

IDENT = {"device_id": "aa:bb:cc:dd:ee:02", "client_id": "12345678-1234-4123-8123-123456789abd"}


class RebootFacade(Facade):
    def __init__(self, done, **kw):
        super().__init__(**kw)
        self.done = done

    def reset(self):
        self.resets += 1
        self.done.set()


async def main(ota_url):
    done = asyncio.Event()
    f = RebootFacade(done, play_ms=100)
    dev = xiaozhi.Device(f, "0.1.0")
    link = xiaozhi_link.Link(dev, {"ota_url": ota_url}, IDENT, backoff=xiaozhi.Backoff(100, 400))
    task = asyncio.create_task(link.run())
    await asyncio.wait_for(done.wait(), 120)
    link.stop()
    task.cancel()
    print(json.dumps({"commands": f.commands, "status": link.status()}))


asyncio.run(main(sys.argv[1]))
