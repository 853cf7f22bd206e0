# The rv32 tier's line in pytest's summary: how many tests ran on the image, or why it did not run.
import test_rv32_port as tier


def pytest_terminal_summary(terminalreporter):
    s = tier.STATS
    if s["not_run"]:
        terminalreporter.write_line("rv32 tier NOT RUN: " + s["not_run"], yellow=True)
    elif s["modules"]:
        terminalreporter.write_line(
            "rv32 tier: %d modules on the RV32 image: %d passed, %d failed, %d skipped or expected "
            "to differ" % (s["modules"], s["passed"], s["failed"], s["skipped"])
        )
