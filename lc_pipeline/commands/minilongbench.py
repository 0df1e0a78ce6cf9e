"""`lcp tools minilongbench fit | estimate`: build a MiniLongBench subset and score new models on it.

    lcp tools minilongbench fit --scores FILE.parquet [--embeddings FILE.parquet | --texts FILE.parquet]
                                [--ratio 0.95] [--dims 10] [--seed 42] [--epochs 2000] [--candidates 8]
                                [--validation-splits 2] [--validation-seeds 2] [--validation-draws 20] --out DIR
    lcp tools minilongbench estimate --model-dir DIR --scores FILE.parquet [--mode predict|blend|direct|weighted]
                                     [--allow-partial [--min-coverage 0.5]]

``fit`` reads the training models' per-sample scores (columns ``model, task, category,
global_sample, score``; score in [0, 1]) and sample representations: ``--embeddings`` (columns
``global_sample, pc0, pc1, ...``; reduced by PCA to --dims when wider) or ``--texts`` (columns
``global_sample, text``; embedded with the offline sentence-transformers model, then PCA). With
neither, alpha starts at 0 (no text signal; the paper's ablation says this costs accuracy). It
writes ``DIR/subset.parquet`` (``global_sample, task, category`` and the cluster of each sample)
and the fitted parameters (``items.parquet``, ``abilities.parquet``, ``meta.json``; the format is
described in :mod:`lc_pipeline.benchmarks.minilongbench.persistence`) and prints a JSON summary. Beside the subset
it reports the honest baseline (``DIR/baseline.json``): per mode, the training models' Spearman
from the subset against the median of ``--baseline-draws`` random subsets with the same per-task
counts (in-sample for both), and the leave-models-out validation (``--validation-*``; meta.json's
``validation``, summarized in the printed JSON): every mode on held-out training models beside the
median of random stratified subsets scored in the same mode, and the modes it trusts for ranking
and for absolute error (benchmarks/minilongbench_cv.py runs it at full size on the 20 real LLMs).

``estimate`` reads new models' scores on the subset samples (``model, global_sample, score``;
rows of other samples are ignored) and prints ``{model: {"overall": x, "categories": {...},
"tasks": {...}}}``. Modes: ``predict`` (the paper's Eq. 4) fits each model's ability on its
subset scores and predicts the rest; ``direct`` (the paper's App. G) averages its subset scores;
``weighted`` weighs each subset score by the share of the benchmark its K-Means cluster stands
for; ``blend`` is the mean of ``weighted`` and ``predict`` (tinyBenchmarks' gp-IRT idea). All
aggregate task -> category -> overall (the mean of the category means). The default is the mode
benchmarks/minilongbench_validation.py chose (``blend``: the highest median held-out Spearman and
worst case over 16 refit units; no mode beats a random stratified subset reliably, README.md says
how far each can be trusted). The fit's own validation (``validation.choice`` in meta.json) judges
the modes on the models it was fitted on, by their margin over their own random median.

``estimate`` checks its input first (issue 22; :mod:`lc_pipeline.benchmarks.minilongbench.estimate_input`): no rows,
a score outside [0, 1] or not a number, or an unknown sample is an error naming the row (the CSV line); two rows
for one model and sample with different scores are an error naming both (identical ones are collapsed, said on
stderr). Every model must have a score on every subset sample; otherwise it exits non-zero naming each model's
covered/total subset samples per category. ``--allow-partial`` estimates only the categories with at least
``--min-coverage`` (default half) of their subset samples covered, prints each model's coverage (stderr, and
``coverage`` / ``not_estimated`` in the JSON) and leaves ``overall`` null unless every category is estimated.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import polars as pl

from lc_pipeline.benchmarks import minilongbench as mlbm
from lc_pipeline.benchmarks.minilongbench import estimate_input


def read_table(path: str | Path) -> pl.DataFrame:
    p = Path(path)
    if p.is_file() and p.stat().st_size == 0:
        raise click.ClickException(f"{p}: the file is empty")
    try:
        return pl.read_csv(p) if p.suffix.lower() == ".csv" else pl.read_parquet(p)
    except Exception as exc:  # noqa: BLE001  (polars raises several error types for unreadable files)
        raise click.ClickException(f"{p}: cannot read it as {'CSV' if p.suffix.lower() == '.csv' else 'Parquet'}: {exc}")


@click.group("minilongbench")
def minilongbench() -> None:
    """MiniLongBench: a ~5 % subset of a benchmark that estimates the full scores (IRT + K-Means)."""


@minilongbench.command("fit")
@click.option("--scores", "scores_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Parquet (or CSV): model, task, category, global_sample, score")
@click.option("--embeddings", "emb_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Parquet (or CSV): global_sample, pc0, pc1, ... (sample representations)")
@click.option("--texts", "texts_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Parquet (or CSV): global_sample, text (embedded offline, then PCA to --dims)")
@click.option("--ratio", type=float, default=0.95, show_default=True, help="share of samples REMOVED")
@click.option("--dims", type=int, default=10, show_default=True)
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--epochs", type=int, default=2000, show_default=True, help="IRT training epochs")
@click.option("--candidates", type=click.IntRange(1), default=8, show_default=True,
              help="K-Means runs to choose the subset from (by how well it recovers the training models); 1 = the paper")
@click.option("--baseline-draws", type=click.IntRange(0), default=50, show_default=True,
              help="random stratified subsets to compare the subset with, on the training models (0: skip)")
@click.option("--validation-splits", type=click.IntRange(0), default=2, show_default=True,
              help="leave-models-out validation of every mode against its own random median: fold splits (0: skip)")
@click.option("--validation-folds", type=click.IntRange(2), default=2, show_default=True)
@click.option("--validation-seeds", type=click.IntRange(1), default=2, show_default=True,
              help="K-Means seeds per fold in the validation")
@click.option("--validation-draws", type=click.IntRange(1), default=20, show_default=True,
              help="random stratified subsets per subset in the validation")
@click.option("--irt", type=click.Choice(["fit", "released"]), default="fit", show_default=True,
              help="item parameters: fit the 2PL on --scores, or the authors' released best_parameters.json "
                   "(through $LCP_OFFICIAL or fetched at the pinned commit; --scores indexed by LongBench's global "
                   "sample); released: no refit, no validation")
@click.option("--subset", "subset_name", default=None,
              help="a released subset to keep instead of K-Means (as config released.subset: 'minilongbench' = "
                   "the authors' 237 samples)")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
def fit_cmd(scores_path, emb_path, texts_path, ratio, dims, seed, epochs, candidates, baseline_draws,
            validation_splits, validation_folds, validation_seeds, validation_draws, irt, subset_name,
            out_dir) -> None:
    """Fit the IRT model on the training models' scores (or take the released one) and select the subset."""
    if emb_path and texts_path:
        raise click.UsageError("give --embeddings or --texts, not both")
    if irt == "released" and (emb_path or texts_path):
        raise click.UsageError("--irt released takes no --embeddings/--texts (nothing is fitted)")
    validation = None
    try:
        matrix = mlbm.ScoreMatrix.from_frame(read_table(scores_path))
        given = None
        if subset_name:
            from lc_pipeline.benchmarks.minilongbench.subset import subset_sample_ids

            given = list(subset_sample_ids(subset_name))
        if irt == "released":
            from lc_pipeline.benchmarks.minilongbench import released_irt
            from lc_pipeline.benchmarks.minilongbench.fitting import from_parameters
            from lc_pipeline.official import OfficialFileError

            try:
                alpha, beta = released_irt.item_parameters(matrix.samples)
            except OfficialFileError as exc:
                raise ValueError(str(exc)) from exc
            mlb = from_parameters(matrix, alpha, beta, ratio=ratio, seed=seed, candidates=candidates,
                                  subset_ids=given, source=released_irt.SOURCE)
        else:
            mlb, validation = _fit_and_validate(matrix, emb_path, texts_path, ratio, dims, seed, epochs, candidates,
                                                validation_splits, validation_folds, validation_seeds,
                                                validation_draws, given)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    _write_fit(mlb, matrix, validation, baseline_draws, seed, out_dir)


