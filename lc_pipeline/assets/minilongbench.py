"""minilongbench_subset, minilongbench_estimates: MiniLongBench inside the pipeline.

``minilongbench_subset`` (unpartitioned) fits MiniLongBench (:mod:`lc_pipeline.score.minilongbench`)
on a score matrix and writes the selected samples with their IRT parameters; the whole fitted
model is saved beside the tables in ``<lake>/_minilongbench/`` (the ``lcp minilongbench fit``
format, so ``lcp minilongbench estimate --model-dir <lake>/_minilongbench`` works on it too).
``minilongbench_estimates`` (partitioned by model) estimates one model's full-benchmark scores
from its scores on the subset, in every mode: the paper's ``predict`` and ``direct``, and
``weighted`` (cluster-weighted subset mean) and ``blend`` (their mix with ``predict``).

Options: the ``minilongbench:`` mapping of the benchmark config (every key optional)::

    minilongbench:
      scores: path            # imported matrix: model, task, category, global_sample, score (parquet/csv);
                              # absent -> train on our own metric_scores tables (every model in the lake)
      embeddings: path        # imported representations: global_sample, pc0, pc1, ...
      texts: path             # or texts to embed: global_sample, text (embedded with the embedder resource)
      estimate_scores: path   # new models' scores: model, global_sample, score (a partition's model is
                              # matched case-insensitively, as partition keys are lower-case slugs)
      train_models: [a, b]    # train on these models only (default: all in the matrix)
      metrics: [lb100, f1]    # own metric_scores: per instance, the first of these metrics it has
      representation: text    # own metric_scores: "text" (embed question + context) or "none"
      ratio: 0.95             # share of samples removed (K = int((1 - ratio) * n))
      dims: 10
      seed: 42                # default: the config's seed
      epochs: 2000
      baseline_draws: 50      # random stratified subsets scored on the training models (metadata)
      subset_candidates: 8    # K-Means runs; keep the one that best recovers the training models (1 = paper)

Relative paths are resolved against the config file's folder. With an imported matrix and
neither ``embeddings`` nor ``texts``, alpha starts at 0. With our own ``metric_scores`` a
sample is one instance (``instance_id``), and its representation the PCA of the embedding of
its question and the start of its context (the embedder reads its first 256 tokens).

The subset's metadata carries the honest baseline the paper omits: Spearman, over the training
models, of the subset's estimates against their true scores, beside the median over
``baseline_draws`` random subsets with the same per-task counts (in-sample for both;
``benchmarks/minilongbench_cv.py`` measures held-out models).
"""


import shutil
import tempfile
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.assets.common import FINGERPRINT_KEY, preview
from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.fingerprints import short_id
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource, EmbedderResource, LakeResource
from lc_pipeline.resources.parquet_io import read_table
from lc_pipeline.score import minilongbench as mlbm

CODE_VERSION = "2"  # 2: weighted and blend estimates; the subset chosen among K-Means candidates
MODEL_DIR = "_minilongbench"  # under the lake; "_" keeps it out of the DuckDB table views
OPTIONS = {
    "scores", "embeddings", "texts", "estimate_scores", "train_models", "metrics", "representation", "ratio",
    "dims", "seed", "epochs", "baseline_draws", "subset_candidates",
}
DEFAULT_METRICS = ("lb100", "f1")


def options(config: BenchmarkConfig) -> dict:
    opts = dict(config.minilongbench or {})
    unknown = sorted(set(opts) - OPTIONS)
    if unknown:
        raise dg.Failure(f"config {config.name!r}: minilongbench has unknown keys {unknown}; known: {sorted(OPTIONS)}",
                         allow_retries=False)
    if opts.get("representation", "text") not in ("text", "none"):
        raise dg.Failure("minilongbench.representation must be 'text' or 'none'", allow_retries=False)
    return opts


def _path(value: str, benchmark: BenchmarkResource) -> Path:
    p = Path(value).expanduser()
    if not p.is_absolute():
        cfg = Path(benchmark.config)
        if cfg.is_file():
            p = cfg.resolve().parent / p
    if not p.exists():
        raise dg.Failure(f"minilongbench: {value!r} not found (looked at {p})", allow_retries=False)
    return p


def _read(path: Path) -> pl.DataFrame:
    return pl.read_csv(path) if path.suffix.lower() == ".csv" else pl.read_parquet(path)


def _lake_table(lake: LakeResource, table: str) -> pl.DataFrame | None:
    return read_table(storage.lake_path(lake.base_dir) / table)


