"""MiniLongBench's validation (lc_pipeline/benchmarks/minilongbench/validation.py): every estimate mode
judged by its margin over random subsets scored the same way, on held-out models."""

from __future__ import annotations

import numpy as np
import pytest
from test_minilongbench import synthetic_frame

from lc_pipeline.benchmarks import minilongbench as mlbm
from lc_pipeline.benchmarks.minilongbench import validation
from lc_pipeline.benchmarks.minilongbench import options


def test_margins_compare_each_mode_with_the_median_of_its_own_random_draws():
    truth = [0.1, 0.2, 0.3, 0.4]
    estimates = {"good": [0.11, 0.21, 0.31, 0.41],  # right order, error 0.01
                 "bad": [0.4, 0.3, 0.2, 0.1]}  # reversed, error 0.2
    random = {
        # draws: perfect order (error 0.02), one swap (rho 0.8, error 0.045), reversed (error 0.2)
        "good": np.array([[0.12, 0.22, 0.32, 0.42], [0.21, 0.19, 0.33, 0.43], [0.4, 0.3, 0.2, 0.1]]),
        "bad": np.array([[0.12, 0.22, 0.32, 0.42], [0.12, 0.22, 0.32, 0.42], [0.12, 0.22, 0.32, 0.42]]),
    }
    fig = mlbm.mode_figures(estimates, random, truth)
    assert fig["good"]["spearman"] == pytest.approx(1.0)
    assert fig["good"]["random_median_spearman"] == pytest.approx(0.8)  # median of 1.0, 0.8, -1.0
    assert fig["good"]["spearman_margin"] == pytest.approx(0.2)
    assert fig["good"]["mae"] == pytest.approx(0.01)
    assert fig["good"]["random_median_mae"] == pytest.approx(0.045)  # median of 0.02, 0.045, 0.2
    assert fig["good"]["mae_ratio"] == pytest.approx(0.01 / 0.045)
    # "bad" is judged against its own draws, which all beat it.
    assert fig["bad"]["spearman_margin"] == pytest.approx(-2.0)
    assert fig["bad"]["mae_ratio"] == pytest.approx(0.2 / 0.02)


def test_the_summary_counts_how_often_a_mode_beats_its_random_median_and_the_choice_follows():
    def unit(margin_a, ratio_a, margin_b, ratio_b):
        return {"a": {"spearman": 0.9, "random_median_spearman": 0.9 - margin_a, "spearman_margin": margin_a,
                      "mae": 0.01 * ratio_a, "random_median_mae": 0.01, "mae_ratio": ratio_a},
                "b": {"spearman": 0.9, "random_median_spearman": 0.9 - margin_b, "spearman_margin": margin_b,
                      "mae": 0.01 * ratio_b, "random_median_mae": 0.01, "mae_ratio": ratio_b}}

    # a ranks better than luck in 2 of 3 units; b never does but has the smaller error, beating luck every time.
    units = [unit(0.02, 1.1, -0.01, 0.8), unit(0.01, 1.2, -0.02, 0.9), unit(-0.01, 0.9, 0.0, 0.7)]
    s = mlbm.summarize(units)
    assert s["a"]["beats_spearman"] == pytest.approx(2 / 3) and s["a"]["spearman_margin"] == pytest.approx(0.02 / 3)
    assert s["a"]["min_spearman_margin"] == pytest.approx(-0.01) and s["a"]["beats_mae"] == pytest.approx(1 / 3)
    assert s["b"]["beats_spearman"] == 0 and s["b"]["beats_mae"] == 1 and s["b"]["max_mae_ratio"] == pytest.approx(0.9)
    assert mlbm.choose_modes(s) == {"ranking": "a", "error": "b", "default": "a",
                                    "reason": "a beats its random median for ranking"}
    # When no mode ranks better than luck, the default is the one trusted for error, and ranking says "random".
    s = mlbm.summarize([unit(-0.02, 1.1, -0.01, 0.8), unit(0.01, 1.2, -0.02, 0.9)])
    choice = mlbm.choose_modes(s)
    assert (choice["ranking"], choice["error"], choice["default"]) == ("random", "b", "b")
    assert "no mode ranks better than a random stratified subset" in choice["reason"]


def test_leave_models_out_holds_every_model_out_once_per_split_and_scores_every_mode():
    df, reps = synthetic_frame(n_models=8)
    matrix = mlbm.ScoreMatrix.from_frame(df)
    fitted: list[tuple[tuple[str, ...], int]] = []
    fits: dict = {}

    def fit_fold(train, seed):
        fitted.append((train.models, seed))
        if (train.models, seed) not in fits:
            fits[train.models, seed] = mlbm.fit(train, reps, ratio=0.8, dims=2, epochs=30, seed=seed, candidates=1)
        return fits[train.models, seed]

    val = mlbm.leave_models_out(matrix, fit_fold, folds=2, splits=2, kmeans_seeds=2, draws=3, seed=7, candidates=2)
    # 2 splits x 2 folds fitted; each split's two folds train on complementary halves of the 8 models.
    assert [s for _, s in fitted[:4]] == [7, 7, 8, 8]
    for a, b in (fitted[0:2], fitted[2:4]):
        assert len(a[0]) == len(b[0]) == 4 and set(a[0]) | set(b[0]) == set(matrix.models)
    assert [(u["split_seed"], u["kmeans_seed"]) for u in val.units] == [(7, 7), (7, 1016), (8, 8), (8, 1017)]
    summary = val.to_json()["summary"]
    assert set(summary) == set(mlbm.MODES)
    for s in summary.values():
        assert s["units"] == 4 and 0 <= s["beats_spearman"] <= 1 and s["mae"] >= 0 and s["random_median_mae"] > 0
    assert val.choice["default"] in (*mlbm.MODES, "random")
    # Seeded: the same call on the same fits gives the same figures.
    again = mlbm.leave_models_out(matrix, fit_fold, folds=2, splits=2, kmeans_seeds=2, draws=3, seed=7, candidates=2)
    assert again.summary == val.summary


def test_on_random_subsets_weighted_is_direct_and_blend_mixes_it_with_predict():
    df, reps = synthetic_frame(n_models=6)
    matrix = mlbm.ScoreMatrix.from_frame(df)
    mlb = mlbm.fit(matrix, reps, ratio=0.8, dims=2, epochs=30, seed=1, candidates=1)
    r = validation.random_mode_estimates(mlb, matrix.scores, 2, np.random.default_rng(0))
    assert np.allclose(r["weighted"], r["direct"])
    assert np.allclose(r["blend"], mlbm.BLEND_WEIGHT * r["direct"] + (1 - mlbm.BLEND_WEIGHT) * r["predict"])


def test_the_options_know_every_mode():
    assert set(options.MiniLongBenchOptions.model_fields["mode"].annotation.__args__[0].__args__) == set(mlbm.MODES)
