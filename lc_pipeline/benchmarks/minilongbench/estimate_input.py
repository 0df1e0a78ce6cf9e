"""What ``lcp minilongbench estimate`` accepts: new models' subset scores checked before any estimate (issue 22).

Pure logic (polars, numpy); no Dagster. An estimate rests on the model's scores on the subset S_M: the paper
fits the new model's ability "on the test samples of S_M" (spec ``shared/specs/minilongbench.md`` §5.2, all 237
of them) or averages them (§5.1, App. G), and every mode aggregates task -> category -> overall. A category with
none of its subset samples has no data behind its number: ``predict`` would still print one (the 2PL
extrapolated from the other categories), ``direct`` would silently leave it out of the overall. So:

* :func:`clean_scores`: the rows are read strictly. No rows is an error; a missing or non-finite score, or one
  outside [0, 1], and a sample the fitted benchmark does not know are errors naming the row, the model and the
  sample; two rows for one (model, sample) with different scores are an error naming the sample and both
  values (with their rows), identical ones are collapsed with a note.
* :func:`coverage`: per model, how many of the subset's samples per category (and task) it has a score on.
* :func:`check_coverage`, the rule: by default every subset sample is required (the paper's protocol); a model
  lacking any is refused, naming its categories' covered/total counts. With ``allow_partial``, a category is
  estimated when at least ``min_coverage`` (default :data:`MIN_COVERAGE`, half) of its subset samples are
  covered; the others get no number, a task no number when none of its subset samples is covered, and the
  overall (the mean of every category's estimate) is null unless every category is estimated
  (:func:`partial_json`). A model with no category at ``min_coverage`` is refused even then.

The pipeline's estimates (``minilongbench_estimates``, :mod:`.pipeline`) keep their own rule for a partially
run released subset (they record ``n_observed`` and the missing tasks); this module is the command's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from lc_pipeline.benchmarks.minilongbench.matrix import SAMPLE, Estimate
from lc_pipeline.benchmarks.minilongbench.model import MiniLongBench

__all__ = ["MIN_COVERAGE", "Coverage", "check_coverage", "clean_scores", "coverage", "partial_json"]

MIN_COVERAGE = 0.5  # share of a category's subset samples an --allow-partial estimate of it needs


@dataclass(frozen=True)
class Coverage:
    """One model's subset samples with a score, ``(covered, total)`` per category and per task (sorted), and
    each task's category."""

    model: str
    categories: dict[str, tuple[int, int]]
    tasks: dict[str, tuple[int, int]]
    category_of: dict[str, str]

    @property
    def covered(self) -> int:
        return sum(c for c, _ in self.categories.values())

    @property
    def total(self) -> int:
        return sum(n for _, n in self.categories.values())

    @property
    def complete(self) -> bool:
        return self.covered == self.total

    def estimable(self, min_coverage: float) -> list[str]:
        """The categories with at least ``min_coverage`` of their subset samples covered (and one at least)."""
        return [c for c, (k, n) in self.categories.items() if k > 0 and k >= min_coverage * n]

    def describe(self) -> str:
        """``model 'x' covers 20 of 237 subset samples (code 0/49, ...)``."""
        cats = ", ".join(f"{c} {k}/{n}" for c, (k, n) in self.categories.items())
        return f"model {self.model!r} covers {self.covered} of {self.total} subset samples ({cats})"

    def to_json(self) -> dict:
        return {"covered": self.covered, "total": self.total,
                "categories": {c: {"covered": k, "total": n} for c, (k, n) in self.categories.items()}}


def _row_label(i: int) -> str:
    return f"row {i + 1}"


