"""Confidence: seeded bootstrap intervals over resampled items, and paired comparisons.

Every interval in the lake (leaderboard and benchmark_scores ``ci_low`` / ``ci_high``, ``lcp compare``) is a
percentile bootstrap: the scored units (items, or instances within a task cell) are resampled with replacement,
the row's statistic is recomputed the way the row itself is computed, 1,000 draws by default, and the 2.5th and
97.5th percentiles of the draws are the 95% interval. Draws are seeded from the row's identity
(:func:`rng_for`), so a rerun gives the same interval to the last digit, and two models compared on the same
items get the same resamples (a paired bootstrap).

These are the primitives; the tables that use them say what they resample. Pure numpy, no Dagster.
We write the resampling by hand rather than calling ``scipy.stats.bootstrap``: our statistics are weighted
means over strata (task cells, items across lengths) that are recomputed from one shared matrix of resample
counts per draw, which scipy's per-sample statistic interface does not express without a Python loop per draw.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

DRAWS = 1000  # bootstrap draws by default (the and HELMET-style reporting's usual count)
LEVEL = 0.95  # two-sided interval


def rng_for(*parts: object) -> np.random.Generator:
    """A generator seeded from ``parts`` (e.g. seed, model, benchmark, length, task): the same parts, the same draws."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def resample_counts(n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws x n) matrix: how often each of ``n`` units is picked in each resample of size ``n``."""
    if n < 1:
        raise ValueError("resample_counts: nothing to resample (n = 0)")
    return rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(np.float64)


def percentile_interval(samples: Sequence[float] | np.ndarray, level: float = LEVEL) -> tuple[float | None, float | None]:
    """The percentile interval of the finite draws in ``samples``; (None, None) when there are none."""
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None, None
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def bootstrap_mean_draws(values: Sequence[float] | np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Draws of the mean of ``values`` (one stratum): (draws,) array."""
    values = np.asarray(values, dtype=np.float64)
    counts = resample_counts(values.size, draws, rng)
    return counts @ values / values.size


def sign_flips(n: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws x n) matrix of +1 / -1, each entry a fair coin: one relabelling of ``n`` paired units per row (under
    the null hypothesis that the two models are exchangeable, swapping a unit's two scores flips its difference)."""
    if n < 1:
        raise ValueError("sign_flips: nothing to flip (n = 0)")
    return rng.choice(np.array([-1.0, 1.0]), size=(draws, n))


def permutation_p_value(observed: float, permuted: np.ndarray) -> float:
    """Two-sided p-value of ``observed`` against its permutation draws: (1 + #{|draw| >= |observed|}) / (1 + draws),
    the usual add-one estimate (never 0; 1 when nothing differs). Ties within a relative 1e-9 count as reached,
    so float noise in a recomputed statistic does not turn an exact tie into evidence."""
    permuted = np.asarray(permuted, dtype=np.float64)
    bar = abs(observed) - 1e-9 * max(1.0, abs(observed))
    return float((1 + np.count_nonzero(np.abs(permuted) >= bar)) / (1 + permuted.size))


def interval_of_mean(points: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> tuple[float | None,
                                                                                                     float | None]:
    """An interval for the mean of ``k`` independent estimates from each one's own interval: each side's half
    width is sqrt(sum of that side's squared half widths) / k (errors of independent parts add in quadrature,
    the normal approximation). Exact for one estimate; (None, None) when any part has no interval."""
    if not points or any(v is None for v in (*lows, *highs)):
        return None, None
    k = len(points)
    mean = sum(points) / k
    below = float(np.sqrt(sum((p - lo) ** 2 for p, lo in zip(points, lows, strict=True)))) / k
    above = float(np.sqrt(sum((hi - p) ** 2 for p, hi in zip(points, highs, strict=True)))) / k
    return mean - below, mean + above
