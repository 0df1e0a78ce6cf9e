"""Multi-hop QA in its native formats (HotpotQA, 2WikiMultihopQA, MuSiQue) -> (documents, items).

Every context paragraph becomes a document, so our assembler can rebuild a context of any
length around the supporting paragraphs (the evidence). The format is detected per file from
its first record that has one of these shapes (option ``format`` forces it):

* ``hotpotqa`` (Yang et al. 2018): ``_id, question, answer, type, level,
  supporting_facts: [[title, sent_id]], context: [[title, [sentences]]]``. The Hugging Face
  ``hotpot_qa`` layout (``id``; ``supporting_facts: {title: [...], sent_id: [...]}``,
  ``context: {title: [...], sentences: [[...]]}``) is read too.
* ``2wikimqa`` (Ho et al. 2020): as HotpotQA plus ``evidences: [[subject, relation, object]]``
  (and ``entity_ids``); detected by ``evidences`` or a 2Wiki-only ``type``
  (compositional, inference, bridge_comparison).
* ``musique`` (Trivedi et al. 2022): ``id, question, answer, answer_aliases, answerable,
  paragraphs: [{idx, title, paragraph_text, is_supporting}], question_decomposition:
  [{id, question, answer, paragraph_support_idx}]``.

Per item: ``answers`` = the answer plus ``answer_aliases`` (when present, any format), distinct;
``evidence_doc_ids`` = the supporting paragraphs (HotpotQA/2Wiki: every context paragraph whose
title a supporting fact names; MuSiQue: ``is_supporting``); ``hops`` = number of supporting
paragraphs, for MuSiQue the length of ``question_decomposition`` when given. Tasks are named as
in LongBench (``hotpotqa``, ``2wikimqa``, ``musique``), category ``multi-doc QA``.

Documents: doc id ``{source}-{task}-{hash of title and text}``. The same Wikipedia paragraph
recurs in many records' contexts; one document per distinct paragraph means a filler can never
be a copy of the item's own evidence under another id. Domain ``multihop/{task}``.

Checks: a supporting fact whose title is not a context paragraph, an empty context, a blank
supporting paragraph, answers that are not strings, duplicate ids, ... are errors naming the
file, the record and the field. Reported, not errors: supporting-fact sentence numbers past
the paragraph's end (a known HotpotQA annotation slip; evidence is per paragraph anyway) and
blank non-supporting paragraphs (not made documents), each counted in the report notes.

**MuSiQue unanswerable records** (``answerable: false``, MuSiQue-Full): a supporting
paragraph was removed on purpose, so the gold answer is not in the context and our QA scoring
would count a correct abstention as wrong. Default ``unanswerable: reject``: each such record
becomes a rejected record with field ``answerable`` and that reason, *whatever* ``on_error``
says (they are well-formed, so they must not stop a run; they are not used, so they must be
listed). ``unanswerable: keep`` keeps them as items of task ``musique_unanswerable`` (the flag:
they never mix with answerable ``musique`` items), evidence = the supporting paragraphs left.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

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
    read_records,
    source_frames,
    validate_file,
)

__all__ = ["FORMATS", "detect_format", "load_multihop", "multihop_source", "paragraph_text"]

FORMATS = ("hotpotqa", "2wikimqa", "musique")
CATEGORY = "multi-doc QA"
UNANSWERABLE_TASK = "musique_unanswerable"
_TWOWIKI_TYPES = frozenset({"compositional", "inference", "bridge_comparison"})
_KNOWN = {
    "hotpotqa": {"_id", "id", "question", "answer", "answer_aliases", "type", "level", "supporting_facts", "context"},
    "2wikimqa": {"_id", "id", "question", "answer", "answer_aliases", "type", "supporting_facts", "context",
                 "evidences", "entity_ids"},
    "musique": {"id", "question", "answer", "answer_aliases", "answerable", "paragraphs", "question_decomposition"},
}


def detect_format(record: dict) -> str | None:
    """``hotpotqa`` / ``2wikimqa`` / ``musique`` from a record's fields, or None."""
    keys = set(record)
    if {"question", "paragraphs"} <= keys:
        return "musique"
    if {"question", "context", "supporting_facts"} <= keys:
        if "evidences" in keys or record.get("type") in _TWOWIKI_TYPES:
            return "2wikimqa"
        return "hotpotqa"
    return None


