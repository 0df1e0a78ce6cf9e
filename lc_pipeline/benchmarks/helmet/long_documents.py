"""HELMET's long-document datasets (spec helmet.md §2.5, §2.6, §4.2): NarrativeQA, ∞Bench, Multi-LexSum
-> (source documents, source items). Pure logic; one adapter per ``kind``.

Every item of these sources is an item of long-document QA (category ``long-document QA``, never a RAG
item) or of summarization (category ``summarization``), its document(s) as documents, and what its
metric or judge needs in ``record_fields``: ``options`` (∞Bench MC), ``key_points`` (HELMET's
extracted key points: ∞Bench Sum's key-points file, Multi-LexSum's ``summary/short_keypoints``),
``reference_summary`` (Multi-LexSum's long summary: the judge's expert summary for precision, §4.2
step 4). Items of a train split only serve as demonstrations: ``record_fields.split = "train"``, no
documents (benchmarks/helmet/construction/long_document.py never makes them test items).

``kind: narrativeqa`` (Hugging Face ``deepmind/narrativeqa`` layout; JSONL / Parquet dumps of its splits)::

    document: {id, kind, text, summary: {text, title?}}   question: {text}   answers: [{text}]

  Options: ``test`` (file, directory or list: the test split; items, one document per document id),
  ``train`` (the train split: demonstration Q/A pairs, no document read), or ``hf_dataset`` (+
  ``hf_name``, ``hf_revision``, ``test_split`` default ``test``, ``train_split`` default ``train``);
  ``min_document_tokens`` (HELMET keeps test documents of more than 131072 tokens; 0 = no filter),
  counted in ``tokenizer`` (default cl100k_base; HELMET's is Llama-2's: ``hf:meta-llama/Llama-2-7b-hf`` or a
  folder, the config's ``tokenizer`` value, with ``tokenizer_fallback`` when it may be absent); ``language``,
  ``on_error``. Item ids ``{source}-{file stem}-{record index}``
  (the release has no question ids).

``kind: infbench`` (∞Bench JSON Lines: ``id, context, input, answer: [str], options: [str]``):

  Options: ``paths`` (files ``longbook_qa_eng`` / ``longbook_choice_eng`` / ``longbook_sum_eng``, a
  directory or a list: a file whose stem contains ``choice`` holds multiple-choice items, ``sum``
  summarization items, any other QA items), ``keypoints`` (optional JSONL ``{id, keypoints: [str]}``:
  HELMET's ``longbook_sum_eng_keypoints.jsonl``), ``min_document_tokens`` (HELMET: 65536, "all
  samples are already longer") with ``tokenizer`` / ``tokenizer_fallback`` as NarrativeQA's, ``language``,
  ``on_error``. Records sharing a context share one
  document (id from the context's hash). An MC answer must be one of the record's options.

``kind: multi_lexsum`` (Hugging Face ``allenai/multi_lexsum`` layout: ``id, sources: [str],
summary/long, summary/short, summary/tiny`` or a nested ``summary: {long, short, tiny}``; HELMET's
``multi_lexsum_val.jsonl`` adds ``summary/short_keypoints``):

  Options: ``test`` (HELMET's test set is the validation split), ``train`` (demonstration short
  summaries), or ``hf_dataset`` (+ ``hf_name`` e.g. ``v20230518``, ``hf_revision``, ``test_split``
  default ``validation``, ``train_split`` default ``train``); ``keypoints`` (optional JSONL ``{id,
  keypoints}``; the record's own ``summary/short_keypoints`` wins); ``min_document_tokens`` (HELMET:
  65536 over the joined sources, in ``tokenizer`` / ``tokenizer_fallback`` as NarrativeQA's); ``language``,
  ``on_error``. Each source text is one document (the
  builder joins them with a blank line, as HELMET's context); the gold answer is the short summary.

Records a length filter drops, and Multi-LexSum records without a short summary (HELMET keeps only
items whose short summary is non-null), are valid records *filtered*: counted in the file's report
notes, never rejected and never silent.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from lc_pipeline.benchmarks.helmet.construction.long_document import TRAIN_SPLIT
from lc_pipeline.construct.categories import LONG_DOCUMENT_QA, SUMMARIZATION_CATEGORY
from lc_pipeline.sources.hub import HUB_OPTIONS, hub_to_file
from lc_pipeline.sources.validation import (
    OnError,
    Record,
    ValidationReport,
    accepted,
    input_files,
    source_frames,
    source_stem,
    validate_file,
)

__all__ = ["infbench_file_kind", "infbench_source", "load_infbench", "load_keypoints", "load_multi_lexsum",
           "load_narrativeqa", "multi_lexsum_source", "narrativeqa_source"]

TEST, TRAIN = "test", TRAIN_SPLIT


# --------------------------------------------------------------------------- shared


class _Lengths:
    """Token counts of documents, counted once each for the length filter: in the source's ``tokenizer`` option
    (a config's ``tokenizer`` value: cl100k_base by default, ``hf:<Llama-2 folder or repo id>`` as HELMET counts,
    with its special tokens as ``filter_length`` counts; ``tokenizer_fallback`` when it is not here)."""

    def __init__(self, minimum: int, tokenizer: str = "cl100k_base", fallback: str | None = None):
        if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 0:
            raise ValueError(f"option min_document_tokens: expected an int >= 0, got {minimum!r}")
        if not isinstance(tokenizer, str) or not tokenizer.strip():
            raise ValueError(f"option tokenizer: expected a tokenizer name (cl100k_base, hf:<folder or repo id>), "
                             f"got {tokenizer!r}")
        self.minimum = minimum
        self.tokenizer, self.fallback = tokenizer, fallback
        self._counts: dict[str, int] = {}
        self._counter = None

    def long_enough(self, key: str, text: Callable[[], str]) -> bool:
        """HELMET's filter: more than ``minimum`` tokens (always true without a minimum)."""
        if not self.minimum:
            return True
        if key not in self._counts:
            if self._counter is None:
                from lc_pipeline.benchmarks.helmet.construction.fitting import COUNTS_SPECIAL_TOKENS
                from lc_pipeline.construct.tokens import TokenCounter

                self._counter = TokenCounter.load(self.tokenizer, fallback=self.fallback).counting_special_tokens(
                    COUNTS_SPECIAL_TOKENS)
            self._counts[key] = self._counter.count(text())
        return self._counts[key] > self.minimum


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _id(rec: Record, name: str = "id") -> str:
    """A record's id (a string or an int) as text; the record's later errors name it."""
    value = rec.data.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise rec.error(name, f"expected a non-blank string or int id, got {_type_name(value)} {value!r}")
    rec.data = {**rec.data, name: str(value).strip()}
    rec.id_field = name
    return str(value).strip()


