"""Generic items adapter: any JSONL/JSON/Parquet/CSV QA file with a declared field mapping.

Options (``kind: generic``)::

    paths: data/my_qa.jsonl            # file, directory or list (or hf_dataset: ...)
    fields:                            # our name -> the record's field name
      question: query                  # required
      answers: golds                   # required
      context: ctx                     # required
      id: qid                          # optional: record index when absent
      language: lang                   # optional: else option `language` (default "en")
      title: title                     # optional: title of the (first) document
      answer_keywords: kws             # optional: list of strings (or JSON string with answers_format json)
    answers_format: list               # "list" (list of strings), "string" (one answer), "json" (JSON-encoded list)
    separator: "^Passage \\d+:\\s*$"   # optional regex (multiline): split the context into documents
    task: qa                           # item task (default: the source name)
    category: "single-doc QA"
    language: en
    on_error: fail | reject

Each record's context becomes one document, or one per separated block with ``separator``;
all of them are the item's evidence. A mapped field that a record lacks is a
:class:`RecordError` naming the record's field and the mapping that asked for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from lc_pipeline.sources.hub import source_paths
from lc_pipeline.sources.validation import (
    OnError,
    Record,
    ValidationReport,
    accepted,
    input_files,
    source_frames,
    validate_file,
)

__all__ = ["ANSWERS_FORMATS", "REQUIRED_FIELDS", "generic_source", "load_generic"]

REQUIRED_FIELDS = ("question", "answers", "context")
OPTIONAL_FIELDS = ("id", "language", "title", "answer_keywords")
ANSWERS_FORMATS = ("list", "string", "json")


def _check_fields(fields: Mapping[str, Any]) -> dict[str, str]:
    if not isinstance(fields, Mapping):
        raise ValueError(f"generic source: 'fields' must be a mapping of our names to record fields, got {fields!r}")  # noqa: TRY004
    unknown = sorted(set(fields) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS))
    if unknown:
        raise ValueError(f"generic source: unknown keys in 'fields': {unknown}; "
                         f"known: {list(REQUIRED_FIELDS + OPTIONAL_FIELDS)}")
    missing = [f for f in REQUIRED_FIELDS if f not in fields]
    if missing:
        raise ValueError(f"generic source: 'fields' must map {missing} (our name -> the record's field name)")
    bad = {k: v for k, v in fields.items() if not isinstance(v, str) or not v}
    if bad:
        raise ValueError(f"generic source: field names must be non-empty strings, got {bad}")
    return dict(fields)


def _present(rec: Record, fields: dict[str, str], ours: str) -> str:
    name = fields[ours]
    if name not in rec.data:
        raise rec.error(name, f"missing (mapped from {ours!r} by the 'fields' option)")
    return name


def _answers(rec: Record, name: str, fmt: str) -> list[str]:
    if fmt == "string":
        return [rec.required_str(name)]
    return rec.str_list(name, allow_json_string=fmt == "json")


def _parse(rec: Record, *, source: str, fields: dict[str, str], fmt: str, separator: re.Pattern[str] | None,
           task: str, category: str, language: str, seen: dict[str, str], notes: set[str]):
    if "id" in fields:
        rec.id_field = fields["id"]  # errors name the record's id (when it is a string)
    question = rec.required_str(_present(rec, fields, "question"))
    answers = _answers(rec, _present(rec, fields, "answers"), fmt)
    context = rec.required_str(_present(rec, fields, "context"))
    if "id" in fields:
        id_name = _present(rec, fields, "id")
        raw = rec.data[id_name]
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise rec.error(id_name, f"expected a string or int id, got {type(raw).__name__}")
        rid = str(raw).strip()
        if not rid:
            raise rec.error(id_name, "empty (blank) id")
    else:
        id_name, rid = "<record>", f"{rec.index:05d}"
    lang = rec.required_str(_present(rec, fields, "language")) if "language" in fields else language
    title = rec.required_str(_present(rec, fields, "title"), non_empty=False) if "title" in fields else ""
    keywords: list[str] = []
    if "answer_keywords" in fields:
        kw_name = _present(rec, fields, "answer_keywords")
        keywords = rec.str_list(kw_name, allow_json_string=fmt == "json", non_empty=False)

    if separator is not None:
        blocks = [b.strip() for b in separator.split(context)]
        blocks = [b for b in blocks if b]
        if len(blocks) <= 1:
            notes.add("some contexts have no separator match and stay one document")
        if not blocks:
            raise rec.error(fields["context"], "only separators, no text")
    else:
        blocks = [context]
    item_id = f"{source}-{rid}"
    if item_id in seen:
        raise rec.error(id_name, f"duplicate id {rid!r}, first seen in {seen[item_id]}")
    seen[item_id] = f"{rec.file} record {rec.index}"
    doc_ids = [f"{item_id}-d{i}" for i in range(1, len(blocks) + 1)]
    docs = [(d, source, title if i == 0 else "", text, lang, f"{source}/{task}", "")
            for i, (d, text) in enumerate(zip(doc_ids, blocks, strict=True))]
    item = (item_id, source, task, category, lang, question, answers, keywords, doc_ids, 1, [], [])
    return docs, item


def load_generic(
    paths_or_dir: str | Path | Iterable[str | Path],
    *,
    fields: Mapping[str, str],
    source: str,
    answers_format: str = "list",
    separator: str | None = None,
    task: str | None = None,
    category: str = "single-doc QA",
    language: str = "en",
    on_error: OnError = "fail",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Load QA records through a field mapping; returns (documents, items, one report per file).

    Item ids ``{source}-{id}`` (or the 5-digit record index without an ``id`` mapping), doc
    ids item id + ``-d{N}``; ids repeated across files are errors of the later record.
    """
    fields = _check_fields(fields)
    if answers_format not in ANSWERS_FORMATS:
        raise ValueError(f"generic source: answers_format must be one of {ANSWERS_FORMATS}, got {answers_format!r}")
    try:
        sep = re.compile(separator, re.MULTILINE) if separator else None
    except re.error as exc:
        raise ValueError(f"generic source: separator {separator!r} is not a valid regex: {exc}") from None
    task = task or source
    doc_rows: list[tuple] = []
    item_rows: list[tuple] = []
    reports: list[ValidationReport] = []
    seen: dict[str, str] = {}
    for path in input_files(paths_or_dir, label="supported", caller="load_generic"):
        notes: set[str] = set()
        parsed, report = validate_file(
            path,
            lambda r: _parse(r, source=source, fields=fields, fmt=answers_format, separator=sep, task=task,
                             category=category, language=language, seen=seen, notes=notes),  # noqa: B023
            on_error=on_error,
        )
        ndocs = sum(len(d) for d, _ in parsed)
        report.notes.append(f"mapping {fields}, answers_format {answers_format!r}: {ndocs} documents"
                            + (f" (separator {separator!r})" if separator else " (one per record)"))
        report.notes.extend(sorted(notes))
        reports.append(report)
        for docs, item in parsed:
            doc_rows.extend(docs)
            item_rows.append(item)
    return (*source_frames(doc_rows, item_rows), reports)


def generic_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: generic``: options as in the module docstring; ``hf_dataset`` (+ ``hf_name``,
    ``hf_split``, ``hf_revision``) may replace ``paths``."""
    options = dict(config.options)
    paths = source_paths(options, source=config.name, kind="generic")
    if "fields" not in options:
        raise ValueError(f"source {config.name!r} (generic): option 'fields' (our name -> record field) is required")
    return accepted(load_generic(paths, source=config.name, **options))
