"""MiniLongBench with the authors' released IRT parameters (issue 30, MI1): ``data/irt_model/best_parameters.json``
loads as an alternative to refitting, and a model's estimate from its subset scores reproduces the authors'
procedure, written here independently from our reading of their ``irt.py`` (``load_irt_parameters``,
``estimate_ability_parameters``: BFGS from theta = 0 on the soft subset scores under ``item_curve``'s clipped
2PL) and the paper's Eq. 4 (observed scores kept, the rest predicted; task -> category -> overall).

Reads ``../shared/official`` (the authors' file) and ``../shared/data/minilongbench`` (the training models'
scores); skips with a reason where they are absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from scipy.optimize import minimize

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
OFFICIAL = SHARED.parent / "official"
PARAMS = OFFICIAL / "MilkThink-Lab+MiniLongBench" / "data" / "irt_model" / "best_parameters.json"
SCORES = SHARED / "minilongbench" / "scores_train_models.parquet"

pytestmark = pytest.mark.skipif(not (PARAMS.is_file() and SCORES.is_file()),
                                reason=f"needs the authors' {PARAMS} and the shared {SCORES} (../shared absent)")


@pytest.fixture
def official_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")


def _authors_estimate(subset_scores: np.ndarray, subset_pos: np.ndarray, params: dict, tasks: np.ndarray,
                      categories: np.ndarray) -> float:
    """The authors' estimate of one model, computed from the released file without our code."""
    a = np.array(params["disc"]).T[None, :, :]  # (1, D, items): irt.py's A
    b = np.array(params["diff"]).T[None, :, :]  # (1, 1, items): irt.py's B
    d = a.shape[1]
    # item q<j> is sample j: column j of A / B holds item item_ids[str(i)] = "q<j>"
    col = np.array([int(params["item_ids"][str(i)][1:]) for i in range(a.shape[2])])
    order = np.argsort(col)
    a, b = a[:, :, order], b[:, :, order]

    def curve(theta, aa, bb):  # the clipped multidimensional 2PL: sum over dims of clip(a theta - b)
        return 1 / (1 + np.exp(-np.clip(aa * theta - bb, -30, 30).sum(axis=1)))

    a_sub, b_sub = a[:, :, subset_pos], b[:, :, subset_pos]

    def nll(x):
        p = curve(x.reshape(1, d, 1), a_sub, b_sub).squeeze()
        return -np.sum(subset_scores * np.log(p + 1e-10) + (1 - subset_scores) * np.log(1 - p + 1e-10))

    theta = minimize(nll, np.zeros(d), method="BFGS").x
    full = curve(theta.reshape(1, d, 1), a, b).squeeze()
    full[subset_pos] = subset_scores
    task_mean = {t: full[tasks == t].mean() for t in np.unique(tasks)}
    cat_of = dict(zip(tasks.tolist(), categories.tolist()))
    cats = {c: np.mean([v for t, v in task_mean.items() if cat_of[t] == c]) for c in np.unique(categories)}
    return float(np.mean(list(cats.values())))


def test_released_parameters_estimate_as_the_authors_do(official_env):
    from lc_pipeline.benchmarks import minilongbench as mlbm
    from lc_pipeline.benchmarks.minilongbench import released_irt
    from lc_pipeline.benchmarks.minilongbench.fitting import from_parameters
    from lc_pipeline.benchmarks.minilongbench.subset import released_sample_ids

    matrix = mlbm.ScoreMatrix.from_frame(pl.read_parquet(SCORES))
    alpha, beta = released_irt.item_parameters(matrix.samples)
    subset = list(released_sample_ids())
    mlb = from_parameters(matrix, alpha, beta, subset_ids=subset, source=released_irt.SOURCE)
    assert len(mlb.subset) == 237 and mlb.meta["irt"]["method"].startswith("released MilkThink-Lab/MiniLongBench@")
    params = json.loads(PARAMS.read_text())
    pos = np.array([list(matrix.samples).index(s) for s in subset])
    for i in (0, 7, 15):  # three of the training models
        ours = mlb.estimate_many(matrix.scores[i][None, :], "predict")[0].overall
        theirs = _authors_estimate(matrix.scores[i, pos], pos, params, matrix.tasks, matrix.categories)
        assert ours == pytest.approx(theirs, abs=2e-4), matrix.models[i]
        assert 0.05 < ours < 0.6
    # the parameters are the file's, not a refit: sample 4 749's row is the file's item q4749
    row = next(int(k) for k, v in params["item_ids"].items() if v == "q4749")
    assert alpha[-1].tolist() == params["disc"][row] and beta[-1] == params["diff"][row][0]


def test_released_parameters_refuse_a_sample_the_file_lacks(official_env):
    from lc_pipeline.benchmarks.minilongbench import released_irt
    from lc_pipeline.official import OfficialFileError

    with pytest.raises(OfficialFileError, match=r"best_parameters.json.*no item for 1 sample\(s\), e.g. \[4750\]"):
        released_irt.item_parameters([0, 4750])


def test_fit_subset_with_irt_released_writes_the_released_model(official_env, tmp_path):
    from lc_pipeline.benchmarks.minilongbench import pipeline
    from lc_pipeline.benchmarks.minilongbench.options import MiniLongBenchOptions

    opts = MiniLongBenchOptions.parse({"scores": str(SCORES), "irt": "released", "baseline_draws": 2})
    run = pipeline.fit_subset(opts, config_file=None, read_table=lambda name: None, embedder=lambda: None,
                              default_seed=42, lake_dir=tmp_path / "lake", released_subset="minilongbench")
    assert run.table.height == 237 and run.mlb.meta["subset"] == "given"
    assert "irt: released" in run.validation["skipped"]
    loaded = pipeline.load_fitted(tmp_path / "lake", run.table, "test")
    assert np.allclose(loaded.alpha, run.mlb.alpha) and loaded.meta["irt"]["method"] == run.mlb.meta["irt"]["method"]
    with pytest.raises(pipeline.MiniLongBenchError, match="irt: released needs released.subset"):
        pipeline.fit_subset(opts, config_file=None, read_table=lambda name: None, embedder=lambda: None,
                            default_seed=42, lake_dir=tmp_path / "lake2", released_subset=None)
    with pytest.raises(ValueError, match="irt"):
        MiniLongBenchOptions.parse({"irt": "refit"})


def test_cli_fit_irt_released_then_estimate(official_env, tmp_path):
    from lc_pipeline.benchmarks.minilongbench.subset import released_sample_ids
    from lc_pipeline.commands.minilongbench import minilongbench

    out = tmp_path / "mlb"
    r = CliRunner().invoke(minilongbench, ["fit", "--scores", str(SCORES), "--irt", "released", "--subset",
                                           "minilongbench", "--baseline-draws", "0", "--out", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output[r.output.index("{"):])
    assert summary["subset"] == 237 and summary["validation"] is None
    subset = set(released_sample_ids())
    new = pl.read_parquet(SCORES).filter(pl.col("model") == "qwen2.5-1.5b-base", pl.col("global_sample").is_in(subset))
    scores = tmp_path / "new.parquet"
    new.select("model", "global_sample", "score").write_parquet(scores)
    r = CliRunner().invoke(minilongbench, ["estimate", "--model-dir", str(out), "--scores", str(scores),
                                           "--mode", "predict"])
    assert r.exit_code == 0, r.output
    est = json.loads(r.output)["qwen2.5-1.5b-base"]
    assert 0 < est["overall"] < 1 and len(est["categories"]) == 6
