"""Checks of built HELMET instances (spec helmet.md §9: the gold passage at its configured depth)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import ClassVar

import polars as pl

from lc_pipeline.benchmarks.helmet.construction.context import SUITE
from lc_pipeline.benchmarks.helmet.construction.fitting import (
    depth_position,
    evenly_spaced_depths,
)
from lc_pipeline.construct.instance_checks import CheckResult, SuiteCheck, SuiteRules
from lc_pipeline.tasks.catalog import catalog_for

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


CHECK_RAG_DEPTHS = "helmet_rag_gold_at_depths"


class GoldDepthCheck(SuiteCheck):
    """:func:`gold_depth_violations` over a level's RAG rows (the depth check spans batches)."""

    def __init__(self, config) -> None:
        self.n_depths = config.helmet.n_depths
        # Every task HELMET's builder makes with kind rag (a user's copy too), by its task files.
        self.rag_tasks = sorted({t.name for t in catalog_for(config)
                                 if t.builder.name == SUITE and t.builder.options.get("kind") == "rag"})
        self.rag: list[pl.DataFrame] = []  # RAG rows' ids and block ids

    def add(self, out: pl.DataFrame) -> None:
        self.rag.append(out.filter((pl.col("suite") == SUITE) & pl.col("task").is_in(self.rag_tasks)).select(
            "instance_id", "item_id", "suite", "task", "depth", "target_tokens", "evidence_doc_ids", "context_doc_ids"))

    def result(self) -> CheckResult:
        rag = pl.concat(self.rag)
        return CheckResult(CHECK_RAG_DEPTHS, gold_depth_violations(rag, self.n_depths, self.rag_tasks),
                           {"rag_instances": rag.height})


class HelmetRows(SuiteRules):
    """The instance checks' rules for HELMET's rows (registered as suite ``helmet``): its contexts hold passages, cut
    documents and pairs, not whole evidence documents; its per-dataset tasks have a size of their own; RAG's gold
    passage sits at each depth (spec helmet.md §2.2)."""

    holds_whole_documents = False
    checks: ClassVar[Mapping[str, str]] = {
        CHECK_RAG_DEPTHS: "HELMET RAG: the gold passage sits at each of the evenly spaced depths"}

    def fixed_size_tasks(self, config) -> set[str]:
        # HELMET's per-dataset tasks take the spec's count of passages / shots per level (builder.options.per_level)
        # or cut their document to the level less a buffer and the answer (builder.options.buffer: ∞Bench Sum at 8k
        # keeps 8192 - 1400 tokens), not a fill to the target: their length is the table's.
        return {t.name for t in catalog_for(config) if t.builder.name == SUITE
                and {"per_level", "buffer"} & set(t.builder.options)}

    def level_checks(self, config) -> list[SuiteCheck]:
        return [GoldDepthCheck(config)]


ROWS = HelmetRows()
