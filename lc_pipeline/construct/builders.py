"""Every instance builder behind one protocol, and the plan of which builders a level runs.

A builder is registered by name (``tasks.registry.BUILDERS``) and called as
``build(request: BuildRequest) -> Iterator[pl.DataFrame]``: it gets the level's inputs and the
``TaskSpec`` s it builds, and yields INSTANCES frames (construct/rows.py). Task files name their
builder (``builder: {name: helmet, options: {kind: rag}}``); the config says which tasks a level
builds (the QA suite from the sources' items, ``longbench100.tasks``, ``helmet.tasks``, and any
``tasks:`` of its own). ``level_batches`` runs them in that order and fills the columns a builder
need not know: the task's ``benchmark``, the item's ``all_classes``, the length units, the
LV-Eval variant columns. Pure: no Dagster (the asset turns ``BuildError`` into a failure).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import polars as pl

from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.construct.build_request import Builder, BuildError, BuildRequest, LevelInputs
from lc_pipeline.construct.qa_items import item_benchmarks, qa_prompt_for
from lc_pipeline.tasks.catalog import DEFAULT_BENCHMARK, TaskCatalog
from lc_pipeline.tasks.registry import BUILDERS
from lc_pipeline.tasks.spec import TaskSpec


# --------------------------------------------------------------------------- which tasks a config builds


def configured_tasks(config: BenchmarkConfig, catalog: TaskCatalog) -> list[TaskSpec]:
    """The tasks a level builds besides the QA suite's items, in build order: LV-Eval's factrecall when
    asked for, the ``longbench100`` and ``helmet`` sections' tasks, then the config's own ``tasks``."""
    out: list[TaskSpec] = []
    if config.items_per_length and config.lveval.factrecall_positions:
        out += [t for t in catalog.tasks("lveval") if t.builder.name == "lveval.factrecall"]
    out += [catalog.get(f"longbench100/{t}", "config longbench100.tasks") for t in config.longbench100.tasks]
    out += [catalog.get(f"helmet/{t}", "config helmet.tasks") for t in config.helmet.tasks]
    for name in config.tasks:
        spec = catalog.get(name, "config tasks")
        if spec.builder.name in QA_SUITE_BUILDERS:
            raise BuildError(f"config tasks: {spec.qualified_name} is built from the sources' items "
                             f"(builder {spec.builder.name}); list sources instead")
        if spec.qualified_name not in {t.qualified_name for t in out}:
            out.append(spec)
    return out


def build_plan(config: BenchmarkConfig, catalog: TaskCatalog) -> list[tuple[str, tuple[TaskSpec, ...]]]:
    """[(builder name, its tasks)] in build order; the QA suite (items) first when items_per_length > 0."""
    plan: list[tuple[str, tuple[TaskSpec, ...]]] = []
    if config.released is not None:  # a published benchmark as released: its records, nothing else
        released = config.released
        tasks = tuple(t for t in catalog.tasks(released.benchmark) if not released.tasks or t.name in released.tasks)
        return [(released.builder, tasks)]
    if config.items_per_length:
        plan.append((QA_SUITE, tuple(t for t in catalog if t.builder.name in QA_SUITE_BUILDERS)))
    for spec in configured_tasks(config, catalog):
        if plan and plan[-1][0] == spec.builder.name and spec.builder.name != QA_SUITE:
            plan[-1] = (plan[-1][0], (*plan[-1][1], spec))
        else:
            plan.append((spec.builder.name, (spec,)))
    return plan


# --------------------------------------------------------------------------- running a level


def level_batches(inputs: LevelInputs, progress: Callable[[], None] | None = None) -> Iterator[pl.DataFrame]:
    """The level's INSTANCES frames, builder by builder (:func:`build_plan`), each completed with the
    columns builders leave to this function. ``progress()`` is called after each frame."""
    from lc_pipeline.construct.lveval_levels import with_length_units
    from lc_pipeline.construct.lveval_variants import with_empty_variant_columns
    from lc_pipeline.schemas import conform

    config, catalog = inputs.config, inputs.catalog
    sources = item_benchmarks(config)
    benchmark_of_item = {i: sources.get(s, DEFAULT_BENCHMARK)
                         for i, s in inputs.items.select("item_id", "source").iter_rows()}
    classes_of_item = dict(inputs.items.select("item_id", "all_classes").iter_rows())
    record_of_item = {i: (r, f) for i, r, f in inputs.items.select("item_id", "record_id", "record_fields").iter_rows()}
    for name, tasks in build_plan(config, catalog):
        benchmark_of_task = {t.name: t.benchmark for t in tasks}
        builder: Builder = BUILDERS.get(name, where="task files")
        for frame in builder(BuildRequest(inputs, tasks)):
            item_ids = frame["item_id"].to_list()
            frame = frame.with_columns(
                benchmark=pl.Series([benchmark_of_item.get(i) if name == QA_SUITE else benchmark_of_task[t]
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
    """How many frames :func:`level_batches` will yield (for a progress bar)."""
    from lc_pipeline.construct.qa_suite import items_per_batch

    config, n = inputs.config, 0
    for name, _ in build_plan(config, inputs.catalog):
        if name == QA_SUITE and config.length_unit == "tokens" and config.released is None:
            n += -(-config.items_per_length // items_per_batch(inputs.level, config))
        else:
            n += 1
    return n


# --------------------------------------------------------------------------- the registered builders


QA_SUITE = "qa.assemble"
QA_SUITE_BUILDERS = (QA_SUITE,)  # builders whose tasks are chosen by the sources' items, not listed


def qa_assemble(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """The QA suite: each selected item's evidence placed at the configured depths among hard negatives and
    fillers (token levels, construct/assembly/) or mixed whole (LV-Eval's word levels,
    construct/lveval_levels.py), each row followed by its LV-Eval variants (construct/lveval_variants.py)."""
    from lc_pipeline.construct import qa_suite

    yield from qa_suite.build(request.inputs, qa_prompt_for(request.inputs.config, request.inputs.catalog))


def lveval_factrecall(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """LV-Eval's factrecall: one fact sentence moved through one haystack (construct/lveval_levels.py)."""
    from lc_pipeline.construct import qa_suite

    i = request.inputs
    yield from qa_suite.factrecall(i, qa_prompt_for(i.config, i.catalog, request.tasks), request.tasks)


def longbench100(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """100-LongBench's tasks: a real item or synthetic needles padded by the paper's greedy fill."""
    from lc_pipeline.construct.longbench100 import build_longbench100

    i = request.inputs
    try:
        yield build_longbench100(i.documents, i.items, level=i.level, n_per_task=i.config.longbench100.n_per_task,
                                 seed=i.config.seed, counter=i.counter, tasks=request.tasks,
                                 base_levels=i.config.base_lengths)
    except ValueError as exc:
        raise BuildError(f"100-LongBench instances at {i.level}: {exc}") from exc


def helmet(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """HELMET's categories: passages, demonstrations or pairs counted to the level (construct/helmet/)."""
    from lc_pipeline.construct.helmet import build_helmet

    i = request.inputs
    try:
        yield build_helmet(i.documents, i.items, i.passages, i.hard_negatives, level=i.level, config=i.config.helmet,
                           seed=i.config.seed, counter=i.counter, length_tolerance=i.config.length_tolerance,
                           tasks=request.tasks)
    except ValueError as exc:
        raise BuildError(f"HELMET instances at {i.level}: {exc}") from exc
