"""Checks of built HELMET instances (spec helmet.md §9: the gold passage at its configured depth)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection

import polars as pl

from lc_pipeline.construct.helmet.context import SUITE
from lc_pipeline.construct.helmet.fitting import depth_position, evenly_spaced_depths

RAG_TASKS = ("rag",)  # the packaged task of kind "rag"


def gold_depth_violations(instances: pl.DataFrame, n_depths: int, tasks: Collection[str] = RAG_TASKS) -> list[str]:
    """RAG (one gold passage) instances whose gold passage is not at its depth, or items that lack a depth.

    The gold block is the context block from the evidence document; with k blocks it must
    sit at index ``depth_position(depth, k)``, and each (item, level) must have exactly the
    ``n_depths`` evenly spaced depths. ``tasks``: the names of the tasks built with ``kind: rag``
    (default: the packaged ``rag``).
    """
    rag = instances.filter((pl.col("suite") == SUITE) & pl.col("task").is_in(list(tasks)))
    want = set(evenly_spaced_depths(n_depths))
    bad: list[str] = []
    seen: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for iid, task, item, depth, target, ev, ctx in rag.select(
        "instance_id", "task", "item_id", "depth", "target_tokens", "evidence_doc_ids", "context_doc_ids"
    ).iter_rows():
        seen[(task, item, target)].append(round(depth, 10))
        gold = [i for i, b in enumerate(ctx) if b.split("#")[0] in set(ev)]
        if len(gold) != 1 or gold[0] != depth_position(depth, len(ctx)):
            bad.append(iid)
    for (task, item, target), depths in seen.items():
        if sorted(depths) != sorted(want):
            bad.append(f"{item}@{target}: depths {sorted(depths)}" if len(tasks) == 1
                       else f"{task}/{item}@{target}: depths {sorted(depths)}")
    return bad
