"""ALCE (Gao et al. 2023) as HELMET ships it: questions with their GTR-retrieved passages -> items.

HELMET's generation-with-citations category (spec ``helmet.md`` §2.4) reads ALCE's released files,
``data/alce/asqa_eval_gtr_top2000.json`` and ``qampari_eval_gtr_top2000.json``: a JSON list (JSON Lines
is read too) of questions, each with its retrieved Wikipedia passages in rank order. Two shapes, told
apart record by record (option ``style`` insists on one):

* **ASQA**: ``sample_id, question, answer (a long answer), qa_pairs: [{question, short_answers: [str]}],
  docs: [{title, text, ...}]``. Answers: every distinct short answer; ``record_fields.qa_pairs`` keeps the
  short answers pair by pair (STR-EM is the share of pairs with a short answer in the output, §3).
* **QAMPARI**: ``id, question, answers: [[alias, ...], ...]`` (one list per answer cluster), ``docs``.
  Answers: each cluster's first alias; ``record_fields.answer_clusters`` keeps every alias (rec-5, §3).

Each question is one item (``{source}-{id}``; ``record_id`` its own id; category :data:`CATEGORY`, task
``asqa`` | ``qampari``). Its passages are not documents of the corpus (700 per question at 128k, and
never distractors of other tasks): they stay in ``record_fields.docs`` as ``{title, text}`` in rank order,
the other fields of a passage (GTR score, summaries, ...) dropped. Option ``max_docs`` keeps the first n
(HELMET's largest level reads 700 of the 2000 shipped).

Option ``demos``: ALCE's prompt file (``prompts/asqa_revised.json`` / ``qampari_revised.json``), a JSON
object ``{instruction, demos: [{question, answer, docs: [{title, text}]}], ...}``. Each demonstration
becomes an item of category :data:`DEMO_CATEGORY` (``{source}-demo{i}``, its cited answer in
``record_fields.answer``, its passages in ``record_fields.docs``); the file's instruction and templates
are not read (our own instruction is in the task file). benchmarks/helmet/construction/cite.py draws the shots.

Errors name the file, the record (index and id) and the field; ``on_error: reject`` lists a bad
question (or demonstration) and goes on, as in the other adapters.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from lc_pipeline.sources.hub import source_paths
from lc_pipeline.sources.validation import (
    FILE,
    OnError,
    Record,
    RecordError,
    Rejected,
    ValidationReport,
    accepted,
    display_name,
    input_files,
    source_frames,
    validate_file,
)

__all__ = ["ASQA", "CATEGORY", "DEMO_CATEGORY", "QAMPARI", "STYLES", "alce_source", "load_alce", "load_alce_demos", "validate_alce_file"]

ASQA, QAMPARI = "asqa", "qampari"
STYLES = (ASQA, QAMPARI)
CATEGORY = "cited QA"  # items whose answer cites retrieved passages (ALCE); no other HELMET kind takes them
DEMO_CATEGORY = "cited QA demonstration"  # the demos file's worked examples


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _style_of(rec: Record, style: str | None) -> str:
    """ASQA when the record has ``qa_pairs``, QAMPARI when its ``answers`` is a list of lists."""
    found = ASQA if "qa_pairs" in rec.data else QAMPARI if "answers" in rec.data else None
    if found is None:
        raise rec.error("qa_pairs", "missing: an ASQA record has qa_pairs, a QAMPARI record answers "
                                    "(a list of alias lists)")
    if style is not None and found != style:
        raise rec.error("qa_pairs" if style == ASQA else "answers",
                        f"missing: the source's style is {style!r}, the record looks like {found!r}")
    return found


def _id(rec: Record, name: str) -> str:
    value = rec.data.get(name)
    if value is None:
        raise rec.error(name, "missing")
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise rec.error(name, f"expected a non-blank string or int id, got {_type_name(value)} {value!r}")
    rid = str(value).strip()
    rec.data = {**rec.data, name: rid}  # every later error of the record names its id
    rec.id_field = name
    return rid


def _docs(rec: Record, max_docs: int | None, *, required: bool = True) -> list[dict[str, str]]:
    """The record's passages as ``{title, text}`` in their order (rank order in the eval files)."""
    value = rec.data.get("docs")
    if value is None:
        if required:
            raise rec.error("docs", "missing: the question's retrieved passages")
        return []
    if not isinstance(value, list):
        raise rec.error("docs", f"expected a list of {{title, text}} objects, got {_type_name(value)}")
    if not value and required:
        raise rec.error("docs", "empty list: the question has no retrieved passage")
    out = []
    for i, doc in enumerate(value[:max_docs] if max_docs is not None else value):
        if not isinstance(doc, dict):
            raise rec.error("docs", f"docs[{i}]: expected an object, got {_type_name(doc)}")
        title, text = doc.get("title", ""), doc.get("text")
        if title is None:
            title = ""
        if not isinstance(title, str):
            raise rec.error("docs", f"docs[{i}].title: expected a string, got {_type_name(title)}")
        if not isinstance(text, str) or not text.strip():
            raise rec.error("docs", f"docs[{i}].text: expected a non-blank string, got "
                                    f"{'a blank string' if isinstance(text, str) else _type_name(text)}")
        out.append({"title": title, "text": text})
    return out


