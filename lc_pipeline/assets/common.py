"""Small helpers shared by the asset modules (metadata, fingerprints, plots, progress)."""

from __future__ import annotations

import time
from collections.abc import Callable

import dagster as dg
import polars as pl
from tqdm import tqdm

from lc_pipeline.plots import markdown_image

FINGERPRINT_KEY = "lcp/fingerprint"


def preview(df: pl.DataFrame, n: int = 5, width: int = 80) -> dg.MetadataValue:
    """A markdown preview with long strings cut, so the UI stays readable."""
    shown = df.head(n).with_columns(
        [pl.col(c).cast(pl.String).str.slice(0, width) for c, t in df.schema.items() if t in (pl.String, pl.Categorical)]
    )
    header = "| " + " | ".join(shown.columns) + " |"
    sep = "| " + " | ".join("---" for _ in shown.columns) + " |"
    rows = ["| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in r) + " |" for r in shown.iter_rows()]
    return dg.MetadataValue.md("\n".join([header, sep, *rows]))


def plot_metadata(context: dg.AssetExecutionContext, name: str, make: Callable[[], bytes]) -> dict:
    """``{name: markdown with the PNG inline}``: the UI shows it on the materialization.

    A plot that fails is logged and shown as text instead: a figure never costs the data.
    """
    try:
        return {name: dg.MetadataValue.md(markdown_image(make(), name))}
    except Exception as exc:  # noqa: BLE001  (any plotting bug; the error is logged and shown)
        context.log.warning(f"plot {name} failed: {type(exc).__name__}: {exc}")
        return {name: dg.MetadataValue.text(f"plot failed: {type(exc).__name__}: {exc}")}


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