def paragraph_text(sentences: list[str]) -> str:
    """HotpotQA sentences carry their own leading space (" Then ..."); 2Wiki's do not: join
    with a space only where the next sentence has none, so both read as the original paragraph."""
    text = ""
    for s in sentences:
        text += s if not text or s[:1].isspace() else " " + s
    return text.strip()


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, str) else value


def _doc_id(source: str, task: str, title: str, text: str) -> str:
    digest = hashlib.sha1(f"{title}\n{text}".encode()).hexdigest()[:16]
    return f"{source}-{task}-{digest}"


def _answers(rec: Record) -> list[str]:
    answer = rec.required_str("answer")
    aliases = rec.optional_str_list("answer_aliases") or []
    return list(dict.fromkeys(a for a in [answer, *aliases] if a.strip()))


def _record_id(rec: Record, names: tuple[str, ...]) -> str:
    for name in names:
        if name in rec.data:
            rec.id_field = name
            return rec.required_str(name)
    rec.id_field = names[0]
    raise rec.error(names[0], "missing")


# --------------------------------------------------------------------------- HotpotQA / 2Wiki


def _pairs(rec: Record, name: str, second: str, check) -> list[tuple[str, Any]]:
    """``[[title, x], ...]`` or the Hugging Face ``{title: [...], second: [...]}`` -> [(title, x)]."""
    if name not in rec.data:
        raise rec.error(name, "missing")
    value = _plain(rec.data[name])
    if isinstance(value, dict):
        if not {"title", second} <= set(value):
            raise rec.error(name, f"expected keys 'title' and {second!r}, got {sorted(value)}")
        titles, seconds = _plain(value["title"]), _plain(value[second])
        if not isinstance(titles, list) or not isinstance(seconds, list) or len(titles) != len(seconds):
            raise rec.error(name, f"'title' and {second!r} must be lists of one length")
        value = [[t, _plain(s)] for t, s in zip(titles, seconds, strict=True)]
    if not isinstance(value, list):
        raise rec.error(name, f"expected a list of [title, {second}] pairs, got {_type_name(value)}")
    pairs = []
    for i, pair in enumerate(value):
        pair = _plain(pair)
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise rec.error(name, f"element {i}: expected a [title, {second}] pair, got {pair!r:.80}")
        title, x = pair[0], _plain(pair[1])
        if not isinstance(title, str):
            raise rec.error(name, f"element {i}: title: expected a string, got {_type_name(title)}")
        reason = check(x)
        if reason:
            raise rec.error(name, f"element {i} ({title!r}): {second}: {reason}")
        pairs.append((title, x))
    return pairs


def _sentences_problem(x: Any) -> str | None:
    if not isinstance(x, list):
        return f"expected a list of strings, got {_type_name(x)}"
    bad = next((k for k, s in enumerate(x) if not isinstance(s, str)), None)
    return None if bad is None else f"element {bad} is {_type_name(x[bad])}, expected a string"


def _sent_id_problem(x: Any) -> str | None:
    if isinstance(x, bool) or not isinstance(x, int):
        return f"expected an int, got {_type_name(x)}"
    return "expected a non-negative int" if x < 0 else None


def _parse_hotpot(rec: Record, task: str, stats: Counter):
    """-> (item fields, [(title, text, supporting)])."""
    rid = _record_id(rec, ("_id", "id"))
    question = rec.required_str("question")
    answers = _answers(rec)
    rec.optional("type", str)
    context = _pairs(rec, "context", "sentences", _sentences_problem)
    if not context:
        raise rec.error("context", "empty list: no paragraphs")
    facts = _pairs(rec, "supporting_facts", "sent_id", _sent_id_problem)
    if not facts:
        raise rec.error("supporting_facts", "empty list: no supporting paragraph")
    if task == "2wikimqa" and rec.data.get("evidences") is not None:
        evidences = _plain(rec.data["evidences"])
        if not isinstance(evidences, list) or not all(isinstance(_plain(e), list | tuple) for e in evidences):
            raise rec.error("evidences", f"expected a list of [subject, relation, object] triples, got {evidences!r:.80}")
    sizes = {}
    for title, sentences in context:
        sizes.setdefault(title, len(sentences))
    supporting = set()
    for i, (title, sent_id) in enumerate(facts):
        if title not in sizes:
            raise rec.error("supporting_facts", f"element {i}: title {title!r} is not a paragraph of the context "
                                                f"(titles: {list(sizes)[:10]})")
        if sent_id >= sizes[title]:
            stats["supporting facts past the paragraph's last sentence"] += 1
        supporting.add(title)
    paragraphs = [(title, paragraph_text(sentences), title in supporting) for title, sentences in context]
    stats[f"type {rec.data.get('type') or '?'}"] += 1
    return rid, question, answers, paragraphs, len(supporting)