def _strings(rec: Record, name: str, value: Any, where: str) -> list[str]:
    """A list of strings, blank ones dropped (a blank short answer would match every output)."""
    if not isinstance(value, list):
        raise rec.error(name, f"{where}: expected a list of strings, got {_type_name(value)}")
    for j, v in enumerate(value):
        if not isinstance(v, str):
            raise rec.error(name, f"{where}[{j}]: expected a string, got {_type_name(v)}")
    return [v for v in value if v.strip()]


def _asqa(rec: Record, stats: Counter) -> tuple[list[str], dict[str, Any]]:
    pairs = rec.data["qa_pairs"]
    if not isinstance(pairs, list) or not pairs:
        raise rec.error("qa_pairs", f"expected a non-empty list of {{question, short_answers}} objects, got "
                                    f"{'an empty list' if isinstance(pairs, list) else _type_name(pairs)}")
    qa_pairs = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, dict):
            raise rec.error("qa_pairs", f"qa_pairs[{i}]: expected an object, got {_type_name(pair)}")
        if "short_answers" not in pair:
            raise rec.error("qa_pairs", f"qa_pairs[{i}].short_answers: missing")
        short = _strings(rec, "qa_pairs", pair["short_answers"], f"qa_pairs[{i}].short_answers")
        if not short:
            stats["QA pairs without a short answer (never hit, as in ALCE)"] += 1
        qa_pairs.append(short)
    answers = list(dict.fromkeys(a for pair in qa_pairs for a in pair))
    if not answers:
        raise rec.error("qa_pairs", "no short answer in any QA pair")
    long_answer = rec.optional("answer", str, "")
    return answers, {"qa_pairs": qa_pairs, "long_answer": long_answer}


def _qampari(rec: Record) -> tuple[list[str], dict[str, Any]]:
    value = rec.data["answers"]
    if not isinstance(value, list) or not value:
        raise rec.error("answers", f"expected a non-empty list of answer clusters (alias lists), got "
                                   f"{'an empty list' if isinstance(value, list) else _type_name(value)}")
    clusters = []
    for i, cluster in enumerate(value):
        aliases = _strings(rec, "answers", cluster, f"answers[{i}]")
        if not aliases:
            raise rec.error("answers", f"answers[{i}]: an answer cluster with no non-blank alias")
        clusters.append(aliases)
    return [c[0] for c in clusters], {"answer_clusters": clusters}


def _parse(rec: Record, *, source: str, style: str | None, language: str, max_docs: int | None,
           seen: dict[str, str], stats: Counter) -> tuple:
    found = _style_of(rec, style)
    rid = _id(rec, "sample_id" if found == ASQA and "sample_id" in rec.data else "id")
    question = rec.required_str("question")
    answers, fields = _asqa(rec, stats) if found == ASQA else _qampari(rec)
    docs = _docs(rec, max_docs)
    item_id = f"{source}-{rid}"
    if item_id in seen:
        raise rec.error(rec.id_field or "id", f"duplicate id {rid!r}, first seen in {seen[item_id]}")
    seen[item_id] = f"{rec.file} record {rec.index}"  # after every check: a rejected record claims no id
    stats[f"{found} questions"] += 1
    stats["passages kept"] += len(docs)
    record_fields = {"style": found, **fields, "docs": docs}
    return (item_id, source, found, CATEGORY, language, question, answers, [], [], 1, [], [], rid, "",
            json.dumps(record_fields, ensure_ascii=False, sort_keys=True))


