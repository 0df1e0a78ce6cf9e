"""minilongbench_subset, minilongbench_estimates: MiniLongBench inside the pipeline.

``minilongbench_subset`` (unpartitioned) fits MiniLongBench (:mod:`lc_pipeline.benchmarks.minilongbench`)
on a score matrix and writes the selected samples with their IRT parameters; the whole fitted
model is saved beside the tables in ``<lake>/_minilongbench/`` (the ``lcp minilongbench fit``
format, so ``lcp minilongbench estimate --model-dir <lake>/_minilongbench`` works on it too).
``minilongbench_estimates`` (partitioned by model) estimates one model's full-benchmark scores
from its scores on the subset, in every mode: the paper's ``predict`` and ``direct``, and
``weighted`` (cluster-weighted subset mean) and ``blend`` (their mix with ``predict``).

LongBench run as released on MiniLongBench's records (config ``released.subset``, the packaged
``minilongbench`` config): the subset is the one named there (the released 237 samples), the
IRT model is fitted on the imported LongBench score matrix, and a model's estimate reads its own
``metric_scores`` of the released instances; the estimates' metadata says how many of the
subset's samples it had (``n_observed`` of ``n_subset``) and which tasks were missing.

Options: the ``minilongbench:`` mapping of the benchmark config, every key optional, typed and
documented by :class:`lc_pipeline.benchmarks.minilongbench.options.MiniLongBenchOptions` (scores,
embeddings, texts, estimate_scores, train_models, metrics, representation, ratio, dims, seed,
epochs, baseline_draws, subset_candidates, mode, validation_*); relative paths are resolved against the config
file's folder. What the assets run (reading the matrix, fitting, saving the model in the lake,
the tables and their metadata) is :mod:`lc_pipeline.benchmarks.minilongbench.pipeline`; this module
is the Dagster wiring. The subset's metadata carries the honest baseline the paper omits (spec
§7): the training models' Spearman from the subset beside the median over ``baseline_draws``
random stratified subsets (in-sample for both), and the leave-models-out validation of every mode
on held-out training models beside its own random median (``validation_*``, ``validated_mode_*``;
:mod:`lc_pipeline.benchmarks.minilongbench.validation`; ``benchmarks/minilongbench_cv.py`` runs it at
full size on the 20 real LLMs).
"""

import dagster as dg
import numpy as np
import polars as pl

from lc_pipeline.assets import side_inputs
from lc_pipeline.assets.common import FINGERPRINT_KEY, preview
from lc_pipeline.assets.side_inputs import side_input_reader
from lc_pipeline.assets.versions import RUNS
from lc_pipeline.benchmarks.minilongbench import pipeline as mlbp
from lc_pipeline.benchmarks.minilongbench.options import MiniLongBenchOptions
from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.fingerprints import short_id
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource, EmbedderResource, LakeResource

CODE_VERSION = "2"  # 2: weighted and blend estimates; the subset chosen among K-Means candidates
MODEL_DIR = mlbp.MODEL_DIR



def _float(v: float) -> dg.MetadataValue:
    return dg.MetadataValue.float(float(v)) if np.isfinite(v) else dg.MetadataValue.text("n/a")


def _options(config: BenchmarkConfig, benchmark: BenchmarkResource) -> MiniLongBenchOptions:
    try:
        return mlbp.options_of(config.minilongbench, config.name, benchmark.config)
    except mlbp.MiniLongBenchError as exc:
        raise dg.Failure(str(exc), allow_retries=False) from exc


def _released_subset(config: BenchmarkConfig) -> str | None:
    """Config ``released.subset`` (a LongBench run as released on MiniLongBench's records), else None."""
    return (config.released.subset or None) if config.released is not None else None


def _fingerprint(stage: str, config: BenchmarkConfig) -> str:
    released = _released_subset(config)  # hashed only when set: other configs keep their fingerprints
    extra = ("released.subset", released) if released else ()
    return short_id(stage, CODE_VERSION, config.fingerprint("minilongbench", "seed"), *extra, length=16)


def build(parts: Partitions) -> list:
    @dg.asset(
        **side_inputs.MINILONGBENCH_SUBSET.declaration(),
        group_name="minilongbench", tags={RUNS: "manual"},  # lcp minilongbench
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
        try:
            run = mlbp.fit_subset(_options(config, benchmark), config_file=benchmark.config,
                                  read_table=side_input_reader(context, lake).table,
                                  embedder=embedder.embedder, default_seed=config.seed, lake_dir=lake.base_dir,
                                  released_subset=_released_subset(config))
        except mlbp.MiniLongBenchError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        context.log.info(run.summary)
        meta = run.metadata()
        figures, texts, table = mlbp.validation_metadata(run.validation)
        return dg.Output(
            run.table,
            metadata={
                FINGERPRINT_KEY: _fingerprint("minilongbench_subset", config),
                **meta,
                "model_dir": dg.MetadataValue.path(str(run.model_dir)),
                **{k: _float(v) for k, v in run.quality.items()},
                "baseline_draws": run.baseline_draws,
                **{k: _float(v) for k, v in figures.items()},
                **texts,
                **({"validation_table": dg.MetadataValue.md(table)} if table else {}),
                "task_counts": preview(run.task_counts, n=50),
            },
        )

    @dg.asset(
        partitions_def=parts.model,
        **side_inputs.MINILONGBENCH_ESTIMATES.declaration(),
        group_name="minilongbench", tags={RUNS: "manual"},  # lcp minilongbench
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
        try:
            run = mlbp.estimate_partition(_options(config, benchmark), config_file=benchmark.config,
                                          read_table=side_input_reader(context, lake).table,
                                          lake_dir=lake.base_dir,
                                          subset=minilongbench_subset, slug=context.partition_key,
                                          released_subset=_released_subset(config))
        except mlbp.MiniLongBenchError as exc:
            raise dg.Failure(str(exc), allow_retries=False) from exc
        return dg.Output(
            run.table,
            metadata={
                FINGERPRINT_KEY: _fingerprint("minilongbench_estimates", config),
                "scores_from": run.scores_from,
                "n_observed": run.n_observed,
                "n_subset": int(run.table["n_subset"][0]) if run.table.height else 0,
                "in_training": run.in_training,
                "missing_tasks": dg.MetadataValue.json(run.missing_tasks),
                "mode": run.mode,
                "estimate": dg.MetadataValue.float(run.estimate),
                **{f"overall_{mode}": dg.MetadataValue.float(float(e.overall)) for mode, e in run.estimates.items()},
                "preview": preview(run.table.filter(pl.col("scope") != "task"), n=20),
            },
        )

    return [minilongbench_subset, minilongbench_estimates]
