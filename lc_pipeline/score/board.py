"""The leaderboard over several models (non-released configs): every (metric) row on the instances every model
of that metric has a score on, with a bootstrap interval and the shares of what was not answered (issue 21).

Pairing. A model that skipped a prompt (truncation policy ``skip``) or whose thinking ran out (``invalid``) has
no score on that instance; ranking it against a model that answered it compares different items. So each
metric's rows are computed on the common instances: those every model of the metric has a score on (its
metric_scores rows, its judge rows parsed ok). ``n_instances`` counts the model's instances behind the row (as
long_scores does) and ``n_unpaired`` its scored instances left out because some other model lacks them, or
because they are no longer among the config's instances (``current``: records removed from the data since the model
ran, issue 31; the leaderboard holds the current records only).

Prior knowledge (100-LongBench, spec 100longbench.md §5.4). The paper drops the items a model answers without
context from *that model's* scores only; we keep it so: the common set is taken before drops, then each model
leaves out its own dropped items. One model's memory does not remove an item from the others' scores; models
with drops are then compared on the common items less their own drops, as in the paper's tables.

Intervals (score/confidence.py). A percentile bootstrap over items: an item's instances at every length move
together, item ids are resampled within each task, seeded by ``rng_for("leaderboard", metric, task)`` so every
model of a metric gets the same resamples (paired). Each draw recomputes the row's formula (score/longscore.py):
per task and length the mean over the resampled instances, tasks averaged per length first, Base Ability over
the scored base lengths, LC_l rounded to 2 decimals, the mean over the scored long lengths. Per task, a matrix
items x lengths of score sums and counts; (draws x items) resample counts @ it gives every draw at once. The
interval is of ``long_score``, or of ``old_metric`` where the row has no LongScore (zero Base Ability).

Not scored. A (task, length) cell without common instances (a model skipped every prompt there) gets a null
score on the board and is named in the notes; the averages run over the lengths that have one (as long_scores
does for a model alone). A model whose rows lack a cell that its generations do not explain (not run) is left
off that metric's board, with the reason.

Pure logic (polars, numpy), no Dagster; assets/reports.py wires it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.score import confidence
from lc_pipeline.score.longscore import OVERALL, check_lengths, leaderboard_frame, long_scores_frame

__all__ = [
    "BOARD_SEED",
    "ROW_COLUMNS",
    "STATUS_COLUMNS",
    "longscore_draws",
    "not_scored_cells",
    "not_scored_lengths",
    "paired_board",
    "status_frame",
    "status_shares",
]

BOARD_SEED = "leaderboard"  # first part of every rng_for(...) of the board's intervals
ROW_COLUMNS = ("model", "metric", "task", "length", "item_id", "instance_id", "score")
STATUS_COLUMNS = ("model", "task", "length", "status", "truncated")


# --------------------------------------------------------------------------- what was not answered


def status_frame(generations: pl.DataFrame, instance_tasks: pl.DataFrame) -> pl.DataFrame:
    """``model, task, length, status, truncated`` per generation: GENERATIONS rows (with their ``model`` and
    ``length`` partition columns) joined to their instance's task (``instance_id, task``). A generation whose
    instance is not in ``instance_tasks`` is a ValueError naming it (the lake is inconsistent)."""
    for frame, cols, label in ((generations, ("model", "length", "instance_id", "status", "truncated"), "generations"),
                               (instance_tasks, ("instance_id", "task"), "instances")):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{label} frame lacks column(s) {missing}; it has {frame.columns}")
    joined = generations.select("model", "length", "instance_id", "status", "truncated").join(
        instance_tasks.select("instance_id", "task").unique("instance_id"), on="instance_id", how="left")
    orphan = joined.filter(pl.col("task").is_null())
    if orphan.height:
        row = orphan.row(0, named=True)
        raise ValueError(f"generations: {orphan.height} row(s) answer instances the instances table lacks, e.g. "
                         f"model {row['model']!r} length {row['length']!r} instance_id {row['instance_id']!r}")
    return joined.select(STATUS_COLUMNS)


def not_scored_cells(statuses: pl.DataFrame) -> dict[str, set[tuple[str, str]]]:
    """{model: {(task, length)}}: the cells whose every generation is skipped or invalid (``schemas.NOT_SCORED``):
    they have no score by design. A cell without generations is not in it (not run is not 'not scored')."""
    cells = (statuses.group_by("model", "task", "length")
             .agg(pl.col("status").is_in(list(schemas.NOT_SCORED)).all().alias("none")))
    out: dict[str, set[tuple[str, str]]] = {}
    for model, task, length, none in cells.iter_rows():
        if none:
            out.setdefault(model, set()).add((task, length))
    return out


def not_scored_lengths(statuses: pl.DataFrame) -> dict[str, set[str]]:
    """{model: {length}}: the lengths at which the model has generations and every one is skipped or invalid."""
    per = (statuses.group_by("model", "length")
           .agg(pl.col("status").is_in(list(schemas.NOT_SCORED)).all().alias("none")))
    out: dict[str, set[str]] = {}
    for model, length, none in per.iter_rows():
        if none:
            out.setdefault(model, set()).add(length)
    return out


def status_shares(statuses: pl.DataFrame | None, model: str, tasks: Iterable[str], lengths: Iterable[str]
                  ) -> dict[str, float | None]:
    """``skipped_share, truncated_share, invalid_share`` of ``model``'s generations of ``tasks`` at ``lengths``
    (all None when it has none there, or ``statuses`` is None: unknown, never 0)."""
    keys = ("skipped_share", "truncated_share", "invalid_share")
    if statuses is None:
        return dict.fromkeys(keys)
    rows = statuses.filter((pl.col("model") == model) & pl.col("task").is_in(list(tasks))
                           & pl.col("length").is_in(list(lengths)))
    if rows.is_empty():
        return dict.fromkeys(keys)
    n = rows.height
    return {
        "skipped_share": rows.filter(pl.col("status") == "skipped").height / n,
        "truncated_share": rows.filter(pl.col("truncated").fill_null(False)).height / n,
        "invalid_share": rows.filter(pl.col("status") == "invalid").height / n,
    }


# --------------------------------------------------------------------------- the bootstrap


def _task_matrices(rows: pl.DataFrame, items: Sequence[str], lengths: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(sums, counts), items x lengths, of one task's ``item_id, length, score`` rows (items outside ``items``
    and lengths outside ``lengths`` ignored)."""
    item_at = {it: k for k, it in enumerate(items)}
    length_at = {lv: k for k, lv in enumerate(lengths)}
    sums = np.zeros((len(items), len(lengths)))
    counts = np.zeros((len(items), len(lengths)))
    for item, length, score in rows.select("item_id", "length", "score").iter_rows():
        i, j = item_at.get(item), length_at.get(length)
        if i is not None and j is not None:
            sums[i, j] += score
            counts[i, j] += 1
    return sums, counts


