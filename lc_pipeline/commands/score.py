"""`lcp tools score FILE.jsonl --metric NAME [--variant code|paper]`: score an external predictions file.

Each input line is a JSON record with ``_id``, ``prediction`` (or the field named by
``--prediction-field``), ``answers`` (a list of gold strings) and, where the metric needs them,
``answer_keywords`` (LV-Eval: a string, a list of strings or null) and ``all_classes``
(LongBench trec/lsht). Output: one JSON line per record, ``{"_id": ..., "score": ...}`` with the
score in [0, 1], in input order; the mean x 100 goes to stderr.

Metric names:

* ``longbench:<task>`` for LongBench's 21 tasks (official normalization, first-line rule for
  trec/triviaqa/samsum/lsht, max over gold answers);
* ``lveval:<dataset>`` for LV-Eval's 11 datasets (``hotpotwikiqa_mixup``, ``factrecall_en`` ...;
  a level suffix such as ``_16k`` is ignored), plus ``lveval:keyword_recall_en`` /
  ``lveval:keyword_recall_zh`` for the keyword-recall F1 on other corpora. ``--variant``
  chooses the released code's metric (default, comparable with published numbers) or the paper's.

Every record is checked before any is scored: a bad record stops the command with its line,
its ``_id`` and the field; so does a line that is not UTF-8 (Latin-1, UTF-16), with the byte.

Scores are the official ones. Records whose 0 is the official code's fallback (LongBench's ROUGE
failed on them; the texts differ from the gold only in Unicode normalization) are counted on stderr
with their first ids (score/fallbacks.py, issue 22).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from lc_pipeline import json_files
from lc_pipeline.score.fallbacks import FallbackZeros, score_noted
from lc_pipeline.text import LONE_SURROGATE, byte_order_mark

__all__ = ["read_records", "resolve_metric", "score"]


class RecordProblem(ValueError):
    """A predictions record that cannot be scored; the message names the line, the id and the field."""


def resolve_metric(name: str, variant: str | None) -> Callable[[dict, str], float]:
    """``(record, prediction) -> score`` for a metric name; ``ValueError`` for unknown names."""
    family, _, target = name.partition(":")
    if family == "longbench":
        from lc_pipeline.benchmarks.longbench.metrics import score_record, tasks

        if target not in tasks():
            raise ValueError(f"unknown LongBench task {target!r}; use longbench:<task> with one of: {', '.join(tasks())}")
        if variant is not None:
            raise ValueError("--variant applies to lveval:<dataset> metrics only (LongBench has one definition)")
        return lambda rec, pred: score_record(target, pred, rec["answers"], rec.get("all_classes"))
    if family == "lveval":
        from lc_pipeline.score.keyword_recall import (
            DEFAULT_VARIANT,
            dataset_rule,
            keyword_recall_score,
        )

        rule = dataset_rule(target)  # ValueError lists the known datasets
        chosen = variant or DEFAULT_VARIANT
        return lambda rec, pred: keyword_recall_score(rule.name, pred, rec["answers"], rec.get("answer_keywords"), chosen)
    raise ValueError(f"unknown metric {name!r}: expected longbench:<task> or lveval:<dataset>")


def _where(line_no: int, rec: dict | None) -> str:
    rid = rec.get("_id") if isinstance(rec, dict) else None
    return f"line {line_no}" + (f" (_id {rid!r})" if rid is not None else "")


def _decode(path: Path, line_no: int, raw: bytes, data: bytes) -> str:
    """One line as text; a line that is not UTF-8 (or holds NUL bytes: UTF-16/32) is a RecordProblem naming
    the line, the byte and, when the line still parses as JSON with the bad bytes replaced, its ``_id``."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        try:
            guess = json.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            guess = None
        found = byte_order_mark(data)
        bom = found[1] if found else None
        hint = (f"the file starts with a {bom} byte-order mark" if bom else
                "NUL bytes: UTF-16 or UTF-32 without a byte-order mark?" if b"\x00" in raw else
                "Latin-1 or another 8-bit encoding?")
        raise RecordProblem(f"{path}: {_where(line_no, guess)}: not UTF-8 (byte 0x{raw[exc.start]:02x} at byte "
                            f"{exc.start + 1} of the line; {hint}): save the file as UTF-8") from None
    if "\x00" in line:
        raise RecordProblem(f"{path}: line {line_no}: holds NUL bytes (UTF-16 or UTF-32 without a byte-order "
                            f"mark?): save the file as UTF-8")
    return line


