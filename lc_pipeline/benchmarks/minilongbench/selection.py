"""Subset selection (spec §4.3): how many samples, their split over the groups, the balance
weights, and K-Means on [alpha, beta] with the nearest free sample per centroid.

Pure logic (numpy, scikit-learn); no Dagster. Which of several K-Means runs is kept is
:func:`lc_pipeline.benchmarks.minilongbench.fitting.choose_subset`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lc_pipeline.benchmarks.minilongbench.matrix import group_index, task_categories


def n_selected(n_samples: int, ratio: float) -> int:
    """K = int((1 - ratio) * n): ratio is the share of samples REMOVED (spec §4.3, A2).
    4,750 samples at ratio 0.95 -> 237; 200 at 0.8 -> 40."""
    if not 0 <= ratio < 1:
        raise ValueError(f"ratio must be in [0, 1) (the share of samples removed), got {ratio}")
    # The tolerance keeps float noise from dropping a whole sample: (1 - 0.8) * 200 = 39.99999...
    k = int((1 - ratio) * n_samples + 1e-9)
    if k < 1:
        raise ValueError(f"ratio {ratio} keeps no sample of {n_samples}")
    return k


def cluster_budgets(group_sizes: Mapping[str, int], total: int) -> dict[str, int]:
    """K_g = int(|G_g| / n * K) for every group but the last (in the given order), which takes the
    remainder (spec §4.3 step 3). Each group gets at least 1 and at most |G_g| clusters."""
    names = list(group_sizes)
    n = sum(group_sizes.values())
    if total > n:
        raise ValueError(f"cannot select {total} of {n} samples")
    if total < len(names):
        raise ValueError(f"{total} samples cannot cover {len(names)} groups (lower the ratio)")
    out = {g: min(group_sizes[g], max(1, int(group_sizes[g] / n * total))) for g in names[:-1]}
    last = names[-1]
    out[last] = total - sum(out.values())
    if not 1 <= out[last] <= group_sizes[last]:
        # Rare rounding corner: spread the surplus/deficit over the other groups.
        out[last] = min(group_sizes[last], max(1, out[last]))
        diff = total - sum(out.values())
        for g in sorted(names, key=lambda g: -group_sizes[g]):
            while diff > 0 and out[g] < group_sizes[g]:
                out[g] += 1
                diff -= 1
            while diff < 0 and out[g] > 1:
                out[g] -= 1
                diff += 1
    return out


def balance_weights(tasks: np.ndarray, categories: np.ndarray) -> np.ndarray:
    """w_j = n / (T_cat * C * n_task), normalized to sum to 1: every category, and every task within
    it, weighs the same (spec §4.3 step 4)."""
    cat_of = task_categories(tasks, categories)
    task_size = {t: len(idx) for t, idx in group_index(tasks).items()}
    tasks_per_cat: dict[str, int] = {}
    for c in cat_of.values():
        tasks_per_cat[c] = tasks_per_cat.get(c, 0) + 1
    n_cat = len(tasks_per_cat)
    w = np.array([len(tasks) / (tasks_per_cat[cat_of[t]] * n_cat * task_size[t]) for t in tasks.tolist()])
    return w / w.sum()


def representative_weights(
    subset: np.ndarray,
    tasks: np.ndarray,
    categories: np.ndarray,
    cluster_weight: np.ndarray | None = None,
) -> np.ndarray:
    """The share of the benchmark each subset sample stands for (sums to 1), in subset order.

    With ``cluster_weight`` (a K-Means subset): its cluster's summed balance weight. Without (a
    random stratified subset): its task's balance weight split evenly over the task's subset
    samples, which makes the weighted estimate equal the direct one.
    """
    subset = np.asarray(subset)
    if cluster_weight is not None:
        v = np.asarray(cluster_weight, dtype=np.float64)
        if v.shape != subset.shape or not np.isfinite(v).all() or (v < 0).any():
            raise ValueError(f"cluster weights must be {len(subset)} finite values >= 0")
    else:
        w = balance_weights(tasks, categories)
        sub_tasks = np.asarray(tasks)[subset]
        v = np.empty(len(subset))
        for t in set(sub_tasks.tolist()):
            here = sub_tasks == t
            v[here] = w[np.asarray(tasks) == t].sum() / here.sum()
    if v.sum() <= 0:
        raise ValueError("the subset's representative weights sum to 0")
    return v / v.sum()


@dataclass(frozen=True)
class Selection:
    indices: np.ndarray  # selected sample positions, ascending
    cluster: np.ndarray  # per selected sample: its cluster id (unique over groups)
    cluster_group: np.ndarray  # per selected sample: its group
    cluster_weight: np.ndarray  # per selected sample: the summed balance weight of its cluster
    budgets: dict[str, int]


def select_subset(
    features: np.ndarray,
    groups: np.ndarray,
    weights: np.ndarray,
    k: int,
    seed: int,
) -> Selection:
    """K-Means per group (budgets from :func:`cluster_budgets`, groups in sorted order), weighted by
    ``weights``; for each centroid the nearest real sample not yet taken (Euclidean)."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import pairwise_distances

    x = np.asarray(features, dtype=np.float64)
    by_group = group_index(np.asarray(groups))
    budgets = cluster_budgets({g: len(idx) for g, idx in by_group.items()}, k)
    chosen, clusters, cgroups, cweights = [], [], [], []
    next_cluster = 0
    for g, idx in by_group.items():
        kg = budgets[g]
        km = KMeans(n_clusters=kg, n_init="auto", random_state=seed).fit(x[idx], sample_weight=weights[idx])
        dist = pairwise_distances(km.cluster_centers_, x[idx])
        taken: set[int] = set()
        for c in range(kg):
            order = np.argsort(dist[c], kind="stable")
            pick = next(int(j) for j in order if int(j) not in taken)
            taken.add(pick)
            chosen.append(int(idx[pick]))
            clusters.append(next_cluster + c)
            cgroups.append(g)
            cweights.append(float(weights[idx][km.labels_ == c].sum()))
        next_cluster += kg
    order = np.argsort(chosen, kind="stable")
    return Selection(
        indices=np.asarray(chosen)[order],
        cluster=np.asarray(clusters)[order],
        cluster_group=np.asarray(cgroups)[order],
        cluster_weight=np.asarray(cweights)[order],
        budgets=budgets,
    )
