"""The ``metric_scores`` table: every generation scored with the metrics its task declares.

An instance names its task by ``benchmark`` and ``task``; the task catalog (lc_pipeline/tasks/) gives
its ``TaskSpec``, whose ``metrics`` are registered names (``tasks.registry.METRICS``,
score/task_metrics.py). One row per (generation, metric), the metric's label in ``metric``.

Plus the variant metrics (``tasks.registry.variant_metrics()``, named by the benchmark package that defines the
construction variants' metric) on every instance of an item that has construction variants in ``instances`` (its
plain row too), so plain, CFI and KPR rows compare on one metric, whatever the item's own task declares. Pure: no
Dagster.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.fingerprints import short_id
from lc_pipeline.score.fallbacks import FallbackZeros, score_noted
from lc_pipeline.score.task_metrics import FED_TEMPLATE
from lc_pipeline.tasks.catalog import TaskCatalog, load_catalog
from lc_pipeline.tasks.registry import METRICS, variant_metrics
from lc_pipeline.tasks.spec import MetricRef, TaskSpec

INSTANCE_FIELDS = ("instance_id", "item_id", "benchmark", "task", "category", "depth", "answers")
# Read when present (INSTANCES has them): metrics that need them say so; hand-made frames may lack them.
OPTIONAL_FIELDS = ("variant", "language", "answer_keywords", "all_classes", "record_fields", "protocol")


LEFT_OUT_HOOK = "official_left_out"  # a protocol module's (task, output) -> bool: the authors keep no result for it


@cache
def _left_out_hook(benchmark: str) -> Callable[[str, str], bool] | None:
    from lc_pipeline.config import has_official_protocol, protocol_module

    if not has_official_protocol(benchmark):
        return None
    return getattr(importlib.import_module(protocol_module(benchmark)), LEFT_OUT_HOOK, None)


def left_out_by_protocol(benchmark: str, task: str, protocol: str | None, output: str | None) -> bool:
    """Whether the authors' harness keeps no result for this reply, so that their scorer neither counts nor scores it
    (LongBench v2's ``pred.py`` skips an empty reply: fidelity review V2-4): for an instance of an official protocol
    (``protocol`` "official@..."), its benchmark's protocol module's ``official_left_out(task, output)``; False
    under ``ours`` or when the module declares no such rule."""
    if output is None or not str(protocol or "").startswith("official"):
        return False
    hook = _left_out_hook(benchmark)
    return bool(hook is not None and hook(task, output))


def score_id(generation_id: str, metric: str) -> str:
    """Stable short id of one (generation, metric) score row."""
    return short_id(generation_id, metric, length=16)


def score_instance(spec: TaskSpec, instance: Mapping[str, Any], output: str,
                   run_options: Mapping[str, Any] | None = None,
                   extra: tuple[MetricRef, ...] = ()) -> dict[str, float]:
    """{metric label: score} of one output, for every metric of ``spec`` (then ``extra`` ones it lacks)."""
    return {label: value for label, (value, _) in score_instance_parsed(spec, instance, output, run_options,
                                                                        extra).items()}


def score_instance_parsed(spec: TaskSpec, instance: Mapping[str, Any], output: str,
                          run_options: Mapping[str, Any] | None = None,
                          extra: tuple[MetricRef, ...] = ()) -> dict[str, tuple[float, bool]]:
    """{metric label: (score, parsed)}: ``parsed`` is False when the metric parses an answer (``Metric.parses``)
    and the output holds none."""
    return {label: (value, parsed) for label, (value, parsed, _) in score_instance_noted(
        spec, instance, output, run_options, extra).items()}


def score_instance_noted(spec: TaskSpec, instance: Mapping[str, Any], output: str,
                         run_options: Mapping[str, Any] | None = None,
                         extra: tuple[MetricRef, ...] = ()) -> dict[str, tuple[float, bool, str | None]]:
    """{metric label: (score, parsed, fallback)}: ``fallback`` says why a 0 is a fallback zero (a
    ``score.fallbacks.REASONS`` key: the official ROUGE failed, or the texts differ only in Unicode
    normalization), else None. The score is the metric's, unchanged."""
    values: dict[str, tuple[float, bool, str | None]] = {}
    refs = (*spec.metrics, *(m for m in extra if m.name not in spec.metric_names))
    for ref in refs:
        metric = METRICS.get(ref.name, where=f"task {spec.qualified_name}, field metrics")
        if metric.needs:  # model-based (e.g. "nli": citation_scores computes it), not a function of the output
            continue
        if metric.label in values:
            raise ValueError(f"task {spec.qualified_name}: metrics {[m.name for m in refs]} write the label "
                             f"{metric.label!r} twice")
        options = {**(run_options or {}), **ref.options}
        value, fallback = score_noted(lambda o, i, m=metric, opts=options: m(o, i, spec, opts), output, instance)
        parsed = metric.parses is None or bool(metric.parses(output, instance, spec))
        values[metric.label] = (value, parsed, fallback)
    return values


def score_frame(
    generations: pl.DataFrame,
    instances: pl.DataFrame,
    catalog: TaskCatalog | None = None,
    metric_variant: str = "code",
    fallbacks: FallbackZeros | None = None,
) -> pl.DataFrame:
    """METRIC_SCORES rows: per generation, one row per metric of its instance's task, in generation order.

    ``generations`` needs ``generation_id, instance_id, output``; ``instances`` the INSTANCES columns
    ``instance_id, item_id, benchmark, task, category, depth, answers`` (plus, when a metric needs them,
    ``all_classes``, ``answer_keywords``, ``language``; ``variant`` marks construction variant rows).
    ``metric_variant``: the metrics' ``variant`` option (a keyword-recall metric's released scorer, "code", default,
    or the paper's; the config's ``lveval.metric_variant``). Bad input is a
    ValueError naming the generation, the instance and the field.

    A generation's ``chat_template_source`` (when the frame has it) reaches the metrics beside the instance's fields
    (task_metrics.completion_mode: whether the output continues a plain prompt). A generation's ``status``
    (GENERATIONS) is kept on its rows; a reply the instance's official protocol leaves out
    (:func:`left_out_by_protocol`: LongBench v2's empty reply) gets no row; rows ``skipped`` (not sent) or ``invalid``
    (thinking ran out) are not scored and get no row (they are counted where scores are shown); a metric that
    parses an answer and finds none marks its row ``unparsable`` (scored as the metric scores it: 0).

    ``fallbacks``, when given, receives each row whose 0 is a fallback zero (metric, reason, instance_id;
    score/fallbacks.py): the score and the status stay the official ones, the metric_scores asset reports
    the count in its metadata (issue 22).
    """
    catalog = catalog or load_catalog()
    for frame, label, cols in ((generations, "generations", ("generation_id", "instance_id", "output")),
                               (instances, "instances", INSTANCE_FIELDS)):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{label} frame lacks column(s) {missing}")
    optional = [c for c in OPTIONAL_FIELDS if c in instances.columns]
    with_variants = (set(instances.filter(pl.col("variant") != "plain")["item_id"])
                     if "variant" in instances.columns else set())
    by_id: dict[str, dict] = {}
    for row in instances.select(*INSTANCE_FIELDS, *optional).iter_rows(named=True):
        if row["instance_id"] in by_id:
            raise ValueError(f"instances: instance_id {row['instance_id']!r} occurs more than once")
        by_id[row["instance_id"]] = row

    specs: dict[tuple[str, str], TaskSpec] = {}
    run_options = {"variant": metric_variant}
    on_variants = tuple(MetricRef(name=name) for name in variant_metrics())
    rows: dict[str, list] = {c: [] for c in schemas.METRIC_SCORES}
    if "status" not in generations.columns:  # frames made before statuses, or by hand: derived as the store does
        cut = pl.col("finish_reason") == "length" if "finish_reason" in generations.columns else pl.lit(False)
        generations = generations.with_columns(
            status=pl.when(pl.col("output").str.strip_chars() == "").then(pl.lit("empty"))
            .when(cut).then(pl.lit("cut")).otherwise(pl.lit("answered")))
    fed = (pl.col(FED_TEMPLATE) if FED_TEMPLATE in generations.columns else pl.lit(None, pl.String)).alias(FED_TEMPLATE)
    for gid, iid, output, status, template in generations.select(
            "generation_id", "instance_id", "output", "status", fed).iter_rows():
        if status in schemas.NOT_SCORED:
            continue
        inst = by_id.get(iid)
        if inst is None:
            raise ValueError(f"generation {gid!r}: field instance_id={iid!r} not found in instances")
        if left_out_by_protocol(inst["benchmark"], inst["task"], inst.get("protocol"), output):
            continue  # the authors' harness keeps no result for it (counted in benchmark_scores' status_counts)
        if template:  # how the prompt was fed (task_metrics.completion_mode reads it)
            inst = {**inst, FED_TEMPLATE: template}
        if output is None:
            raise ValueError(f"generation {gid!r}: field output is null")
        key = (inst["benchmark"], inst["task"])
        try:
            if key not in specs:
                specs[key] = catalog.resolve(*key)
            extra = on_variants if inst["item_id"] in with_variants else ()
            values = score_instance_noted(specs[key], inst, output, run_options, extra)
        except ValueError as exc:
            raise ValueError(f"generation {gid!r} (instance {iid!r}): {exc}") from exc
        for metric, (value, parsed, fallback) in values.items():
            if fallback is not None and fallbacks is not None:
                fallbacks.add(metric, fallback, iid)
            rows["score_id"].append(score_id(gid, metric))
            rows["generation_id"].append(gid)
            rows["instance_id"].append(iid)
            rows["item_id"].append(inst["item_id"])
            rows["task"].append(inst["task"])
            rows["category"].append(inst["category"])
            rows["depth"].append(inst["depth"])
            rows["metric"].append(metric)
            rows["score"].append(value)
            rows["status"].append(status if parsed else "unparsable")
    return schemas.conform(pl.DataFrame(rows, schema=schemas.METRIC_SCORES), "metric_scores")