def _text_of(rec: Record, value: Any, where: str) -> str:
    """A string, or a ``{text: str}`` object (NarrativeQA's question / answer)."""
    field = where.split(".", 1)[0].split("[", 1)[0]
    if isinstance(value, dict):
        value = value.get("text")
        where += ".text"
    if not isinstance(value, str) or not value.strip():
        raise rec.error(field, f"{where}: expected a non-blank string, got {_type_name(value)}")
    return value.strip()


def _doc_row(doc_id: str, source: str, title: str, text: str, language: str, domain: str) -> tuple:
    return (doc_id, source, title, text, language, domain, "")


def _item_row(item_id: str, source: str, task: str, category: str, language: str, question: str,
              answers: list[str], evidence: list[str], record_id: str, fields: dict) -> tuple:
    return (item_id, source, task, category, language, question, answers, [], evidence, max(len(evidence), 1), [],
            [], record_id, "", json.dumps(fields, ensure_ascii=False, sort_keys=True) if fields else "{}")


def _split_inputs(options: dict, *, source: str, kind: str, default_test_split: str) -> dict[str, Any]:
    """``{"test": paths, "train": paths or None}`` from ``test`` / ``train`` or a Hub dataset."""
    hub = {k: options.pop(k) for k in HUB_OPTIONS if k in options}
    splits = {TEST: options.pop("test_split", default_test_split), TRAIN: options.pop("train_split", "train")}
    if "hf_split" in hub:
        raise ValueError(f"source {source!r} ({kind}): option 'hf_split': name the splits with 'test_split' and "
                         "'train_split'")
    out = {TEST: options.pop("test", None), TRAIN: options.pop("train", None)}
    if out[TEST] is None and "hf_dataset" not in hub:
        raise ValueError(f"source {source!r} ({kind}): option 'test' (file, directory or list) or 'hf_dataset' is "
                         "required")
    for split in (TEST, TRAIN):
        if out[split] is None and "hf_dataset" in hub and splits[split]:
            out[split] = hub_to_file(hub["hf_dataset"], name=hub.get("hf_name"), split=splits[split],
                                     revision=hub.get("hf_revision"), file_stem=split)
    return out


