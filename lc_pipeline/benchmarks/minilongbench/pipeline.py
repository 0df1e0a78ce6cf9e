"""What the ``minilongbench_subset`` and ``minilongbench_estimates`` assets run, without Dagster.

``minilongbench_subset`` fits MiniLongBench on a score matrix (:func:`fit_subset`): an imported one
(``minilongbench.scores``) or our own ``metric_scores`` tables (every model in the lake; a sample
is one instance, scored by the first of ``minilongbench.metrics`` it has; its representation the
PCA of the embedding of its question and the start of its context). With an imported matrix and
neither ``embeddings`` nor ``texts``, alpha starts at 0. The whole fitted model is saved in the lake
(``<lake>/_minilongbench/``, the ``lcp minilongbench fit`` format) beside the subset table, whose
metadata carries the honest baseline the paper omits (spec §7): the training models' Spearman from
the subset beside the median over ``baseline_draws`` random stratified subsets (in-sample for both).

``minilongbench_estimates`` estimates one model's full-benchmark score, in every mode, from its
scores on the subset only (:func:`estimate_partition`), read from ``estimate_scores``, ``scores``
or, for a model fitted on our own tables, ``metric_scores``.

**LongBench run as released with a subset** (config ``released.subset``, e.g. the packaged
``minilongbench`` config): ``minilongbench_subset`` fits the IRT model on the imported LongBench
score matrix and takes the subset as given (the released 237 samples; spec Appendix A), not
re-selected by K-Means; ``minilongbench_estimates`` reads the model's own ``metric_scores`` of
the released instances, keyed back to LongBench's global sample index through the instances'
items (benchmarks/minilongbench/subset.py, the rule the builder chose the records by) and scores the
model from them (:func:`released_scores`). A subset partly present (only some LongBench task
files) is estimated from the samples that ran, and the table says how many of the subset's did.

Lake tables are read through a ``read_table(name) -> DataFrame | None`` the caller gives and the
embedder is built by a callable, so this module needs neither Dagster nor its resources. Errors
worth no retry are :class:`MiniLongBenchError` (a ``ValueError``) naming the asset and the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.benchmarks.minilongbench import persistence
from lc_pipeline.benchmarks.minilongbench.baseline import baseline_report
from lc_pipeline.benchmarks.minilongbench.fitting import fit
from lc_pipeline.benchmarks.minilongbench.matrix import SAMPLE, Estimate, ScoreMatrix
from lc_pipeline.benchmarks.minilongbench.model import DEFAULT_MODE, MODES, MiniLongBench, estimate_frame
from lc_pipeline.benchmarks.minilongbench.options import MiniLongBenchOptions
from lc_pipeline.benchmarks.minilongbench.representations import (
    representations_from_frame,
    text_representations,
)
from lc_pipeline.benchmarks.minilongbench.validation import leave_models_out

__all__ = [
    "MODEL_DIR",
    "EstimatesRun",
    "MiniLongBenchError",
    "SubsetRun",
    "estimate_partition",
    "fit_subset",
    "load_fitted",
    "model_dir",
    "options_of",
    "own_scores",
    "own_texts",
    "released_item_parameters",
    "released_scores",
    "validate",
    "validation_metadata",
]

MODEL_DIR = "_minilongbench"  # under the lake; "_" keeps it out of the DuckDB table views
ReadTable = Callable[[str], "pl.DataFrame | None"]  # a lake table by name; None when it has no file yet


class MiniLongBenchError(ValueError):
    """A failure a retry cannot mend (bad options, missing files or scores, a stale fitted model)."""


def options_of(section: Any, config_name: str, config_file: str | Path | None = None) -> MiniLongBenchOptions:
    """The typed ``minilongbench:`` section of config ``config_name`` (a mapping until the config
    loader types it); an unknown or bad key names the config, its file and the key."""
    where = f"config {config_name!r}" + (f" ({config_file})" if config_file else "") + ": minilongbench"
    try:
        return MiniLongBenchOptions.parse(section, where)
    except ValueError as exc:
        raise MiniLongBenchError(str(exc)) from None


def model_dir(lake_dir: str | Path) -> Path:
    """Where the fitted model lives in the lake."""
    return storage.lake_path(lake_dir) / MODEL_DIR


def _file(opts: MiniLongBenchOptions, key: str, config_file: str | Path | None) -> pl.DataFrame:
    """The table option ``key`` names (CSV by suffix, else Parquet; relative to the config's folder)."""
    try:
        path = opts.path(key, config_file)
    except FileNotFoundError as exc:
        raise MiniLongBenchError(str(exc)) from None
    return pl.read_csv(path) if path.suffix.lower() == ".csv" else pl.read_parquet(path)


def own_scores(metric_scores: pl.DataFrame | None, metrics: Sequence[str]) -> pl.DataFrame | None:
    """Our metric_scores as ``model, task, category, global_sample (= instance_id), score``: per
    model and instance the score of the first metric of ``metrics`` it has (None when none has)."""
    if metric_scores is None:
        return None
    rank = {m: i for i, m in enumerate(metrics)}
    df = metric_scores.filter(pl.col("metric").is_in(list(metrics))).with_columns(
        pl.col("metric").replace_strict(rank, return_dtype=pl.Int64).alias("_rank")
    )
    if df.is_empty():
        return None
    return (
        df.sort("_rank")
        .group_by("model", "instance_id", maintain_order=True)
        .first()
        .select("model", "task", "category", pl.col("instance_id").alias(SAMPLE), "score")
    )


def own_texts(instances: pl.DataFrame | None) -> dict[str, str]:
    """Per instance id, its question and the start of its context (what gets embedded)."""
    if instances is None:
        return {}
    return {i: f"{q}\n{c[:4000]}" for i, q, c in instances.select("instance_id", "question", "context").iter_rows()}


# ---------------------------------------------------------------------------------------------
# minilongbench_subset
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubsetRun:
    """A fitted MiniLongBench, saved in the lake, with its subset table and what its metadata shows."""

    mlb: MiniLongBench
    matrix: ScoreMatrix
    source: str  # "metric_scores" or "imported <file name>"
    table: pl.DataFrame  # the minilongbench_subset table
    quality: dict[str, float]  # baseline_report: train / random-median Spearman per mode
    baseline_draws: int
    model_dir: Path
    validation: dict | None = None  # validation.Validation.to_json(); None: not run (validation_splits 0)

    @property
    def task_counts(self) -> pl.DataFrame:
        counts = self.mlb.subset_task_counts()
        return pl.DataFrame({"task": list(counts), "n": list(counts.values())})

    @property
    def summary(self) -> str:
        return (f"MiniLongBench: {self.table.height} of {len(self.mlb.samples)} samples from "
                f"{len(self.matrix.models)} models")

    def metadata(self) -> dict[str, Any]:
        """Plain values for the materialization (the quality figures are :attr:`quality`)."""
        return {
            "source": self.source,
            "train_models": len(self.matrix.models),
            "samples": len(self.mlb.samples),
            "subset": self.table.height,
            "threshold": float(self.mlb.threshold),
            "representation": str(self.mlb.meta["representation"]),
        }


def validation_metadata(validation: dict | None) -> tuple[dict[str, float], dict[str, str], str]:
    """The validation's figures for a materialization: per mode its held-out Spearman and MAE
    beside its own random median (flat floats, NaN when not measured), the modes it trusts for
    ranking and for error and the default (texts), and a Markdown table of every figure."""
    if not validation or not validation.get("summary"):
        why = (validation or {}).get("skipped", "not run (minilongbench.validation_splits: 0)")
        return {}, {"validation": why}, ""
    figures: dict[str, float] = {}
    rows = ["| mode | Spearman | random median | margin | beats random | MAE | random median | ratio | beats random |",
            "|---|---|---|---|---|---|---|---|---|"]
    for mode, s in validation["summary"].items():
        figures.update({
            f"validation_spearman_{mode}": s["spearman"],
            f"validation_random_median_spearman_{mode}": s["random_median_spearman"],
            f"validation_mae_{mode}": s["mae"],
            f"validation_random_median_mae_{mode}": s["random_median_mae"],
        })
        rows.append(f"| {mode} | {s['spearman']:.3f} | {s['random_median_spearman']:.3f} | {s['spearman_margin']:+.3f} "
                    f"| {s['beats_spearman']:.0%} | {s['mae']:.4f} | {s['random_median_mae']:.4f} | "
                    f"{s['mae_ratio']:.2f} | {s['beats_mae']:.0%} |")
    st, choice = validation["settings"], validation["choice"]
    texts = {
        "validated_mode_ranking": choice["ranking"],
        "validated_mode_error": choice["error"],
        "validation": (f"{st['folds']}-fold leave-models-out x {st['splits']} split(s) x {st['kmeans_seeds']} K-Means "
                       f"seed(s), {st['draws']} random draws per subset: {choice['reason']}"),
    }
    return figures, texts, "\n".join(rows)


def _training_data(
    opts: MiniLongBenchOptions,
    config_file: str | Path | None,
    read_table: ReadTable,
    embedder: Callable[[], Any],
    source: str,
    scores: pl.DataFrame,
) -> tuple[ScoreMatrix, Any, str | None]:
    """The score matrix and the samples' representations (None: alpha starts at 0) with their label."""
    matrix = ScoreMatrix.from_frame(scores)
    if opts.train_models:
        matrix = matrix.select_models(list(opts.train_models))
    if opts.embeddings is not None:
        reps = representations_from_frame(_file(opts, "embeddings", config_file), matrix.samples, opts.dims)
        return matrix, reps, f"embeddings {Path(opts.embeddings).name}"
    if opts.texts is None and not (source == "metric_scores" and opts.representation == "text"):
        return matrix, None, None
    if opts.texts is not None:
        t = _file(opts, "texts", config_file)
        by_id = dict(zip(t[SAMPLE].to_list(), t["text"].to_list()))
    else:
        by_id = own_texts(read_table("instances"))
    missing = [s for s in matrix.samples.tolist() if s not in by_id]
    if missing:
        raise ValueError(f"{len(missing)} sample(s) have no text, e.g. {missing[:3]}")
    emb = embedder()
    reps = text_representations([by_id[s] for s in matrix.samples.tolist()], opts.dims, embedder=emb)
    return matrix, reps, f"{emb.model_name} + PCA-{opts.dims}"


def fit_subset(
    opts: MiniLongBenchOptions,
    *,
    config_file: str | Path | None,
    read_table: ReadTable,
    embedder: Callable[[], Any],
    default_seed: int,
    lake_dir: str | Path,
    released_subset: str | None = None,
) -> SubsetRun:
    """Fit MiniLongBench as the options say, replace the fitted model in the lake and build the
    subset table. ``embedder()`` (with ``encode`` and ``model_name``) is called only when texts
    are embedded; ``default_seed`` is the config's seed. ``released_subset`` (config
    ``released.subset``): the subset is the samples it names (LongBench global sample indices,
    so the matrix must be indexed by them), not one K-Means selects."""
    if opts.scores is not None:
        scores = _file(opts, "scores", config_file)
        source = f"imported {Path(opts.scores).name}"
    else:
        scores = own_scores(read_table("metric_scores"), opts.metrics)
        if scores is None:
            raise MiniLongBenchError("minilongbench_subset: no minilongbench.scores configured and no metric_scores "
                                     "in the lake; evaluate models first or import a score matrix")
        source = "metric_scores"
    if released_subset and source == "metric_scores":
        _released_subset_ids(released_subset, None, source)  # raises: our own tables are not LongBench-indexed
    if opts.irt == "released":
        return _released_subset_run(opts, scores, source, released_subset, default_seed, lake_dir)
    try:
        matrix, reps, label = _training_data(opts, config_file, read_table, embedder, source, scores)
        given = _released_subset_ids(released_subset, matrix, source)
        mlb = fit(
            matrix, reps, ratio=float(opts.ratio), dims=opts.dims,
            seed=opts.seed if opts.seed is not None else default_seed,
            epochs=opts.epochs, representation=label, candidates=opts.subset_candidates, subset_ids=given,
        )
    except MiniLongBenchError:
        raise
    except ValueError as exc:
        raise MiniLongBenchError(f"minilongbench_subset ({source}): {exc}") from exc
    mlb.meta["source"] = source
    if released_subset:
        mlb.meta["released_subset"] = released_subset
    validation = validate(opts, matrix, reps, seed=mlb.meta["seed"], subset_ids=given, label=label)
    if validation is not None:
        mlb.meta["validation"] = validation
    where = persistence.write_to_lake(mlb, model_dir(lake_dir))
    # In-sample check on the training models, beside random stratified subsets (spec §7).
    quality = baseline_report(mlb, matrix, opts.baseline_draws, seed=mlb.meta["seed"])
    return SubsetRun(mlb=mlb, matrix=matrix, source=source, table=subset_table(mlb), quality=quality,
                     baseline_draws=opts.baseline_draws, model_dir=where, validation=validation)


def released_item_parameters(released_subset: str | None, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """``(alpha, beta, label)`` of the item parameters the authors of subset ``released_subset`` (config
    ``released.subset``) released, in ``samples`` order: read by that benchmark's package
    (``lc_pipeline.benchmarks.<subset>.released_irt``, found by convention: the core names no benchmark)."""
    import importlib

    from lc_pipeline.official import OfficialFileError

    if not released_subset or not str(released_subset).isidentifier():
        raise MiniLongBenchError(
            f"minilongbench_subset: minilongbench.irt: released needs released.subset naming a benchmark whose "
            f"authors released item parameters (e.g. minilongbench), got {released_subset!r}")
    try:
        module = importlib.import_module(f"lc_pipeline.benchmarks.{released_subset}.released_irt")
    except ModuleNotFoundError as exc:
        raise MiniLongBenchError(f"minilongbench_subset: minilongbench.irt: released: no released item parameters "
                                 f"for subset {released_subset!r} ({exc})") from None
    try:
        alpha, beta = module.item_parameters(samples)
    except OfficialFileError as exc:
        raise MiniLongBenchError(f"minilongbench_subset: minilongbench.irt: released: {exc}") from exc
    return alpha, beta, module.SOURCE


def _released_subset_run(opts: MiniLongBenchOptions, scores: pl.DataFrame, source: str,
                         released_subset: str | None, default_seed: int, lake_dir: str | Path) -> SubsetRun:
    """:func:`fit_subset` with ``irt: released``: the authors' item parameters, not refitted (MI1); the score
    matrix gives the samples' tasks and categories and the baseline; no leave-models-out validation (the
    released parameters have seen every training model: benchmarks/minilongbench_validation.py measures them)."""
    from lc_pipeline.benchmarks.minilongbench.fitting import from_parameters

    if source == "metric_scores":
        raise MiniLongBenchError("minilongbench_subset: minilongbench.irt: released needs minilongbench.scores, a "
                                 "score matrix indexed by LongBench's global sample (the released parameters' items)")
    try:
        matrix = ScoreMatrix.from_frame(scores)
        if opts.train_models:
            matrix = matrix.select_models(list(opts.train_models))
        given = _released_subset_ids(released_subset, matrix, source)
        alpha, beta, label = released_item_parameters(released_subset, matrix.samples)
        mlb = from_parameters(matrix, alpha, beta, ratio=float(opts.ratio),
                              seed=opts.seed if opts.seed is not None else default_seed,
                              candidates=opts.subset_candidates, subset_ids=given, source=label)
    except MiniLongBenchError:
        raise
    except ValueError as exc:
        raise MiniLongBenchError(f"minilongbench_subset ({source}): {exc}") from exc
    mlb.meta["source"] = source
    mlb.meta["released_subset"] = released_subset
    where = persistence.write_to_lake(mlb, model_dir(lake_dir))
    quality = baseline_report(mlb, matrix, opts.baseline_draws, seed=mlb.meta["seed"])
    return SubsetRun(mlb=mlb, matrix=matrix, source=source, table=subset_table(mlb), quality=quality,
                     baseline_draws=opts.baseline_draws, model_dir=where,
                     validation={"skipped": "irt: released (the released parameters were fitted on every training "
                                            "model; see benchmarks/minilongbench_validation.py)"})


def validate(opts: MiniLongBenchOptions, matrix: ScoreMatrix, reps: np.ndarray | None, *, seed: int,
             subset_ids: Sequence | None = None, label: str | None = None) -> dict | None:
    """The leave-models-out validation of every mode against its own random median
    (:func:`lc_pipeline.benchmarks.minilongbench.validation.leave_models_out`) on the training models,
    fitted and selected as the subset itself is; ``None`` when ``validation_splits`` is 0. With
    too few models (< 2 per fold and 4 in all) the result says so instead of figures."""
    if not opts.validation_splits:
        return None
    n, folds = len(matrix.models), opts.validation_folds
    if n < max(4, 2 * folds):
        return {"settings": {"splits": opts.validation_splits, "folds": folds}, "summary": {}, "units": [],
                "choice": {}, "skipped": f"{n} training models; the validation needs at least {max(4, 2 * folds)}"}

    def fit_fold(train: ScoreMatrix, split_seed: int) -> MiniLongBench:
        return fit(train, reps, ratio=float(opts.ratio), dims=opts.dims, seed=split_seed, epochs=opts.epochs,
                   representation=label, candidates=1, subset_ids=subset_ids)

    try:
        val = leave_models_out(matrix, fit_fold, folds=folds, splits=opts.validation_splits,
                               kmeans_seeds=opts.validation_seeds, draws=opts.validation_draws, seed=seed,
                               candidates=opts.subset_candidates, subset_ids=subset_ids)
    except ValueError as exc:
        raise MiniLongBenchError(f"minilongbench_subset validation: {exc}") from exc
    return val.to_json()


def _released_subset_ids(released_subset: str | None, matrix: ScoreMatrix | None, source: str) -> list[int] | None:
    """The given subset's sample ids (None: K-Means selects one); the matrix must be LongBench's."""
    if not released_subset:
        return None
    from lc_pipeline.benchmarks.minilongbench.subset import subset_sample_ids

    if matrix is None or source == "metric_scores" or not np.issubdtype(matrix.samples.dtype, np.integer):
        raise MiniLongBenchError(
            f"minilongbench_subset: released.subset {released_subset!r} names LongBench's global sample indices; "
            f"the score matrix ({source}) must be indexed by them: set minilongbench.scores to a LongBench score "
            "matrix (e.g. $LCP_DATA/minilongbench/scores_train_models.parquet)")
    return list(subset_sample_ids(released_subset))


def subset_table(mlb: MiniLongBench) -> pl.DataFrame:
    """The ``minilongbench_subset`` table: the subset samples with their clusters and IRT parameters."""
    sub = mlb.subset_frame()
    return schemas.conform(
        pl.DataFrame(
            {
                "sample_id": [str(s) for s in sub[SAMPLE].to_list()],
                "task": sub["task"],
                "category": sub["category"],
                "cluster_group": sub["cluster_group"],
                "cluster": sub["cluster"],
                "cluster_weight": sub["cluster_weight"],
                "alpha": mlb.alpha[mlb.subset].tolist(),
                "beta": mlb.beta[mlb.subset],
            },
            schema_overrides={"alpha": pl.List(pl.Float64)},
        ),
        "minilongbench_subset",
    )


# ---------------------------------------------------------------------------------------------
# minilongbench_estimates
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EstimatesRun:
    """One model's estimates in every mode, as the ``minilongbench_estimates`` table."""

    table: pl.DataFrame
    estimates: dict[str, Estimate]  # per mode
    scores_from: str  # the option ("estimate_scores", "scores") or "metric_scores" the scores came from
    n_observed: int
    in_training: bool
    missing_tasks: dict[str, int] = field(default_factory=dict)  # released subset: task -> samples not run
    mode: str = DEFAULT_MODE  # the mode reported first (minilongbench.mode); the table has every mode

    @property
    def estimate(self) -> float:
        """The overall estimate in :attr:`mode`."""
        return float(self.estimates[self.mode].overall)


def load_fitted(lake_dir: str | Path, subset: pl.DataFrame, who: str) -> MiniLongBench:
    """The fitted model in the lake, checked against the ``minilongbench_subset`` table."""
    try:
        mlb = MiniLongBench(**persistence.read_fields_from_lake(model_dir(lake_dir)))
    except (FileNotFoundError, ValueError) as exc:
        raise MiniLongBenchError(f"{who}: {exc}; materialize minilongbench_subset") from exc
    if sorted(map(str, mlb.subset_ids.tolist())) != sorted(subset["sample_id"].to_list()):
        raise MiniLongBenchError("the fitted MiniLongBench in the lake does not match the minilongbench_subset table; "
                                 "re-materialize minilongbench_subset")
    return mlb


def released_scores(
    metric_scores: pl.DataFrame | None,
    instances: pl.DataFrame | None,
    source_items: pl.DataFrame | None,
    model: str,
    subset: str,
    metrics: Sequence[str] = (),
) -> tuple[pl.DataFrame | None, dict[str, int]]:
    """Model ``model``'s scores on the released instances (suite ``released``) that are samples of
    ``subset`` (config ``released.subset``), as ``model, task, global_sample, score``, and the
    subset's tasks with samples no record stood for (task -> count).

    An instance is keyed to LongBench's global sample index through its item, by the rule the
    builder chose the records by (:func:`lc_pipeline.benchmarks.minilongbench.subset.sample_index` over
    the sources' items). Its score is its task's metric (a released LongBench task declares one);
    an instance scored by several metrics takes the first of ``metrics`` it has, else it is an
    error naming the instance. A sample run more than once (two levels) scores their mean.
    ``(None, missing)`` when the model has no score on a subset sample."""
    from lc_pipeline.construct.released import SUITE
    from lc_pipeline.benchmarks.minilongbench.subset import sample_index, task_of_sample

    if source_items is None or instances is None:
        raise MiniLongBenchError(f"minilongbench_estimates {model}: released.subset {subset!r} needs the lake's "
                                 "source_items and instances; materialize them and the model's metric_scores first")
    index = sample_index(source_items, subset)
    released = instances.filter(pl.col("suite") == SUITE).select("instance_id", "item_id").unique()
    sample_of = pl.DataFrame({"item_id": list(index.samples), SAMPLE: list(index.samples.values())},
                             schema={"item_id": pl.String, SAMPLE: pl.Int64})
    keyed = released.join(sample_of, on="item_id", how="inner")
    if metric_scores is None or keyed.is_empty():
        return None, index.missing_tasks
    mine = metric_scores.filter(pl.col("model") == model).join(keyed.select("instance_id", SAMPLE), on="instance_id")
    if mine.is_empty():
        return None, index.missing_tasks
    several = mine.group_by("instance_id").agg(pl.col("metric").unique()).filter(pl.col("metric").list.len() > 1)
    if several.height:
        rank = {m: i for i, m in enumerate(metrics)}
        mine = mine.filter(pl.col("metric").is_in(list(metrics)))
        bad = set(several["instance_id"].to_list()) - set(mine["instance_id"].to_list())
        if bad:
            row = several.filter(pl.col("instance_id").is_in(sorted(bad))).row(0, named=True)
            raise MiniLongBenchError(f"minilongbench_estimates {model}: instance {row['instance_id']!r} is scored by "
                                     f"metrics {sorted(row['metric'])}, none of minilongbench.metrics {list(metrics)}")
        mine = (mine.with_columns(pl.col("metric").replace_strict(rank, return_dtype=pl.Int64).alias("_rank"))
                .sort("_rank").group_by("instance_id", maintain_order=True).first())
    out = (mine.group_by(SAMPLE).agg(pl.col("task").first(), pl.col("score").mean())
           .with_columns(pl.lit(model).alias("model")).select("model", "task", SAMPLE, "score").sort(SAMPLE))
    present = set(out[SAMPLE].to_list())
    missing: dict[str, int] = {}
    for s in index.subset:
        if s not in present:
            task = task_of_sample(s)[0]
            missing[task] = missing.get(task, 0) + 1
    return out, missing


def _model_scores(
    opts: MiniLongBenchOptions, config_file: str | Path | None, read_table: ReadTable, mlb: MiniLongBench, slug: str,
    released_subset: str | None = None,
) -> tuple[pl.DataFrame, str, dict[str, int]]:
    """The scores of partition ``slug``'s model (matched case-insensitively in files, as partition
    keys are lower-case slugs), where they came from and, for a released subset, the subset's tasks
    it has no score on. With ``released_subset`` the model's own released runs come first."""
    missing: dict[str, int] = {}
    if released_subset:
        own, missing = released_scores(read_table("metric_scores"), read_table("instances"),
                                       read_table("source_items"), slug, released_subset, opts.metrics)
        if own is not None:
            return own, "metric_scores (released)", missing
    for key in ("estimate_scores", "scores"):
        if getattr(opts, key) is not None:
            df = _file(opts, key, config_file)
            mine = df.filter(pl.col("model").str.to_lowercase() == slug.lower())
            if mine.height:
                return mine, key, {}
    if mlb.meta.get("source") == "metric_scores":
        own = own_scores(read_table("metric_scores"), opts.metrics)
        if own is not None and own.filter(pl.col("model") == slug).height:
            return own.filter(pl.col("model") == slug), "metric_scores", {}
    looked = [k for k in ("estimate_scores", "scores") if getattr(opts, k) is not None] or ["metric_scores"]
    if released_subset:
        looked.insert(0, f"metric_scores of the released instances of subset {released_subset!r}")
    raise MiniLongBenchError(f"minilongbench_estimates: no scores for model {slug!r} (looked in {looked})")


def estimate_partition(
    opts: MiniLongBenchOptions,
    *,
    config_file: str | Path | None,
    read_table: ReadTable,
    lake_dir: str | Path,
    subset: pl.DataFrame,
    slug: str,
    released_subset: str | None = None,
) -> EstimatesRun:
    """Estimate model ``slug`` (a partition key) in every mode from its scores on the subset of the
    fitted model in the lake; ``subset`` is the ``minilongbench_subset`` table it must match.
    ``released_subset`` (config ``released.subset``): the scores are the model's own on the
    released instances first (:func:`released_scores`)."""
    mlb = load_fitted(lake_dir, subset, f"minilongbench_estimates {slug}")
    rows, where, missing = _model_scores(opts, config_file, read_table, mlb, slug, released_subset)
    names = set(rows["model"].unique().to_list())
    if len(names) > 1:
        raise MiniLongBenchError(f"minilongbench_estimates: models {sorted(names)} all match partition {slug!r}")
    in_training = bool(names & set(mlb.train_models))
    rows = rows.with_columns(pl.lit(slug).alias("model"))
    if mlb.meta.get("sample_id_type") == "int":
        rows = rows.with_columns(pl.col(SAMPLE).cast(pl.Int64))
    rows = rows.filter(pl.col(SAMPLE).is_in(list(set(mlb.subset_ids.tolist()))))
    try:
        estimates = {mode: estimate_frame(mlb, rows, mode)[slug] for mode in MODES}
    except ValueError as exc:
        raise MiniLongBenchError(f"minilongbench_estimates {slug}: {exc}") from exc
    out_rows = []
    for mode, e in estimates.items():
        out_rows.append((mode, "overall", "overall", e.overall))
        out_rows += [(mode, "category", c, v) for c, v in e.categories.items()]
        out_rows += [(mode, "task", t, v) for t, v in e.tasks.items()]
    out = pl.DataFrame(out_rows, schema=["mode", "scope", "name", "estimate"], orient="row").with_columns(
        pl.lit(rows.height).alias("n_observed"),
        pl.lit(len(mlb.subset)).alias("n_subset"),
        pl.lit(in_training).alias("in_training"),
    )
    return EstimatesRun(table=schemas.conform(out, "minilongbench_estimates"), estimates=estimates, scores_from=where,
                        n_observed=rows.height, in_training=in_training, missing_tasks=missing,
                        mode=opts.mode or DEFAULT_MODE)