def _fit_and_validate(matrix, emb_path, texts_path, ratio, dims, seed, epochs, candidates, validation_splits,
                      validation_folds, validation_seeds, validation_draws, given):
    """``fit --irt fit``: the representations, the 2PL fit and the leave-models-out validation."""
    if emb_path:
        reps = mlbm.representations_from_frame(read_table(emb_path), matrix.samples, dims)
        label = f"embeddings {Path(emb_path).name}"
    elif texts_path:
        texts = read_table(texts_path)
        if not {mlbm.SAMPLE, "text"} <= set(texts.columns):
            raise ValueError(f"{texts_path}: expected columns {mlbm.SAMPLE}, text; got {texts.columns}")
        by_id = dict(zip(texts[mlbm.SAMPLE].to_list(), texts["text"].to_list()))
        missing = [s for s in matrix.samples.tolist() if s not in by_id]
        if missing:
            raise ValueError(f"{len(missing)} scored sample(s) have no text, e.g. {missing[:5]}")
        reps = mlbm.text_representations([by_id[s] for s in matrix.samples.tolist()], dims)
        label = f"texts {Path(texts_path).name}, sentence-transformers + PCA-{dims}"
    else:
        reps = None
        label = None
        click.echo("no --embeddings/--texts: alpha starts at 0 (no text signal)", err=True)
    mlb = mlbm.fit(matrix, reps, ratio=ratio, dims=dims, seed=seed, epochs=epochs, representation=label,
                   candidates=candidates, subset_ids=given)
    from lc_pipeline.benchmarks.minilongbench.pipeline import validate

    opts = mlbm.MiniLongBenchOptions(ratio=ratio, dims=dims, epochs=epochs, subset_candidates=candidates,
                                     validation_splits=validation_splits, validation_folds=validation_folds,
                                     validation_seeds=validation_seeds, validation_draws=validation_draws)
    validation = validate(opts, matrix, reps, seed=seed, subset_ids=given, label=label)
    return mlb, validation


