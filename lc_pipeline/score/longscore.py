"""100-LongBench's LongScore, the "old metric", and the leaderboard built from them.

Pure logic (no Dagster). Formulas from the 100-LongBench spec (§6, §10):

* ``Base Ability B`` = mean of the task score S over the base lengths (paper: 2k/4k/6k).
* ``LC_l = 100 * (S_l - B) / B`` at each long length l (paper: 8k ... 128k).
* reported LongScore = mean of LC_l over the long lengths; old metric = mean of S_l over them.
* Across tasks, the raw scores are averaged per length FIRST and LongScore is computed on that
  averaged curve. Averaging per-task LongScores instead is wrong: a task with a tiny base
  dominates (the spec's Llama-3.1-8B example: +7.43 instead of the paper's -17.46).
* The reference ``longscore_table`` rounds each LC_l to 2 decimals before averaging; we do the
  same by default (``round_each``), and keep the averages themselves unrounded (rounding them
  is display, and the caller can round a stored number, not un-round it).
* Ranks: descending, ties take the smallest rank (pandas ``rank(ascending=False, method='min')``).
* Not scored (issue 21): a (task, length) cell whose every generation was skipped (truncation policy ``skip``)
  or invalid has no score. Such a cell, named by the caller (``not_scored``), gets a null S_l; the cross-task S_l
  at that length is null too (averaging the other tasks would change what the number is); Base Ability is the
  mean over the base lengths that have a score, and the averages over the long lengths that have one. A cell
  missing for any other reason (not run) is still an error. Neither the paper nor its code has this case.
* Comparable input (issue 22, :func:`check_score_values`, :func:`comparable_scores`): scores computed elsewhere
  (``lcp longscore``) are ranked only when the models can be compared. Every score is a finite number, >= 0
  and <= 100 (the paper's S_l is a percentage, §6.1); every model has the same tasks (Tables 4/7 average the
  same 8 tasks per model; a model averaged over 4 of them is another benchmark), unless the caller asks to
  rank on the tasks every model has and says which were dropped; all models on one scale (below); one
  score per (model, task, length).
* Scale rule: the paper's scores are 0-100, but 0-1 accuracies are common. LongScore itself is a ratio and
  does not depend on the scale, Base Ability and the old metric do, so mixing them misranks. With
  ``scale="auto"`` a model whose every score (at the base and long lengths) is <= 1 and one of them > 0 looks
  0-1; a model with a score > 1 looks 0-100; a model scoring 0 everywhere is either. Models of both kinds
  together are refused. A model that truly scores at most 1 of 100 is declared with ``scale="100"`` (no
  guess; only > 100 is refused); ``scale="1"`` refuses any score above 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import polars as pl

from lc_pipeline import schemas

__all__ = [
    "OVERALL",
    "AVG",
    "ZeroBaseError",
    "LongScoreSummary",
    "SCALES",
    "ComparableScores",
    "check_score_values",
    "comparable_scores",
    "check_lengths",
    "long_score",
    "long_score_summary",
    "long_scores_frame",
    "rank_descending",
    "leaderboard_frame",
    "summarize",
    "task_curves",
    "HEADLINE",
    "HeadlineUnavailable",
    "ScoreSource",
    "headline_long_scores",
    "headline_rows",
    "headline_sources",
    "task_score_source",
]

OVERALL = "overall"  # task name of the cross-task rows
AVG = "avg"  # length_level of the rows averaged over the long lengths
HEADLINE = "headline"  # LONG_SCORES.metric of the headline rows (each task scored by its task file's source)


class ZeroBaseError(ValueError):
    """Base Ability is 0, so the relative change LongScore is undefined."""


def long_score(base: float, score: float) -> float:
    """LongScore at one length in percent: ``100 * (score - base) / base``.

    Example: ``long_score(96.5, 95.8)`` -> -0.7253... (Table 5, Llama3.1-70B at 8k).
    """
    if base == 0:
        raise ZeroBaseError(
            "Base Ability is 0: LongScore = 100*(S_l - B)/B is undefined when the model scores 0 "
            "at every base length (the paper requires a non-trivial base ability)"
        )
    return 100.0 * (score - base) / base


@dataclass(frozen=True)
class LongScoreSummary:
    """LongScore of one score curve (one task, or several tasks averaged per length).

    ``scores`` holds S_l for every base and long length (0-100; ``None`` at a length not scored);
    ``long_scores`` holds LC_l for the long lengths (``None`` with a zero base tolerated, or where S_l or
    the base is not scored); ``avg_score`` is the old metric; ``avg_long_score`` the reported LongScore.
    """

    tasks: tuple[str, ...]
    base_lengths: tuple[str, ...]
    long_lengths: tuple[str, ...]
    base_ability: float | None
    scores: dict[str, float | None]
    long_scores: dict[str, float | None]
    avg_score: float | None
    avg_long_score: float | None


def check_lengths(
    base_lengths: Sequence[str], long_lengths: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The base and long length levels as tuples; a bare str, an empty or duplicated group, or a
    level in both groups is an error."""
    for name, group in (("base_lengths", base_lengths), ("long_lengths", long_lengths)):
        if isinstance(group, str):
            raise TypeError(f"{name} must be a sequence of length levels, not a single str")
        if not group:
            raise ValueError(f"{name} is empty")
        if len(set(group)) != len(group):
            raise ValueError(f"{name} has duplicates: {list(group)}")
    overlap = sorted(set(base_lengths) & set(long_lengths))
    if overlap:
        raise ValueError(f"lengths {overlap} are both base and long lengths")
    return tuple(base_lengths), tuple(long_lengths)


