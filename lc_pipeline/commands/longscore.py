"""`lcp tools longscore`: 100-LongBench's LongScore for results computed elsewhere.

    lcp tools longscore --scores FILE.csv [--base-lengths 2k,4k,6k] [--long-lengths 8k,16k,32k,64k,128k]
                        [--common-tasks] [--scale auto|1|100] [--format table|json]

FILE.csv has the columns ``task, model, length, score``: one row per task, model and length
level, ``score`` the task score at that length on any fixed scale (the paper's 0-100). Length
labels are free text (``base``, ``4k``, ``8k``, ``8192``...) and must match the ones given in
the options. Defaults: the base lengths are ``base`` when the file has that label, else the
paper's 2k, 4k, 6k; the long lengths are the paper's 8k, 16k, 32k, 64k, 128k. Rows at other
lengths (e.g. 256k) are ignored.

Per model (see :mod:`lc_pipeline.score.longscore` for the formulas): Base Ability (mean over
the base lengths of the task-averaged score), LC_l = 100 (S_l - Base) / Base per long length
(tasks averaged per length first, LC_l rounded to 2 decimals as the paper's code does), the
average LC (LongScore), the average raw score over the long lengths (the old metric), and the
ranks by LongScore, by the old metric and by Base Ability (descending, ties share the smallest
rank). A model whose Base Ability is 0 has no LongScore (null) and no LongScore rank.

Only comparable models are ranked (issue 22; the rules are :func:`lc_pipeline.score.longscore.check_score_values`
and :func:`~lc_pipeline.score.longscore.comparable_scores`): every score finite, >= 0 and <= 100; one row per task,
model and length; every model with the same tasks (``--common-tasks`` ranks on the tasks every model has instead,
and says on stderr which tasks it used and which it dropped per model; the JSON output has them under
``common_tasks``); every model on one scale (``--scale auto``, the default, refuses a model whose scores are all
<= 1 beside one with scores above 1; ``--scale 100`` / ``--scale 1`` declare the scale instead). Each refusal
exits non-zero naming the line of the CSV, the model, the task and the column, or the models and tasks.
``--format json`` is strict JSON: a number that is undefined is null, never NaN or Infinity.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import polars as pl

from lc_pipeline.commands.options import format_option
from lc_pipeline.score.longscore import (
    SCALES,
    ZeroBaseError,
    check_lengths,
    check_score_values,
    comparable_scores,
    rank_descending,
    summarize,
    task_curves,
)

PAPER_BASE = ("2k", "4k", "6k")
PAPER_LONG = ("8k", "16k", "32k", "64k", "128k")


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise click.BadParameter("expected a comma-separated list of length labels, e.g. 8k,16k")
    return items


def read_scores(path: str | Path) -> pl.DataFrame:
    """The ``task, model, length, score`` CSV; labels read as text, scores as floats, and ``line``: each row's
    line in the file (the header is line 1), for the messages. An empty file, or one with a header and no rows,
    is an error."""
    if Path(path).stat().st_size == 0:
        raise ValueError(f"{path}: the file is empty; expected the header task,model,length,score and one row per "
                         "task, model and length")
    try:
        df = pl.read_csv(path, infer_schema=False)
    except Exception as exc:  # polars raises several error types for unreadable CSVs
        raise ValueError(f"{path}: cannot read the CSV: {exc}") from exc
    df = df.rename({c: c.strip() for c in df.columns})
    need = ["task", "model", "length", "score"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected {need}, got {df.columns}")
    df = df.select([pl.col(c).str.strip_chars() for c in need])
    try:
        df = df.with_columns(pl.col("score").cast(pl.Float64, strict=True))
    except Exception as exc:
        raise ValueError(f"{path}: the score column must be numeric: {exc}") from exc
    if df.is_empty():
        raise ValueError(f"{path}: no score rows below the header; expected one row per task, model and length")
    df = df.with_row_index("line", offset=2).with_columns(pl.col("line").cast(pl.Int64))
    empty = df.filter(pl.any_horizontal(pl.col(need).is_null()))
    if empty.height:
        row = empty.row(0, named=True)
        raise ValueError(f"{path}: {empty.height} row(s) with an empty field, e.g. line {row.pop('line')}: {row}")
    return df.select(*need, "line")


def report(
    scores: pl.DataFrame,
    base_lengths: list[str] | None = None,
    long_lengths: list[str] | None = None,
    *,
    round_each: bool = True,
    common_tasks: bool = False,
    scale: str = "auto",
    label: str = "scores",
) -> dict:
    """LongScore per model from a ``task, model, length, score`` frame (see the module docstring); ``label``
    (the file) starts the messages. With ``common_tasks`` the result has ``common_tasks``: the tasks ranked on
    and, per model, those dropped."""
    check_score_values(scores, scale=scale, label=label)
    labels = set(scores["length"].unique().to_list())
    if base_lengths is None:
        base_lengths = ["base"] if "base" in labels else list(PAPER_BASE)
    if long_lengths is None:
        long_lengths = list(PAPER_LONG)
    base, long = check_lengths(base_lengths, long_lengths)
    absent = [lv for lv in (*base, *long) if lv not in labels]
    if absent:
        raise ValueError(
            f"length(s) {absent} do not occur in the scores (labels present: {sorted(labels)}); "
            "pass --base-lengths/--long-lengths"
        )
    comparable = comparable_scores(scores, (*base, *long), common_tasks=common_tasks, scale=scale, label=label)
    scores = comparable.scores
    rows = []
    for model in sorted(scores["model"].unique().to_list()):
        part = scores.filter(pl.col("model") == model)
        curves = task_curves(part, (*base, *long), f"model {model!r}")
        try:
            s = summarize(curves, base, long, round_each, allow_zero_base=False)
        except ZeroBaseError:
            s = summarize(curves, base, long, round_each, allow_zero_base=True)
        rows.append(
            {
                "model": model,
                "tasks": list(s.tasks),
                "base_ability": s.base_ability,
                "scores": {lv: s.scores[lv] for lv in long},
                "long_scores": dict(s.long_scores),
                "avg_long_score": s.avg_long_score,
                "avg_score": s.avg_score,
            }
        )
        numbers = [s.base_ability, s.avg_score, s.avg_long_score, *s.scores.values(), *s.long_scores.values()]
        if any(v is not None and not math.isfinite(v) for v in numbers):
            raise ValueError(f"{label}: model {model!r}: LongScore is not a finite number (Base Ability "
                             f"{s.base_ability!r} is too close to 0 for 100 x (S_l - B) / B)")
    for key, rank_key in (("avg_long_score", "rank_long_score"), ("avg_score", "rank_old_metric"),
                          ("base_ability", "rank_base_ability")):
        for r, rank in zip(rows, rank_descending([r[key] for r in rows])):
            r[rank_key] = rank
    rows.sort(key=lambda r: (r["rank_long_score"] is None, r["rank_long_score"] or 0, r["model"]))
    result = {"base_lengths": list(base), "long_lengths": list(long), "models": rows}
    if common_tasks:
        result["common_tasks"] = {"tasks": list(comparable.tasks),
                                  "dropped": {m: list(ts) for m, ts in comparable.dropped.items()}}
    return result


def common_tasks_note(result: dict) -> str:
    """What ``--common-tasks`` ranked on and left out, for stderr and the table."""
    info = result["common_tasks"]
    head = f"--common-tasks: ranked on the {len(info['tasks'])} task(s) every model has: {', '.join(info['tasks'])}"
    if not info["dropped"]:
        return head + "; no task dropped (every model has the same tasks)"
    return head + "; dropped: " + "; ".join(f"model {m!r}: {', '.join(ts)}" for m, ts in info["dropped"].items())


def _table(result: dict) -> str:
    long = result["long_lengths"]
    head = ["model", "base", *[f"LC {lv}" for lv in long], "avg LC", "avg score", "rank LC", "rank old", "rank base"]

    def num(v) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    body = [
        [r["model"], num(r["base_ability"]), *[num(r["long_scores"][lv]) for lv in long], num(r["avg_long_score"]),
         num(r["avg_score"]), str(r["rank_long_score"] or "n/a"), str(r["rank_old_metric"]), str(r["rank_base_ability"])]
        for r in result["models"]
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(head, widths)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    lines.append(f"base lengths {','.join(result['base_lengths'])}; long lengths {','.join(long)}; "
                 f"LC = 100*(S_l - base)/base, tasks averaged per length first")
    if "common_tasks" in result:
        lines.append(common_tasks_note(result))
    return "\n".join(lines)


@click.command("longscore")
@click.option("--scores", "scores_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="CSV with columns task, model, length, score")
@click.option("--base-lengths", default=None, help="comma-separated base length labels (default: base, else 2k,4k,6k)")
@click.option("--long-lengths", default=None, help="comma-separated long length labels (default: 8k,16k,32k,64k,128k)")
@click.option("--common-tasks", is_flag=True, default=False,
              help="rank on the tasks every model has (named on stderr, with the tasks dropped per model) instead of "
                   "refusing models with different task sets")
@click.option("--scale", type=click.Choice(list(SCALES)), default="auto", show_default=True,
              help="the scores' scale: auto refuses a model whose scores are all <= 1 beside one with scores above 1; "
                   "100 or 1 declares it (scores above it are refused)")
@format_option("table", "json")
def longscore(scores_path: str, base_lengths: str | None, long_lengths: str | None, common_tasks: bool, scale: str,
              fmt: str) -> None:
    """LongScore (100-LongBench) per model from per-task scores at each length."""
    try:
        result = report(read_scores(scores_path), _split(base_lengths), _split(long_lengths),
                        common_tasks=common_tasks, scale=scale, label=scores_path)
        text = json.dumps(result, indent=1, allow_nan=False) if fmt == "json" else _table(result)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if common_tasks:
        click.echo(common_tasks_note(result), err=True)
    click.echo(text)
