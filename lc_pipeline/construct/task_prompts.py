"""Each item's prompt, from its task (the task files), for the builders that build the sources' items, and which
benchmark an item's task belongs to (its source's kind, tasks.catalog). Pure, no Dagster.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.construct.build_request import BuildError
from lc_pipeline.construct.prompts import QAPrompt
from lc_pipeline.ids import short_id
from lc_pipeline.tasks.catalog import (
    DEFAULT_BENCHMARK,
    TaskCatalog,
    benchmark_of_source_kind,
)
from lc_pipeline.tasks.spec import TaskSpec


def item_benchmarks(config: BenchmarkConfig) -> dict[str, str]:
    """Source name -> the benchmark its items' tasks belong to (by its source kind; else the default benchmark)."""
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
