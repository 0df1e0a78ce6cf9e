"""Which estimate to trust: leave-models-out validation, every mode against its own random median.

Pure logic (numpy); no Dagster. Spec: ``shared/specs/minilongbench.md`` §7 (the stratified random
baseline the paper omits) and §9 item 12 (validate on held-out LLMs). On the spec's 20 held-out
LLMs the learned subset ranks *below* the median random stratified subset of the same size scored
the same way (84 % of random draws do at least as well), so a mode is judged here not by its
Spearman or error alone but by its **margin over random subsets scored the same way**:

* The models are split into ``folds`` (default 2: half train, half held out), ``splits`` times
  with different seeds; every model is held out once per split. On each fold's training models
  the IRT model is fitted (threshold, 2PL) and the subset selected as ``fit`` does, once per
  K-Means seed (``kmeans_seeds``); the held-out models are estimated from their subset scores only,
  in every mode, and pooled over the folds of the split: one **unit** = (split, K-Means seed) with
  an estimate of every model.
* Beside each subset: ``draws`` random stratified subsets with the subset's per-task counts, scored
  with the same fold's item parameters and the same mode (:func:`random_mode_estimates`), pooled
  over the folds per draw. A mode's random median is the median over draws of the figure
  (Spearman, MAE) that the random subsets reach **in that mode**.
* Per unit and mode (:func:`mode_figures`): Spearman of the estimates against the true overall
  scores and its margin over the random median; mean absolute error and its ratio to the random
  median's (< 1: the subset is better than luck). Over the units (:func:`summarize`): the mean
  figures and how often (share of units) the mode beats its random median.
* :func:`choose_modes` picks, from those figures, the mode to trust for ranking and the one to trust
  for absolute error (``"random"`` when no learned mode beats its random median in most units) and
  the default mode.

What ``benchmarks/minilongbench_cv.py`` measures on the 20 real LLMs and the ``minilongbench_subset``
asset reports in its metadata (on its own training models, with fewer splits and draws).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lc_pipeline.benchmarks.minilongbench.baseline import random_stratified_subset
from lc_pipeline.benchmarks.minilongbench.fitting import choose_subset, given_subset
from lc_pipeline.benchmarks.minilongbench.matrix import ScoreMatrix, aggregate, spearman
from lc_pipeline.benchmarks.minilongbench.model import BLEND_WEIGHT, MODES, MiniLongBench
from lc_pipeline.benchmarks.minilongbench.selection import Selection

__all__ = [
    "Validation",
    "choose_modes",
    "folds_of",
    "leave_models_out",
    "mode_figures",
    "random_mode_estimates",
    "summarize",
    "with_selection",
]

KMEANS_SEED_STEP = 1009  # K-Means seeds seed, seed + 1009, ...: far apart, each uses `candidates` seeds
# A mode is trusted for a purpose only when it beats its random median in more than this share of units.
MAJORITY = 0.5


def folds_of(models: Sequence[str], k: int, seed: int) -> list[list[str]]:
    """``models`` split into ``k`` folds by a seeded permutation (fold f = every k-th model from f)."""
    if not 2 <= k <= len(models):
        raise ValueError(f"folds must be in [2, {len(models)}] (the number of models), got {k}")
    order = np.random.default_rng(seed).permutation(len(models))
    return [[models[i] for i in order[f::k]] for f in range(k)]


def with_selection(mlb: MiniLongBench, sel: Selection) -> MiniLongBench:
    """The same item parameters with another subset."""
    return MiniLongBench(samples=mlb.samples, tasks=mlb.tasks, categories=mlb.categories, alpha=mlb.alpha,
                         beta=mlb.beta, subset=sel.indices, threshold=mlb.threshold, meta=dict(mlb.meta),
                         cluster=sel.cluster, cluster_group=sel.cluster_group, cluster_weight=sel.cluster_weight)


def random_mode_estimates(mlb: MiniLongBench, observed: np.ndarray, draws: int, rng: np.random.Generator,
                          blend_weight: float = BLEND_WEIGHT) -> dict[str, np.ndarray]:
    """Per mode, overall estimates (draws x models) from random stratified subsets with ``mlb``'s
    per-task counts, each draw scored in every mode with the same item parameters (spec §7). One
    ability fit per draw and model serves ``predict`` and ``blend`` (= ``blend_weight`` x weighted +
    the rest predict, as :meth:`MiniLongBench.estimate_many` computes it)."""
    counts = mlb.subset_task_counts()
    n = np.asarray(observed).shape[0]
    out = {m: np.empty((draws, n)) for m in MODES}
    for d in range(draws):
        sub = random_stratified_subset(mlb.tasks, counts, rng)
        for mode in ("predict", "direct", "weighted"):
            out[mode][d] = [e.overall for e in mlb.estimate_many(observed, mode, subset=sub)]
        out["blend"][d] = blend_weight * out["weighted"][d] + (1 - blend_weight) * out["predict"][d]
    return out


def mode_figures(estimates: Mapping[str, Sequence[float]], random: Mapping[str, np.ndarray],
                 truth: Sequence[float]) -> dict[str, dict[str, float]]:
    """Per mode, the subset's figures beside its own random median, on one set of models.

    ``estimates[mode]``: one overall estimate per model; ``random[mode]``: (draws x models) estimates
    from random subsets scored in the same mode; ``truth``: the true overall scores. Returns per mode
    ``spearman``, ``random_median_spearman``, ``spearman_margin`` (= the difference), ``mae``,
    ``random_median_mae`` and ``mae_ratio`` (mae / random median; < 1 is better than luck)."""
    t = np.asarray(truth, dtype=float)
    out = {}
    for mode, est in estimates.items():
        e = np.asarray(est, dtype=float)
        r = np.asarray(random[mode], dtype=float)
        if e.shape != t.shape or r.ndim != 2 or r.shape[1] != len(t) or r.shape[0] < 1:
            raise ValueError(f"mode {mode!r}: {e.shape} estimates and {r.shape} random draws for {len(t)} models")
        rho, mae = spearman(e, t), float(np.mean(np.abs(e - t)))
        r_rho = float(np.nanmedian([spearman(row, t) for row in r]))
        r_mae = float(np.median(np.mean(np.abs(r - t[None, :]), axis=1)))
        out[mode] = {
            "spearman": rho,
            "random_median_spearman": r_rho,
            "spearman_margin": rho - r_rho,
            "mae": mae,
            "random_median_mae": r_mae,
            "mae_ratio": mae / r_mae if r_mae > 0 else (math.inf if mae > 0 else 1.0),
        }
    return out


def summarize(units: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """Per mode over the units (each :func:`mode_figures`): the mean of every figure, the smallest
    Spearman margin, the largest MAE ratio, and the share of units where the mode beats its random
    median (``beats_spearman``: margin > 0; ``beats_mae``: ratio < 1)."""
    if not units:
        return {}
    out = {}
    for mode in units[0]:
        rows = [u[mode] for u in units]
        s = {k: float(np.nanmean([r[k] for r in rows])) for k in rows[0]}
        margins = np.array([r["spearman_margin"] for r in rows], dtype=float)
        ratios = np.array([r["mae_ratio"] for r in rows], dtype=float)
        s["min_spearman_margin"] = float(np.nanmin(margins)) if np.isfinite(margins).any() else math.nan
        s["max_mae_ratio"] = float(np.max(ratios))
        s["beats_spearman"] = float(np.mean(margins > 0))
        s["beats_mae"] = float(np.mean(ratios < 1))
        s["units"] = len(rows)
        out[mode] = s
    return out


def choose_modes(summary: Mapping[str, Mapping[str, float]]) -> dict[str, str]:
    """The mode to trust for ranking, for absolute error, and the default, from :func:`summarize`'s figures.

    Ranking: among the modes whose Spearman beats their random median in more than half the units
    with a positive mean margin, the largest mean margin; ``"random"`` when none does (a random
    stratified subset ranks as well). Absolute error: likewise among the modes whose error beats
    their random median in more than half the units with a mean ratio below 1, the smallest mean
    MAE (the error a user gets); ``"random"`` when none. Default: the ranking mode if there is one,
    else the error mode, else the mode with the smallest mean MAE."""
    def trusted(beats: str, ok: Callable[[Mapping[str, float]], bool]) -> list[str]:
        return [m for m, s in summary.items() if s[beats] > MAJORITY and ok(s)]

    rank = trusted("beats_spearman", lambda s: s["spearman_margin"] > 0)
    err = trusted("beats_mae", lambda s: s["mae_ratio"] < 1)
    ranking = max(rank, key=lambda m: summary[m]["spearman_margin"]) if rank else "random"
    error = min(err, key=lambda m: summary[m]["mae"]) if err else "random"
    if ranking != "random":
        default, why = ranking, f"{ranking} beats its random median for ranking"
    elif error != "random":
        default, why = error, (f"no mode ranks better than a random stratified subset; {error} has the smallest "
                               "error among the modes that beat their random median in error")
    else:
        default = min(summary, key=lambda m: summary[m]["mae"]) if summary else "random"
        why = f"no mode beats its random median; {default} has the smallest error"
    return {"ranking": ranking, "error": error, "default": default, "reason": why}


@dataclass
class Validation:
    """The leave-models-out validation: per unit the figures of every mode, their summary and the choice."""

    settings: dict
    units: list[dict] = field(default_factory=list)  # {"split_seed", "kmeans_seed", "figures": mode_figures}

    @property
    def summary(self) -> dict[str, dict[str, float]]:
        return summarize([u["figures"] for u in self.units])

    @property
    def choice(self) -> dict[str, str]:
        return choose_modes(self.summary)

    def to_json(self) -> dict:
        return {"settings": dict(self.settings), "summary": self.summary, "choice": self.choice,
                "units": [dict(u) for u in self.units]}


def leave_models_out(
    matrix: ScoreMatrix,
    fit_fold: Callable[[ScoreMatrix, int], MiniLongBench],
    *,
    folds: int = 2,
    splits: int = 2,
    kmeans_seeds: int = 3,
    draws: int = 20,
    seed: int = 42,
    candidates: int = 8,
    selection_mode: str | None = None,
    groups: Mapping[str, str] | None = None,
    subset_ids: Sequence | None = None,
    blend_weight: float = BLEND_WEIGHT,
    log: Callable[[str], None] | None = None,
) -> Validation:
    """Every mode of MiniLongBench on held-out models beside its own random median (module docstring).

    ``fit_fold(train_matrix, split_seed)`` fits the item parameters on a fold's training models
    (``fit`` with the caller's settings; the benchmark caches them); the subset is then selected on
    that fit with :func:`choose_subset` (``candidates`` K-Means runs judged by ``selection_mode``)
    for each K-Means seed ``split_seed + 1009 i``, or taken as given (``subset_ids``: one unit per
    split). Split s uses seed ``seed + s`` for the fold split, the fit and the first K-Means seed."""
    settings = {"folds": folds, "splits": splits, "kmeans_seeds": 1 if subset_ids is not None else kmeans_seeds,
                "draws": draws, "seed": seed, "candidates": candidates, "selection_mode": selection_mode,
                "subset": "given" if subset_ids is not None else "k-means", "models": len(matrix.models)}
    val = Validation(settings=settings)
    if draws < 1 or splits < 1:
        raise ValueError(f"validation needs at least 1 split and 1 random draw, got {splits} and {draws}")
    models = list(matrix.models)
    truth = np.array([e.overall for e in aggregate(matrix.scores, matrix.tasks, matrix.categories)])
    for s in range(splits):
        split_seed = seed + s
        kseeds = [split_seed] if subset_ids is not None else [split_seed + KMEANS_SEED_STEP * i
                                                              for i in range(kmeans_seeds)]
        est = {k: {m: np.full(len(models), np.nan) for m in MODES} for k in kseeds}
        rand = {k: {m: np.full((draws, len(models)), np.nan) for m in MODES} for k in kseeds}
        for f, held in enumerate(folds_of(models, folds, split_seed)):
            train_names = [m for m in models if m not in held]
            train = matrix.select_models(train_names)
            where = np.array([models.index(m) for m in held])
            obs = matrix.scores[where]
            fitted = fit_fold(train, split_seed)
            group_of = np.array([(groups or {}).get(t, c) for t, c in zip(fitted.tasks.tolist(),
                                                                          fitted.categories.tolist())])
            for k in kseeds:
                if subset_ids is not None:
                    sel = given_subset(train, subset_ids, group_of)
                else:
                    sel, _ = choose_subset(train, fitted.alpha, fitted.beta, group_of, len(fitted.subset), k,
                                           candidates, mode=selection_mode)
                mlb = with_selection(fitted, sel)
                for mode in MODES:
                    est[k][mode][where] = [e.overall for e in mlb.estimate_many(obs, mode, blend_weight=blend_weight)]
                rng = np.random.default_rng([split_seed, f, k, 7])
                for mode, r in random_mode_estimates(mlb, obs, draws, rng, blend_weight).items():
                    rand[k][mode][:, where] = r
            if log:
                log(f"  split {s} (seed {split_seed}) fold {f}: {len(train_names)} training, {len(held)} held out, "
                    f"{len(kseeds)} subset(s)")
        for k in kseeds:
            val.units.append({"split_seed": split_seed, "kmeans_seed": k,
                              "figures": mode_figures(est[k], rand[k], truth)})
    return val