def _write_fit(mlb, matrix, validation, baseline_draws, seed, out_dir) -> None:
    """Save the fitted model with its baseline and print the summary."""
    if validation is not None:
        mlb.meta["validation"] = validation
    out = mlb.save(out_dir)
    # The honest baseline beside the subset (spec §7): in-sample on the training models.
    baseline = mlbm.baseline_report(mlb, matrix, baseline_draws, seed)
    (out / "baseline.json").write_text(json.dumps({"draws": baseline_draws, **baseline}, indent=1) + "\n")
    click.echo(json.dumps({
        "out": str(out),
        "train_models": len(mlb.train_models),
        "samples": len(mlb.samples),
        "subset": len(mlb.subset),
        "threshold": mlb.threshold,
        "task_counts": mlb.subset_task_counts(),
        "baseline": {"draws": baseline_draws, "in_sample": True, **baseline},
        "validation": _validation_summary(validation),
    }, indent=1))


def _validation_summary(validation: dict | None) -> dict | None:
    """What the summary prints of the validation (meta.json keeps every unit): settings, per mode
    its figures beside its own random median, and the modes it trusts."""
    if validation is None:
        return None
    return {k: validation[k] for k in ("settings", "choice", "summary", "skipped") if k in validation}


@minilongbench.command("estimate")
@click.option("--model-dir", required=True, type=click.Path(exists=True, file_okay=False),
              help="a directory written by `lcp tools minilongbench fit`")
@click.option("--scores", "scores_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Parquet (or CSV): model, global_sample, score (subset samples)")
@click.option("--mode", type=click.Choice(list(mlbm.MODES)), default=mlbm.DEFAULT_MODE, show_default=True,
              help="predict / direct: the paper's two; weighted: cluster-weighted subset mean; blend (default): "
                   "weighted + predict, the best median held-out rank correlation in the validation")
@click.option("--blend-weight", type=click.FloatRange(0, 1), default=mlbm.BLEND_WEIGHT, show_default=True,
              help="share of 'weighted' in 'blend' (the rest is 'predict')")
@click.option("--allow-partial", is_flag=True, default=False,
              help="estimate models that lack some subset samples: only the categories with at least --min-coverage "
                   "of theirs covered, the coverage printed, overall null unless every category is estimated")
@click.option("--min-coverage", type=click.FloatRange(0, 1, min_open=True), default=estimate_input.MIN_COVERAGE,
              show_default=True, help="with --allow-partial: the share of a category's subset samples it needs")
def estimate_cmd(model_dir, scores_path, mode, blend_weight, allow_partial, min_coverage) -> None:
    """Estimate new models' full-benchmark scores from their scores on the subset."""
    csv = Path(scores_path).suffix.lower() == ".csv"
    try:
        mlb = mlbm.MiniLongBench.load(model_dir)
        scores, notes = estimate_input.clean_scores(
            mlb, read_table(scores_path), label=scores_path,
            row_label=(lambda i: f"line {i + 2}") if csv else (lambda i: f"row {i + 1}"))
        coverages = estimate_input.coverage(mlb, scores)
        estimate_input.check_coverage(coverages, allow_partial=allow_partial, min_coverage=min_coverage)
        est = mlbm.estimate_frame(mlb, scores, mode, blend_weight=blend_weight)
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    for note in notes:
        click.echo(note, err=True)
    if allow_partial:
        out = {m: estimate_input.partial_json(e, coverages[m], min_coverage) for m, e in est.items()}
        for m, row in out.items():
            left = f"; not estimated: {', '.join(row['not_estimated'])}" if row["not_estimated"] else ""
            click.echo(f"--allow-partial: {coverages[m].describe()}{left}", err=True)
    else:
        out = {m: e.to_json() for m, e in est.items()}
    click.echo(json.dumps(out, indent=1, allow_nan=False))
