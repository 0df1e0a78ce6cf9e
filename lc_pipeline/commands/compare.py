"""`lcp results compare MODEL_A MODEL_B`: two models on the instances both have a score on, read from the lake.

    lcp results compare MODEL_A MODEL_B [--lake DIR] [--config C] [--draws 1000] [--seed 0] [--format table|json]

Per benchmark x table x length: each model's score on the common instances (the benchmark's overall, aggregated
as its task file's headline says), the difference A - B with its 95% paired bootstrap interval, the p-value of a
paired sign-flip permutation test, the common count and the instances only one model has a score on (the other
skipped, invalidated, or never generated or judged them). Reads the lake's instances, each model's
metric_scores, and its judge_scores / citation_scores where the config's tasks are judged / NLI-scored; the logic
is score/compare.py.
"""

from __future__ import annotations

import click
import polars as pl

from lc_pipeline.commands.options import config_option, format_option, lake_option
from lc_pipeline.commands.output import print_table

FORMATS = ("table", "json")
INSTANCE_COLUMNS = ("instance_id", "benchmark", "task", "variant", "record_fields", "protocol")


def _partitions(lake, table: str, model: str) -> list[str]:
    """The length partitions of ``table`` that ``model`` has in the lake."""
    from lc_pipeline import storage
    from lc_pipeline.lake_files import LENGTH_DIM, MODEL_DIM
    from lc_pipeline.storage import FILE_NAME

    root = storage.lake_path(lake) / table
    return sorted(p.parent.parent.name.split("=", 1)[1]
                  for p in root.glob(f"{LENGTH_DIM}=*/{MODEL_DIM}={model}/{FILE_NAME}"))


def _instances(lake) -> pl.DataFrame:
    from lc_pipeline import storage
    from lc_pipeline.lake_files import LENGTH_DIM
    from lc_pipeline.storage import FILE_NAME

    frames = []
    for path in sorted(storage.lake_path(lake).joinpath("instances").glob(f"{LENGTH_DIM}=*/{FILE_NAME}"), key=str):
        frame = storage.read_parquet(path)
        frames.append(frame.select([c for c in INSTANCE_COLUMNS if c in frame.columns])
                      .with_columns(pl.lit(path.parent.name.split("=", 1)[1]).alias("length")))
    if not frames:
        raise ValueError(f"the lake {storage.url(lake)} has no instances: build the benchmark first (lcp run)")
    return pl.concat(frames, how="diagonal_relaxed")


def model_scored(lake, model: str, instances: pl.DataFrame, catalog):
    """``model``'s scored instances (benchmark_scores.scored_instances) from its lake partitions; a model with no
    metric_scores, or with generations at a length where its metric_scores are missing, is a ValueError naming
    the model and the partition."""
    from lc_pipeline import storage
    from lc_pipeline.lake_files import LENGTH_DIM, read_judge_scores, read_model_partitions
    from lc_pipeline.score.benchmark_scores import judged_tasks, nli_tasks, scored_instances, with_citation_scores

    scored_at = _partitions(lake, "metric_scores", model)
    generated_at = _partitions(lake, "generations", model)
    if not scored_at:
        raise ValueError(f"model {model!r} has no metric_scores partition in the lake {storage.url(lake)} "
                         f"(generations at {generated_at or 'no length'}): run lcp backfill --model {model}")
    unscored = sorted(set(generated_at) - set(scored_at))
    if unscored:
        raise ValueError(f"model {model!r} has generations but no metric_scores at length(s) {unscored} (partition "
                         f"metric_scores/{LENGTH_DIM}={unscored[0]}/model={model}): run lcp backfill --model {model}")
    scores = read_model_partitions(lake, "metric_scores", model)
    judgments = read_judge_scores(lake, model) if judged_tasks(instances, catalog) else None
    if nli_tasks(instances, catalog):
        scores = with_citation_scores(scores, read_model_partitions(lake, "citation_scores", model))
    try:
        return scored_instances(scores, instances, catalog, judgments)
    except ValueError as exc:
        raise ValueError(f"model {model!r}: {exc}") from exc


@click.command("compare")
@click.argument("model_a")
@click.argument("model_b")
@lake_option
@config_option
@click.option("--draws", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Bootstrap resamples, and sign flips of the permutation test.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the resamples and of the flips.")
@format_option(*FORMATS)
def compare(model_a: str, model_b: str, config: str | None, draws: int, seed: int, fmt: str) -> None:
    """Compare MODEL_A with MODEL_B on the instances both have a score on: per benchmark x table x length, each
    model's score (0-100, the benchmark's overall), diff = A - B with its 95% paired bootstrap interval (the
    instances of each task cell resampled, the same resamples for both models, seeded), and the two-sided p-value of
    a paired sign-flip permutation test on the same statistic (each instance's A - B flipped at random, --draws
    times; the smallest p is 1/(draws+1)); n_common, and only_a / only_b: instances only one model has a score on,
    left out of both. With --format json each row also names model_a and model_b."""
    from lc_pipeline.config import load_config
    from lc_pipeline.score.compare import compare_models
    from lc_pipeline.settings import cli_settings
    from lc_pipeline.tasks.catalog import catalog_for

    if model_a == model_b:
        raise click.BadParameter("give two different models", param_hint="MODEL_B")
    s = cli_settings(config)
    try:
        catalog = catalog_for(load_config(s.config))
        instances = _instances(s.lake_dir)
        a = model_scored(s.lake_dir, model_a, instances, catalog)
        b = model_scored(s.lake_dir, model_b, instances, catalog)
        table = compare_models(a, b, draws=draws, seed=seed)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if fmt == "table":
        click.echo(f"{model_a} (A) vs {model_b} (B): scores 0-100 on the common instances; diff = A - B, 95% paired "
                   f"bootstrap interval ({draws} draws, seed {seed}); p: paired sign-flip permutation test")
    else:  # a JSON row read on its own says which model is A and which is B
        table = table.select(pl.lit(model_a).alias("model_a"), pl.lit(model_b).alias("model_b"), pl.all())
    print_table(table.columns, table.rows(), fmt)
