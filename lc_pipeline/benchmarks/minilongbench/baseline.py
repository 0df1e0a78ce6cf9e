"""The honest baseline the paper omits (spec §7): random subsets with the subset's number of
samples per task, scored the same way; the Spearman of both against the true scores.

Pure logic (numpy); no Dagster. A random sample stands for an equal share of its task, so
there ``weighted`` is ``direct``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lc_pipeline.benchmarks.minilongbench.matrix import (
    ScoreMatrix,
    group_index,
    aggregate,
    spearman,
)
from lc_pipeline.benchmarks.minilongbench.model import DEFAULT_MODE, MODES, MiniLongBench


def random_stratified_subset(tasks: np.ndarray, counts: Mapping[str, int], rng: np.random.Generator) -> np.ndarray:
    """A uniformly random subset with ``counts[task]`` samples of each task (ascending positions)."""
    by_task = group_index(np.asarray(tasks))
    picks = []
    for t, c in counts.items():
        if c > len(by_task.get(t, ())):
            raise ValueError(f"task {t!r} has {len(by_task.get(t, ()))} samples, cannot draw {c}")
        picks.append(rng.choice(by_task[t], size=c, replace=False))
    return np.sort(np.concatenate(picks)) if picks else np.array([], dtype=np.int64)


def random_baseline_estimates(
    mlb: MiniLongBench,
    observed: np.ndarray,
    n_draws: int,
    seed: int,
    mode: str = DEFAULT_MODE,
) -> np.ndarray:
    """Overall estimates (draws x models) from random subsets with the subset's per-task counts,
    scored with the same item parameters and mode as the subset itself (spec §7). A random
    sample stands for an even share of its task, so ``weighted`` = ``direct`` and ``blend`` mixes
    ``direct`` and ``predict`` here."""
    rng = np.random.default_rng(seed)
    counts = mlb.subset_task_counts()
    out = np.empty((n_draws, np.asarray(observed).shape[0]))
    for i in range(n_draws):
        sub = random_stratified_subset(mlb.tasks, counts, rng)
        out[i] = [e.overall for e in mlb.estimate_many(observed, mode, subset=sub)]
    return out


def baseline_report(mlb: MiniLongBench, matrix: ScoreMatrix, draws: int, seed: int) -> dict[str, float]:
    """The honest baseline the paper omits (spec §7), on the models of ``matrix`` (in-sample when
    they are the training models): per mode, the Spearman of the subset's estimates against the
    true scores, and the median over ``draws`` random stratified subsets scored the same way."""
    out: dict[str, float] = {}
    if len(matrix.models) < 3:
        return out
    truth = [e.overall for e in aggregate(matrix.scores, matrix.tasks, matrix.categories)]
    for mode in MODES:
        out[f"train_spearman_{mode}"] = spearman([e.overall for e in mlb.estimate_many(matrix.scores, mode)], truth)
        if draws:
            rand = random_baseline_estimates(mlb, matrix.scores, draws, seed=seed, mode=mode)
            out[f"random_median_spearman_{mode}"] = float(np.nanmedian([spearman(r, truth) for r in rand]))
    return out
