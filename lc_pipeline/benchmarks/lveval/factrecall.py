"""LV-Eval's factrecall (spec ``lveval.md`` §4.3): builder ``lveval.factrecall``, one fact sentence moved through one
haystack (benchmarks/lveval/levels.py), each row followed by its variants. Pure: no Dagster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import polars as pl

from lc_pipeline.benchmarks.lveval.levels import build_factrecall_instances
from lc_pipeline.benchmarks.lveval.variants import add_variants
from lc_pipeline.construct.build_request import BuildError, BuildRequest
from lc_pipeline.construct.task_prompts import qa_prompt_for


def build(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """Builder ``lveval.factrecall``: the factrecall tasks' rows at the request's level."""
    i = request.inputs
    yield from factrecall(i, qa_prompt_for(i.config, i.catalog, request.tasks), request.tasks)


def configured_tasks(config, catalog) -> list:
    """LV-Eval's factrecall tasks, when the config asks for them (``lveval.factrecall_positions`` with
    ``items_per_length``)."""
    if config.items_per_length and config.lveval.factrecall_positions:
        return [t for t in catalog.tasks("lveval") if t.builder.name == "lveval.factrecall"]
    return []


def factrecall(inputs: Any, prompt_for: Callable[[dict], Any], tasks: Sequence[Any]) -> Iterator[pl.DataFrame]:
    """LV-Eval's factrecall rows (``lveval.factrecall_positions`` needle positions), with their variants;
    ``tasks``: the factrecall TaskSpecs, one per needle language."""
    try:
        plain = build_factrecall_instances(inputs.items, inputs.documents, level=inputs.level, config=inputs.config,
                                           counter=inputs.counter, prompt_for=prompt_for,
                                           task_by_language={t.language: t.name for t in tasks})
    except ValueError as exc:
        raise BuildError(f"factrecall instances at {inputs.level}: {exc}") from exc
    try:
        rows, variant_meta = add_variants(plain, inputs.facts, inputs.rules, inputs.config, inputs.counter)
    except ValueError as exc:
        raise BuildError(f"LV-Eval variants at {inputs.level}: {exc}") from exc
    for key, n in variant_meta.items():
        inputs.meta[key] = inputs.meta.get(key, 0) + n
    yield rows
