# The virtual body's unix-port master at its documented 80 KB for data: /speak bodies up to the 4 KB limit are spoken, parallel ones never wait for the speaker, a plan beside them is served.
#
# Issue 24 (10): at 80 KB a 3.9 KB /speak body, under the 4 KB limit, got 503 (its text was cut
# out whole: no free block that size); 8 /speak at once waited for the speaker without bound
# and took an unrelated plan's connection slot.
import threading
import time

from e2e_support import VirtualBody, one_step

TOKEN = "speak-heap-token"


def test_long_and_parallel_speaks_at_80k(tmp_path):
    from vbody import launch

    heap = "%dk" % (launch.DATA_NEEDS["master"] // 1024)
    vb = VirtualBody(
        out_dir=str(tmp_path), heap=heap, master_config={"http": {"token": TOKEN}}
    ).start()
    try:
        assert vb.wait_http(30), "master HTTP never came up: %s" % vb.failure()
        assert vb.wait_menu(["speak", "led_on"], 40) is not None, vb.failure()
        # long bodies, short speech: the master forwards the first 240 bytes ("Hi." and spaces)
        # A 503 "short of memory right now, try again" (Retry-After: 1) is asked again once after
        # that second, as a client is asked to and the other heap tests do (seen once in about
        # 20 runs: a 272-byte block not found beside two queued plans); at most one of the 9
        # may need it (before: 7 of 9 refused, every time).
        got = []
        retried = 0
        for size in (100, 1000, 2000, 3000, 3900, 4080, 3900, 2000, 4080):
            for _ in range(20):  # the speaker's queue full (503, Retry-After: 2): try again
                status, out = vb.request("POST", "/speak", {"text": "Hi." + " " * (size - 3)})
                if status == 503 and "right now, try again" in out.get("error", "") and not retried:
                    retried += 1
                    time.sleep(1)
                    continue
                if status != 503 or "wait for the organ" not in out.get("error", ""):
                    break
                time.sleep(2)
            got.append((size, status, out))
        bad = [g for g in got if g[1] not in (200, 202)]
        assert not bad, "long /speak bodies refused at %s: %r" % (heap, bad)
        assert all(("notes" in g[2]) == (g[0] > 500) for g in got), got
        results = []

        def speak(i):
            t0 = time.monotonic()
            try:
                status, out = vb.request("POST", "/speak", {"text": "line %d" % i})
            except OSError as e:
                status, out = repr(e), None
            results.append((status, out, time.monotonic() - t0))

        threads = [threading.Thread(target=speak, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
            time.sleep(0.02)
        plans = [vb.plan(one_step("led_on" if i % 2 else "led_off"))[0] for i in range(5)]
        for t in threads:
            t.join(30)
        assert plans == [200] * 5, "plans beside 8 /speak: %r" % plans
        # each answered at once: spoken now, queued (two at most), or the queue is full
        for status, out, took in results:
            assert status in (200, 202) or (
                status == 503 and "wait for the organ" in out["error"]
            ), results
            assert took < 5, "no /speak waited for the speech: %r" % results
        assert [r[0] for r in results].count(202) <= 2, results
        assert vb.failure() is None, vb.failure()
    finally:
        vb.stop()