# --------------------------------------------------------------------------- MuSiQue


def _parse_musique(rec: Record, stats: Counter):
    rid = _record_id(rec, ("id",))
    question = rec.required_str("question")
    answerable = rec.optional("answerable", bool, True)
    if "paragraphs" not in rec.data:
        raise rec.error("paragraphs", "missing")
    raw = _plain(rec.data["paragraphs"])
    if not isinstance(raw, list):
        raise rec.error("paragraphs", f"expected a list of {{idx, title, paragraph_text, is_supporting}}, got {_type_name(raw)}")
    if not raw:
        raise rec.error("paragraphs", "empty list: no paragraphs")
    paragraphs, idxs = [], set()
    for i, p in enumerate(raw):
        if not isinstance(p, dict):
            raise rec.error("paragraphs", f"element {i}: expected an object, got {_type_name(p)}")
        idx, title, text, sup = (p.get(k) for k in ("idx", "title", "paragraph_text", "is_supporting"))
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise rec.error("paragraphs", f"element {i}: idx: expected an int, got {_type_name(idx)}")
        if idx in idxs:
            raise rec.error("paragraphs", f"element {i}: idx {idx} repeated")
        idxs.add(idx)
        for key, value, types in (("title", title, str), ("paragraph_text", text, str), ("is_supporting", sup, bool)):
            if not isinstance(value, types):
                raise rec.error("paragraphs", f"element {i} (idx {idx}): {key}: expected {types.__name__}, "
                                              f"got {_type_name(value)}")
        paragraphs.append((title, text.strip(), sup))
    decomposition = _plain(rec.data.get("question_decomposition"))
    if decomposition is not None:
        if not isinstance(decomposition, list) or not all(isinstance(s, dict) for s in decomposition):
            raise rec.error("question_decomposition", f"expected a list of objects, got {decomposition!r:.80}")
        for k, step in enumerate(decomposition):
            ref = step.get("paragraph_support_idx")
            if answerable and ref is not None and ref not in idxs:
                raise rec.error("question_decomposition", f"step {k}: paragraph_support_idx {ref!r} is no "
                                                          "paragraph's idx")
    n_supporting = sum(sup for _, _, sup in paragraphs)
    hops = len(decomposition) if decomposition else n_supporting
    if not answerable:
        # The answer is still checked: a kept record must be scorable.
        answers = _answers(rec) if rec.data.get("answer") else []
        return rid, question, answers, paragraphs, hops, False
    answers = _answers(rec)
    if not n_supporting:
        raise rec.error("paragraphs", "no paragraph has is_supporting: true (the item would have no evidence)")
    stats[f"{hops}-hop"] += 1
    return rid, question, answers, paragraphs, hops, True


# --------------------------------------------------------------------------- driver


def _parse(rec: Record, *, fmt: str, source: str, language: str, unanswerable: str, seen: dict[str, str],
           stats: Counter):
    task = fmt
    if fmt == "musique":
        rid, question, answers, paragraphs, hops, answerable = _parse_musique(rec, stats)
        if not answerable:
            reason = ("unanswerable record (answerable: false, MuSiQue-Full): a supporting paragraph was removed, "
                      "the gold answer is not in the context; set unanswerable: keep to load it as "
                      f"task {UNANSWERABLE_TASK!r}")
            if unanswerable == "reject":
                stats["unanswerable, rejected"] += 1
                return Rejected(rec.file, rec.index, rid, "answerable", reason)
            if not answers:
                raise rec.error("answer", "missing or blank (kept unanswerable records need a gold answer)")
            task = UNANSWERABLE_TASK
            stats["unanswerable, kept"] += 1
    else:
        rid, question, answers, paragraphs, hops = _parse_hotpot(rec, fmt, stats)
    docs, evidence = {}, []
    for title, text, supporting in paragraphs:
        if not text:
            if supporting:
                raise rec.error("context" if fmt != "musique" else "paragraphs",
                                f"supporting paragraph {title!r} has no text")
            stats["blank non-supporting paragraphs (no document)"] += 1
            continue
        doc_id = _doc_id(source, fmt, title, text)
        docs[doc_id] = (doc_id, source, title, text, language, f"multihop/{fmt}", "")
        if supporting:
            evidence.append(doc_id)
    if not evidence:
        raise rec.error("paragraphs", "no supporting paragraph left (the item would have no evidence)")
    item_id = f"{source}-{task}-{rid}"
    if item_id in seen:
        raise rec.error(rec.id_field, f"item {item_id!r} already loaded from {seen[item_id]}")
    seen[item_id] = f"{rec.file} record {rec.index}"  # only after every check: a rejected record claims no id
    extra = set(rec.data) - _KNOWN[fmt]
    stats.update(f"field ignored: {k}" for k in extra)
    item = (item_id, source, task, CATEGORY, language, question, answers, [], list(dict.fromkeys(evidence)),
            max(hops, 1), [], [])
    return list(docs.values()), item


