# Guest side: runs every test_* function of the named modules on the RV32 image; one line per test.
import sys

from rv32count import instret


def run(names, skip=()):
    """skip: "module.function" names not to run (reported as SKIP lines)."""
    passed = failed = skipped = 0
    for name in names:
        try:
            mod = __import__(name)
        except Exception as e:
            failed += 1
            print("FAIL", name, "<import>")
            sys.print_exception(e)
            continue
        for attr in sorted(dir(mod)):
            fn = getattr(mod, attr)
            if not attr.startswith("test_") or not callable(fn):
                continue
            if name + "." + attr in skip:
                skipped += 1
                print("SKIP", name, attr)
                continue
            start = instret()
            try:
                fn()
            except Exception as e:
                failed += 1
                print("FAIL", name, attr)
                sys.print_exception(e)
                continue
            passed += 1
            print("PASS", name, attr, (instret() - start) & 0xFFFFFFFF)
    print("rv32: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return failed
