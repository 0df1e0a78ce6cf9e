"""Part of a config, to try it out (config ``only``, ``lcp run --tasks T,... --limit N``): the level's instance
frames narrowed to the selected tasks and to the first ``limit`` instances of each task (and variant) in the order
the builders make them. What the selection left out is counted, never dropped without a word (:class:`Narrowed`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.config import RunSelection


@dataclass
class Narrowed:
    """What :func:`narrowed` kept and left out of one level, for the level's metadata."""

    only: RunSelection
    kept: Counter = field(default_factory=Counter)  # task -> instances kept
    left_out: Counter = field(default_factory=Counter)  # task -> instances built and left out by the selection

    def metadata(self) -> dict:
        return {"tasks": list(self.only.tasks) or "all", "limit": self.only.limit,
                "kept": dict(sorted(self.kept.items())), "left_out": dict(sorted(self.left_out.items())),
                "selected_tasks_without_instances": [t for t in self.only.tasks if not self.kept[t]]}


def narrowed(frames: Iterable[pl.DataFrame], record: Narrowed | None) -> Iterator[pl.DataFrame]:
    """``frames`` (INSTANCES rows) as they are when ``record`` is None (no selection); else only the rows of
    ``record.only``'s tasks, at most ``only.limit`` per (task, variant), counting in ``record`` what was kept and
    left out."""
    if record is None:
        yield from frames
        return
    only = record.only
    taken: Counter = Counter()
    for frame in frames:
        tasks = frame["task"].to_list()
        variants = frame["variant"].to_list() if "variant" in frame.columns else [""] * frame.height
        keep = []
        for task, variant in zip(tasks, variants, strict=True):
            wanted = (not only.tasks or task in only.tasks) and (
                only.limit is None or taken[(task, variant)] < only.limit)
            if wanted:
                taken[(task, variant)] += 1
                record.kept[task] += 1
            else:
                record.left_out[task] += 1
            keep.append(wanted)
        if all(keep):
            yield frame
        elif any(keep):
            yield frame.filter(pl.Series(keep, dtype=pl.Boolean))