def clean_scores(
    mlb: MiniLongBench,
    scores: pl.DataFrame,
    *,
    label: str = "scores",
    row_label: Callable[[int], str] = _row_label,
    sample_col: str = SAMPLE,
) -> tuple[pl.DataFrame, list[str]]:
    """``scores`` (``model, <sample_col>, score``; other columns dropped) checked as the module docstring says,
    identical duplicate rows collapsed; and the notes to print (what was collapsed). ``row_label(i)`` names the
    0-based row ``i`` in the messages (``line i + 2`` for a CSV with a header). Raises ValueError."""
    need = ["model", sample_col, "score"]
    missing = [c for c in need if c not in scores.columns]
    if missing:
        raise ValueError(f"{label}: lacks column(s) {missing}; expected {need}, got {scores.columns}")
    if scores.is_empty():
        raise ValueError(f"{label}: no score rows; expected one row per model and subset sample ({need})")
    df = scores.select(need)
    if mlb.meta.get("sample_id_type") == "str" or not np.issubdtype(mlb.samples.dtype, np.integer):
        df = df.with_columns(pl.col(sample_col).cast(pl.String))
    try:
        df = df.with_columns(pl.col("score").cast(pl.Float64))
    except pl.exceptions.InvalidOperationError as exc:
        raise ValueError(f"{label}: column 'score' must be numeric: {exc}") from None
    df = df.with_row_index("_row")

    def where(row: dict) -> str:
        return f"{label} {row_label(row['_row'])}: model {row['model']!r}, sample {row[sample_col]!r}"

    score = pl.col("score")
    checks = [
        (pl.col("model").is_null() | pl.col(sample_col).is_null(), "has an empty model or sample field"),
        (score.is_null() | score.is_nan() | score.is_infinite(),
         "column 'score' is missing or not a finite number"),
        ((score < 0) | (score > 1), "column 'score' is outside [0, 1] (MiniLongBench scores are per-sample shares)"),
    ]
    for bad, why in checks:
        rows = df.filter(bad)
        if rows.height:
            r = rows.row(0, named=True)
            more = f" ({rows.height} rows like it)" if rows.height > 1 else ""
            raise ValueError(f"{where(r)}, score {r['score']!r}: {why}{more}")
    known = set(mlb.samples.tolist())
    unknown = df.filter(~pl.col(sample_col).is_in(list(known)))
    if unknown.height:
        r = unknown.row(0, named=True)
        more = f" ({unknown.height} rows like it)" if unknown.height > 1 else ""
        raise ValueError(f"{where(r)}: sample {r[sample_col]!r} is not a sample of this MiniLongBench "
                         f"({len(known)} samples){more}")

    groups = (df.group_by("model", sample_col, maintain_order=True)
              .agg(pl.col("score"), pl.col("_row")).filter(pl.col("_row").list.len() > 1))
    notes: list[str] = []
    if groups.height:
        conflicting = groups.filter(pl.col("score").list.n_unique() > 1)
        if conflicting.height:
            g = conflicting.row(0, named=True)
            values = ", ".join(f"{v!r} ({row_label(i)})" for v, i in zip(g["score"], g["_row"]))
            more = f"; {conflicting.height} samples like it" if conflicting.height > 1 else ""
            raise ValueError(f"{label}: model {g['model']!r}, sample {g[sample_col]!r} has conflicting scores {values}"
                             f"{more}; keep one row per model and sample")
        extra = int(groups["_row"].list.len().sum()) - groups.height
        g = groups.row(0, named=True)
        notes.append(f"{label}: {extra} duplicate row(s) with the same score collapsed, e.g. model {g['model']!r}, "
                     f"sample {g[sample_col]!r} ({', '.join(row_label(i) for i in g['_row'])})")
        df = df.unique(["model", sample_col], keep="first", maintain_order=True)
    return df.drop("_row"), notes


def coverage(mlb: MiniLongBench, scores: pl.DataFrame, sample_col: str = SAMPLE) -> dict[str, Coverage]:
    """{model: its :class:`Coverage` of the subset}, models sorted, from rows :func:`clean_scores` let through."""
    sub_ids = mlb.subset_ids.tolist()
    sub_tasks = mlb.tasks[mlb.subset].astype(str).tolist()
    sub_cats = mlb.categories[mlb.subset].astype(str).tolist()
    out: dict[str, Coverage] = {}
    for model in sorted(scores["model"].unique().to_list()):
        have = set(scores.filter(pl.col("model") == model)[sample_col].to_list())
        cats: dict[str, list[int]] = {}
        tasks: dict[str, list[int]] = {}
        for s, t, c in zip(sub_ids, sub_tasks, sub_cats):
            for bucket, key in ((cats, c), (tasks, t)):
                k_n = bucket.setdefault(key, [0, 0])
                k_n[0] += s in have
                k_n[1] += 1
        out[model] = Coverage(model=model, categories={c: tuple(v) for c, v in sorted(cats.items())},
                              tasks={t: tuple(v) for t, v in sorted(tasks.items())},
                              category_of=dict(zip(sub_tasks, sub_cats)))
    return out


def check_coverage(coverages: dict[str, Coverage], *, allow_partial: bool = False,
                   min_coverage: float = MIN_COVERAGE) -> None:
    """Refuse models whose subset coverage the rule (module docstring) does not accept: a ValueError naming
    each model with its per-category covered/total counts and what would be accepted."""
    if not 0 < min_coverage <= 1:
        raise ValueError(f"min_coverage must be in (0, 1], got {min_coverage}")
    if allow_partial:
        refused = [c for c in coverages.values() if not c.estimable(min_coverage)]
        rule = (f"--allow-partial estimates a category only when at least {min_coverage:.0%} of its subset samples "
                "have a score, and these models have no such category")
    else:
        refused = [c for c in coverages.values() if not c.complete]
        rule = ("an estimate needs a score on every subset sample (the paper fits the model on all of them); "
                "run the missing samples, or pass --allow-partial to estimate only the categories with at least "
                f"{min_coverage:.0%} of theirs (--min-coverage) and print the coverage")
    if refused:
        raise ValueError("; ".join(c.describe() for c in refused) + f": {rule}")


def partial_json(estimate: Estimate, cov: Coverage, min_coverage: float = MIN_COVERAGE) -> dict:
    """``estimate`` as ``lcp minilongbench estimate --allow-partial`` prints it: only the categories
    :meth:`Coverage.estimable` names and, in them, the tasks with a covered sample; ``overall`` null unless every
    category is estimated; the coverage beside it and the categories left out under ``not_estimated``."""
    keep = set(cov.estimable(min_coverage))
    cats = {c: v for c, v in estimate.categories.items() if c in keep}
    tasks = {t: v for t, v in estimate.tasks.items() if cov.tasks.get(t, (0, 0))[0] > 0 and cov.category_of[t] in keep}
    every = keep == set(cov.categories)
    return {"overall": estimate.overall if every else None, "categories": cats, "tasks": tasks,
            "coverage": cov.to_json(), "not_estimated": sorted(set(cov.categories) - keep)}
