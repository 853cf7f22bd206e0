# Minimal test runner for the MicroPython unix port: runs every test_* function of the given modules.
import sys


def run(names):
    passed = failed = 0
    for name in names:
        mod = __import__(name)
        for attr in sorted(dir(mod)):
            fn = getattr(mod, attr)
            if not attr.startswith("test_") or not callable(fn):
                continue
            try:
                fn()
                passed += 1
                print("PASS", name, attr)
            except Exception as e:
                failed += 1
                print("FAIL", name, attr)
                sys.print_exception(e)
    print("unix port: %d passed, %d failed" % (passed, failed))
    return failed


def run_cases(cases):
    """[(async case, args)] each under its own asyncio.run, reported as run() reports; the
    number failed (the unix-port runners of cases against a live server)."""
    import asyncio

    passed = failed = 0
    for c, args in cases:
        try:
            asyncio.run(c(*args))
            passed += 1
            print("PASS", c.__name__)
        except Exception as e:
            failed += 1
            print("FAIL", c.__name__)
            sys.print_exception(e)
    print("unix port: %d passed, %d failed" % (passed, failed))
    return failed


if __name__ == "__main__":
    mods = [a.rsplit("/", 1)[-1][:-3] if a.endswith(".py") else a for a in sys.argv[1:]]
    sys.exit(1 if run(mods) else 0)
