"""The items the QA suite uses for a config: chosen once, the same at every level.

"Test instances across these levels share the same set of question-answer (QA) pairs, and only
differ in the context content and length" (spec ``lveval.md`` §1.1). So the choice depends on the
config and the sources only, never on the level:

* token levels: the items whose prompt with only their evidence fits the SMALLEST level
  (``assembly.fitting_items``), then the seeded, task-balanced choice of ``items_per_length``
  (``assembly.select_items``);
* word levels (``length_unit: words``): evidence shorter than the smallest level in words /
  characters, then the same choice (``benchmarks.lveval.levels.word_level_items``);
* factrecall (``lveval.factrecall_positions``): ``factrecall_items`` needles, each an item with one
  evidence document stating its answer (``benchmarks.lveval.levels.factrecall_needles``, spec ``lveval.md`` §4.3).

``instances`` builds these items at every level (benchmarks/qa/suite.py), and LV-Eval's
``confusing_facts`` and ``replacement_rules`` are made for exactly them (:func:`items_for_variants`;
CFI and KPR apply to factrecall too, spec ``lveval.md`` §5.1, §6.1): both call
:func:`qa_suite_items`, with the same prompts. Pure, no Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from lc_pipeline.benchmarks.lveval.levels import factrecall_needles, word_level_items
from lc_pipeline.config import BenchmarkConfig, level_tokens
from lc_pipeline.construct.assembly import fitting_items, select_items
from lc_pipeline.construct.task_prompts import qa_prompt_for


@dataclass(frozen=True)
class QaSuiteItems:
    """The QA suite's items for one config (every level)."""

    chosen: pl.DataFrame  # the plain QA items, in the order the levels build them
    # Token levels: the items that fit the smallest level, ``chosen`` being ``select_items`` of them
    # (the level builder takes this pool and makes the same choice); word levels: ``chosen``.
    eligible: pl.DataFrame
    too_long: int  # items left out: their evidence does not fit the smallest level
    needles: list[tuple[dict, str]]  # factrecall: (item, needle sentence), in build order
    needle_items: pl.DataFrame  # the needles' items, in the sources' order

    @property
    def all_items(self) -> pl.DataFrame:
        """``chosen`` then the factrecall items not among them: the items LV-Eval's facts and rules are for."""
        others = self.needle_items.filter(~pl.col("item_id").is_in(self.chosen["item_id"].implode()))
        return pl.concat([self.chosen, others])


def qa_suite_items(items: pl.DataFrame, documents: pl.DataFrame, config: BenchmarkConfig, counter, *,
                   prompt_for=None, strict: bool = True) -> QaSuiteItems:
    """The items every level of the QA suite builds (see the module docstring).

    ``prompt_for`` (item row -> QAPrompt; None: our QA prompt) is the prompt the levels build each
    item with: it decides what fits. ``strict``: too few items that fit is a ``ValueError``
    (``instances`` fails and says so); otherwise what there is is used (LV-Eval's facts and rules
    for what there is cost nothing extra). Too few factrecall needles leaves ``needles`` empty:
    the factrecall builder, which needs them, says so itself."""
    if not config.items_per_length or items.is_empty():
        return QaSuiteItems(items.clear(), items.clear(), 0, [], items.clear())
    if config.length_unit == "words":
        try:
            chosen, too_long = word_level_items(items, documents, config)
        except ValueError:
            if strict:
                raise
            chosen, too_long = items.clear(), items.height
        eligible = chosen
    else:
        smallest = min(level_tokens(lv) for lv in config.lengths)
        eligible, left_out = fitting_items(items, documents, counter, smallest, prompt_for=prompt_for)
        too_long = left_out.height
        if eligible.height < config.items_per_length and strict:
            raise ValueError(
                f"only {eligible.height} of {items.height} items fit the smallest level ({smallest} tokens) with "
                f"their evidence; items_per_length is {config.items_per_length}: lower it or raise the smallest level")
        chosen = select_items(eligible, min(config.items_per_length, eligible.height), config.seed)
    needles: list[tuple[dict, str]] = []
    if config.lveval.factrecall_positions:
        try:
            needles = factrecall_needles(items, documents, config)
        except ValueError:
            pass
    needle_ids = [item["item_id"] for item, _ in needles]
    return QaSuiteItems(chosen, eligible, too_long, needles, items.filter(pl.col("item_id").is_in(needle_ids)))


def items_for_variants(items: pl.DataFrame, documents: pl.DataFrame, config: BenchmarkConfig, counter,
                       catalog) -> pl.DataFrame:
    """The items LV-Eval's confusing facts and replacement rules are made for: the QA suite's, each
    with the prompt ``instances`` builds it with (its task's, :func:`qa_prompt_for`; ``catalog``
    the config's task catalog), then factrecall's. Lenient (``strict=False``): when too few items fit,
    ``instances`` fails and says so, and facts for what there is cost nothing extra."""
    return qa_suite_items(items, documents, config, counter, prompt_for=qa_prompt_for(config, catalog),
                          strict=False).all_items
