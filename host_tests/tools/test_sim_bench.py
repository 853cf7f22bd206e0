# tools/bench_body.py still runs and returns its figures (a smoke run; the figures are not judged here).
import os
import sys

from support import ROOT

sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_body  # noqa: E402


def test_bench_body_returns_every_figure(tmp_path):
    f = bench_body.run(soak_s=2, plans=1, latency_n=2, out_dir=str(tmp_path))
    rt = f["round_trips"]
    assert 0 < rt["ratio"] <= 1.05, (
        "round trips can't beat the wire by more than the 0.1 ms lead: %s" % rt
    )
    assert rt["wire_limit_per_s"] > 400 and rt["organ_ms"] and rt["master_ms"], rt
    assert 0 < f["bus_floor"]["ratio"] <= 1.05, f["bus_floor"]
    assert f["latency"]["samples"] == 2 and f["latency"]["post_to_first_command_ms_median"] > 0, f
    for role in ("master", "led", "speaker"):
        h = f["heap_soak"][role]
        assert h["after_boot"] and h["after_soak"], "%s reported no heap: %s" % (role, h)