SCALES = ("auto", "1", "100")  # scale="auto" guesses each model's scale and refuses a mix (module docstring)


@dataclass(frozen=True)
class ComparableScores:
    """The rows :func:`comparable_scores` lets through: ``scores`` (at the base and long lengths; with
    ``common_tasks`` only the tasks every model has), ``tasks`` (the tasks ranked on, in first-seen order)
    and ``dropped`` ({model: its tasks left out}; only with ``common_tasks``, models that lost none absent)."""

    scores: pl.DataFrame
    tasks: tuple[str, ...]
    dropped: dict[str, tuple[str, ...]]


def _with_row_names(scores: pl.DataFrame) -> pl.DataFrame:
    """``scores`` with a ``_where`` column naming each row: ``line N`` from a ``line`` column (the CSV's line,
    as ``lcp longscore`` reads it), else ``row N`` (1-based)."""
    if "line" in scores.columns:
        where = pl.format("line {}", pl.col("line"))
    else:
        where = pl.format("row {}", pl.int_range(1, pl.len() + 1))
    return scores.with_columns(where.alias("_where"))


def _describe(row: dict) -> str:
    return (f"{row['_where']}: model {row['model']!r}, task {row['task']!r}, length {row['length']!r}, "
            f"column 'score' = {row['score']!r}")


def check_score_values(scores: pl.DataFrame, *, scale: str = "auto", label: str = "scores") -> None:
    """Refuse score rows that cannot be ranked (module docstring, "Comparable input"): no rows; a null, NaN or
    infinite score; a negative score; a score above 100 (above 1 with ``scale="1"``). Every row is checked,
    also those at lengths outside the averages. The ValueError names the first offending row (its ``line``
    when the frame has one), its model, task and length, the column and the value, and how many rows fail."""
    _require_columns(scores, ("task", "model", "length", "score"), label)
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale!r}")
    if scores.is_empty():
        raise ValueError(f"{label}: no score rows; expected one row per task, model and length")
    top = 1.0 if scale == "1" else 100.0
    score = pl.col("score").cast(pl.Float64)
    checks = [
        (score.is_null() | score.is_nan(), "is missing or NaN; every score must be a number"),
        (score.is_infinite(), "is not finite; every score must be a finite number"),
        (score < 0, ("is negative; scores are >= 0 (LongScore's Base Ability and S_l are shares of the "
                     "maximum, 100 x (S_l - B) / B has no meaning below 0)")),
        (score > top, f"is above {top:g}; scores are on a 0-100 scale (the paper's) or a 0-1 one"
                      + (" (--scale 1 was given)" if scale == "1" else "")),
    ]
    named = _with_row_names(scores)
    for bad, why in checks:
        rows = named.filter(bad)
        if rows.height:
            more = f" ({rows.height} rows like it)" if rows.height > 1 else ""
            raise ValueError(f"{label} {_describe(rows.row(0, named=True))} {why}{more}")