def _note(report: ValidationReport, stats: Counter) -> None:
    report.notes.extend(f"{k}: {v}" for k, v in sorted(stats.items()))


# --------------------------------------------------------------------------- NarrativeQA


def _narrativeqa_record(rec: Record, *, source: str, split: str, stem: str, language: str, lengths: _Lengths,
                        docs: dict[str, tuple], stats: Counter) -> tuple | None:
    doc = rec.data.get("document")
    if not isinstance(doc, dict):
        raise rec.error("document", f"expected an object {{id, kind, text, summary}}, got {_type_name(doc)}")
    raw_id = doc.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
        raise rec.error("document", f"document.id: expected a non-blank string, got {_type_name(raw_id)}")
    doc_key = str(raw_id).strip()
    question = _text_of(rec, rec.data.get("question"), "question")
    answers_raw = rec.data.get("answers")
    if not isinstance(answers_raw, list) or not answers_raw:
        raise rec.error("answers", f"expected a non-empty list of {{text}} objects, got {_type_name(answers_raw)}")
    answers = list(dict.fromkeys(_text_of(rec, a, f"answers[{i}]") for i, a in enumerate(answers_raw)))
    item_id = f"{source}-{stem}-{rec.index}"
    if split == TRAIN:
        stats["train questions (demonstrations)"] += 1
        return None, _item_row(item_id, source, "narrativeqa", LONG_DOCUMENT_QA, language, question, answers, [],
                               doc_key, {"split": TRAIN})
    text = doc.get("text")
    if not isinstance(text, str) or not text.strip():
        raise rec.error("document", f"document.text: expected the story's text, got {_type_name(text)}")
    if not lengths.long_enough(doc_key, lambda: text):
        stats[f"filtered: document of at most {lengths.minimum} tokens"] += 1
        return None
    doc_id = f"{source}-{doc_key}"
    doc_row = None
    if doc_id not in docs:
        summary = doc.get("summary") if isinstance(doc.get("summary"), dict) else {}
        title = summary.get("title") if isinstance(summary.get("title"), str) and summary["title"].strip() else doc_key
        kind = doc.get("kind") if isinstance(doc.get("kind"), str) and doc["kind"] else "story"
        doc_row = docs[doc_id] = _doc_row(doc_id, source, title, text, language, f"narrativeqa/{kind}")
    stats["test questions"] += 1
    return doc_row, _item_row(item_id, source, "narrativeqa", LONG_DOCUMENT_QA, language, question, answers, [doc_id],
                              doc_key, {})