def _file_format(path: Path) -> str:
    _, records = read_records(path)
    for _, rec in records:
        if isinstance(rec, dict) and (fmt := detect_format(rec)) is not None:
            return fmt
    raise RecordError(display_name(path), None, None, FILE,
                      "no record has the fields of HotpotQA/2Wiki (question, context, supporting_facts) or MuSiQue "
                      "(question, paragraphs); set option 'format' to force one")


def load_multihop(
    paths_or_dir: str | Path | Iterable[str | Path],
    *,
    source: str,
    format: Literal["auto", "hotpotqa", "2wikimqa", "musique"] = "auto",
    unanswerable: Literal["reject", "keep"] = "reject",
    language: str = "en",
    on_error: OnError = "fail",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Load HotpotQA / 2WikiMultihopQA / MuSiQue files (or every supported file of a directory).

    Returns (documents, items, one report per file). Item ids ``{source}-{task}-{id}``; a
    paragraph shared by several records is one document (see the module docstring).
    """
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"multihop source: format must be 'auto' or one of {FORMATS}, got {format!r}")
    if unanswerable not in ("reject", "keep"):
        raise ValueError(f"multihop source: unanswerable must be 'reject' or 'keep', got {unanswerable!r}")
    doc_rows: dict[str, tuple] = {}
    item_rows: list[tuple] = []
    reports: list[ValidationReport] = []
    seen: dict[str, str] = {}
    for path in input_files(paths_or_dir, label="HotpotQA/2Wiki/MuSiQue", caller="load_multihop"):
        fmt = _file_format(path) if format == "auto" else format
        stats: Counter = Counter()
        parsed, report = validate_file(
            path,
            lambda r: _parse(r, fmt=fmt, source=source, language=language, unanswerable=unanswerable,  # noqa: B023
                             seen=seen, stats=stats),  # noqa: B023
            on_error=on_error,
        )
        kept = [p for p in parsed if not isinstance(p, Rejected)]
        if len(kept) != len(parsed):  # unanswerable records: rejected by policy, listed like any other
            report.rejected = sorted([*report.rejected, *(p for p in parsed if isinstance(p, Rejected))],
                                     key=lambda r: r.index if r.index is not None else -1)
            report.accepted = len(kept)
        assert report.consistent, report
        new_docs = {d[0] for docs, _ in kept for d in docs}
        report.notes.append(f"format {fmt}" + (" (detected)" if format == "auto" else "") +
                            f": {len(new_docs)} distinct paragraphs as documents")
        report.notes.extend(f"{k}: {v}" for k, v in sorted(stats.items()))
        reports.append(report)
        for docs, item in kept:
            doc_rows.update((d[0], d) for d in docs)
            item_rows.append(item)
    return (*source_frames(list(doc_rows.values()), item_rows), reports)


def multihop_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: multihop``: options ``paths`` (file, directory or list) or ``hf_dataset`` (e.g.
    ``hotpot_qa`` with ``hf_name: distractor``, ``hf_split: validation``), ``format`` (``auto``,
    ``hotpotqa``, ``2wikimqa``, ``musique``), ``unanswerable`` (``reject``/``keep``), ``language``
    and ``on_error``."""
    options = dict(config.options)
    paths = source_paths(options, source=config.name, kind="multihop")
    return accepted(load_multihop(paths, source=config.name, **options))


def validate_multihop_files(paths: list[Path]) -> list[ValidationReport]:
    """`lcp sources validate`: HotpotQA, 2Wiki and MuSiQue files (the loader detects each file's format itself)."""
    return load_multihop(paths, source="validate", on_error="reject")[2]
