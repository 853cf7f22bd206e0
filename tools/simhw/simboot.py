# Boot of a simulated board on the unix port: runs main.py from the current folder (the stage
# tools/vbody/launch.py made: main.py, board.json, settings.json) as __main__, as the board
# itself would, after optional simulation hooks:
#   ORGANBUS_SIM_HEAP_MS  every N ms print {"event": "heap", "alloc": .., "free": ..} after a
#                         gc.collect(), from a task added beside the board's own (benchmarks).
#   ORGANBUS_SIM_HEAP_MAP if set, each heap report is followed by micropython.mem_info()'s
#                         lines (the largest free block: "max free sz"), as print lines;
#                         "verbose": mem_info(1), the block map too.
#   ORGANBUS_SIM_PRELOAD  modules (a,b.c,...) imported after boot.py, before main.py (--heap:
#                         the code there before the data, as frozen code is; tools/vbody/launch.py)
import os
import sys

sys.path.insert(1, os.getcwd())

_every = os.getenv("ORGANBUS_SIM_HEAP_MS")
if _every:
    import asyncio
    import gc

    _run = asyncio.run
    _map = os.getenv("ORGANBUS_SIM_HEAP_MAP")
    if _map:
        import micropython

    async def _heap_report(ms):
        while True:
            gc.collect()
            print('{"event": "heap", "alloc": %d, "free": %d}' % (gc.mem_alloc(), gc.mem_free()))
            if _map:
                micropython.mem_info(1 if _map == "verbose" else 0)
            await asyncio.sleep_ms(ms)

    def _run_with_report(main):
        async def both():
            asyncio.create_task(_heap_report(int(_every)))
            return await main

        return _run(both())

    asyncio.run = _run_with_report

try:  # boot.py first, when the board has one, as MicroPython does (the master's slot choice)
    _f = open("boot.py")
except OSError:
    _f = None
if _f is not None:
    with _f:
        _code = compile(_f.read(), "boot.py", "exec")
    exec(_code, {"__name__": "__main__", "__file__": "boot.py"})

_pre = os.getenv("ORGANBUS_SIM_PRELOAD")
if _pre:
    import gc

    for _m in _pre.split(","):
        try:
            __import__(_m)
        except Exception:  # main.py imports it again and says why, as on a board
            pass
        gc.collect()
    del _m
del _pre

with open("main.py") as _f:
    _code = compile(_f.read(), "main.py", "exec")
del _f
exec(_code, {"__name__": "__main__", "__file__": "main.py"})
