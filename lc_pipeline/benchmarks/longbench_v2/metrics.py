"""LongBench v2's answer extraction, record score and table (spec released_benchmarks.md "LongBench v2").

Extraction as the authors' code does it: remove every ``*`` from the reply (markdown bold), then the
letter of the first match of "The correct answer is (X)", else of the first "The correct answer is X",
X in A-D; no match is no answer. A record is correct when that letter is the gold one. The
"compensated" variant counts a record with no extracted answer as 0.25 (a guess among four).

The table: accuracy x 100 overall, on the easy and hard records, and on the short, medium and long
ones; rounded to one decimal only when displayed. The classes are the record's own fields, kept in the
instances' ``record_fields`` (benchmarks/longbench_v2/sources.py); the direct mode (task ``longbench_v2``) and the
chain-of-thought mode (task ``cot``) are tables apart (:func:`v2_tables`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from lc_pipeline.score.task_metrics import Metric

__all__ = ["CHOICE", "COLUMNS", "DIFFICULTIES", "LENGTHS", "choice_score", "extract_choice", "format_v2_table",
           "v2_rows", "v2_table", "v2_tables"]

DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")
COLUMNS = ("overall", *DIFFICULTIES, *LENGTHS)
COMPENSATED_SCORE = 0.25

_PARENTHESIZED = re.compile(r"The correct answer is \(([A-D])\)")
_BARE = re.compile(r"The correct answer is ([A-D])")


def extract_choice(reply: str) -> str | None:
    """The letter the reply gives as its answer ("The correct answer is (B)" -> "B"), or None."""
    text = (reply or "").replace("*", "")
    m = _PARENTHESIZED.search(text) or _BARE.search(text)
    return m.group(1) if m else None


def choice_score(reply: str, gold: str, *, compensated: bool = False) -> float:
    """1.0 when the extracted letter is ``gold``, 0.0 when another; no answer: 0.0 (0.25 ``compensated``)."""
    letter = extract_choice(reply)
    if letter is None:
        return COMPENSATED_SCORE if compensated else 0.0
    return float(letter == gold)


def metric(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
    """``longbench_v2.choice`` (tasks.registry.METRICS): ``instance["answers"]`` holds the gold letter."""
    answers = instance.get("answers")
    if answers is None or isinstance(answers, str) or len(answers) != 1 or answers[0] not in ("A", "B", "C", "D"):
        raise ValueError(f"field answers: expected one gold letter A-D, got {answers!r}")
    return choice_score(output, answers[0], compensated=bool(options.get("compensated", False)))


def parses(output: str, instance: Mapping[str, Any], task: Any) -> bool:
    """Whether the reply gives a letter at all (:func:`extract_choice`); none: status "unparsable" (issue 21),
    scored 0 (0.25 compensated) as before."""
    return extract_choice(output) is not None


CHOICE = Metric("longbench_v2", metric, "letter after 'The correct answer is', * removed; option compensated: "
                                      "no answer scores 0.25", parses=parses)


def v2_table(rows: Iterable[tuple[str, str, float]] | pl.DataFrame) -> pl.DataFrame:
    """One row: accuracy x 100 over ``rows`` of (difficulty, length, correct), overall and per class.

    ``correct`` is a record's score (1.0 / 0.0, or 0.25 for an unanswered record in the compensated
    variant). Full precision is kept (:func:`format_v2_table` rounds for display); a class without
    records is null. Columns ``overall, easy, hard, short, medium, long`` and ``n`` (records).
    """
    frame = rows.select("difficulty", "length", "correct") if isinstance(rows, pl.DataFrame) else pl.DataFrame(
        list(rows), schema={"difficulty": pl.String, "length": pl.String, "correct": pl.Float64}, orient="row")
    for name, allowed in (("difficulty", DIFFICULTIES), ("length", LENGTHS)):
        bad = sorted(set(frame[name].to_list()) - set(allowed), key=str)
        if bad:
            raise ValueError(f"field {name}: expected one of {', '.join(allowed)}, got {bad}")

    def accuracy(where: pl.Expr | None) -> pl.Expr:
        values = pl.col("correct") if where is None else pl.col("correct").filter(where)
        return values.mean() * 100

    return frame.select(
        accuracy(None).alias("overall"),
        *(accuracy(pl.col("difficulty") == d).alias(d) for d in DIFFICULTIES),
        *(accuracy(pl.col("length") == x).alias(x) for x in LENGTHS),
        pl.len().alias("n"),
    )


def v2_rows(metric_scores: pl.DataFrame, instances: pl.DataFrame) -> pl.DataFrame:
    """(task, difficulty, length, correct) per LongBench v2 row of METRIC_SCORES (metric ``longbench_v2``), the
    classes read from its instance's ``record_fields`` (the record's own ``difficulty`` and ``length``, kept by
    benchmarks/longbench_v2/sources.py). Give it one model's scores; ``task`` tells the direct and the CoT mode apart.

    An instance without a score row, or a score whose instance is missing or lacks the classes, is an error
    naming the instance and the field."""
    scores = metric_scores.filter(pl.col("metric") == CHOICE.label).select("instance_id", "task", "score")
    fields = instances.select("instance_id", "record_fields").unique("instance_id")
    joined = scores.join(fields, on="instance_id", how="left", maintain_order="left")
    rows: list[tuple[str, str, str, float]] = []
    for r in joined.iter_rows(named=True):
        if r["record_fields"] is None:
            raise ValueError(f"metric_scores: instance {r['instance_id']!r} is not in the instances given")
        try:
            classes = json.loads(r["record_fields"] or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(f"instance {r['instance_id']!r}: field record_fields is not JSON: {exc}") from None
        missing = [k for k in ("difficulty", "length") if not isinstance(classes.get(k), str)]
        if missing:
            raise ValueError(f"instance {r['instance_id']!r}: field record_fields lacks {missing} (not a LongBench v2 "
                             "record run as released?)")
        rows.append((r["task"], classes["difficulty"], classes["length"], float(r["score"])))
    return pl.DataFrame(rows, schema={"task": pl.String, "difficulty": pl.String, "length": pl.String,
                                      "correct": pl.Float64}, orient="row")


def v2_tables(metric_scores: pl.DataFrame, instances: pl.DataFrame) -> pl.DataFrame:
    """One :func:`v2_table` row per task (the direct mode ``longbench_v2``, the CoT mode ``cot``), ``task`` first."""
    rows = v2_rows(metric_scores, instances)
    tasks = sorted(set(rows["task"].to_list()))
    frames = [v2_table(rows.filter(pl.col("task") == t)).select(pl.lit(t).alias("task"), pl.all()) for t in tasks]
    if not frames:
        return v2_table(rows).select(pl.lit(None, pl.String).alias("task"), pl.all()).clear()
    return pl.concat(frames)


def format_v2_table(table: pl.DataFrame, columns: Sequence[str] = COLUMNS) -> list[str]:
    """The table's values as displayed: one decimal ("-" for a class without records)."""
    row = table.row(0, named=True)
    return ["-" if row[c] is None else f"{row[c]:.1f}" for c in columns]