def read_records(path: Path, prediction_field: str) -> list[tuple[int, dict]]:
    """Parse and check every record; (line number, record) in file order, blank lines skipped."""
    records: list[tuple[int, dict]] = []
    seen: dict[str, int] = {}
    data = path.read_bytes()
    for line_no, raw in enumerate(data.splitlines(), start=1):  # \n, \r\n and \r: text mode's universal newlines
        line = _decode(path, line_no, raw, data)
        if not line.strip():
            continue
        try:  # nesting bounded, a key given twice and lone surrogates refused, as every user JSON file (issue 31)
            rec = json_files.parse(line)
        except json_files.JsonProblem as exc:
            if exc.syntax is not None:
                raise RecordProblem(f"{path}: line {line_no}: not valid JSON ({exc.syntax.msg})") from None
            try:  # the record's _id for the message, when the line parses without the checks
                guess = json_files.parse(line, check=False)
            except json_files.JsonProblem:
                guess = None
            field = f" field {exc.field!r}:" if exc.field else ""
            raise RecordProblem(f"{path}: {_where(line_no, guess if isinstance(guess, dict) else None)}:{field} "
                                f"{exc}") from None
        if not isinstance(rec, dict):
            raise RecordProblem(f"{path}: line {line_no}: expected a JSON object, got {type(rec).__name__}")
        where = f"{path}: {_where(line_no, rec)}"
        rid = rec.get("_id")
        if not isinstance(rid, (str, int)) or isinstance(rid, bool) or rid == "":
            raise RecordProblem(f"{where}: field '_id': missing or not a string/integer")
        if isinstance(rid, str) and LONE_SURROGATE.search(rid):  # JSON's "\ud800" escape
            raise RecordProblem(f"{where}: field '_id': holds a lone UTF-16 surrogate, which no UTF-8 output can carry")
        if str(rid) in seen:
            raise RecordProblem(f"{where}: field '_id': duplicate of line {seen[str(rid)]}")
        seen[str(rid)] = line_no
        if not isinstance(rec.get(prediction_field), str):
            raise RecordProblem(f"{where}: field {prediction_field!r}: missing or not a string")
        answers = rec.get("answers")
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
            raise RecordProblem(f"{where}: field 'answers': expected a non-empty list of strings, got {answers!r}")
        kw = rec.get("answer_keywords")
        if kw is not None and not isinstance(kw, str) and not (
            isinstance(kw, list) and all(isinstance(k, str) for k in kw)
        ):
            raise RecordProblem(f"{where}: field 'answer_keywords': expected a string, a list of strings or null")
        classes = rec.get("all_classes")
        if classes is not None and not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
            raise RecordProblem(f"{where}: field 'all_classes': expected a list of strings or null")
        records.append((line_no, rec))
    if not records:
        raise RecordProblem(f"{path}: no records")
    return records


@click.command("score")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--metric", required=True, help="longbench:<task> (21 tasks) or lveval:<dataset> (11 datasets).")
@click.option("--variant", type=click.Choice(["code", "paper"]), default=None,
              help="LV-Eval metric variant: the released code's (default; matches published numbers) or the paper's.")
@click.option("--prediction-field", default="prediction", show_default=True,
              help="Field holding the model output (e.g. 'pred' for LongBench's own files).")
def score(file: Path, metric: str, variant: str | None, prediction_field: str) -> None:
    """Score an external predictions FILE (JSONL): one {"_id", "score"} line per record on stdout."""
    try:
        scorer = resolve_metric(metric, variant)
        records = read_records(file, prediction_field)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    total = 0.0
    fallbacks = FallbackZeros()
    for line_no, rec in records:
        try:
            value, fallback = score_noted(lambda output, record: scorer(record, output), rec[prediction_field], rec)
        except ValueError as exc:
            raise click.ClickException(f"{file}: {_where(line_no, rec)}: {exc}") from exc
        if fallback is not None:
            fallbacks.add(metric, fallback, rec["_id"])
        total += float(value)
        click.echo(json.dumps({"_id": rec["_id"], "score": float(value)}, ensure_ascii=False))
    shown = f"{metric}" + (f" ({variant or 'code'} variant)" if metric.startswith("lveval:") else "")
    click.echo(f"{len(records)} records, {shown}: mean x 100 = {100 * total / len(records):.2f}", err=True)
    for line in fallbacks.lines("ids"):  # the official 0s kept above, counted (issue 22)
        click.echo(line, err=True)
