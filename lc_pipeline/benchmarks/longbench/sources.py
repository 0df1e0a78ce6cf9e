"""LongBench v1 and LongBench-E adapter: records -> (source documents, source items).

A LongBench record is ``dataset, _id, language, context, input, answers, all_classes``
(LongBench-E adds ``length``; our shared samples add ``reference_prediction``). Contexts
built from several documents are split back into those documents, so the assembler can
rebuild a context of any length around the evidence:

* hotpotqa / 2wikimqa / musique / multi_news: ``Passage N:\\n`` blocks (QA passages start
  with a title line);
* dureader: ``文章N`` blocks whose first line is ``标题：…``;
* passage_count / passage_retrieval_en: ``Paragraph N: …``; passage_retrieval_zh: ``段落N：…``.

Every other task (single-doc QA, single-doc summaries, few-shot, code) keeps its context
as one document: few-shot examples and code files are not separable passages.

Headers are only taken in sequence (1, 2, 3, …) at the start of a line, so a passage that
quotes "Passage 7:" mid-document does not cut itself in two.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from lc_pipeline.sources.hub import source_paths
from lc_pipeline.sources.numbered_blocks import split_numbered
from lc_pipeline.sources.validation import (
    OnError,
    Record,
    RecordError,
    ValidationReport,
    accepted,
    input_files,
    source_frames,
    source_stem,
    validate_file,
)

__all__ = ["CATEGORIES", "CLASSIFICATION", "LONGBENCH_E_TASKS", "MULTI_HOP", "TASKS", "load_longbench",
           "longbench_source"]

# LongBench's own grouping (paper Table 1), named as our items' ``category``.
CATEGORIES: dict[str, str] = {
    **dict.fromkeys(["narrativeqa", "qasper", "multifieldqa_en", "multifieldqa_zh"], "single-doc QA"),
    **dict.fromkeys(["hotpotqa", "2wikimqa", "musique", "dureader"], "multi-doc QA"),
    **dict.fromkeys(["gov_report", "qmsum", "multi_news", "vcsum"], "summarization"),
    **dict.fromkeys(["trec", "triviaqa", "samsum", "lsht"], "few-shot"),
    **dict.fromkeys(["passage_count", "passage_retrieval_en", "passage_retrieval_zh"], "synthetic"),
    **dict.fromkeys(["lcc", "repobench-p"], "code"),
}
TASKS = tuple(CATEGORIES)
LONGBENCH_E_TASKS = (
    "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news",
    "trec", "triviaqa", "samsum", "passage_count", "passage_retrieval_en", "lcc", "repobench-p",
)
# Option ``variant``: which release's files a folder holding both is read for.
VARIANTS = {"": "LongBench", "v1": "LongBench v1 (<task>.jsonl)", "e": "LongBench-E (<task>_e.jsonl)"}
MULTI_HOP = frozenset({"hotpotqa", "2wikimqa", "musique"})
# LongBench's classification tasks: eval.py scores them with classification_score, which picks the label set's
# (``all_classes``) names out of the answer; a record of theirs without a label set would fail only when scored,
# after generation (issue 31 D17), so it is rejected when read.
CLASSIFICATION = frozenset({"trec", "lsht"})
CODE = frozenset({"lcc", "repobench-p"})

_PASSAGE = re.compile(r"^Passage (?P<n>\d+):[ \t]*\n?", re.MULTILINE)
_DUREADER = re.compile(r"^文章(?P<n>\d+)[ \t]*\n?", re.MULTILINE)
_PARAGRAPH_EN = re.compile(r"^Paragraph (?P<n>\d+):[ \t]*", re.MULTILINE)
_PARAGRAPH_ZH = re.compile(r"^段落(?P<n>\d+)[:：][ \t]*", re.MULTILINE)
_GOLD_EN = re.compile(r"^\s*Paragraph (\d+)\s*$")
_GOLD_ZH = re.compile(r"^\s*段落(\d+)\s*$")

# task -> (header pattern, layout name for messages, whether a missing layout is an error)
_SPLITS: dict[str, tuple[re.Pattern[str], str, bool]] = {
    **dict.fromkeys(["hotpotqa", "2wikimqa", "musique"], (_PASSAGE, "Passage N:", True)),
    # multi_news has no gold mapping to protect: an unsplit context is still a valid summary source.
    "multi_news": (_PASSAGE, "Passage N:", False),
    "dureader": (_DUREADER, "文章N", True),
    "passage_count": (_PARAGRAPH_EN, "Paragraph N:", True),
    "passage_retrieval_en": (_PARAGRAPH_EN, "Paragraph N:", True),
    "passage_retrieval_zh": (_PARAGRAPH_ZH, "段落N：", True),
}



@dataclass(frozen=True)
class _Doc:
    n: int  # passage number in the record (0 = text before the first header)
    title: str
    text: str


def _title_and_text(task: str, body: str) -> tuple[str, str]:
    if task in MULTI_HOP:  # "Passage 3:\nTitle\ntext": the assembler prints titles itself
        title, _, text = body.partition("\n")
        return (title.strip(), text.strip()) if text.strip() else ("", body)
    if task == "dureader":
        first, _, text = body.partition("\n")
        if first.startswith(("标题：", "标题:")) and text.strip():
            return first[3:].strip(), text.strip()
    return "", body


def _documents(rec: Record, task: str, context: str, notes: set[str]) -> list[_Doc]:
    if task not in _SPLITS:
        return [_Doc(1, "", context)]
    header, layout, required = _SPLITS[task]
    blocks = split_numbered(context, header)
    if blocks is None:
        if required:
            raise rec.error("context", f"no {layout!r} header: expected LongBench's multi-document layout for {task}")
        notes.add(f"{task}: a context without {layout!r} headers was kept as one document")
        return [_Doc(1, "", context)]
    docs = []
    for n, body in blocks:
        if not body:
            raise rec.error("context", f"{layout.replace('N', str(n))} is empty")
        title, text = _title_and_text(task, body)
        docs.append(_Doc(n, title, text))
    return docs


def _parse(rec: Record, *, source: str, file_variant: str, seen_items: dict[str, str], notes: set[str]):
    dataset = rec.required_str("dataset")
    is_e = dataset.endswith("_e") or file_variant == "_e"
    task = dataset.removesuffix("_e")
    if task not in CATEGORIES:
        raise rec.error("dataset", f"unknown LongBench task {dataset!r}; known: {', '.join(TASKS)}")
    # LongBench-E files may name the plain task; the label keeps their ids apart from v1's.
    label = task + "_e" if is_e else task
    rid = rec.required_str("_id")
    language = rec.required_str("language")
    if task not in CODE and language not in ("en", "zh"):
        raise rec.error("language", f"expected 'en' or 'zh', got {language!r}")
    context = rec.required_str("context")
    question = rec.required_str("input", non_empty=False)  # summaries and code completion have no question
    answers = rec.str_list("answers")
    if task in CLASSIFICATION:
        try:
            all_classes = rec.str_list("all_classes")  # missing, null, [] or all blank: rejected
        except RecordError as exc:
            raise rec.error("all_classes", f"{exc.reason}: {task} is a classification task, scored against its "
                                           "label set (a non-empty list of the class names)") from None
    else:
        all_classes = rec.optional_str_list("all_classes")
    length = rec.optional("length", int)
    if length is not None and length < 0:
        raise rec.error("length", f"expected a non-negative int, got {length}")
    rec.optional("reference_prediction", str)

    docs = _documents(rec, task, context, notes)
    doc_ids = [f"{source}-{label}-{rid}-p{d.n}" for d in docs]
    if task.startswith("passage_retrieval"):
        gold = (_GOLD_ZH if task.endswith("_zh") else _GOLD_EN).match(answers[0])
        by_n = {d.n: i for i, d in enumerate(docs)}
        if gold is None or int(gold.group(1)) not in by_n:
            raise rec.error("answers", f"gold {answers[0]!r} names no paragraph of the context (1..{len(docs)})")
        evidence = [doc_ids[by_n[int(gold.group(1))]]]
    else:
        # Multi-doc QA: LongBench has no gold-passage labels, so every passage of the record
        # is evidence (and none of them can be drawn as a distractor for it).
        evidence = doc_ids
    item_id = f"{source}-{label}-{rid}"
    if item_id in seen_items:
        raise rec.error("_id", f"item {item_id!r} already loaded from {seen_items[item_id]}")
    seen_items[item_id] = rec.file  # only after every check: a rejected record claims no id

    extra = sorted(set(rec.data) - {"dataset", "_id", "language", "context", "input", "answers", "all_classes",
                                     "length", "reference_prediction"})
    if extra:
        notes.add(f"{task}: fields ignored: {', '.join(extra)}")

    lang = language if language in ("en", "zh") else "en"  # code records: natural language of the prompt
    doc_rows = [
        (doc_id, source, d.title, d.text, lang, f"longbench/{task}", "") for doc_id, d in zip(doc_ids, docs, strict=True)
    ]
    # Run as released (construct/released.py): the record's context verbatim, its `length` (LongBench-E's
    # buckets) and its 0-based position in its file (MiniLongBench's sample index counts records in file order).
    fields = {"dataset": dataset, "index": rec.index, **({"length": length} if length is not None else {})}
    item_row = (item_id, source, task, CATEGORIES[task], lang, question, answers, [], evidence,
                2 if task in MULTI_HOP else 1, all_classes or [], [], rid, context,
                json.dumps(fields, sort_keys=True))
    return doc_rows, item_row


def load_longbench(
    paths_or_dir: str | Path | Iterable[str | Path],
    *,
    source: str,
    on_error: OnError = "fail",
    variant: str = "",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Load LongBench v1 / LongBench-E files (or every supported file of a directory).

    ``variant`` picks files by name, for a folder holding both releases: ``"v1"`` only LongBench's
    (``<task>.jsonl``), ``"e"`` only LongBench-E's (``<task>_e.jsonl``), ``""`` every file.

    Returns (documents, items, one report per file), the frames conforming to
    ``schemas.SOURCE_DOCUMENTS`` / ``SOURCE_ITEMS``. Doc ids are
    ``{source}-{dataset}-{_id}-p{N}``, item ids ``{source}-{dataset}-{_id}`` (dataset
    suffixed ``_e`` for LongBench-E). ``all_classes`` is stored (classification label
    sets; required, non-empty, for trec and lsht: ``CLASSIFICATION``); the record's ``_id``,
    its context verbatim and ``{dataset, index, length}`` are kept (``record_id``, ``context``,
    ``record_fields``) for the benchmark run as released.
    """
    doc_rows: list[tuple] = []
    item_rows: list[tuple] = []
    reports: list[ValidationReport] = []
    seen_items: dict[str, str] = {}
    if variant not in VARIANTS:
        raise ValueError(f"LongBench option variant {variant!r}: expected one of {list(VARIANTS)}")
    files = input_files(paths_or_dir, label="LongBench", caller="load_longbench")
    if variant:
        files = [f for f in files if source_stem(f).endswith("_e") == (variant == "e")]
        if not files:
            raise ValueError(f"{paths_or_dir}: no {VARIANTS[variant]} files")
    for path in files:
        notes: set[str] = set()
        variant = "_e" if source_stem(path).endswith("_e") else ""
        parsed, report = validate_file(
            path,
            lambda r: _parse(r, source=source, file_variant=variant, seen_items=seen_items, notes=notes),  # noqa: B023
            id_field="_id",
            on_error=on_error,
        )
        report.notes.extend(sorted(notes))
        reports.append(report)
        for docs, item in parsed:
            doc_rows.extend(docs)
            item_rows.append(item)
    return (*source_frames(doc_rows, item_rows), reports)


def longbench_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``SOURCE_KINDS["longbench"]`` entry: options ``paths`` (file, directory or list) or
    ``hf_dataset: THUDM/LongBench`` with ``hf_name`` (task configs, e.g. ``[qasper, hotpotqa]``),
    ``variant`` (``v1`` / ``e``: only that release's files of a folder holding both) and ``on_error``.
    Rejected records are listed in the raised error / kept in the reports."""
    options = dict(config.options)
    paths = source_paths(options, source=config.name, kind="longbench")
    return accepted(load_longbench(paths, source=config.name, **options))


def validate_longbench_files(paths: list[Path]) -> list[ValidationReport]:
    """`lcp sources validate`: LongBench files loaded together as a run loads them, every record checked."""
    return load_longbench(paths, source="validate", on_error="reject")[2]
