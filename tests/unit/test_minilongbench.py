"""MiniLongBench (spec shared/specs/minilongbench.md): budgets, weights, aggregation, subset
selection, estimation modes, persistence, the config's options and what the assets run, the
`lcp minilongbench` commands, and held-out models on the real 20-LLM score matrix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.score import irt
from lc_pipeline.benchmarks import minilongbench as mlbm
from lc_pipeline.benchmarks.minilongbench import pipeline as mlbp
from lc_pipeline.benchmarks.minilongbench.options import MiniLongBenchOptions

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "minilongbench"
HAVE_DATA = (DATA / "scores_train_models.parquet").exists()

CATEGORY_SIZES = {"code": 1000, "few_shot": 800, "multi_doc_qa": 800, "single_doc_qa": 750, "summarization": 800,
                  "synthetic": 600}


# ---------------------------------------------------------------------------------------------
# Synthetic benchmark: 3 categories, 5 tasks, a 2-dim latent ability
# ---------------------------------------------------------------------------------------------

TASKS = {"qa1": ("qa", 60), "qa2": ("qa", 40), "sum1": ("sum", 50), "code1": ("code", 30), "code2": ("code", 20)}


def synthetic_frame(n_models: int = 14, seed: int = 0, ids: str = "int") -> tuple[pl.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows, reps, g = [], [], 0
    theta = rng.normal(size=(n_models, 2))
    for task, (cat, n) in TASKS.items():
        alpha = rng.normal(size=(n, 2))
        beta = rng.normal(size=n) * 0.3 + (0.3 if cat == "sum" else 0.0)
        p = irt.predict_proba(theta, alpha, beta)
        y = np.clip(p + rng.normal(scale=0.1, size=p.shape), 0, 1)
        for j in range(n):
            sid = g if ids == "int" else f"s{g:04d}"
            reps.append(alpha[j] + rng.normal(scale=0.3, size=2))
            for i in range(n_models):
                rows.append((f"m{i:02d}", task, cat, sid, float(y[i, j])))
            g += 1
    df = pl.DataFrame(rows, schema=["model", "task", "category", "global_sample", "score"], orient="row")
    return df, np.array(reps)


def emb_frame(df: pl.DataFrame, reps: np.ndarray) -> pl.DataFrame:
    ids = df.select("global_sample").unique().sort("global_sample")["global_sample"]
    return pl.DataFrame({"global_sample": ids, **{f"pc{k}": reps[:, k] for k in range(reps.shape[1])}})


@pytest.fixture(scope="module")
def synth():
    df, reps = synthetic_frame()
    matrix = mlbm.ScoreMatrix.from_frame(df)
    mlb = mlbm.fit(matrix.select_models(list(matrix.models[:10])), reps, ratio=0.8, dims=2, epochs=120, seed=5)
    return df, reps, matrix, mlb


# ---------------------------------------------------------------------------------------------
# Budgets, weights, aggregation
# ---------------------------------------------------------------------------------------------


def test_subset_size_and_category_budgets_match_the_paper():
    assert mlbm.n_selected(4750, 0.95) == 237  # int(237.50000000000003)
    budgets = mlbm.cluster_budgets(CATEGORY_SIZES, 237)
    # K_g = int(|G|/4750*237); the last group (synthetic) takes the remainder: 37/39/39/39/49/34.
    assert budgets == {"code": 49, "few_shot": 39, "multi_doc_qa": 39, "single_doc_qa": 37, "summarization": 39,
                       "synthetic": 34}
    assert sum(budgets.values()) == 237


def test_budgets_give_every_group_a_sample_and_never_more_than_it_has():
    b = mlbm.cluster_budgets({"a": 1000, "b": 3, "c": 2}, 10)
    assert sum(b.values()) == 10 and all(1 <= b[g] <= n for g, n in {"a": 1000, "b": 3, "c": 2}.items())
    with pytest.raises(ValueError, match="cannot cover"):
        mlbm.cluster_budgets({"a": 10, "b": 10}, 1)
    with pytest.raises(ValueError, match="keeps no sample"):
        mlbm.n_selected(10, 0.95)


def test_balance_weights_weigh_every_category_and_task_equally():
    tasks = np.array(["a"] * 10 + ["b"] * 30 + ["c"] * 5)
    cats = np.array(["x"] * 40 + ["y"] * 5)
    w = mlbm.balance_weights(tasks, cats)
    assert w.sum() == pytest.approx(1.0)
    assert w[:10].sum() == pytest.approx(0.25) and w[10:40].sum() == pytest.approx(0.25) and w[40:].sum() == pytest.approx(0.5)


def test_aggregate_is_task_then_category_then_overall():
    tasks = np.array(["a", "a", "b", "c"])
    cats = np.array(["x", "x", "x", "y"])
    est = mlbm.aggregate(np.array([1.0, 0.0, 1.0, 0.2]), tasks, cats)
    assert est.tasks == {"a": 0.5, "b": 1.0, "c": 0.2}
    assert est.categories == {"x": 0.75, "y": 0.2}
    assert est.overall == pytest.approx(0.475)  # not the flat mean 0.55
    # Unknown values (NaN) are left out: task a from one sample, category x from its tasks with a value.
    est = mlbm.aggregate(np.array([np.nan, 0.0, np.nan, 0.2]), tasks, cats)
    assert est.tasks == {"a": 0.0, "c": 0.2} and est.categories == {"x": 0.0, "y": 0.2}


def test_score_matrix_checks_its_input():
    df, _ = synthetic_frame(n_models=2)
    m = mlbm.ScoreMatrix.from_frame(df)
    assert m.scores.shape == (2, 200) and m.models == ("m00", "m01") and list(m.samples[:3]) == [0, 1, 2]
    with pytest.raises(ValueError, match="outside"):
        mlbm.ScoreMatrix.from_frame(df.with_columns(pl.col("score") * 5))
    with pytest.raises(ValueError, match="has 2 scores for sample 0"):
        mlbm.ScoreMatrix.from_frame(pl.concat([df, df.head(1)]))
    with pytest.raises(ValueError, match="more than one task"):
        mlbm.ScoreMatrix.from_frame(pl.concat([df.head(1), df.slice(1, 1).with_columns(pl.lit("zzz").alias("task"))]))
    with pytest.raises(ValueError, match="lack column"):
        mlbm.ScoreMatrix.from_frame(df.drop("category"))


# ---------------------------------------------------------------------------------------------
# Selection, estimation, persistence (synthetic)
# ---------------------------------------------------------------------------------------------


def test_subset_has_k_distinct_samples_nearest_their_centroids(synth):
    mlb = synth[3]
    k = mlbm.n_selected(200, 0.8)
    assert len(mlb.subset) == k == 40 and len(set(mlb.subset.tolist())) == k
    assert sum(mlb.meta["cluster_budgets"].values()) == k
    assert set(mlb.categories[mlb.subset]) == {"qa", "sum", "code"}
    assert mlb.meta["cluster_budgets"] == {"code": 10, "qa": 20, "sum": 10}  # 50/200*40, 100/200*40, rest
    assert list(mlb.subset) == sorted(mlb.subset)


def test_same_seed_same_subset_and_another_seed_another(synth):
    _, reps, matrix, mlb = synth
    train = matrix.select_models(list(matrix.models[:10]))
    again = mlbm.fit(train, reps, ratio=0.8, dims=2, epochs=120, seed=5)
    assert np.array_equal(again.subset, mlb.subset) and np.array_equal(again.alpha, mlb.alpha)
    other = mlbm.fit(train, reps, ratio=0.8, dims=2, epochs=120, seed=50)  # K-Means candidates 50..57, not 5..12
    assert not np.array_equal(other.subset, mlb.subset)


def test_subset_is_the_k_means_run_that_best_recovers_the_training_models(synth):
    _, _, matrix, mlb = synth
    train = matrix.select_models(list(matrix.models[:10]))
    tried = mlb.meta["subset_candidates"]
    assert [t["seed"] for t in tried] == list(range(5, 13))
    best = min(tried, key=lambda t: t["train_mae"])
    # The kept subset is that candidate's K-Means selection...
    features = np.hstack([mlb.alpha, mlb.beta[:, None]])
    weights = mlbm.balance_weights(mlb.tasks, mlb.categories)
    again = mlbm.select_subset(features, mlb.categories, weights, len(mlb.subset), best["seed"])
    assert np.array_equal(again.indices, mlb.subset)
    # ...and its error is what the blend estimates of the training models make of their truth.
    truth = np.array([e.overall for e in mlbm.aggregate(train.scores, train.tasks, train.categories)])
    est = np.array([e.overall for e in mlb.estimate_many(train.scores, "blend")])
    assert best["train_mae"] == pytest.approx(np.mean(np.abs(est - truth)))
    # One candidate is the paper's single K-Means run.
    single, info = mlbm.choose_subset(train, mlb.alpha, mlb.beta, mlb.categories, len(mlb.subset), 5, candidates=1)
    assert info == [{"seed": 5, "train_mae": None}]
    assert np.array_equal(single.indices, mlbm.select_subset(features, mlb.categories, weights, len(mlb.subset), 5).indices)


def test_direct_mode_is_the_aggregated_subset_mean(synth):
    _, _, matrix, mlb = synth
    row = matrix.scores[12]
    est = mlb.estimate_many(row[None, :], "direct")[0]
    only = np.full_like(row, np.nan)
    only[mlb.subset] = row[mlb.subset]
    assert est == mlbm.aggregate(only, mlb.tasks, mlb.categories)


def test_predict_mode_uses_only_subset_scores(synth):
    _, _, matrix, mlb = synth
    row = matrix.scores[11].copy()
    a = mlb.estimate_many(row[None, :], "predict")[0]
    outside = np.setdiff1d(np.arange(len(row)), mlb.subset)
    row[outside] = 1.0 - row[outside]  # change every score outside the subset
    b = mlb.estimate_many(row[None, :], "predict")[0]
    assert a == b
    assert set(a.tasks) == set(TASKS) and 0 <= a.overall <= 1


def test_weighted_mode_weighs_each_subset_score_by_its_cluster(synth):
    _, _, matrix, mlb = synth
    row = matrix.scores[12]
    est = mlb.estimate_many(row[None, :], "weighted")[0]
    v, y, cats = mlb.cluster_weight, row[mlb.subset], mlb.categories[mlb.subset]
    # Clusters live inside a category, so each category's cluster weights add up to its share.
    for c in ("qa", "sum", "code"):
        assert v[cats == c].sum() == pytest.approx(1 / 3)
        assert est.categories[c] == pytest.approx(np.sum(v[cats == c] * y[cats == c]) / np.sum(v[cats == c]))
    assert est.overall == pytest.approx(np.sum(v * y) / np.sum(v))


def test_on_a_random_stratified_subset_weighted_is_direct(synth):
    _, _, matrix, mlb = synth
    sub = mlbm.random_stratified_subset(mlb.tasks, mlb.subset_task_counts(), np.random.default_rng(3))
    direct, weighted = (mlb.estimate_many(matrix.scores[10:], mode, subset=sub) for mode in ("direct", "weighted"))
    for d, w in zip(direct, weighted):
        assert w.overall == pytest.approx(d.overall)
        assert w.categories == pytest.approx(d.categories)


def test_blend_mixes_weighted_and_predict(synth):
    _, _, matrix, mlb = synth
    held = matrix.scores[10:]
    weighted, predict = mlb.estimate_many(held, "weighted"), mlb.estimate_many(held, "predict")
    for lam in (0.5, 0.3):
        for b, w, p in zip(mlb.estimate_many(held, "blend", blend_weight=lam), weighted, predict):
            assert b.overall == pytest.approx(lam * w.overall + (1 - lam) * p.overall)
            assert b.categories["sum"] == pytest.approx(lam * w.categories["sum"] + (1 - lam) * p.categories["sum"])
    assert mlbm.DEFAULT_MODE == "blend"  # benchmarks/minilongbench_validation.py's choice
    with pytest.raises(ValueError, match="blend_weight"):
        mlb.estimate_many(held, "blend", blend_weight=1.5)


def test_predict_ranks_held_out_models(synth):
    _, _, matrix, mlb = synth
    held = matrix.scores[10:]
    truth = [e.overall for e in mlbm.aggregate(held, matrix.tasks, matrix.categories)]
    pred = [e.overall for e in mlb.estimate_many(held, "predict")]
    assert mlbm.spearman(pred, truth) >= 0.8


def test_save_and_load_round_trip(synth, tmp_path):
    df, _, _, mlb = synth
    mlb.save(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["abilities.parquet", "items.parquet", "meta.json",
                                                                   "subset.parquet"]
    meta = json.loads((tmp_path / "m" / "meta.json").read_text())
    assert meta["format"] == mlbm.FORMAT and meta["n_subset"] == 40 and meta["dims"] == 2
    sub = pl.read_parquet(tmp_path / "m" / "subset.parquet")
    assert sub.columns[:3] == ["global_sample", "task", "category"] and sub.height == 40
    back = mlbm.MiniLongBench.load(tmp_path / "m")
    assert np.array_equal(back.subset, mlb.subset) and np.array_equal(back.samples, mlb.samples)
    assert np.allclose(back.alpha, mlb.alpha) and back.threshold == mlb.threshold
    assert back.train_models == mlb.train_models
    new = df.filter(pl.col("model") == "m13")
    assert mlbm.estimate_frame(back, new)["m13"] == mlbm.estimate_frame(mlb, new)["m13"]


def test_string_sample_ids_survive_the_round_trip(tmp_path):
    df, reps = synthetic_frame(n_models=6, ids="str")
    mlb = mlbm.fit(mlbm.ScoreMatrix.from_frame(df), reps, ratio=0.9, dims=2, epochs=20, seed=1)
    back = mlbm.MiniLongBench.load(mlb.save(tmp_path / "s"))
    assert back.samples[0] == "s0000" and list(back.subset_ids) == list(mlb.subset_ids)
    assert mlbm.estimate_frame(back, df.filter(pl.col("model") == "m01"))["m01"].overall >= 0


def test_estimate_frame_errors():
    df, reps = synthetic_frame(n_models=4)
    mlb = mlbm.fit(mlbm.ScoreMatrix.from_frame(df), reps, ratio=0.9, dims=2, epochs=10, seed=1)
    with pytest.raises(ValueError, match="not a sample"):
        mlbm.estimate_frame(mlb, pl.DataFrame({"model": ["x"], "global_sample": [99999], "score": [0.5]}))
    outside = int(np.setdiff1d(np.arange(200), mlb.subset)[0])
    with pytest.raises(ValueError, match="no score on any subset sample"):
        mlbm.estimate_frame(mlb, pl.DataFrame({"model": ["x"], "global_sample": [outside], "score": [0.5]}))
    with pytest.raises(ValueError, match="mode"):
        mlb.estimate_many(np.zeros((1, 200)), "guess")


def test_random_stratified_subsets_keep_the_task_counts(synth):
    _, _, matrix, mlb = synth
    counts = mlb.subset_task_counts()
    rng = np.random.default_rng(0)
    a = mlbm.random_stratified_subset(mlb.tasks, counts, rng)
    b = mlbm.random_stratified_subset(mlb.tasks, counts, rng)
    assert len(a) == len(mlb.subset) and not np.array_equal(a, b)
    got: dict[str, int] = {}
    for t in mlb.tasks[a]:
        got[t] = got.get(t, 0) + 1
    assert got == counts
    est = mlbm.random_baseline_estimates(mlb, matrix.scores[10:], n_draws=3, seed=0, mode="direct")
    assert est.shape == (3, 4) and np.isfinite(est).all()


def test_representations_from_frame_align_and_reduce():
    samples = np.array([3, 1, 2])
    df = pl.DataFrame({"global_sample": [1, 2, 3], "pc0": [1.0, 2.0, 3.0], "pc1": [0.0, 1.0, 0.0]})
    x = mlbm.representations_from_frame(df, samples, 2)
    assert x[:, 0].tolist() == [3.0, 1.0, 2.0]
    assert mlbm.representations_from_frame(df, samples, 1).shape == (3, 1)  # PCA to 1
    with pytest.raises(ValueError, match="no embedding"):
        mlbm.representations_from_frame(df, np.array([4]), 2)


def test_text_representations_with_a_stub_embedder():
    class Stub:
        def encode(self, texts):
            return np.array([[len(t), t.count("a"), t.count("b"), 1.0] for t in texts], dtype=float)

    x = mlbm.text_representations(["aa", "bbb", "ab", "aab b"], d=2, embedder=Stub())
    assert x.shape == (4, 2) and np.allclose(x.mean(axis=0), 0)


# ---------------------------------------------------------------------------------------------
# The config's minilongbench section and what the assets run (benchmarks/minilongbench/pipeline.py)
# ---------------------------------------------------------------------------------------------


def test_options_default_to_the_paper_settings_and_the_configs_seed():
    opts = MiniLongBenchOptions.parse(None)
    assert (opts.ratio, opts.dims, opts.epochs, opts.subset_candidates, opts.baseline_draws) == (0.95, 10, 2000, 8, 50)
    assert opts.metrics == ("lb100", "f1") and opts.representation == "text"
    assert opts.seed is None and opts.scores is None and opts.train_models is None


def test_options_keep_the_values_as_written_so_the_fingerprint_does_not_move():
    written = {"ratio": 0, "dims": 3, "train_models": ["a", "b"], "scores": "./x.parquet"}
    dumped = MiniLongBenchOptions.parse(written).model_dump(exclude_unset=True)
    assert json.dumps(dumped, sort_keys=True) == json.dumps(written, sort_keys=True)
    assert MiniLongBenchOptions.parse(MiniLongBenchOptions.parse(written)).ratio == 0


@pytest.mark.parametrize(("section", "problem"), [
    ({"ratios": 0.9}, r"unknown key 'ratios'; known keys: \['baseline_draws'"),
    ({"representation": "pca"}, "representation: Input should be 'text' or 'none'"),
    ({"ratio": 1}, r"ratio: the share of samples removed must be in \[0, 1\)"),
    ({"dims": "10"}, "dims: Input should be a valid integer"),
    ({"subset_candidates": 0}, "subset_candidates: Input should be greater than or equal to 1"),
    ({"metrics": []}, "metrics: Tuple should have at least 1 item"),
    (["scores"], "Input should be a valid dictionary"),
])
def test_bad_options_are_refused_naming_the_section_and_the_key(section, problem):
    with pytest.raises(ValueError, match=r"^config 'x' \(x.yaml\): minilongbench: .*" + problem):
        mlbp.options_of(section, "x", "x.yaml")


def test_option_paths_are_relative_to_the_config_files_folder(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "mlb.yaml").write_text("name: x\n")
    (tmp_path / "cfg" / "train.parquet").write_bytes(b"")
    opts = MiniLongBenchOptions.parse({"scores": "train.parquet", "texts": "absent.parquet"})
    assert opts.path("scores", tmp_path / "cfg" / "mlb.yaml") == tmp_path / "cfg" / "train.parquet"
    with pytest.raises(FileNotFoundError, match=r"'absent.parquet' not found \(looked at .*cfg/absent.parquet\)"):
        opts.path("texts", tmp_path / "cfg" / "mlb.yaml")


def test_importing_the_options_stays_light():
    code = ("import sys, lc_pipeline.benchmarks.minilongbench.options; "
            "print(sorted(m for m in ('numpy', 'polars', 'sklearn', 'torch', 'dagster') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_own_scores_take_each_instances_first_listed_metric():
    metric_scores = pl.DataFrame(
        [("m", "qa", "QA", "i1", "f1", 0.5), ("m", "qa", "QA", "i1", "lb100", 0.9), ("m", "qa", "QA", "i2", "f1", 0.4),
         ("m", "qa", "QA", "i3", "rouge", 0.1)],
        schema=["model", "task", "category", "instance_id", "metric", "score"], orient="row",
    )
    got = mlbp.own_scores(metric_scores, ["lb100", "f1"]).sort("global_sample")
    assert got.columns == ["model", "task", "category", "global_sample", "score"]
    assert got["global_sample"].to_list() == ["i1", "i2"] and got["score"].to_list() == [0.9, 0.4]
    assert mlbp.own_scores(metric_scores, ["subem"]) is None and mlbp.own_scores(None, ["f1"]) is None


def test_pipeline_fits_an_imported_matrix_saves_it_in_the_lake_and_estimates_a_new_model(tmp_path):
    df, reps = synthetic_frame(n_models=8)
    df.filter(pl.col("model") != "m07").write_parquet(tmp_path / "train.parquet")
    df.filter(pl.col("model") == "m07").write_csv(tmp_path / "new.csv")
    emb_frame(df, reps).write_parquet(tmp_path / "emb.parquet")
    (tmp_path / "mlb.yaml").write_text("name: x\n")
    opts = mlbp.options_of({"scores": "train.parquet", "embeddings": "emb.parquet", "estimate_scores": "new.csv",
                            "ratio": 0.8, "dims": 2, "epochs": 40, "baseline_draws": 2, "subset_candidates": 2}, "x")
    common = {"config_file": tmp_path / "mlb.yaml", "read_table": lambda table: None, "lake_dir": tmp_path / "lake"}

    run = mlbp.fit_subset(opts, embedder=lambda: None, default_seed=3, **common)
    assert run.source == "imported train.parquet" and run.table.height == 40 and run.mlb.meta["seed"] == 3
    assert run.metadata()["train_models"] == 7 and run.metadata()["representation"] == "embeddings emb.parquet"
    assert set(run.quality) >= {"train_spearman_blend", "random_median_spearman_blend"}
    # The leave-models-out validation: 7 training models in 2 folds, every mode beside its own random median,
    # saved with the fitted model and flattened for the asset's metadata.
    assert run.validation["settings"]["models"] == 7 and set(run.validation["summary"]) == set(mlbm.MODES)
    figures, texts, table = mlbp.validation_metadata(run.validation)
    assert {f"validation_random_median_spearman_{m}" for m in mlbm.MODES} <= set(figures)
    assert texts["validated_mode_error"] in (*mlbm.MODES, "random") and table.count("\n") == 5
    saved = json.loads((tmp_path / "lake" / "_minilongbench" / "meta.json").read_text())
    assert saved["validation"]["summary"]["blend"]["mae"] == pytest.approx(run.validation["summary"]["blend"]["mae"])
    few = mlbp.validate(opts, mlbm.ScoreMatrix.from_frame(df).select_models(["m00", "m01", "m02"]), reps, seed=1)
    assert few["skipped"] == "3 training models; the validation needs at least 4"
    assert mlbp.validation_metadata(few)[1] == {"validation": few["skipped"]}
    assert mlbm.MiniLongBench.load(tmp_path / "lake" / "_minilongbench").subset.tolist() == run.mlb.subset.tolist()

    est = mlbp.estimate_partition(opts, subset=run.table, slug="m07", **common)
    assert est.scores_from == "estimate_scores" and not est.in_training and est.n_observed == 40
    assert set(est.table["mode"]) == set(mlbm.MODES)
    assert est.estimates["direct"] == mlbm.estimate_frame(
        run.mlb, df.filter(pl.col("model") == "m07"), "direct")["m07"]
    with pytest.raises(mlbp.MiniLongBenchError, match="no scores for model 'm99'"):
        mlbp.estimate_partition(opts, subset=run.table, slug="m99", **common)
    with pytest.raises(mlbp.MiniLongBenchError, match="does not match the minilongbench_subset table"):
        mlbp.estimate_partition(opts, subset=run.table.head(3), slug="m07", **common)


def test_pipeline_without_scores_fails_clearly(tmp_path):
    with pytest.raises(mlbp.MiniLongBenchError, match="no minilongbench.scores configured and no metric_scores"):
        mlbp.fit_subset(mlbp.options_of({}, "x"), config_file=None, read_table=lambda table: None,
                        embedder=lambda: None, default_seed=1, lake_dir=tmp_path)


# ---------------------------------------------------------------------------------------------
# The commands
# ---------------------------------------------------------------------------------------------


def test_cli_fit_then_estimate(tmp_path):
    from lc_pipeline.cli import main

    df, reps = synthetic_frame()
    train = df.filter(pl.col("model") < "m10")
    train.write_parquet(tmp_path / "train.parquet")
    emb_frame(df, reps).write_parquet(tmp_path / "emb.parquet")
    runner = CliRunner()
    res = runner.invoke(main, ["tools", "minilongbench", "fit", "--scores", str(tmp_path / "train.parquet"),
                               "--embeddings", str(tmp_path / "emb.parquet"), "--ratio", "0.8", "--dims", "2",
                               "--epochs", "60", "--out", str(tmp_path / "model")])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["subset"] == 40 and summary["train_models"] == 10
    # Which mode to trust, from held-out training models, each beside its own random median.
    assert set(summary["validation"]["summary"]) == set(mlbm.MODES) and summary["validation"]["choice"]["default"]
    assert json.loads((tmp_path / "model" / "meta.json").read_text())["validation"]["settings"]["splits"] == 2
    # The honest baseline beside the subset: per mode, ours and the median of random stratified subsets.
    baseline = json.loads((tmp_path / "model" / "baseline.json").read_text())
    assert baseline["draws"] == 50 and {k: summary["baseline"][k] for k in baseline} == baseline
    for mode in mlbm.MODES:
        assert -1 <= baseline[f"train_spearman_{mode}"] <= 1 and -1 <= baseline[f"random_median_spearman_{mode}"] <= 1
    subset = pl.read_parquet(tmp_path / "model" / "subset.parquet")
    new = df.filter(pl.col("model") >= "m10").join(subset.select("global_sample"), on="global_sample")
    new.select("model", "global_sample", "score").write_parquet(tmp_path / "new.parquet")
    for mode in ("blend", "direct", "weighted", None):  # None: the default, predict
        res = runner.invoke(main, ["tools", "minilongbench", "estimate", "--model-dir", str(tmp_path / "model"),
                                   "--scores", str(tmp_path / "new.parquet")] + (["--mode", mode] if mode else []))
        assert res.exit_code == 0, res.output
        out = json.loads(res.output)
        assert sorted(out) == ["m10", "m11", "m12", "m13"]
        assert set(out["m10"]) >= {"overall", "categories"} and set(out["m10"]["categories"]) == {"qa", "sum", "code"}
        cats = out["m10"]["categories"]
        assert out["m10"]["overall"] == pytest.approx(sum(cats.values()) / 3)


def test_cli_reports_bad_input(tmp_path):
    from lc_pipeline.cli import main

    df, _ = synthetic_frame(n_models=3)
    df.drop("category").write_parquet(tmp_path / "bad.parquet")
    res = CliRunner().invoke(main, ["tools", "minilongbench", "fit", "--scores", str(tmp_path / "bad.parquet"), "--out",
                                    str(tmp_path / "o")])
    assert res.exit_code != 0 and "lack column" in res.output
    res = CliRunner().invoke(main, ["tools", "minilongbench", "estimate", "--model-dir", str(tmp_path), "--scores",
                                    str(tmp_path / "bad.parquet")])
    assert res.exit_code != 0 and "meta.json" in res.output


# ---------------------------------------------------------------------------------------------
# Real data: 20 LLMs x 4,750 LongBench samples
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real():
    if not HAVE_DATA:
        pytest.skip("shared MiniLongBench data absent")
    matrix = mlbm.ScoreMatrix.from_frame(pl.read_parquet(DATA / "scores_train_models.parquet"))
    reps = mlbm.representations_from_frame(pl.read_parquet(DATA / "sample_pca10.parquet"), matrix.samples, 10)
    return matrix, reps


def test_real_data_held_out_models_two_folds(real):
    # Two folds of 10 models: fit on the other 10 (threshold, IRT, K-Means, 237 samples), estimate
    # the 10 held-out models from their 237 subset scores only; pool the folds and rank against the
    # truth. The full protocol (5 folds, 2,000 epochs, 10 K-Means seeds, random stratified
    # baseline) is benchmarks/minilongbench_cv.py.
    matrix, reps = real
    truth = mlbm.true_scores(matrix)
    models = list(matrix.models)
    order = np.random.default_rng(0).permutation(len(models))
    folds = [[models[i] for i in order[f::2]] for f in range(2)]
    pred: dict[str, dict[str, float]] = {mode: {} for mode in mlbm.MODES}
    for held in folds:
        train = [m for m in models if m not in held]
        mlb = mlbm.fit(matrix.select_models(train), reps, ratio=0.95, epochs=300, seed=42)
        assert len(mlb.subset) == 237 and mlb.meta["cluster_budgets"]["synthetic"] == 34
        for mode, est in pred.items():
            for m, e in zip(held, mlb.estimate_many(matrix.select_models(held).scores, mode)):
                est[m] = e.overall
    rho = {mode: mlbm.spearman([est[m] for m in models], [truth[m].overall for m in models]) for mode, est in pred.items()}
    # Measured here: predict 0.910, direct 0.917, weighted 0.907, blend 0.907 (300 epochs).
    assert min(rho.values()) >= 0.8, rho