def load_narrativeqa(test: Any, train: Any = None, *, source: str, min_document_tokens: int = 0, tokenizer: str = "cl100k_base",
                     tokenizer_fallback: str | None = None,
                     language: str = "en", on_error: OnError = "fail") -> tuple[pl.DataFrame, pl.DataFrame,
                                                                                  list[ValidationReport]]:
    """NarrativeQA test (items with their stories) and train (demonstration Q/A pairs) -> frames, reports."""
    lengths = _Lengths(min_document_tokens, tokenizer, tokenizer_fallback)
    docs: dict[str, tuple] = {}
    doc_rows, item_rows, reports = [], [], []
    for split, paths in ((TEST, test), (TRAIN, train)):
        if paths is None:
            continue
        for path in input_files(paths, label="NarrativeQA", caller="load_narrativeqa"):
            stats: Counter = Counter()
            parsed, report = validate_file(path, lambda r: _narrativeqa_record(  # noqa: B023
                r, source=source, split=split, stem=source_stem(path), language=language, lengths=lengths,  # noqa: B023
                docs=docs, stats=stats), on_error=on_error)  # noqa: B023
            for value in parsed:
                if value is not None:
                    doc_row, item_row = value
                    if doc_row is not None:
                        doc_rows.append(doc_row)
                    item_rows.append(item_row)
            report.notes.append(f"{split} split")
            _note(report, stats)
            reports.append(report)
    return (*source_frames(doc_rows, item_rows), reports)