def comparable_scores(
    scores: pl.DataFrame,
    needed: Sequence[str],
    *,
    common_tasks: bool = False,
    scale: str = "auto",
    label: str = "scores",
) -> ComparableScores:
    """The rows of ``scores`` (columns ``task, model, length, score``, optionally ``line``) at the ``needed``
    lengths, once the models are known to be comparable (module docstring, "Comparable input"); call
    :func:`check_score_values` first. Each refusal is a ValueError naming what to fix:

    * two rows for one (model, task, length): both rows and values;
    * with ``scale="auto"``, models that look 0-1 beside models that look 0-100 (the scale rule): both lists;
    * a model without every task some model has: ``model 'b' has scores for 4 of 8 tasks; missing: ...``.
      With ``common_tasks`` the models are instead ranked on the tasks every model has at every needed length
      (``tasks``), the others left out (``dropped``); none in common is an error.
    """
    _require_columns(scores, ("task", "model", "length", "score"), label)
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, not {scale!r}")
    needed = list(needed)
    rows = _with_row_names(scores).filter(pl.col("length").is_in(needed))
    if rows.is_empty():
        raise ValueError(f"{label}: no rows at the lengths {needed}")

    dup = (rows.group_by("model", "task", "length", maintain_order=True)
           .agg(pl.col("_where"), pl.col("score"), pl.len().alias("n")).filter(pl.col("n") > 1))
    if dup.height:
        d = dup.row(0, named=True)
        values = d["score"]
        what = (f"the same score {values[0]!r} on {', '.join(d['_where'])}" if len(set(values)) == 1
                else "different scores: " + ", ".join(f"{v!r} on {w}" for v, w in zip(values, d["_where"])))
        raise ValueError(f"{label}: more than one score for model {d['model']!r}, task {d['task']!r}, "
                         f"length {d['length']!r}: {what}; keep one row per model, task and length"
                         + (f" ({dup.height} such groups)" if dup.height > 1 else ""))

    models = scores["model"].unique(maintain_order=True).to_list()  # a model with no row at a needed length too
    if scale == "auto":
        tops = dict(rows.group_by("model").agg(pl.col("score").cast(pl.Float64).max()).iter_rows())
        unit = [m for m in sorted(tops) if 0 < tops[m] <= 1]
        percent = [m for m in sorted(tops) if tops[m] > 1]
        if unit and percent:
            raise ValueError(
                f"{label}: the models are on different scales: 0-1 (no score above 1): {', '.join(map(repr, unit))}; "
                f"0-100 (scores above 1): {', '.join(f'{m!r} (up to {tops[m]:g})' for m in percent)}. Put every model "
                "on one scale (the paper's is 0-100). Rule: a model whose every score is <= 1 (one > 0) looks 0-1; "
                "if such a model really is on 0-100, say so with --scale 100")

    order = rows["task"].unique(maintain_order=True).to_list()
    has = {m: set() for m in models}
    complete = {m: set() for m in models}
    for (model, task), lengths in rows.group_by("model", "task").agg(pl.col("length")).rows_by_key(
            ["model", "task"], unique=True).items():
        has[model].add(task)
        if set(lengths[0]) >= set(needed):
            complete[model].add(task)
    if not common_tasks:
        short = [m for m in sorted(models) if has[m] != set(order)]
        if short:
            raise ValueError(
                f"{label}: the models do not have the same tasks, so their averages are not comparable: "
                + "; ".join(f"model {m!r} has scores for {len(has[m])} of {len(order)} tasks; missing: "
                            + ", ".join(t for t in order if t not in has[m]) for m in short)
                + ". Score the missing tasks, or rank on the tasks every model has with --common-tasks")
        return ComparableScores(scores=rows.drop("_where"), tasks=tuple(order), dropped={})
    common = [t for t in order if all(t in complete[m] for m in models)]
    if not common:
        raise ValueError(f"{label}: --common-tasks: no task has scores at every length {needed} for every model "
                         f"({'; '.join(f'{m!r}: {len(complete[m])} task(s)' for m in sorted(models))})")
    dropped = {m: tuple(t for t in order if t in has[m] and t not in common) for m in sorted(models)}
    return ComparableScores(scores=rows.filter(pl.col("task").is_in(common)).drop("_where"), tasks=tuple(common),
                            dropped={m: ts for m, ts in dropped.items() if ts})


