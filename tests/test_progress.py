"""Progress output: bars on a terminal only, plain lines now and then in a log."""

from __future__ import annotations

import io

from patchgate.report.console import LineProgress, Silent, progress


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_a_log_gets_a_line_every_few_seconds_and_one_at_the_end():
    out, clock = io.StringIO(), Clock()
    with LineProgress(100, "latency", out, every_s=10, clock=clock) as bar:
        for i in range(100):
            clock.t = i * 0.5  # 50 s in all
            bar.set_postfix_str(f"round {i // 10 + 1}/10")
            bar.update(1)
        bar.total += 20  # more looks
        bar.update(20)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 5  # at 10, 20, 30, 40 s and the end
    assert lines[0] == "[patchgate] latency: 21/100 calls (round 3/10)"
    assert lines[-1] == "[patchgate] latency: 120/120 calls in 50 s"


def test_quiet_and_non_terminal_streams_get_no_bar():
    assert isinstance(progress(10, "x", quiet=True), Silent)
    assert isinstance(progress(10, "x", stream=io.StringIO()), LineProgress)
    quiet = progress(None, "x", quiet=True)
    with quiet:
        quiet.update(3)
    assert quiet.n == 3
