"""The multidimensional 2PL of MiniLongBench (spec §3.3, §4.2, §5.2): binarization threshold,
logit convention, seeded training with priors, a new model's ability."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from lc_pipeline.score import irt

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "minilongbench"


def synthetic(m=16, n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=(m, d))
    alpha = rng.normal(size=(n, d)) * 0.8
    beta = rng.normal(size=n) * 0.3
    p = irt.predict_proba(theta, alpha, beta)
    return theta, alpha, beta, p, (rng.random(p.shape) < p).astype(float)


def test_threshold_matches_the_share_of_ones_to_the_mean_score():
    # A model scoring 0.2 on 4/5 samples and 0.9 on 1/5 has mean 0.34; only c in [0.2, 0.9)
    # gives a share of ones (1/5) close to it; the first grid point >= 0.2 wins (strict ">").
    y = np.array([[0.2, 0.2, 0.2, 0.2, 0.9]])
    c = irt.binarization_threshold(y)
    assert 0.2 <= c < 0.9
    assert c == irt.THRESHOLD_GRID[np.flatnonzero(irt.THRESHOLD_GRID >= 0.2)[0]]
    assert irt.binarize(y, c).tolist() == [[0, 0, 0, 0, 1]]


def test_threshold_grid_and_missing_scores():
    assert len(irt.THRESHOLD_GRID) == 100 and irt.THRESHOLD_GRID[0] == 0.01 and irt.THRESHOLD_GRID[-1] == 0.99
    y = np.array([[0.0, 1.0, np.nan], [0.5, np.nan, 0.5]])
    c = irt.binarization_threshold(y)
    assert np.isnan(irt.binarize(y, c)[0, 2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        irt.binarization_threshold(np.array([[0.5, 2.0]]))


@pytest.mark.skipif(not (DATA / "scores_train_models.parquet").exists(), reason="shared MiniLongBench data absent")
def test_threshold_on_the_released_training_models_is_0_3664():
    df = pl.read_parquet(DATA / "scores_train_models.parquet")
    y = df.pivot(on="global_sample", index="model", values="score").drop("model").to_numpy()
    c = irt.binarization_threshold(y)
    assert c == pytest.approx(0.366364, abs=1e-6)  # spec §3.3 [V], grid index 36
    assert np.mean(irt.binarize(y, c)) == pytest.approx(0.3008, abs=1e-4)


def test_logit_convention_multiplies_beta_by_dims_and_clips_each_term():
    theta = np.array([1.0, 2.0])
    alpha = np.array([[0.5, -1.0], [100.0, 0.0]])
    beta = np.array([0.25, 0.0])
    z = irt.logits(theta, alpha, beta)
    assert z[0] == pytest.approx(0.5 - 2.0 - 2 * 0.25)  # alpha.theta - d*beta
    assert z[1] == pytest.approx(30.0)  # 100 clipped to 30, plus 0
    assert irt.logits(theta, alpha, beta, clip=None)[1] == pytest.approx(100.0)
    assert irt.predict_proba(np.vstack([theta, theta]), alpha, beta).shape == (2, 2)


@pytest.mark.parametrize("method", ["vi", "map"])
def test_fit_recovers_the_response_surface(method):
    _, alpha, _, p, y = synthetic(m=60, n=200, d=2)
    fit = irt.fit_mirt(y, alpha_init=alpha + 0.1, dims=2, epochs=150, seed=3, method=method)
    assert fit.alpha.shape == (200, 2) and fit.beta.shape == (200,) and fit.theta.shape == (60, 2)
    p_hat = irt.predict_proba(fit.theta, fit.alpha, fit.beta)
    assert np.corrcoef(p_hat.ravel(), p.ravel())[0, 1] > 0.8  # measured 0.88 (vi) / 0.89 (map)
    assert 0 <= fit.best_epoch < 150 and fit.best_loss == min(fit.losses)


def test_fit_is_seeded():
    _, alpha, _, _, y = synthetic(n=100)
    a = irt.fit_mirt(y, alpha, dims=3, epochs=30, seed=7)
    b = irt.fit_mirt(y, alpha, dims=3, epochs=30, seed=7)
    c = irt.fit_mirt(y, alpha, dims=3, epochs=30, seed=8)
    assert np.array_equal(a.alpha, b.alpha) and np.array_equal(a.beta, b.beta) and np.array_equal(a.theta, b.theta)
    assert not np.array_equal(a.alpha, c.alpha)


def test_fit_starts_from_the_given_representation():
    _, alpha, _, _, y = synthetic(n=100)
    fit = irt.fit_mirt(y, alpha, dims=3, epochs=1, seed=0, lr=1e-6)
    assert np.allclose(fit.alpha, alpha, atol=1e-4) and np.allclose(fit.beta, 0, atol=1e-4)


def test_fit_rejects_continuous_or_misshapen_input():
    with pytest.raises(ValueError, match="binary"):
        irt.fit_mirt(np.array([[0.3, 1.0]]), dims=2, epochs=1)
    with pytest.raises(ValueError, match="alpha_init"):
        irt.fit_mirt(np.array([[0.0, 1.0]]), np.zeros((3, 2)), dims=2, epochs=1)


def test_fit_ignores_missing_responses():
    _, alpha, _, _, y = synthetic(n=120)
    holed = y.copy()
    holed[0, :60] = np.nan
    fit = irt.fit_mirt(holed, alpha, dims=3, epochs=30, seed=1)
    assert np.isfinite(fit.alpha).all() and np.isfinite(fit.theta).all()


def test_ability_from_soft_scores_recovers_theta_and_gradient_is_exact():
    rng = np.random.default_rng(5)
    alpha = rng.normal(size=(3000, 3))
    beta = rng.normal(size=3000) * 0.2
    theta = np.array([0.8, -0.5, 0.3])
    p = irt.predict_proba(theta, alpha, beta)
    est = irt.fit_ability(p, alpha, beta)  # exact probabilities as soft targets: the MLE is theta
    assert np.allclose(est, theta, atol=1e-3)
    # Monotone: a model scoring higher on every sample gets a higher predicted mean.
    hi = irt.fit_ability(np.clip(p + 0.1, 0, 1), alpha, beta)
    assert irt.predict_proba(hi, alpha, beta).mean() > p.mean()


def test_ability_input_checks():
    with pytest.raises(ValueError, match="disagree"):
        irt.fit_ability(np.array([0.5]), np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        irt.fit_ability(np.array([1.5]), np.zeros((1, 3)), np.zeros(1))