def longscore_draws(
    matrices: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    n_base: int,
    *,
    round_each: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Draws of (LongScore, old metric) of one row: ``matrices`` holds per task (resample counts draws x items,
    sums items x lengths, counts items x lengths), the lengths being the base lengths (the first ``n_base``)
    then the long ones. The row's formula (module docstring): a length is in the row where every task has an
    instance there (in the full data); a draw without an instance in some cell of the row is NaN (left out of
    the interval). With resample counts of ones (the data itself) the draws equal the row's numbers."""
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.stack([100.0 * (r @ s) / (r @ c) for r, s, c in matrices], axis=1)  # draws x tasks x lengths
        scored = np.array([all(c[:, j].sum() > 0 for _, _, c in matrices) for j in range(means.shape[2])])
        curve = means.mean(axis=1)  # tasks averaged per length first
        base_cols = [j for j in range(n_base) if scored[j]]
        long_cols = [j for j in range(n_base, means.shape[2]) if scored[j]]
        draws = means.shape[0]
        base = curve[:, base_cols].mean(axis=1) if base_cols else np.full(draws, np.nan)
        old = curve[:, long_cols].mean(axis=1) if long_cols else np.full(draws, np.nan)
        if not long_cols:
            return np.full(draws, np.nan), old
        lc = 100.0 * (curve[:, long_cols] - base[:, None]) / base[:, None]
        if round_each:
            lc = np.round(lc, 2)
        return lc.mean(axis=1), old


# --------------------------------------------------------------------------- the board


def _conform_rows(rows: pl.DataFrame) -> pl.DataFrame:
    missing = [c for c in ROW_COLUMNS if c not in rows.columns]
    if missing:
        raise ValueError(f"board rows lack column(s) {missing}; they have {rows.columns}")
    return rows.select(pl.col(c) for c in ROW_COLUMNS).with_columns(pl.col("score").cast(pl.Float64))


def paired_board(
    rows: pl.DataFrame,
    base_lengths: Sequence[str],
    long_lengths: Sequence[str],
    *,
    dropped: Mapping[str, Iterable[str]] | None = None,
    not_scored: Mapping[str, Iterable[tuple[str, str]]] | None = None,
    statuses: pl.DataFrame | None = None,
    draws: int = confidence.DRAWS,
    round_each: bool = True,
    current: Iterable[str] | None = None,
) -> tuple[pl.DataFrame, list[str], list[str]]:
    """LEADERBOARD rows of every (model, metric) in ``rows``, each metric on its models' common instances.

    ``rows``: per-instance scores in [0, 1], columns ``model, metric, task, length, item_id, instance_id, score``
    (metric rows, the headline's, judge rows as ``judge:<rubric>``), before any prior-knowledge drop;
    ``dropped``: {model: item ids its prior-knowledge filter dropped}; ``not_scored``: {model: (task, length)
    cells whose generations were all skipped or invalid} (:func:`not_scored_cells`); ``statuses``:
    :func:`status_frame` for the shares (None: shares null); ``current``: the instance ids of the config's
    instances now in the lake (None: every instance of ``rows``): rows of other instances (records removed from the
    data since a model ran, issue 31) are left out as unpaired ones are. Returns (board, notes naming the cells not scored
    on the board, the (model, metric) pairs left out with the reason). With one model, every row equals
    ``leaderboard_frame`` of its own long_scores (nothing to pair), plus the interval and shares.
    """
    base_lengths, long_lengths = check_lengths(base_lengths, long_lengths)
    needed = (*base_lengths, *long_lengths)
    rows = _conform_rows(rows).filter(pl.col("length").is_in(list(needed)))
    dropped = {m: set(items) for m, items in (dropped or {}).items()}
    not_scored = {m: set(cells) for m, cells in (not_scored or {}).items()}
    frames, notes, left_out = [], [], []
    for metric in sorted(rows["metric"].unique()):
        board, metric_notes, metric_left_out = _metric_board(
            rows.filter(pl.col("metric") == metric), metric, base_lengths, long_lengths, dropped, not_scored,
            statuses, draws, round_each, None if current is None else set(current))
        notes += metric_notes
        left_out += metric_left_out
        if board is not None:
            frames.append(board)
    if not frames:
        return schemas.empty("leaderboard"), notes, left_out
    out = pl.concat(frames).sort(["metric", "rank_long_score", "model"], nulls_last=True)
    return schemas.conform(out, "leaderboard"), notes, left_out


def _metric_board(rows, metric, base_lengths, long_lengths, dropped, not_scored, statuses, draws, round_each,
                  current=None):
    needed = (*base_lengths, *long_lengths)
    tasks = sorted(rows["task"].unique())
    grid = {(t, lv) for t in tasks for lv in needed}
    notes: list[str] = []
    left_out: list[str] = []
    by_model: dict[str, pl.DataFrame] = {}
    for (model,), own in rows.group_by("model", maintain_order=True):
        gaps = grid - set(own.select("task", "length").unique().iter_rows()) - not_scored.get(model, set())
        if gaps:
            named = ", ".join(f"{t}@{lv}" for t, lv in sorted(gaps))
            left_out.append(f"{model}/{metric}: no scores at {named} and its generations there are not all "
                            "skipped or invalid (not run yet?)")
            continue
        by_model[model] = own
    if not by_model:
        return None, notes, left_out
    common = set.intersection(*(set(own["instance_id"]) for own in by_model.values()))
    if current is not None:
        common &= current
    common_rows = next(iter(by_model.values())).filter(pl.col("instance_id").is_in(list(common)))
    have = set(common_rows.select("task", "length").unique().iter_rows())
    empty_cells = sorted(grid - have)
    if empty_cells:
        notes.append(f"{metric}: not scored at {', '.join(f'{t}@{lv}' for t, lv in empty_cells)} (every generation "
                     "of some model there skipped or invalid): null there, averages over the scored lengths")
    items = {t: sorted(common_rows.filter(pl.col("task") == t)["item_id"].unique()) for t in tasks}
    resamples = {t: confidence.resample_counts(len(items[t]), draws, confidence.rng_for(BOARD_SEED, metric, t))
                 for t in tasks if items[t]}

    per_model, extras = [], {}
    for model, own in sorted(by_model.items()):
        kept = own.filter(~pl.col("item_id").is_in(list(dropped.get(model, ()))))
        paired = kept.filter(pl.col("instance_id").is_in(list(common)))
        try:
            scores = long_scores_frame(paired.select("task", "length", "score"), base_lengths, long_lengths, metric,
                                       round_each=round_each, on_zero_base="null", not_scored=empty_cells)
        except ValueError as exc:
            left_out.append(f"{model}/{metric}: {exc}")
            continue
        per_model.append(scores.with_columns(model=pl.lit(model)))
        matrices = [(resamples[t], *_task_matrices(paired.filter(pl.col("task") == t), items[t], needed))
                    for t in tasks if t in resamples]
        lc_draws, old_draws = longscore_draws(matrices, len(base_lengths), round_each=round_each) if matrices \
            else (np.array([np.nan]), np.array([np.nan]))
        extras[model] = {
            "lc": confidence.percentile_interval(lc_draws),
            "old": confidence.percentile_interval(old_draws),
            "n_unpaired": kept.height - paired.height,
            **status_shares(statuses, model, tasks, needed),
        }
    if not per_model:
        return None, notes, left_out
    board = leaderboard_frame(pl.concat(per_model).filter(pl.col("task") == OVERALL))
    filled = []
    for row in board.iter_rows(named=True):
        extra = extras[row["model"]]
        low, high = extra["lc"] if row["long_score"] is not None else extra["old"]
        filled.append(row | {"ci_low": low, "ci_high": high, "n_unpaired": extra["n_unpaired"],
                             **{k: extra[k] for k in ("skipped_share", "truncated_share", "invalid_share")}})
    return pl.DataFrame(filled, schema=schemas.LEADERBOARD), notes, left_out



# --------------------------------------------------------------------------- display


def _interval(low, high) -> str:
    return "n/a" if low is None or high is None else f"[{low:.2f}, {high:.2f}]"


def _shares(row: Mapping) -> str:
    values = [row.get(k) for k in ("skipped_share", "truncated_share", "invalid_share")]
    return "n/a" if any(v is None for v in values) else "/".join(f"{v:.0%}" for v in values)


def released_board_display(board: pl.DataFrame) -> tuple[list[str], list[tuple]]:
    """(columns, rows) of a released config's leaderboard (each published table's overall, no LongScore) as
    ``lcp demo`` prints it: the score with its 95% interval and the shares, as :func:`board_display` does; the
    protocol of each row (ranked among its own protocol's rows) and, for a null score, what it lacks
    (``missing_groups``: ``<group>@<length>``)."""
    board = board.sort("metric", *(["protocol"] if "protocol" in board.columns else []), "rank_old_metric",
                       nulls_last=True)
    columns = ["metric", "protocol", "model", "score", "ci95", "rank", "scores_by_length", "n_instances",
               "skip/trunc/invalid", "missing"]
    rows = [(r["metric"], r.get("protocol") or "ours", r["model"], r["old_metric"],
             _interval(r.get("ci_low"), r.get("ci_high")), r["rank_old_metric"], r["scores_by_length"],
             r["n_instances"], _shares(r), ", ".join(r.get("missing_groups") or []))
            for r in board.iter_rows(named=True)]
    return columns, rows


def board_display(board: pl.DataFrame) -> tuple[list[str], list[tuple], list[str]]:
    """(columns, rows, header lines) of the leaderboard as ``lcp demo`` prints it: the scores, the 95% interval
    of LongScore (of the old metric where there is none) as ``[low, high]``, the skipped / truncated / invalid
    shares as percentages, and, with several models of a metric, "paired on N common instances" per metric
    (N: the largest n_instances, the count before any model's own prior-knowledge drops)."""
    board = board.sort("metric", "rank_long_score", nulls_last=True)
    columns = ["metric", "model", "base_ability", "old_metric", "long_score", "ci95", "rank_old_metric",
               "rank_long_score", "n_instances", "n_unpaired", "skip/trunc/invalid"]
    rows = [(r["metric"], r["model"], r["base_ability"], r["old_metric"], r["long_score"],
             _interval(r.get("ci_low"), r.get("ci_high")), r["rank_old_metric"], r["rank_long_score"],
             r["n_instances"], r.get("n_unpaired"), _shares(r)) for r in board.iter_rows(named=True)]
    lines = []
    for metric, models, common in (board.group_by("metric").agg(pl.len(), pl.col("n_instances").max())
                                   .sort("metric").iter_rows()):
        if models > 1:
            lines.append(f"{metric}: {models} models paired on {common} common instances")
    return columns, rows, lines
