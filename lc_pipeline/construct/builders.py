"""Every instance builder behind one protocol, and the plan of which builders a level runs.

A builder is registered by name (``tasks.registry.BUILDERS``) and called as
``build(request: BuildRequest) -> Iterator[pl.DataFrame]``: it gets the level's inputs and the
``TaskSpec`` s it builds, and yields INSTANCES frames (construct/rows.py). Task files name their
builder (``builder: {name: helmet, options: {kind: rag}}``); the config says which tasks a level
builds (the item builders' tasks from the sources' items, the tasks a benchmark's own config section asks for
(``tasks.registry.TASK_SELECTIONS``), and any ``tasks:`` of its own). ``level_batches`` runs them in that order
and fills the columns a builder need not know: the task's ``benchmark``, the item's ``all_classes``, the length
units, the variant columns. Pure: no Dagster (the asset turns ``BuildError`` into a failure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.construct.build_request import (
    Builder,
    BuildError,
    BuildRequest,
    LevelInputs,
)
from lc_pipeline.construct.task_prompts import item_benchmarks
from lc_pipeline.tasks.catalog import DEFAULT_BENCHMARK, TaskCatalog
from lc_pipeline.tasks.registry import (
    BATCH_COUNTS,
    BUILDERS,
    TASK_SELECTION_ORDER,
    TASK_SELECTIONS,
    item_builders,
)
from lc_pipeline.tasks.spec import TaskSpec

# --------------------------------------------------------------------------- which tasks a config builds


def configured_tasks(config: BenchmarkConfig, catalog: TaskCatalog) -> list[TaskSpec]:
    """The tasks a level builds besides the item builders', in build order: those each benchmark's own config
    section asks for (``tasks.registry.TASK_SELECTIONS``, in their declared order), then the config's own
    ``tasks``."""
    out: list[TaskSpec] = []
    for benchmark in sorted(TASK_SELECTIONS.names(), key=lambda b: (TASK_SELECTION_ORDER.get(b, 0), b)):
        out += TASK_SELECTIONS.get(benchmark)(config, catalog)
    items = item_builders()
    for name in config.tasks:
        spec = catalog.get(name, "config tasks")
        if spec.builder.name in items:
            raise BuildError(f"config tasks: {spec.qualified_name} is built from the sources' items "
                             f"(builder {spec.builder.name}); list sources instead")
        if spec.qualified_name not in {t.qualified_name for t in out}:
            out.append(spec)
    return out


def build_plan(config: BenchmarkConfig, catalog: TaskCatalog) -> list[tuple[str, tuple[TaskSpec, ...]]]:
    """[(builder name, its tasks)] in build order; the item builders first when items_per_length > 0."""
    plan: list[tuple[str, tuple[TaskSpec, ...]]] = []
    if config.released is not None:  # a published benchmark as released: its records, nothing else
        released = config.released
        tasks = tuple(t for t in catalog.tasks(released.benchmark) if not released.tasks or t.name in released.tasks)
        return [(released.builder, tasks)]
    items = item_builders()
    if config.items_per_length:
        for name in sorted(items):
            plan.append((name, tuple(t for t in catalog if t.builder.name == name)))
    for spec in configured_tasks(config, catalog):
        if plan and plan[-1][0] == spec.builder.name and spec.builder.name not in items:
            plan[-1] = (plan[-1][0], (*plan[-1][1], spec))
        else:
            plan.append((spec.builder.name, (spec,)))
    return plan


# --------------------------------------------------------------------------- running a level


def level_batches(inputs: LevelInputs, progress: Callable[[], None] | None = None) -> Iterator[pl.DataFrame]:
    """The level's INSTANCES frames, builder by builder (:func:`build_plan`), each completed with the
    columns builders leave to this function. ``progress()`` is called after each frame."""
    from lc_pipeline.construct.rows import with_empty_variant_columns, with_length_units
    from lc_pipeline.schemas import conform

    config, catalog = inputs.config, inputs.catalog
    sources = item_benchmarks(config)
    benchmark_of_item = {i: sources.get(s, DEFAULT_BENCHMARK)
                         for i, s in inputs.items.select("item_id", "source").iter_rows()}
    classes_of_item = dict(inputs.items.select("item_id", "all_classes").iter_rows())
    record_of_item = {i: (r, f) for i, r, f in inputs.items.select("item_id", "record_id", "record_fields").iter_rows()}
    items = item_builders()  # their rows' benchmark is their item's source's
    for name, tasks in build_plan(config, catalog):
        benchmark_of_task = {t.name: t.benchmark for t in tasks}
        builder: Builder = BUILDERS.get(name, where="task files")
        for frame in builder(BuildRequest(inputs, tasks)):
            item_ids = frame["item_id"].to_list()
            frame = frame.with_columns(
                benchmark=pl.Series([benchmark_of_item.get(i) if name in items else benchmark_of_task[t]
                                     for i, t in zip(item_ids, frame["task"].to_list(), strict=True)], dtype=pl.String),
                all_classes=pl.Series([classes_of_item.get(i) or [] for i in item_ids], dtype=pl.List(pl.String)),
            )
            if "record_id" not in frame.columns or not frame["record_id"].str.len_chars().sum():
                # rows of builders that do not run records as released: their item's record, if any; a row's own
                # record_fields (what its metrics read, e.g. HELMET re-rank qrels) are kept
                records = [record_of_item.get(i, ("", "{}")) for i in item_ids]
                own = frame["record_fields"].to_list() if "record_fields" in frame.columns else [None] * len(item_ids)
                frame = frame.with_columns(record_id=pl.Series([r for r, _ in records], dtype=pl.String),
                                           record_fields=pl.Series([o if o not in (None, "", "{}") else f
                                                                    for o, (_, f) in zip(own, records, strict=True)],
                                                                   dtype=pl.String))
            yield conform(with_length_units(with_empty_variant_columns(frame), inputs.level, config), "instances")
            del frame
            if progress is not None:
                progress()


def planned_batches(inputs: LevelInputs) -> int:
    """How many frames :func:`level_batches` will yield (for a progress bar): a builder's registered count
    (``tasks.registry.BATCH_COUNTS``), else one."""
    n = 0
    for name, _ in build_plan(inputs.config, inputs.catalog):
        n += BATCH_COUNTS.get(name)(inputs) if name in BATCH_COUNTS else 1
    return n
