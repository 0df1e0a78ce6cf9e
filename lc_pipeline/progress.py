"""Progress of a long stage: counts, rate and ETA on a tqdm bar (stderr, the CLI) and as lines in a
log (an asset's ``context.log``, the UI). Nothing Dagster-specific: any object with ``info(str)`` logs."""

from __future__ import annotations

import time
from collections.abc import Callable

from tqdm import tqdm


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """Counts, rate and ETA of a long stage: a tqdm bar on stderr (the CLI) and a line in the
    Dagster log (the UI) at most every ``every_s`` seconds and at the end. Use as a context
    manager; ``update(n)`` takes an increment, like tqdm."""

    def __init__(self, log, total: int, desc: str, unit: str = "item", every_s: float = 15.0,
                 clock: Callable[[], float] = time.monotonic):
        self.log, self.total, self.desc, self.unit, self.every_s, self.clock = log, total, desc, unit, every_s, clock
        self.done = 0
        self.start = self.last = clock()
        self.bar = tqdm(total=total, desc=desc, unit=unit)

    def line(self) -> str:
        elapsed = self.clock() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = 100.0 * self.done / self.total if self.total else 100.0
        text = f"{self.desc}: {self.done}/{self.total} {self.unit}s ({pct:.0f}%) in {_duration(elapsed)}"
        if rate > 0:
            text += f", {rate:.1f} {self.unit}/s" if rate >= 1 else f", {1 / rate:.1f} s/{self.unit}"
            if self.done < self.total:
                text += f", ETA {_duration((self.total - self.done) / rate)}"
        return text

    def update(self, n: int = 1) -> None:
        self.done += n
        self.bar.update(n)
        now = self.clock()
        if now - self.last >= self.every_s and self.done < self.total:
            self.last = now
            self.log.info(self.line())

    def close(self) -> None:
        self.bar.close()
        self.log.info(self.line())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            self.close()
        else:
            self.bar.close()
