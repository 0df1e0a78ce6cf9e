"""The QA suite at one level: which items it uses, their instances batch by batch, LV-Eval's variants.

Token levels: the items whose evidence fits the smallest level are eligible (levels share their
items); ``select_items`` picks ``items_per_length`` of them once; each becomes one row per configured
depth (construct/assembly/), in batches of at most ``items_per_batch_at`` items. Word levels
(``length_unit: words``): LV-Eval's mixing of whole documents (benchmarks/lveval/levels.py). After each
batch its LV-Eval variant rows (CFI / KPR) follow their plain rows. Each item is prompted with its
own task's template (``prompt_for``: construct/task_prompts.py). Pure: no Dagster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import polars as pl

from lc_pipeline.benchmarks.lveval.levels import build_word_level_instances
from lc_pipeline.benchmarks.qa.items import qa_suite_items
from lc_pipeline.config import level_tokens
from lc_pipeline.construct.assembly import (
    ITEMS_PER_BATCH,
    items_per_batch_at,
    iter_instance_batches,
)
from lc_pipeline.construct.build_request import BuildError, BuildRequest
from lc_pipeline.construct.task_prompts import qa_prompt_for


def items_per_batch(level: str, config) -> int:
    """Each item makes a row per depth and LV-Eval variant; a batch holds ~BATCH_TOKENS prompt tokens."""
    return items_per_batch_at(level_tokens(level), len(config.depths) * len(config.lveval.variants), ITEMS_PER_BATCH)


def assemble(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """Builder ``qa.assemble``, the QA suite: each selected item's evidence placed at the configured depths among hard
    negatives and fillers (token levels, construct/assembly/) or mixed whole (LV-Eval's word levels,
    benchmarks/lveval/levels.py), each row followed by its LV-Eval variants (benchmarks/lveval/variants.py)."""
    yield from build(request.inputs, qa_prompt_for(request.inputs.config, request.inputs.catalog))


def batches(inputs: Any) -> int:
    """How many frames :func:`assemble` yields at ``inputs.level`` (one per batch of items at token levels)."""
    config = inputs.config
    if config.length_unit == "tokens" and config.released is None:
        return -(-config.items_per_length // items_per_batch(inputs.level, config))
    return 1


def build(inputs: Any, prompt_for: Callable[[dict], Any]) -> Iterator[pl.DataFrame]:
    """The QA suite's rows at ``inputs.level`` (plain rows, each followed by its LV-Eval variants)."""
    from lc_pipeline.benchmarks.lveval.variants import add_variants

    for plain in _plain_batches(inputs, prompt_for):
        try:  # LV-Eval: CFI / KPR rows after each plain row, as the config's lveval.variants asks
            qa, variant_meta = add_variants(plain, inputs.facts, inputs.rules, inputs.config, inputs.counter)
        except ValueError as exc:
            raise BuildError(f"LV-Eval variants at {inputs.level}: {exc}") from exc
        del plain  # a generator's locals live on while the consumer builds the next batch
        for key, n in variant_meta.items():
            inputs.meta[key] = inputs.meta.get(key, 0) + n
        yield qa
        del qa


def _plain_batches(inputs: Any, prompt_for: Callable[[dict], Any]) -> Iterator[pl.DataFrame]:

    items, documents, config, level, counter, meta = (inputs.items, inputs.documents, inputs.config, inputs.level,
                                                      inputs.counter, inputs.meta)
    if config.length_unit == "words":  # LV-Eval's construction (benchmarks/lveval/levels.py)
        try:
            out, word_meta = build_word_level_instances(items, documents, level=level, config=config, counter=counter,
                                                        prompt_for=prompt_for)
        except ValueError as exc:
            raise BuildError(f"instances {level} (words): {exc}") from exc
        meta.update(word_meta)
        yield out
        return
    # The items every level uses, chosen as for LV-Eval's facts and rules (benchmarks/qa/items.py): items
    # whose evidence alone overflows the smallest level are left out at every level, and counted.
    try:
        suite = qa_suite_items(items, documents, config, counter, prompt_for=prompt_for)
    except ValueError as exc:
        raise BuildError(str(exc)) from exc
    meta.update(items_eligible=suite.eligible.height, items_too_long_for_smallest_level=suite.too_long,
                instances_with_cross_domain_fillers=0)
    domain = dict(documents.select("doc_id", "domain").iter_rows())
    # The builder makes the same seeded choice (select_items) of suite.chosen from this pool.
    for out in iter_instance_batches(suite.eligible, documents, inputs.passages, inputs.hard_negatives, level=level,
                                     config=config, counter=counter, items_per_batch=items_per_batch(level, config),
                                     prompt_for=prompt_for):
        meta["instances_with_cross_domain_fillers"] += sum(
            any(domain.get(d.removesuffix(":cut"), own) not in own for d in ctx)
            for ev, ctx in out.select("evidence_doc_ids", "context_doc_ids").iter_rows()
            for own in [{domain[d] for d in ev}]
        )
        yield out
        del out
