"""Fitting a MiniLongBench (spec §3.3, §4.2, §4.3): binarize, fit the 2PL IRT model, cluster, and
keep the K-Means run that best recovers the training models.

Pure logic (numpy; the IRT model in :mod:`lc_pipeline.score.irt`); no Dagster.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from lc_pipeline.score import irt
from lc_pipeline.benchmarks.minilongbench.matrix import ScoreMatrix, aggregate
from lc_pipeline.benchmarks.minilongbench.model import SELECTION_MODE, MiniLongBench
from lc_pipeline.benchmarks.minilongbench.selection import (
    Selection,
    balance_weights,
    n_selected,
    select_subset,
)


def choose_subset(
    matrix: ScoreMatrix,
    alpha: np.ndarray,
    beta: np.ndarray,
    groups: np.ndarray,
    k: int,
    seed: int,
    candidates: int = 8,
    mode: str | None = None,
) -> tuple[Selection, list[dict]]:
    """K-Means selections with seeds ``seed .. seed + candidates - 1`` (:func:`select_subset` on
    [alpha, beta]); keep the one whose ``mode`` (default :data:`SELECTION_MODE`) estimates of the
    training models, from their subset scores only, are closest to their true scores (mean absolute error of the overall
    score). One K-Means run is a draw whose luck moves held-out rank correlations by +-0.05
    (benchmarks/README.md); picking the run that best reconstructs the models it was fitted on
    raised the held-out Spearman's mean and worst case there. Returns the selection and, per
    candidate, its seed and training error."""
    if candidates < 1:
        raise ValueError(f"candidates must be >= 1, got {candidates}")
    mode = mode or SELECTION_MODE
    features = np.hstack([np.asarray(alpha), np.asarray(beta)[:, None]])
    weights = balance_weights(matrix.tasks, matrix.categories)
    truth = np.array([e.overall for e in aggregate(matrix.scores, matrix.tasks, matrix.categories)])
    best, best_err, tried = None, math.inf, []
    for c in range(candidates):
        sel = select_subset(features, groups, weights, k, seed + c)
        if candidates == 1:
            return sel, [{"seed": seed, "train_mae": None}]
        probe = MiniLongBench(samples=matrix.samples, tasks=matrix.tasks, categories=matrix.categories, alpha=alpha,
                              beta=beta, subset=sel.indices, threshold=math.nan, cluster_weight=sel.cluster_weight)
        # Models with no score on this subset can't judge it; the others do.
        rows = [i for i in range(len(matrix.models)) if not np.isnan(matrix.scores[i, sel.indices]).all()]
        est = np.array([e.overall for e in probe.estimate_many(matrix.scores[rows], mode)]) if rows else np.array([])
        err = float(np.nanmean(np.abs(est - truth[rows]))) if rows else math.inf
        tried.append({"seed": seed + c, "train_mae": err})
        if err < best_err or best is None:
            best, best_err = sel, err
    return best, tried


def given_subset(matrix: ScoreMatrix, subset_ids: Sequence, groups: np.ndarray) -> Selection:
    """A subset named by its sample ids, as a :class:`Selection` without clusters (each sample then
    stands for an even share of its task); an id missing from the matrix is a ValueError naming it."""
    index = {s: i for i, s in enumerate(matrix.samples.tolist())}
    unknown = [s for s in subset_ids if s not in index]
    if unknown:
        raise ValueError(f"{len(unknown)} subset sample(s) are not in the score matrix, e.g. {unknown[:3]}")
    positions = np.array(sorted({index[s] for s in subset_ids}), dtype=np.int64)
    if len(positions) != len(subset_ids):
        raise ValueError("a subset sample is named twice")
    budgets: dict[str, int] = {}
    for g in groups[positions].tolist():
        budgets[str(g)] = budgets.get(str(g), 0) + 1
    return Selection(indices=positions, cluster=np.full(len(positions), -1, dtype=np.int64),
                     cluster_group=groups[positions].astype(str), cluster_weight=np.full(len(positions), np.nan),
                     budgets=dict(sorted(budgets.items())))


def fit(
    matrix: ScoreMatrix,
    representations: np.ndarray | None = None,
    *,
    ratio: float = 0.95,
    dims: int = 10,
    seed: int = 42,
    epochs: int = 2000,
    lr: float = 0.1,
    lr_decay: float = 0.9999,
    method: str = "vi",
    groups: Mapping[str, str] | None = None,
    representation: str | None = None,
    candidates: int = 8,
    subset_ids: Sequence | None = None,
    selection_mode: str | None = None,
) -> MiniLongBench:
    """Build a MiniLongBench from the training models' per-sample scores (steps 2-4 above).

    ``representations`` (n x dims) initialize alpha; ``None`` starts alpha at 0 (no text signal,
    the paper's "random init" ablation is close to it). ``groups`` maps a task to its clustering
    group (default: its category). ``representation`` is a label stored in the metadata.
    ``candidates``: K-Means runs (seeds seed, seed + 1, ...) among which :func:`choose_subset`
    keeps the one that best recovers the training models' scores; 1 is the paper's single run.
    ``selection_mode``: the estimate that judges the candidates (default :data:`SELECTION_MODE`).
    ``subset_ids``: a subset given, not selected (the released MiniLongBench's 237 samples, spec
    Appendix A: K-Means is not deterministic, §4.3, so the paper's numbers need the released list);
    its samples stand for an even share of their task (no clusters), ``ratio`` is then unused.
    """
    if len(matrix.models) < 2:
        raise ValueError("MiniLongBench needs the scores of at least 2 training models")
    n = len(matrix.samples)
    k = n_selected(n, ratio)
    if representations is not None:
        representations = np.asarray(representations, dtype=np.float64)
        if representations.shape != (n, dims):
            raise ValueError(f"representations have shape {representations.shape}, expected {(n, dims)}")
    threshold = irt.binarization_threshold(matrix.scores)
    responses = irt.binarize(matrix.scores, threshold)
    fitted = irt.fit_mirt(responses, representations, dims=dims, epochs=epochs, lr=lr, lr_decay=lr_decay,
                          seed=seed, method=method)
    group_of = np.array([(groups or {}).get(t, c) for t, c in zip(matrix.tasks.tolist(), matrix.categories.tolist())])
    if subset_ids is not None:
        sel, tried = given_subset(matrix, subset_ids, group_of), []
    else:
        sel, tried = choose_subset(matrix, fitted.alpha, fitted.beta, group_of, k, seed, candidates, selection_mode)
    meta = {
        "ratio": ratio,
        "seed": seed,
        "irt": {"method": method, "epochs": epochs, "lr": lr, "lr_decay": lr_decay,
                "best_epoch": fitted.best_epoch, "best_loss": fitted.best_loss},
        "representation": representation or ("given" if representations is not None else "none (alpha starts at 0)"),
        "cluster_budgets": sel.budgets,
        "subset_candidates": tried,
        "subset": "given" if subset_ids is not None else "k-means",
        "share_of_ones": float(np.nanmean(responses)),
    }
    return MiniLongBench(
        samples=matrix.samples,
        tasks=matrix.tasks,
        categories=matrix.categories,
        alpha=fitted.alpha,
        beta=fitted.beta,
        subset=sel.indices,
        threshold=threshold,
        meta=meta,
        cluster=sel.cluster,
        cluster_group=sel.cluster_group,
        cluster_weight=sel.cluster_weight,
        train_models=matrix.models,
        train_theta=fitted.theta,
    )


def from_parameters(
    matrix: ScoreMatrix,
    alpha: np.ndarray,
    beta: np.ndarray,
    *,
    ratio: float = 0.95,
    seed: int = 42,
    groups: Mapping[str, str] | None = None,
    candidates: int = 8,
    subset_ids: Sequence | None = None,
    selection_mode: str | None = None,
    source: str = "given",
) -> MiniLongBench:
    """A MiniLongBench on item parameters fitted elsewhere (e.g. the authors' released α/β), not refitted:
    ``alpha`` (n x d) and ``beta`` (n,) in ``matrix.samples`` order. The matrix gives each sample's task and
    category, the binarization threshold (kept for the record; estimates use soft scores) and, when
    ``subset_ids`` is None, the training models :func:`choose_subset` judges K-Means runs on. No training
    abilities are kept (the parameters' own subjects are not the matrix's models by name). ``source``
    labels the parameters in the metadata (``meta["irt"]["method"]``)."""
    n = len(matrix.samples)
    alpha = np.asarray(alpha, dtype=np.float64)
    beta = np.asarray(beta, dtype=np.float64).reshape(-1)
    if alpha.ndim != 2 or alpha.shape[0] != n or beta.shape != (n,):
        raise ValueError(f"item parameters {source}: alpha {alpha.shape} and beta {beta.shape} do not fit the "
                         f"{n} samples of the score matrix")
    if not (np.isfinite(alpha).all() and np.isfinite(beta).all()):
        raise ValueError(f"item parameters {source}: alpha or beta holds a non-finite value")
    threshold = irt.binarization_threshold(matrix.scores)
    group_of = np.array([(groups or {}).get(t, c) for t, c in zip(matrix.tasks.tolist(), matrix.categories.tolist())])
    if subset_ids is not None:
        sel, tried = given_subset(matrix, subset_ids, group_of), []
    else:
        sel, tried = choose_subset(matrix, alpha, beta, group_of, n_selected(n, ratio), seed, candidates,
                                   selection_mode)
    meta = {
        "ratio": ratio,
        "seed": seed,
        "irt": {"method": source},
        "representation": f"none (item parameters {source})",
        "cluster_budgets": sel.budgets,
        "subset_candidates": tried,
        "subset": "given" if subset_ids is not None else "k-means",
        "share_of_ones": float(np.nanmean(irt.binarize(matrix.scores, threshold))),
    }
    return MiniLongBench(samples=matrix.samples, tasks=matrix.tasks, categories=matrix.categories, alpha=alpha,
                         beta=beta, subset=sel.indices, threshold=threshold, meta=meta, cluster=sel.cluster,
                         cluster_group=sel.cluster_group, cluster_weight=sel.cluster_weight, train_models=(),
                         train_theta=None)
