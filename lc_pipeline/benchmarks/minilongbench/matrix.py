"""The score matrix and how a score is aggregated: task -> category -> overall.

Pure logic (numpy, polars, scipy); no Dagster. Spec: ``shared/specs/minilongbench.md`` (§3, §5:
the true score is the mean of the category means of the task means). Sample ids are LongBench's
global sample index (int) in the shared data, or any string (e.g. our instance ids).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

SAMPLE = "global_sample"  # the sample-id column of score, embedding and subset files


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho (average ranks for ties); NaN when either side is constant."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"spearman needs two equally long sequences of >= 2 values, got {len(x)} and {len(y)}")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


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


@dataclass(frozen=True)
class Estimate:
    """A (possibly estimated) benchmark score: the mean of category means of task means."""

    overall: float
    categories: dict[str, float]
    tasks: dict[str, float]

    def to_json(self) -> dict:
        return {"overall": self.overall, "categories": dict(self.categories), "tasks": dict(self.tasks)}


def group_index(labels: np.ndarray) -> dict[str, np.ndarray]:
    """label -> the positions holding it, labels in sorted order."""
    return {str(k): np.flatnonzero(labels == k) for k in sorted(set(labels.tolist()))}


def task_categories(tasks: np.ndarray, categories: np.ndarray) -> dict[str, str]:
    """task -> its category; a task found in two categories is a ValueError naming both."""
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
    cat_of = task_categories(tasks, categories)
    by_task = group_index(tasks)
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
