"""LV-Eval adapter (Yuan et al. 2024): released records -> (source documents, source items).

A record is ``input, context, answers, length, dataset, language, answer_keywords,
confusing_facts`` (spec ``lveval.md`` §3; ``all_classes`` is always null). One file holds one
dataset at one length level and is named after both: ``hotpotwikiqa_mixup_16k.jsonl`` is
task ``hotpotwikiqa_mixup``, level ``16k`` (spec §1.1). A file whose name carries no level
takes the task and level from each record's ``dataset`` field.

Contexts: the mixup datasets prefix each mixed document with ``### Passage i\\n`` (released
data; the paper prints ``Passage i\\n``, spec §11 #9), 1-based and in sequence; such
contexts are split back into documents. LV-Eval does not say which passage supports the
answer, so every passage of the record is evidence (as for LongBench multi-doc QA).
Factrecall haystacks (book text with a needle) and contexts without headers stay one document.

``answer_keywords`` (a string in the release; a list of strings is accepted) is required for
the AK datasets (spec §2: hotpotwikiqa, lic, loogle-CR/MR/SD, multifieldqa-en/zh). For the
others (cmrc, dureader, factrecall) it is absent or null and becomes ``[]``.
``confusing_facts`` (string, list of strings or null) is validated, counted in the report
and stored in ``source_items.confusing_facts`` (the release has already inserted them in the
context; the column tells which sentences are the planted ones).

Run as released (config ``released: {benchmark: lveval, level_by: record_level}``, packaged config
``lveval``; spec released_benchmarks.md, lveval.md §8): each item also keeps the record as
released: ``record_id`` (the release's records carry no id, spec §3: ``<file stem>-<5-digit
0-based position>``, e.g. ``cmrc_mixup_16k-00003``; an export's ``_id`` when present), ``context``
verbatim and ``record_fields`` ``{dataset, level, index, length}`` (``dataset`` is the task, e.g.
``cmrc_mixup``; ``level`` e.g. ``16k``; ``length`` only when the record has one).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from lc_pipeline.sources.hub import source_paths
from lc_pipeline.sources.numbered_blocks import split_numbered
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

__all__ = ["AK_TASKS", "CATEGORIES", "LEVELS", "PASSAGE_HEADER", "load_lveval", "lveval_source", "split_name"]

LEVELS = ("16k", "32k", "64k", "128k", "256k")
# Spec §2: task type per dataset (our ``category``), hops 2 for multi-hop.
CATEGORIES: dict[str, str] = {
    **dict.fromkeys(["lic_mixup", "hotpotwikiqa_mixup", "loogle_MR_mixup", "loogle_MIR_mixup", "loogle_CR_mixup",
                     "dureader_mixup"],
                    "multi-hop QA"),
    **dict.fromkeys(["loogle_SD_mixup", "cmrc_mixup", "multifieldqa_en_mixup", "multifieldqa_zh_mixup",
                     "factrecall_en", "factrecall_zh"], "single-hop QA"),
}
AK_TASKS = frozenset({"hotpotwikiqa_mixup", "lic_mixup", "loogle_CR_mixup", "loogle_MR_mixup", "loogle_MIR_mixup",
                      "loogle_SD_mixup",
                      "multifieldqa_en_mixup", "multifieldqa_zh_mixup"})
_LANG = {"lic_mixup": "zh", "dureader_mixup": "zh", "cmrc_mixup": "zh", "multifieldqa_zh_mixup": "zh",
         "factrecall_zh": "zh"}
PASSAGE_HEADER = re.compile(r"^(?:#+[ \t]*)?Passage (?P<n>\d+)[ \t]*:?[ \t]*\n", re.MULTILINE)
_NAME = re.compile(r"^(?P<task>.+?)_(?P<level>\d+k)$")
_KNOWN = {"input", "context", "answers", "length", "dataset", "language", "answer_keywords", "confusing_facts",
          "all_classes", "_id"}


def _canonical(task: str) -> str:
    """``hotpotwikiqa-mixup`` / ``loogle_mr_mixup`` / the paper's ``loogle_MR_mixup`` -> the release's spelling."""
    from lc_pipeline.score.keyword_recall import DATASET_ALIASES

    t = task.replace("-", "_")
    t = DATASET_ALIASES.get(t.lower(), t)
    for known in CATEGORIES:
        if known.lower() == t.lower():
            return known
    return t


def split_name(name: str) -> tuple[str, str | None]:
    """``hotpotwikiqa_mixup_16k`` -> (``hotpotwikiqa_mixup``, ``16k``); no level -> (name, None)."""
    m = _NAME.match(name)
    return (_canonical(m.group("task")), m.group("level")) if m else (_canonical(name), None)


def _keywords(rec: Record, task: str) -> list[str]:
    value = rec.data.get("answer_keywords")
    if value is None:
        if task in AK_TASKS:
            raise rec.error("answer_keywords", f"missing or null, but {task} is an answer-keyword dataset (spec §2)")
        return []
    if isinstance(value, str):
        if not value.strip():
            if task in AK_TASKS:
                raise rec.error("answer_keywords", f"empty (blank) string, but {task} is an answer-keyword dataset")
            return []
        return [value]
    kws = rec.str_list("answer_keywords", non_empty=task in AK_TASKS)
    return [k for k in kws if k.strip()]


def _parse(rec: Record, *, source: str, file_task: str | None, file_level: str | None, seen: dict[str, str],
           stats: dict[str, Counter], notes: set[str]):
    rec.id_field = "_id"  # LV-Eval records have no id; some exports add one: errors then name it
    dataset = rec.optional("dataset", str)
    if file_task is not None:
        task, level = file_task, file_level
        if dataset is not None and split_name(dataset) != (task, level):
            raise rec.error("dataset", f"{dataset!r} does not match the file name ({task}_{level})")
    else:
        if dataset is None:
            raise rec.error("dataset", "missing (needed: the file name does not end in a level such as _16k)")
        task, level = split_name(dataset)
        if level is None:
            raise rec.error("dataset", f"{dataset!r} names no length level (expected e.g. {dataset}_16k)")
    if level not in LEVELS:
        notes.add(f"level {level} is not one of LV-Eval's {', '.join(LEVELS)}")
    if task not in CATEGORIES:
        notes.add(f"{task}: not one of LV-Eval's 11 datasets; category 'single-hop QA', answer keywords optional")
    question = rec.required_str("input")
    context = rec.required_str("context")
    answers = rec.str_list("answers")
    keywords = _keywords(rec, task)
    cf = rec.data.get("confusing_facts")
    if cf is not None and not isinstance(cf, str):
        cf = rec.str_list("confusing_facts", non_empty=False)
    facts = [f for f in ([cf] if isinstance(cf, str) else cf or []) if f.strip()]
    length = rec.optional("length", int)
    if length is not None and length < 0:
        raise rec.error("length", f"expected a non-negative int, got {length}")
    language = rec.required_str("language")
    if language not in ("en", "zh"):
        raise rec.error("language", f"expected 'en' or 'zh', got {language!r}")
    expected = _LANG.get(task, "en") if task in CATEGORIES else language
    if language != expected:
        raise rec.error("language", f"{task} is a {expected!r} dataset, got {language!r}")
    rec.optional("all_classes", (str, list))

    blocks = split_numbered(context, PASSAGE_HEADER)
    if blocks is None:
        blocks = [(1, context.strip())]
        if task.endswith("_mixup"):
            notes.add(f"{task}: a context without 'Passage i' headers was kept as one document")
    for n, body in blocks:
        if not body:
            raise rec.error("context", f"passage {n} is empty")
    label = f"{task}_{level}"
    raw_id = rec.data.get("_id")
    key = raw_id if isinstance(raw_id, str) and raw_id else f"{rec.index:05d}"
    item_id = f"{source}-{label}-{key}"
    if item_id in seen:
        raise rec.error("_id" if raw_id else "<record>", f"item {item_id!r} already loaded from {seen[item_id]}")
    seen[item_id] = rec.file

    doc_ids = [f"{item_id}-p{n}" for n, _ in blocks]
    docs = [(d, source, "", body, language, f"lveval/{task}", "") for d, (_, body) in zip(doc_ids, blocks, strict=True)]
    stats["level"][level] += 1
    stats["passages"][label] += len(blocks)
    if facts:
        stats["confusing_facts"][label] += 1
    if length is not None:
        stats["length"][label] += 1
    extra = sorted(set(rec.data) - _KNOWN)
    if extra:
        notes.add(f"fields ignored: {', '.join(extra)}")
    # Run as released (construct/released.py): the record's id (the release has none: its file and 0-based
    # position), its context verbatim (confusing facts already inside) and the fields its table is cut by.
    record_id = raw_id if isinstance(raw_id, str) and raw_id else f"{source_stem(rec.file)}-{rec.index:05d}"
    fields = {"dataset": task, "level": level, "index": rec.index, **({"length": length} if length is not None else {})}
    item = (item_id, source, task, CATEGORIES.get(task, "single-hop QA"), language, question, answers, keywords,
            doc_ids, 2 if CATEGORIES.get(task) == "multi-hop QA" else 1, [], facts, record_id, context,
            json.dumps(fields, sort_keys=True))
    return docs, item


def load_lveval(
    paths_or_dir: str | Path | Iterable[str | Path],
    *,
    source: str,
    on_error: OnError = "fail",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Load LV-Eval files (JSONL/JSON/Parquet/CSV, or every such file of a directory).

    Item ids: ``{source}-{task}_{level}-{_id or 5-digit record index}``; doc ids: item id +
    ``-p{N}``. The same QA pair at five levels gives five items (one per level): the level is
    part of the id and counted in the report notes, not a schema column.
    """
    doc_rows: list[tuple] = []
    item_rows: list[tuple] = []
    reports: list[ValidationReport] = []
    seen: dict[str, str] = {}
    for path in input_files(paths_or_dir, label="LV-Eval", caller="load_lveval"):
        task, level = split_name(source_stem(path))
        file_task = task if level is not None else None
        stats: dict[str, Counter] = {"level": Counter(), "passages": Counter(), "confusing_facts": Counter(),
                                     "length": Counter()}
        notes: set[str] = set()
        parsed, report = validate_file(
            path,
            lambda r: _parse(r, source=source, file_task=file_task, file_level=level,  # noqa: B023
                             seen=seen, stats=stats, notes=notes),  # noqa: B023
            id_field=None,
            on_error=on_error,
        )
        if level is not None:
            report.notes.append(f"task {task}, level {level} (from the file name)")
        else:
            report.notes.append("task and level from each record's 'dataset': "
                                + ", ".join(f"{k} {v}" for k, v in sorted(stats["level"].items())))
        for label, n in sorted(stats["passages"].items()):
            report.notes.append(f"{label}: {n} documents (passages)")
        for label, n in sorted(stats["confusing_facts"].items()):
            report.notes.append(f"{label}: confusing_facts present in {n} records (stored; already inserted "
                                "in the context)")
        if stats["length"]:
            report.notes.append("'length' (words en / characters zh of input+context+answers) validated, not stored")
        report.notes.extend(sorted(notes))
        reports.append(report)
        for docs, item in parsed:
            doc_rows.extend(docs)
            item_rows.append(item)
    return (*source_frames(doc_rows, item_rows), reports)


def lveval_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: lveval``: options ``paths`` (file, directory or list) and ``on_error``; or
    ``hf_dataset`` (e.g. ``Infinigence/LVEval``) with ``hf_name`` (e.g.
    ``hotpotwikiqa_mixup_16k``, also used as the file name), ``hf_split``, ``hf_revision``."""
    options = dict(config.options)
    paths = source_paths(options, source=config.name, kind="lveval")
    return accepted(load_lveval(paths, source=config.name, **options))


def validate_lveval_files(paths: list[Path]) -> list[ValidationReport]:
    """`lcp sources validate`: LV-Eval files loaded together as a run loads them, every record checked."""
    return load_lveval(paths, source="validate", on_error="reject")[2]
