# Runs app.run on the unix port for a config from argv, then prints the master modules it imported.
import asyncio
import gc
import json
import sys

from master import app


class QuietUart:  # an organ port with nothing on it
    def read(self, n=-1):
        return None

    def readinto(self, buf, n=-1):
        return None

    def write(self, data):
        return len(data)

    def any(self):
        return 0


async def main(config, port):
    board = {"http": ("127.0.0.1", port), "console": None, "flash": "/tmp"}
    board["xiaozhi"] = {"ident": {"device_id": "aa:bb:cc:dd:ee:01", "client_id": "x"}}
    if len(sys.argv) > 3:
        board.update(json.loads(sys.argv[3]))  # e.g. no HTTP, the console link on stdin
    asyncio.create_task(app.run({1: QuietUart()}, config, board))
    await asyncio.sleep_ms(600)
    gc.collect()
    print("heap in use:", gc.mem_alloc())  # docs/master.md: what the unconfigured links save
    print(json.dumps(sorted(m for m in sys.modules if m.startswith("master"))))


asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2])))