def load_alce(
    paths_or_dir: str | Path | Iterable[str | Path],
    *,
    source: str,
    demos: str | Path | None = None,
    style: str | None = None,
    max_docs: int | None = None,
    language: str = "en",
    on_error: OnError = "fail",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """ALCE eval files (+ a demos file) -> (documents: none, items, one report per file read).

    ``style``: ``asqa`` | ``qampari`` (default: each record's own shape); ``max_docs``: passages kept
    per question (default all). See the module docstring for the layouts.
    """
    if style is not None and style not in STYLES:
        raise ValueError(f"source {source!r} (alce): option style {style!r} is not one of {list(STYLES)}")
    if max_docs is not None and (isinstance(max_docs, bool) or not isinstance(max_docs, int) or max_docs < 1):
        raise ValueError(f"source {source!r} (alce): option max_docs must be an int >= 1, got {max_docs!r}")
    rows: list[tuple] = []
    reports: list[ValidationReport] = []
    seen: dict[str, str] = {}
    for path in input_files(paths_or_dir, label="ALCE", caller="load_alce"):
        stats: Counter = Counter()
        parsed, report = validate_file(
            path, lambda r: _parse(r, source=source, style=style, language=language, max_docs=max_docs,
                                   seen=seen, stats=stats),  # noqa: B023
            on_error=on_error)
        report.notes.append(", ".join(f"{k}: {v}" for k, v in sorted(stats.items())))
        reports.append(report)
        rows.extend(parsed)
    if demos is not None:
        demo_rows, report = load_alce_demos(demos, source=source, language=language, on_error=on_error)
        rows.extend(demo_rows)
        reports.append(report)
    return (*source_frames([], rows), reports)


def load_alce_demos(path: str | Path, *, source: str, language: str = "en",
                    on_error: OnError = "fail") -> tuple[list[tuple], ValidationReport]:
    """ALCE's prompt file -> demonstration item rows (``{source}-demo{i}``) and the file's report.

    A file that is not a JSON object with a ``demos`` list always raises; a bad demonstration raises
    (``fail``) or is listed as rejected (``reject``).
    """
    p = Path(path)
    name = display_name(p)
    if not p.is_file():
        raise RecordError(name, None, None, FILE, "no such file (option demos: ALCE's prompt file)")
    try:
        data = json.loads(p.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(name, None, None, FILE, f"not a JSON document: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("demos"), list):
        raise RecordError(name, None, None, "demos", "expected a JSON object with a 'demos' list "
                                                     "({instruction, demos: [{question, answer, docs}]})")
    report = ValidationReport(file=name, format="json")
    rows = []
    for i, raw in enumerate(data["demos"]):
        report.records += 1
        try:
            if not isinstance(raw, dict):
                raise RecordError(name, i, None, "<record>", f"expected an object, got {_type_name(raw)}")
            rec = Record(name, i, raw)
            question = rec.required_str("question")
            answer = rec.required_str("answer")
            docs = _docs(rec, None)
            fields = {"answer": answer, "docs": docs}
            rows.append((f"{source}-demo{i}", source, "demo", DEMO_CATEGORY, language, question, [answer], [], [], 1,
                         [], [], f"demo{i}", "", json.dumps(fields, ensure_ascii=False, sort_keys=True)))
        except RecordError as err:
            if on_error == "fail":
                raise
            report.rejected.append(Rejected.from_error(err))
    report.accepted = len(rows)
    if not report.records:
        raise RecordError(name, None, None, "demos", "empty list: no demonstration")
    report.notes.append(f"{len(rows)} demonstrations (the file's instruction is not read: the task file has ours)")
    return rows, report


def validate_alce_file(path: str | Path) -> list[ValidationReport]:
    """`lcp sources validate`: every question of one ALCE eval file checked (reject mode)."""
    return load_alce(path, source="validate", on_error="reject")[2]


def alce_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``SOURCE_KINDS["alce"]``: options ``paths`` (an eval file, a directory or a list), ``demos`` (ALCE's
    prompt file), ``style`` (asqa | qampari), ``max_docs``, ``language`` and ``on_error``."""
    options = dict(config.options)
    paths = source_paths(options, source=config.name, kind="alce")
    return accepted(load_alce(paths, source=config.name, **options))