def narrativeqa_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: narrativeqa`` (module docstring: options)."""
    options = dict(config.options)
    splits = _split_inputs(options, source=config.name, kind="narrativeqa", default_test_split="test")
    return accepted(load_narrativeqa(splits[TEST], splits[TRAIN], source=config.name, **options))


# --------------------------------------------------------------------------- ∞Bench

INFBENCH_QA, INFBENCH_CHOICE, INFBENCH_SUM = "qa", "choice", "sum"


def infbench_file_kind(path: str | Path) -> str:
    """What a ∞Bench file holds, from its name: ``longbook_choice_eng`` MC, ``longbook_sum_eng`` Sum, else QA."""
    stem = source_stem(path).lower()
    return INFBENCH_CHOICE if "choice" in stem else INFBENCH_SUM if "sum" in stem else INFBENCH_QA


def _str_or_list(rec: Record, name: str) -> list[str]:
    value = rec.data.get(name)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise rec.error(name, f"expected a non-empty list of non-blank strings, got {_type_name(value)} "
                              f"{str(value)[:80]!r}")
    return [v.strip() for v in value]


def _keypoint_record(rec: Record) -> tuple[str, list[str]]:
    rid = _id(rec)
    points = rec.str_list("keypoints")
    return rid, [p.strip() for p in points if p.strip()]


def load_keypoints(path: str | Path, *, on_error: OnError = "fail") -> tuple[dict[str, list[str]], ValidationReport]:
    """A key-points file (JSON Lines ``{id, keypoints: [str]}``, HELMET's) -> ({id: key points}, report)."""
    parsed, report = validate_file(path, _keypoint_record, on_error=on_error)
    out: dict[str, list[str]] = {}
    for rid, points in parsed:
        out[rid] = points
    report.notes.append(f"key points of {len(out)} records")
    return out, report


def _infbench_record(rec: Record, *, source: str, task: str, file_kind: str, language: str, lengths: _Lengths,
                     keypoints: dict[str, list[str]] | None, docs: dict[str, tuple], seen: dict[str, str],
                     stats: Counter) -> tuple | None:
    rid = _id(rec)
    item_id = f"{source}-{task}-{rid}"
    if item_id in seen:
        raise rec.error("id", f"duplicate id {rid!r}, first seen in {seen[item_id]}")
    context = rec.required_str("context")
    question = rec.data.get("input")
    if question is not None and not isinstance(question, str):
        raise rec.error("input", f"expected a string, got {_type_name(question)}")
    question = (question or "").strip()
    answers = _str_or_list(rec, "answer")
    fields: dict[str, Any] = {}
    if file_kind == INFBENCH_CHOICE:
        options = _str_or_list(rec, "options")
        if len(options) < 2:
            raise rec.error("options", f"expected at least 2 options, got {len(options)}")
        if answers[0] not in options:
            raise rec.error("answer", f"{answers[0]!r} is not one of the options {options}")
        fields["options"] = options
    elif file_kind == INFBENCH_SUM:
        if keypoints is not None:
            if keypoints.get(rid):
                fields["key_points"] = keypoints[rid]
            else:
                stats["summaries without key points (the judge falls back to the summary's sentences)"] += 1
    if not question:
        if file_kind != INFBENCH_SUM:
            raise rec.error("input", "empty: a QA record needs its question")
        question = "Summarize the book."
    seen[item_id] = f"{rec.file} record {rec.index}"  # after every check: a rejected record claims no id
    key = hashlib.sha256(context.encode()).hexdigest()[:16]
    if not lengths.long_enough(key, lambda: context):
        stats[f"filtered: context of at most {lengths.minimum} tokens"] += 1
        return None
    doc_id = f"{source}-book-{key}"
    doc_row = None
    if doc_id not in docs:
        doc_row = docs[doc_id] = _doc_row(doc_id, source, f"book {key}", context, language, "infbench")
    category = SUMMARIZATION_CATEGORY if file_kind == INFBENCH_SUM else LONG_DOCUMENT_QA
    stats[f"{file_kind} items"] += 1
    return doc_row, _item_row(item_id, source, task, category, language, question, answers, [doc_id], rid, fields)


def load_infbench(paths: Any, *, source: str, keypoints: str | Path | None = None, min_document_tokens: int = 0, tokenizer: str = "cl100k_base",
                     tokenizer_fallback: str | None = None,
                  language: str = "en", on_error: OnError = "fail") -> tuple[pl.DataFrame, pl.DataFrame,
                                                                               list[ValidationReport]]:
    """∞Bench files (QA, MC, Sum by file name) and an optional key-points file -> frames, reports."""
    lengths = _Lengths(min_document_tokens, tokenizer, tokenizer_fallback)
    reports = []
    points = None
    if keypoints is not None:
        points, report = load_keypoints(keypoints, on_error=on_error)
        reports.append(report)
    docs: dict[str, tuple] = {}
    seen: dict[str, str] = {}
    doc_rows, item_rows = [], []
    for path in input_files(paths, label="InfiniteBench", caller="load_infbench"):
        stats: Counter = Counter()
        kind = infbench_file_kind(path)
        parsed, report = validate_file(path, lambda r: _infbench_record(  # noqa: B023
            r, source=source, task=source_stem(path), file_kind=kind, language=language, lengths=lengths,  # noqa: B023
            keypoints=points, docs=docs, seen=seen, stats=stats), on_error=on_error)  # noqa: B023
        for value in parsed:
            if value is not None:
                if value[0] is not None:
                    doc_rows.append(value[0])
                item_rows.append(value[1])
        _note(report, stats)
        reports.append(report)
    return (*source_frames(doc_rows, item_rows), reports)


def infbench_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: infbench`` (module docstring: options)."""
    options = dict(config.options)
    if "paths" not in options:
        raise ValueError(f"source {config.name!r} (infbench): option 'paths' (the ∞Bench JSONL files, a directory or "
                         "a list) is required")
    return accepted(load_infbench(options.pop("paths"), source=config.name, **options))


# --------------------------------------------------------------------------- Multi-LexSum


def _summary(rec: Record, part: str) -> Any:
    """``summary/<part>``, or ``summary: {<part>}`` (both layouts of the release)."""
    flat = f"summary/{part}"
    if flat in rec.data:
        return rec.data[flat]
    nested = rec.data.get("summary")
    return nested.get(part) if isinstance(nested, dict) else None


def _optional_text(rec: Record, part: str) -> str | None:
    value = _summary(rec, part)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise rec.error(f"summary/{part}", f"expected a string or null, got {_type_name(value)}")
    return value.strip()


def _multi_lexsum_record(rec: Record, *, source: str, split: str, language: str, lengths: _Lengths,
                         keypoints: dict[str, list[str]] | None, seen: dict[str, str],
                         stats: Counter) -> tuple | None:
    rid = _id(rec)
    item_id = f"{source}-{split}-{rid}"
    if item_id in seen:
        raise rec.error("id", f"duplicate id {rid!r}, first seen in {seen[item_id]}")
    short = _optional_text(rec, "short")
    long = _optional_text(rec, "long")
    given = _summary(rec, "short_keypoints")
    if given is not None and (not isinstance(given, list) or not all(isinstance(p, str) for p in given)):
        raise rec.error("summary/short_keypoints", f"expected a list of strings, got {_type_name(given)}")
    seen[item_id] = f"{rec.file} record {rec.index}"
    if short is None:
        stats["filtered: no short summary"] += 1
        return None
    if split == TRAIN:
        stats["train summaries (demonstrations)"] += 1
        return [], _item_row(item_id, source, "multi_lexsum", SUMMARIZATION_CATEGORY, language,
                             "Summarize the case.", [short], [], rid, {"split": TRAIN})
    sources = rec.str_list("sources")
    texts = [s for s in sources if s.strip()]
    if not lengths.long_enough(item_id, lambda: "\n\n".join(texts)):
        stats[f"filtered: sources of at most {lengths.minimum} tokens"] += 1
        return None
    points = [p.strip() for p in given if p.strip()] if given else (keypoints or {}).get(rid)
    fields: dict[str, Any] = {}
    if points:
        fields["key_points"] = points
    else:
        stats["summaries without key points (the judge falls back to the short summary's sentences)"] += 1
    if long is not None:
        fields["reference_summary"] = long
    else:
        stats["summaries without a long summary (precision judged against the short one)"] += 1
    docs = [_doc_row(f"{source}-{rid}-{i}", source, f"case {rid} document {i + 1}", t, language, "multi_lexsum")
            for i, t in enumerate(texts)]
    stats["test summaries"] += 1
    return docs, _item_row(item_id, source, "multi_lexsum", SUMMARIZATION_CATEGORY, language, "Summarize the case.",
                           [short], [d[0] for d in docs], rid, fields)


def load_multi_lexsum(test: Any, train: Any = None, *, source: str, keypoints: str | Path | None = None,
                      min_document_tokens: int = 0, tokenizer: str = "cl100k_base",
                     tokenizer_fallback: str | None = None, language: str = "en",
                      on_error: OnError = "fail") -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Multi-LexSum test (validation split: cases with their sources) and train (demonstration short
    summaries) -> frames, reports."""
    lengths = _Lengths(min_document_tokens, tokenizer, tokenizer_fallback)
    reports = []
    points = None
    if keypoints is not None:
        points, report = load_keypoints(keypoints, on_error=on_error)
        reports.append(report)
    seen: dict[str, str] = {}
    doc_rows, item_rows = [], []
    for split, paths in ((TEST, test), (TRAIN, train)):
        if paths is None:
            continue
        for path in input_files(paths, label="Multi-LexSum", caller="load_multi_lexsum"):
            stats: Counter = Counter()
            parsed, report = validate_file(path, lambda r: _multi_lexsum_record(  # noqa: B023
                r, source=source, split=split, language=language, lengths=lengths, keypoints=points,  # noqa: B023
                seen=seen, stats=stats), on_error=on_error)  # noqa: B023
            for value in parsed:
                if value is not None:
                    doc_rows.extend(value[0])
                    item_rows.append(value[1])
            report.notes.append(f"{split} split")
            _note(report, stats)
            reports.append(report)
    return (*source_frames(doc_rows, item_rows), reports)


def multi_lexsum_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: multi_lexsum`` (module docstring: options)."""
    options = dict(config.options)
    splits = _split_inputs(options, source=config.name, kind="multi_lexsum", default_test_split="validation")
    return accepted(load_multi_lexsum(splits[TEST], splits[TRAIN], source=config.name, **options))