def own_scores(lake: LakeResource, metrics: list[str]) -> pl.DataFrame | None:
    """Our metric_scores as ``model, task, category, global_sample (= instance_id), score``: per
    model and instance the score of the first metric of ``metrics`` it has."""
    df = _lake_table(lake, "metric_scores")
    if df is None:
        return None
    rank = {m: i for i, m in enumerate(metrics)}
    df = df.filter(pl.col("metric").is_in(list(metrics))).with_columns(
        pl.col("metric").replace_strict(rank, return_dtype=pl.Int64).alias("_rank")
    )
    if df.is_empty():
        return None
    return (
        df.sort("_rank")
        .group_by("model", "instance_id", maintain_order=True)
        .first()
        .select("model", "task", "category", pl.col("instance_id").alias(mlbm.SAMPLE), "score")
    )


def _own_texts(lake: LakeResource) -> dict[str, str]:
    df = _lake_table(lake, "instances")
    if df is None:
        return {}
    return {i: f"{q}\n{c[:4000]}" for i, q, c in df.select("instance_id", "question", "context").iter_rows()}


def _model_dir(lake: LakeResource) -> Path:
    return storage.lake_path(lake.base_dir) / MODEL_DIR


def _save_model(mlb: mlbm.MiniLongBench, model_dir: Path) -> None:
    """Replace the fitted model in the lake: a local folder is swapped by rename; on an object
    store the files are written to a local folder first, then put one by one."""
    if storage.is_local(model_dir):
        tmp = model_dir.with_name(model_dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        mlb.save(tmp)
        shutil.rmtree(model_dir, ignore_errors=True)
        tmp.rename(model_dir)
        return
    with tempfile.TemporaryDirectory(prefix="lcp-minilongbench-") as tmp:
        storage.upload_tree(mlb.save(Path(tmp) / MODEL_DIR), model_dir)


def _load_model(model_dir: Path) -> mlbm.MiniLongBench:
    if storage.is_local(model_dir):
        return mlbm.MiniLongBench.load(model_dir)
    with tempfile.TemporaryDirectory(prefix="lcp-minilongbench-") as tmp:
        storage.download_tree(model_dir, Path(tmp))
        return mlbm.MiniLongBench.load(tmp)


def _fingerprint(stage: str, config: BenchmarkConfig) -> str:
    return short_id(stage, CODE_VERSION, config.fingerprint("minilongbench", "seed"), length=16)


def build(parts: Partitions) -> list:
    @dg.asset(
        deps=["metric_scores"],
        group_name="minilongbench",
        kinds={"parquet"},
        description=(
            "MiniLongBench subset (~5 % of the samples): 2PL IRT with priors on the binarized scores of the "
            "training models, K-Means per category on [alpha, beta], the samples nearest the centroids"
        ),
    )
    def minilongbench_subset(
        context: dg.AssetExecutionContext,
        benchmark: BenchmarkResource,
        lake: LakeResource,
        embedder: EmbedderResource,
    ):
        config = benchmark.load()
        opts = options(config)
        dims = int(opts.get("dims", 10))
        if "scores" in opts:
            scores = _read(_path(opts["scores"], benchmark))
            source = f"imported {Path(opts['scores']).name}"
        else:
            scores = own_scores(lake, list(opts.get("metrics", DEFAULT_METRICS)))
            if scores is None:
                raise dg.Failure("minilongbench_subset: no minilongbench.scores configured and no metric_scores in "
                                 "the lake; evaluate models first or import a score matrix", allow_retries=False)
            source = "metric_scores"
        try:
            matrix = mlbm.ScoreMatrix.from_frame(scores)
            if opts.get("train_models"):
                matrix = matrix.select_models(list(opts["train_models"]))
            reps, label = None, None
            if "embeddings" in opts:
                reps = mlbm.representations_from_frame(_read(_path(opts["embeddings"], benchmark)), matrix.samples, dims)
                label = f"embeddings {Path(opts['embeddings']).name}"
            elif "texts" in opts or (source == "metric_scores" and opts.get("representation", "text") == "text"):
                if "texts" in opts:
                    t = _read(_path(opts["texts"], benchmark))
                    by_id = dict(zip(t[mlbm.SAMPLE].to_list(), t["text"].to_list()))
                else:
                    by_id = _own_texts(lake)
                missing = [s for s in matrix.samples.tolist() if s not in by_id]
                if missing:
                    raise ValueError(f"{len(missing)} sample(s) have no text, e.g. {missing[:3]}")
                emb = embedder.embedder()
                reps = mlbm.text_representations([by_id[s] for s in matrix.samples.tolist()], dims, embedder=emb)
                label = f"{emb.model_name} + PCA-{dims}"
            mlb = mlbm.fit(
                matrix, reps, ratio=float(opts.get("ratio", 0.95)), dims=dims, seed=int(opts.get("seed", config.seed)),
                epochs=int(opts.get("epochs", 2000)), representation=label,
                candidates=int(opts.get("subset_candidates", 8)),
            )
        except ValueError as exc:
            raise dg.Failure(f"minilongbench_subset ({source}): {exc}", allow_retries=False) from exc
        mlb.meta["source"] = source
        model_dir = _model_dir(lake)
        _save_model(mlb, model_dir)

        # In-sample check on the training models, beside random stratified subsets (spec §7).
        draws = int(opts.get("baseline_draws", 50))
        quality = mlbm.baseline_report(mlb, matrix, draws, seed=mlb.meta["seed"])
        sub = mlb.subset_frame()
        out = schemas.conform(
            pl.DataFrame(
                {
                    "sample_id": [str(s) for s in sub[mlbm.SAMPLE].to_list()],
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
        counts = pl.DataFrame({"task": list(mlb.subset_task_counts()), "n": list(mlb.subset_task_counts().values())})
        context.log.info(f"MiniLongBench: {out.height} of {len(mlb.samples)} samples from {len(matrix.models)} models")
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: _fingerprint("minilongbench_subset", config),
                "source": source,
                "train_models": len(matrix.models),
                "samples": len(mlb.samples),
                "subset": out.height,
                "threshold": float(mlb.threshold),
                "representation": str(mlb.meta["representation"]),
                "model_dir": dg.MetadataValue.path(str(model_dir)),
                **{k: (dg.MetadataValue.float(v) if np.isfinite(v) else dg.MetadataValue.text("n/a"))
                   for k, v in quality.items()},
                "baseline_draws": draws,
                "task_counts": preview(counts, n=50),
            },
        )

    @dg.asset(
        partitions_def=parts.model,
        deps=["metric_scores"],
        group_name="minilongbench",
        kinds={"parquet"},
        description=(
            "A model's full-benchmark score estimated from its scores on the MiniLongBench subset only: "
            "'predict' (IRT ability, predicted remainder), 'direct' (subset mean), 'weighted' (cluster-weighted "
            "subset mean) and 'blend' (weighted + predict), task -> category -> overall"
        ),
    )
    def minilongbench_estimates(
        context: dg.AssetExecutionContext,
        minilongbench_subset: pl.DataFrame,
        benchmark: BenchmarkResource,
        lake: LakeResource,
    ):
        config = benchmark.load()
        opts = options(config)
        slug = context.partition_key
        try:
            mlb = _load_model(_model_dir(lake))
        except (FileNotFoundError, ValueError) as exc:
            raise dg.Failure(f"minilongbench_estimates {slug}: {exc}; materialize minilongbench_subset",
                             allow_retries=False) from exc
        if sorted(map(str, mlb.subset_ids.tolist())) != sorted(minilongbench_subset["sample_id"].to_list()):
            raise dg.Failure("the fitted MiniLongBench in the lake does not match the minilongbench_subset table; "
                             "re-materialize minilongbench_subset", allow_retries=False)

        rows, where = None, None
        for key in ("estimate_scores", "scores"):
            if key in opts:
                df = _read(_path(opts[key], benchmark))
                mine = df.filter(pl.col("model").str.to_lowercase() == slug.lower())
                if mine.height:
                    rows, where = mine, key
                    break
        if rows is None and mlb.meta.get("source") == "metric_scores":
            own = own_scores(lake, list(opts.get("metrics", DEFAULT_METRICS)))
            if own is not None and own.filter(pl.col("model") == slug).height:
                rows, where = own.filter(pl.col("model") == slug), "metric_scores"
        if rows is None:
            raise dg.Failure(f"minilongbench_estimates: no scores for model {slug!r} (looked in "
                             f"{[k for k in ('estimate_scores', 'scores') if k in opts] or ['metric_scores']})",
                             allow_retries=False)
        names = set(rows["model"].unique().to_list())
        if len(names) > 1:
            raise dg.Failure(f"minilongbench_estimates: models {sorted(names)} all match partition {slug!r}",
                             allow_retries=False)
        in_training = bool(names & set(mlb.train_models))
        rows = rows.with_columns(pl.lit(slug).alias("model"))
        if mlb.meta.get("sample_id_type") == "int":
            rows = rows.with_columns(pl.col(mlbm.SAMPLE).cast(pl.Int64))
        subset_ids = set(mlb.subset_ids.tolist())
        rows = rows.filter(pl.col(mlbm.SAMPLE).is_in(list(subset_ids)))
        try:
            estimates = {mode: mlbm.estimate_frame(mlb, rows, mode)[slug] for mode in mlbm.MODES}
        except ValueError as exc:
            raise dg.Failure(f"minilongbench_estimates {slug}: {exc}", allow_retries=False) from exc
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
        out = schemas.conform(out, "minilongbench_estimates")
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: _fingerprint("minilongbench_estimates", config),
                "scores_from": where,
                "n_observed": rows.height,
                "in_training": in_training,
                **{f"overall_{mode}": dg.MetadataValue.float(float(e.overall)) for mode, e in estimates.items()},
                "preview": preview(out.filter(pl.col("scope") != "task"), n=20),
            },
        )

    return [minilongbench_subset, minilongbench_estimates]