def _require_columns(df: pl.DataFrame, cols: Iterable[str], label: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{label} frame lacks column(s) {missing}; it has {df.columns}")


def task_curves(
    scores: pl.DataFrame, needed: tuple[str, ...], label: str,
    not_scored: Iterable[tuple[str, str]] = (),
) -> dict[str, dict[str, float | None]]:
    """{task: {length: score}} for the needed lengths, after checking coverage and values. A cell in
    ``not_scored`` ((task, length): every generation skipped or invalid) without a row is None; any
    other missing cell is a ValueError naming the task and lengths."""
    _require_columns(scores, ("task", "length", "score"), label)
    curves: dict[str, dict[str, float]] = {}
    for task, length, score in scores.select("task", "length", "score").iter_rows():
        if length not in needed:
            continue  # e.g. 256k: built and scored, but outside the paper's averages
        if score is None or (isinstance(score, float) and math.isnan(score)):
            raise ValueError(f"{label}: task {task!r} has a null/NaN score at length {length!r}")
        curve = curves.setdefault(task, {})
        if length in curve:
            raise ValueError(f"{label}: task {task!r} has more than one score at length {length!r}")
        curve[length] = float(score)
    unscored = {(t, lv) for t, lv in not_scored if lv in needed}
    for task, _ in sorted(unscored):
        curves.setdefault(task, {})
    if not curves:
        raise ValueError(f"{label}: no rows at the lengths {list(needed)}")
    for task, curve in curves.items():
        missing = [lv for lv in needed if lv not in curve and (task, lv) not in unscored]
        if missing:
            raise ValueError(f"{label}: task {task!r} has no score at length(s) {missing}")
        for lv in needed:
            curve.setdefault(lv, None)
    return curves


def _mean(values: list[float | None], *, strict: bool) -> float | None:
    """Mean of ``values``: None when empty, or (``strict``) when any is None; else of those not None."""
    if strict and any(v is None for v in values):
        return None
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize(
    curves: dict[str, dict[str, float]],
    base_lengths: tuple[str, ...],
    long_lengths: tuple[str, ...],
    round_each: bool,
    allow_zero_base: bool,
) -> LongScoreSummary:
    """LongScore of ``curves`` (from :func:`task_curves`), tasks averaged per length first.

    ``round_each`` rounds each LC_l to 2 decimals before averaging (as the paper's code does);
    ``allow_zero_base`` gives null LongScores instead of :class:`ZeroBaseError` for a zero base.
    """
    tasks = tuple(curves)
    # Average the raw task scores per length first (spec §6.2 / §10.5), as longscore_table does; a length
    # where some task is not scored has no cross-task score (module docstring).
    s = {lv: _mean([curves[t][lv] for t in tasks], strict=True) for lv in (*base_lengths, *long_lengths)}
    base = _mean([s[lv] for lv in base_lengths], strict=False)
    avg_score = _mean([s[lv] for lv in long_lengths], strict=False)
    lc: dict[str, float | None]
    try:
        lc = {lv: None if base is None or s[lv] is None else long_score(base, s[lv]) for lv in long_lengths}
    except ZeroBaseError as exc:
        if not allow_zero_base:
            raise ZeroBaseError(f"tasks {list(tasks)}: {exc}") from exc
        lc = {lv: None for lv in long_lengths}
        avg_lc = None
    else:
        if round_each:
            lc = {lv: None if v is None else round(v, 2) for lv, v in lc.items()}
        avg_lc = _mean(list(lc.values()), strict=False)
    return LongScoreSummary(
        tasks=tasks,
        base_lengths=base_lengths,
        long_lengths=long_lengths,
        base_ability=base,
        scores=s,
        long_scores=lc,
        avg_score=avg_score,
        avg_long_score=avg_lc,
    )


def long_score_summary(
    scores: pl.DataFrame,
    base_lengths: Sequence[str],
    long_lengths: Sequence[str],
    *,
    round_each: bool = True,
) -> LongScoreSummary:
    """LongScore of the tasks in ``scores`` (columns ``task, length, score``; score 0-100, one
    row per task x length). Several tasks are averaged per length before LongScore is taken.

    Rows at other lengths are ignored. A task missing a base or long length raises ValueError;
    a zero Base Ability raises :class:`ZeroBaseError` (a ValueError).
    """
    base_lengths, long_lengths = check_lengths(base_lengths, long_lengths)
    curves = task_curves(scores, (*base_lengths, *long_lengths), "scores")
    return summarize(curves, base_lengths, long_lengths, round_each, allow_zero_base=False)


def long_scores_frame(
    per_instance: pl.DataFrame,
    base_lengths: Sequence[str],
    long_lengths: Sequence[str],
    metric: str,
    *,
    round_each: bool = True,
    on_zero_base: Literal["raise", "null"] = "raise",
    not_scored: Iterable[tuple[str, str]] = (),
) -> pl.DataFrame:
    """LONG_SCORES rows from per-instance scores (columns ``task, length, score``, score in [0, 1]).

    For each task (sorted by name), then for ``"overall"`` (tasks averaged per length first):
    one row per long length and one ``"avg"`` row. ``n_instances`` counts the instances behind
    the row: those at that length; for ``"avg"``, those at the base and long lengths together
    (both feed the averaged LongScore); summed over tasks for ``"overall"``.

    If the frame has a ``metric`` column, only rows of ``metric`` are used. Rows at lengths that
    are neither base nor long (e.g. 256k) are ignored. A task missing a base or long length raises
    ValueError naming it. A zero Base Ability raises unless ``on_zero_base="null"``, which writes a
    null ``long_score`` for that task (and keeps the raw scores). A (task, length) in ``not_scored`` (its
    generations all skipped or invalid) without rows gets null ``score`` / ``long_score`` and 0 instances
    (module docstring: how the cross-task row and the averages treat it).
    """
    not_scored = list(not_scored)
    if on_zero_base not in ("raise", "null"):
        raise ValueError(f"on_zero_base must be 'raise' or 'null', not {on_zero_base!r}")
    base_lengths, long_lengths = check_lengths(base_lengths, long_lengths)
    needed = (*base_lengths, *long_lengths)
    _require_columns(per_instance, ("task", "length", "score"), "per_instance")
    df = per_instance
    if "metric" in df.columns:
        df = df.filter(pl.col("metric") == metric)
    # Float cast: 0/1 integer scores are fine, and is_nan needs a float column.
    df = df.filter(pl.col("length").is_in(list(needed))).with_columns(pl.col("score").cast(pl.Float64))
    if df.is_empty() and not not_scored:
        raise ValueError(f"per_instance: no rows for metric {metric!r} at lengths {list(needed)}")
    score = pl.col("score")
    bad = df.filter(score.is_null() | score.is_nan() | (score < 0) | (score > 1))
    if not bad.is_empty():
        row = bad.row(0, named=True)
        raise ValueError(
            f"per_instance: {bad.height} score(s) are null or outside [0, 1], e.g. task {row['task']!r} "
            f"length {row['length']!r} score {row['score']!r}"
        )
    if OVERALL in df.get_column("task").unique().to_list():
        raise ValueError(f"per_instance: a task may not be named {OVERALL!r} (reserved for the cross-task rows)")

    per_length = (
        df.group_by("task", "length")
        .agg((pl.col("score").mean() * 100).alias("score"), pl.len().alias("n"))
        .sort("task", "length")
    )
    curves = task_curves(per_length, needed, "per_instance", not_scored)
    counts = {(t, lv): n for t, lv, n in per_length.select("task", "length", "n").iter_rows()}

    rows: list[dict] = []
    allow_zero = on_zero_base == "null"

    def emit(name: str, summary: LongScoreSummary, task_names: Iterable[str]) -> None:
        task_names = list(task_names)
        n = {lv: sum(counts.get((t, lv), 0) for t in task_names) for lv in needed}
        common = {
            "task": name,
            "base_lengths": list(base_lengths),
            "base_ability": summary.base_ability,
            "metric": metric,
        }
        for lv in long_lengths:
            rows.append(
                common
                | {
                    "length_level": lv,
                    "score": summary.scores[lv],
                    "long_score": summary.long_scores[lv],
                    "n_instances": n[lv],
                }
            )
        rows.append(
            common
            | {
                "length_level": AVG,
                "score": summary.avg_score,
                "long_score": summary.avg_long_score,
                "n_instances": sum(n.values()),
            }
        )

    for task in sorted(curves):
        emit(task, summarize({task: curves[task]}, base_lengths, long_lengths, round_each, allow_zero), [task])
    emit(OVERALL, summarize(curves, base_lengths, long_lengths, round_each, allow_zero), curves)
    return schemas.conform(pl.DataFrame(rows, schema=schemas.LONG_SCORES), "long_scores")


def rank_descending(values: Sequence[float | None]) -> list[int | None]:
    """Rank with higher = better (rank 1); ties share the smallest rank; None/NaN get None.

    Same as pandas ``Series.rank(ascending=False, method='min')`` (NaN kept as NaN).
    Example: ``rank_descending([-8.6, -7.5, -15.16, -13.9])`` -> ``[2, 1, 4, 3]``.
    """
    present = [v for v in values if v is not None and not math.isnan(v)]
    return [
        None if v is None or math.isnan(v) else 1 + sum(1 for w in present if w > v)
        for v in values
    ]


def _length_order(levels: list[str]) -> list[str]:
    # Numeric order (8k < 16k < 128k); fall back to first-seen order for odd labels.
    from lc_pipeline.config import level_tokens

    try:
        return sorted(levels, key=level_tokens)
    except ValueError:
        return levels


def leaderboard_frame(long_scores_by_model: pl.DataFrame) -> pl.DataFrame:
    """LEADERBOARD rows from LONG_SCORES rows plus a ``model`` column.

    Uses the ``task == "overall"`` rows: one leaderboard row per (model, metric), with ranks
    computed among the models of the same metric. Sorted by metric, then rank_long_score.
    """
    _require_columns(long_scores_by_model, ("model", *schemas.LONG_SCORES), "long_scores_by_model")
    overall = long_scores_by_model.filter(pl.col("task") == OVERALL)
    if overall.is_empty():
        return schemas.empty("leaderboard")

    out: list[dict] = []
    keys = overall.select("model", "metric").unique(maintain_order=True).iter_rows()
    for model, metric in keys:
        grp = overall.filter((pl.col("model") == model) & (pl.col("metric") == metric))
        avg = grp.filter(pl.col("length_level") == AVG)
        if avg.height != 1:
            raise ValueError(f"model {model!r} metric {metric!r}: expected one overall 'avg' row, found {avg.height}")
        per_len = grp.filter(pl.col("length_level") != AVG)
        levels = per_len.get_column("length_level").to_list()
        if len(set(levels)) != len(levels):
            raise ValueError(f"model {model!r} metric {metric!r}: duplicate overall rows for a length level")
        by_level = dict(zip(levels, per_len.get_column("score").to_list()))
        a = avg.row(0, named=True)
        out.append(
            {
                "model": model,
                "metric": metric,
                "base_ability": a["base_ability"],
                "old_metric": a["score"],
                "long_score": a["long_score"],
                "scores_by_length": json.dumps({lv: by_level[lv] for lv in _length_order(levels)}),
                "n_instances": a["n_instances"],
            }
        )

    for metric in {r["metric"] for r in out}:
        grp = [r for r in out if r["metric"] == metric]
        for col, rank_col in (("old_metric", "rank_old_metric"), ("long_score", "rank_long_score")):
            for r, rank in zip(grp, rank_descending([r[col] for r in grp])):
                r[rank_col] = rank

    df = pl.DataFrame(out, schema={**schemas.LEADERBOARD})
    df = df.sort(["metric", "rank_long_score", "model"], nulls_last=True)
    return schemas.conform(df, "leaderboard")


JUDGE_METRIC_PREFIX = "judge:"


def judge_leaderboard(
    judge_scores: pl.DataFrame, base_lengths: Sequence[str], long_lengths: Sequence[str]
) -> tuple[pl.DataFrame, list[str]]:
    """LEADERBOARD rows for the judge, one per (model, rubric) as metric ``"judge:<rubric>"``,
    to stand next to the metric rows; and the (model, rubric) pairs left out, with the reason.

    ``judge_scores``: JUDGE_SCORES rows with ``model`` and ``length`` columns. Unparsed verdicts
    (a null score: HELMET and Loong leave them out; 100-LongBench's official protocol scores them 0, so those
    rows carry a score) are left out of the means; LongScore is taken as for metrics. A
    pair whose verdicts do not cover every base and long length is reported, not guessed.
    """
    _require_columns(judge_scores, ("model", "length", "task", "rubric", "score", "parse_status"), "judge_scores")
    ok = judge_scores.filter(pl.col("score").is_not_null())
    frames, skipped = [], []
    for model, rubric in ok.select("model", "rubric").unique().sort("model", "rubric").iter_rows():
        rows = ok.filter((pl.col("model") == model) & (pl.col("rubric") == rubric)).select("task", "length", "score")
        metric = JUDGE_METRIC_PREFIX + rubric
        try:
            scores = long_scores_frame(rows, base_lengths, long_lengths, metric, on_zero_base="null")
        except ValueError as exc:
            skipped.append(f"{model}/{rubric}: {exc}")
            continue
        frames.append(scores.with_columns(model=pl.lit(model)))
    if not frames:
        return schemas.empty("leaderboard"), skipped
    return leaderboard_frame(pl.concat(frames)), skipped


# --------------------------------------------------------------------------- the headline (judge + metrics)
#
# 100-LongBench's headline (spec 100longbench.md §5.1-§5.2, §6.2, §10.7; Tables 4/7) is one 8-task
# LongScore in which the QA and summarization tasks are scored by the LLM judge and the other four by
# their accuracy metrics. Which source a task takes is its task file's, never a branch on its name, and the
# same rule benchmark_scores follows (``score.benchmark_scores.score_source``): a task that declares a judge
# ``rubric`` is scored by that rubric's ``judge_scores`` rows when it has no metric or its benchmark's
# ``headline.source`` is ``judge`` (100-LongBench's task file says so); any other task by its first declared
# metric in ``metric_scores``.


class HeadlineUnavailable(ValueError):
    """The headline cannot be computed yet (e.g. a judged task has no judge rows at some length)."""


@dataclass(frozen=True)
class ScoreSource:
    """Where one task's headline score comes from: a ``metric_scores`` metric label (``kind="metric"``)
    or a ``judge_scores`` rubric (``kind="judge"``)."""

    kind: Literal["metric", "judge"]
    name: str

    def __str__(self) -> str:
        return self.name if self.kind == "metric" else JUDGE_METRIC_PREFIX + self.name


def task_score_source(spec, headline=None, overrides: dict[str, str] | None = None) -> ScoreSource | None:
    """The headline source of a task (a ``TaskSpec``) in its benchmark's ``headline`` (a ``Headline``; None:
    the defaults): its rubric (the task file's ``rubric``, or the judge's ``rubric_overrides``) when it is
    judge-scored by ``score.benchmark_scores.score_source``, else its first declared metric; None with neither."""
    from lc_pipeline.score.benchmark_scores import headline_metric, score_source
    from lc_pipeline.score.judge import rubric_for
    from lc_pipeline.tasks.spec import Headline

    rubric = rubric_for(spec.benchmark, spec.name, spec.rubric, overrides)
    if rubric is not None and score_source(spec.model_copy(update={"rubric": rubric}), headline or Headline()) == "judge":
        return ScoreSource("judge", rubric)
    label = headline_metric(spec)
    return None if label is None else ScoreSource("metric", label)


def headline_sources(specs: Iterable, tasks: Iterable[str], overrides: dict[str, str] | None = None,
                     headlines: dict | None = None) -> dict[str, ScoreSource]:
    """{task: its headline source} for the scored task names, each resolved among ``specs`` (the
    ``TaskSpec``s the config builds: ``construct.builders.build_plan``) with its benchmark's ``headlines``
    entry (``TaskCatalog.headlines``). A name no spec or several specs carry (a QA-suite item's task,
    resolved through its benchmark's catch-all; two benchmarks' tasks of one name) or a task with neither
    rubric nor metric is :class:`HeadlineUnavailable`."""
    by_name: dict[str, list] = {}
    for spec in specs:
        if spec.qualified_name not in {s.qualified_name for s in by_name.get(spec.name, [])}:
            by_name.setdefault(spec.name, []).append(spec)
    out: dict[str, ScoreSource] = {}
    for task in sorted(set(tasks)):
        found = by_name.get(task, [])
        if len(found) != 1:
            why = (f"built by several benchmarks ({', '.join(s.benchmark for s in found)})" if found
                   else "not a task the config builds by name")
            raise HeadlineUnavailable(f"headline: task {task!r} is {why}")
        source = task_score_source(found[0], (headlines or {}).get(found[0].benchmark), overrides)
        if source is None:
            raise HeadlineUnavailable(f"headline: task {found[0].qualified_name!r} declares neither a rubric "
                                      "nor a metric")
        out[task] = source
    return out


def headline_rows(
    metric_scores: pl.DataFrame,
    judge_scores: pl.DataFrame,
    sources: dict[str, ScoreSource],
    dropped: Iterable[str] = (),
) -> pl.DataFrame:
    """Per-instance ``task, length, item_id, instance_id, score`` rows of the headline (``instance_id`` null
    where the frames lack the column): each task's rows from its source, less the items in ``dropped`` (the prior-knowledge filter's, spec §5.4: out of numerator and
    denominator at every length, judge rows as metric rows). Judge verdicts that could not be parsed
    are left out (as ``judge_leaderboard`` does, and as HELMET and Loong do)."""
    cols = ["task", "length", "item_id", "instance_id", "score"]
    _require_columns(metric_scores, ("task", "length", "item_id", "metric", "score"), "metric_scores")
    if any(s.kind == "judge" for s in sources.values()):
        _require_columns(judge_scores, ("task", "length", "item_id", "rubric", "parse_status", "score"),
                         "judge_scores")
    frames = []
    for task, src in sorted(sources.items()):
        if src.kind == "metric":
            rows = metric_scores.filter((pl.col("task") == task) & (pl.col("metric") == src.name))
        else:
            rows = judge_scores.filter((pl.col("task") == task) & (pl.col("rubric") == src.name)
                                       & pl.col("score").is_not_null())
        instance = pl.col("instance_id") if "instance_id" in rows.columns else pl.lit(None, pl.String).alias("instance_id")
        frames.append(rows.select(pl.col(cols[:3]), instance, pl.col("score").cast(pl.Float64)))
    out = pl.concat(frames) if frames else pl.DataFrame(schema={c: pl.String for c in cols[:4]} | {"score": pl.Float64})
    left_out = list(dropped)
    return out.filter(~pl.col("item_id").is_in(left_out)) if left_out else out


def headline_gaps(rows: pl.DataFrame, sources: dict[str, ScoreSource], lengths: Sequence[str],
                  not_scored: Iterable[tuple[str, str]] = ()) -> list[str]:
    """``"task@length (source)"`` for every (task, length) the headline needs and ``rows`` lack (a cell
    ``not_scored``, its generations all skipped or invalid, lacks nothing)."""
    have = set(rows.select("task", "length").unique().iter_rows()) | set(not_scored)
    return [f"{t}@{lv} ({sources[t]})" for t in sorted(sources) for lv in lengths if (t, lv) not in have]


def headline_long_scores(
    metric_scores: pl.DataFrame,
    judge_scores: pl.DataFrame,
    sources: dict[str, ScoreSource],
    base_lengths: Sequence[str],
    long_lengths: Sequence[str],
    dropped: Iterable[str] = (),
    *,
    round_each: bool = True,
    not_scored: Iterable[tuple[str, str]] = (),
) -> pl.DataFrame:
    """LONG_SCORES rows (metric :data:`HEADLINE`) of the headline: per task, then ``overall``.

    Each task's per-length score S_l is 100 x the mean of its source's instance scores (judge ``score``
    is the rubric's value mapped to [0, 1]: lb100_qa fluency x correctness / 6, lb100_summ fluency x
    precision); tasks are averaged per length first, Base Ability is the mean over ``base_lengths`` and
    LongScore is taken on that averaged curve (spec §6.2-§6.3), as :func:`long_scores_frame` does. A task
    with no row at some base or long length is :class:`HeadlineUnavailable` naming them, unless the cell is
    ``not_scored`` (null there, as :func:`long_scores_frame`); a zero Base Ability gives a null LongScore.
    """
    base_lengths, long_lengths = check_lengths(base_lengths, long_lengths)
    not_scored = [cell for cell in not_scored if cell[0] in sources]
    rows = headline_rows(metric_scores, judge_scores, sources, dropped)
    gaps = headline_gaps(rows, sources, (*base_lengths, *long_lengths), not_scored)
    if gaps:
        raise HeadlineUnavailable(f"headline: no scores for {', '.join(gaps)}")
    return long_scores_frame(rows.select("task", "length", "score"), base_lengths, long_lengths, HEADLINE,
                             round_each=round_each, on_zero_base="null", not_scored=not_scored)
