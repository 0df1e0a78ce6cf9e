"""The items the QA suite uses for a config: chosen once, the same at every level.

"Test instances across these levels share the same set of question-answer (QA) pairs, and only
differ in the context content and length" (spec ``lveval.md`` §1.1). So the choice depends on the
config and the sources only, never on the level:

* token levels: the items whose prompt with only their evidence fits the SMALLEST level
  (``assembly.fitting_items``), then the seeded, task-balanced choice of ``items_per_length``
  (``assembly.select_items``);
* word levels (``length_unit: words``): evidence shorter than the smallest level in words /
  characters, then the same choice (``lveval_levels.word_level_items``);
* factrecall (``lveval.factrecall_positions``): ``factrecall_items`` needles, each an item with one
  evidence document stating its answer (``lveval_levels.factrecall_needles``, spec ``lveval.md`` §4.3).

``instances`` builds these items at every level (construct/qa_suite.py), and LV-Eval's
``confusing_facts`` and ``replacement_rules`` are made for exactly them (:func:`items_for_variants`;
CFI and KPR apply to factrecall too, spec ``lveval.md`` §5.1, §6.1): both call
:func:`qa_suite_items`, with the same prompts. Pure, no Dagster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from lc_pipeline.config import BenchmarkConfig, level_tokens
from lc_pipeline.construct.assembly import fitting_items, select_items
from lc_pipeline.construct.build_request import BuildError
from lc_pipeline.construct.lveval_levels import factrecall_needles, word_level_items
from lc_pipeline.construct.prompts import QAPrompt
from lc_pipeline.ids import short_id
from lc_pipeline.tasks.catalog import DEFAULT_BENCHMARK, TaskCatalog, benchmark_of_source_kind
from lc_pipeline.tasks.spec import TaskSpec


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


def item_benchmarks(config: BenchmarkConfig) -> dict[str, str]:
    """Source name -> the benchmark its items' tasks belong to (LongBench, LV-Eval, Loong; else ``qa``)."""
    return {s.name: benchmark_of_source_kind(s.kind) for s in config.sources}


def qa_prompt_for(config: BenchmarkConfig, catalog: TaskCatalog,
                  tasks: tuple[TaskSpec, ...] | None = None) -> Callable[[dict], Any]:
    """item -> its QAPrompt: its task's template and max_new_tokens (the config's when the task says none).

    The task: one of ``tasks`` by the row's task name when given (factrecall rows are LV-Eval's
    factrecall tasks whatever corpus the needle came from), else the item's source's benchmark and its
    own task name. Ids: a prompt equal to the default QA prompt at the config's
    max_new_tokens keeps today's ids; any other mixes the template and length into them (LongBench's
    own prompts, a user's override).
    """
    default = QAPrompt.default(config.max_new_tokens)
    cache: dict[tuple[str, str], QAPrompt] = {}
    sources = item_benchmarks(config)
    by_name = {t.name: t for t in tasks} if tasks is not None else None

    def prompt_for(item: dict) -> QAPrompt:
        key = (sources.get(item["source"], DEFAULT_BENCHMARK), item["task"])
        if key not in cache:
            if by_name is not None:
                if item["task"] not in by_name:
                    raise BuildError(f"item {item['item_id']!r}: task {item['task']!r} is not among {sorted(by_name)}")
                spec = by_name[item["task"]]
            else:
                spec = catalog.resolve(*key)
            template = spec.prompt or default.template
            max_new = spec.max_new_tokens or config.max_new_tokens
            same = template == default.template and max_new == default.max_new_tokens
            cache[key] = QAPrompt(template, max_new, "" if same else short_id(template, max_new, length=16))
        return cache[key]

    return prompt_for
