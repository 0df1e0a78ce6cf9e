"""Progress of long asset stages: counts, rate and ETA in the Dagster log (and a tqdm bar on stderr)."""

from __future__ import annotations

from lc_pipeline.progress import Progress


class Log:
    """Collects what an asset would send to context.log."""

    def __init__(self):
        self.lines: list[str] = []

    def info(self, msg: str) -> None:
        self.lines.append(msg)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_carry_counts_rate_and_eta_at_most_every_interval():
    log, clock = Log(), Clock()
    with Progress(log, 1000, "embed passages", unit="passage", every_s=15, clock=clock) as bar:
        for _ in range(10):
            clock.now += 5
            bar.update(100)
    # Updates at 5 s intervals, a line every 15 s: at 15 s and 30 s and 45 s, then the final line.
    assert log.lines[0] == "embed passages: 300/1000 passages (30%) in 0m15s, 20.0 passage/s, ETA 0m35s"
    assert len(log.lines) == 4
    assert log.lines[-1] == "embed passages: 1000/1000 passages (100%) in 0m50s, 20.0 passage/s"


def test_every_step_logged_when_interval_is_zero_and_long_durations_in_hours():
    log, clock = Log(), Clock()
    stages = Progress(log, 2, "instances 2k", unit="suite", every_s=0, clock=clock)
    clock.now = 4000
    stages.update()
    clock.now = 4100
    stages.update()
    stages.close()
    assert log.lines == ["instances 2k: 1/2 suites (50%) in 1h06m, 4000.0 s/suite, ETA 1h06m",
                         "instances 2k: 2/2 suites (100%) in 1h08m, 2050.0 s/suite"]


def test_a_failed_stage_logs_no_final_line():
    log = Log()
    try:
        with Progress(log, 3, "x", every_s=1000) as bar:
            bar.update()
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert log.lines == []
