"""MS MARCO passage re-ranking with graded qrels (TREC DL) -> (source documents, source items), for HELMET's
``msmarco`` task (spec ``helmet.md`` §2.3: TREC 2019 DL passage re-ranking, BM25 top-1000 candidates, grades 0-3).

Two layouts, options of ``kind: msmarco``:

* **TREC DL files**: ``queries`` (``qid<TAB>query``), ``qrels`` (``qid 0 pid grade``, whitespace-separated, grade
  0-3) and ``candidates`` (the BM25 top-1000 list, ``qid<TAB>pid<TAB>query<TAB>passage``). A candidate the qrels do
  not judge reads as grade 0 (trec_eval's convention), counted in the report; only judged queries become items
  (TREC DL evaluates only those), the others counted.
* **HELMET's preprocessed JSONL** (``data``): one query per line, ``{qid, query, ctxs | candidates: [{id | pid,
  title?, text, label}]}``.

Every candidate passage is one document (doc id ``{source}-{pid}``; a pid in several queries is one document, and
two different texts for one pid are an error). Every query with a relevant candidate (grade > 0) is one item: id
``{source}-{qid}``, category ``re-ranking``, ``answers`` ``"<pid>:<grade>"`` of its relevant candidates,
``evidence_doc_ids`` their documents, ``record_id`` the qid and ``record_fields.candidates`` the list
``[pid, doc id, grade]`` in the file's (BM25) order, which ``benchmarks/helmet/construction/rerank.py`` samples from. A query
with no relevant candidate has no NDCG: it is left out and counted in the report's notes, never silently dropped.
A malformed line is an error naming file, line and field (``on_error: fail``), or a rejected record (``reject``).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from lc_pipeline.sources.validation import (
    OnError,
    Record,
    RecordError,
    Rejected,
    ValidationReport,
    accepted,
    display_name,
    source_frames,
    validate_file,
)

__all__ = ["CATEGORY", "load_msmarco_jsonl", "load_msmarco_trec", "msmarco_source"]

CATEGORY = "re-ranking"
TASK = "passage_reranking"
DOMAIN = "msmarco"
_GRADES = range(0, 4)


@dataclass
class _Collected:
    """Queries, candidates and documents gathered from either layout, turned into rows at the end."""

    source: str
    language: str
    docs: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # pid -> (title, text, where)
    queries: dict[str, tuple[str, list[tuple[str, int]], str]] = field(default_factory=dict)  # qid -> (q, [(pid, g)])

    def add_passage(self, pid: str, title: str, text: str, where: str) -> str | None:
        """None when fine; else why the pid clashes with an earlier copy."""
        seen = self.docs.get(pid)
        if seen is None:
            self.docs[pid] = (title, text, where)
        elif (seen[0], seen[1]) != (title, text):
            return f"passage {pid!r} has another text than in {seen[2]}"
        return None

    def frames(self, reports: list[ValidationReport], stats: Counter) -> tuple[pl.DataFrame, pl.DataFrame]:
        doc_rows = [(f"{self.source}-{pid}", self.source, t, x, self.language, DOMAIN, "")
                    for pid, (t, x, _) in self.docs.items()]
        item_rows = []
        for qid, (query, cands, _) in self.queries.items():
            rel = [(pid, g) for pid, g in cands if g > 0]
            if not rel:
                stats["queries without a relevant candidate (left out: NDCG is undefined)"] += 1
                continue
            fields = {"qid": qid, "candidates": [[pid, f"{self.source}-{pid}", g] for pid, g in cands]}
            item_rows.append((f"{self.source}-{qid}", self.source, TASK, CATEGORY, self.language, query,
                              [f"{pid}:{g}" for pid, g in rel], [], [f"{self.source}-{pid}" for pid, _ in rel], 1,
                              [], [], qid, "", json.dumps(fields, ensure_ascii=False)))
        stats["queries (items)"] = len(item_rows)
        stats["candidate passages (documents)"] = len(doc_rows)
        reports[-1].notes.extend(f"{k}: {v}" for k, v in sorted(stats.items()))
        return source_frames(doc_rows, item_rows)


def _grade(rec: Record, name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value not in _GRADES:
        raise rec.error(name, f"expected a grade 0-3, got {value!r}")
    return value


def _id(rec: Record, name: str, value: Any, where: str | None = None) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise rec.error(name, f"{where or name}: expected a non-blank string or int id, got {value!r}")
    return str(value).strip()


# --------------------------------------------------------------------------- HELMET's JSONL


def _parse_json_query(rec: Record, got: _Collected, stats: Counter) -> str:
    qid = _id(rec, "qid", rec.data.get("qid"))
    rec.data = {**rec.data, "qid": qid}
    rec.id_field = "qid"
    if qid in got.queries:
        raise rec.error("qid", f"duplicate qid, first seen in {got.queries[qid][2]}")
    query = rec.required_str("query")
    name = "ctxs" if "ctxs" in rec.data else "candidates"
    cands = rec.data.get(name)
    if not isinstance(cands, list) or not cands:
        raise rec.error(name, "missing or empty: the query's candidate passages (ctxs or candidates)")
    out, pending = [], []
    for i, c in enumerate(cands):
        where = f"{name}[{i}]"
        if not isinstance(c, dict):
            raise rec.error(name, f"{where}: expected an object, got {type(c).__name__}")
        pid = _id(rec, name, c.get("id", c.get("pid")), f"{where}.id")
        text = c.get("text")
        if not isinstance(text, str) or not text.strip():
            raise rec.error(name, f"{where}.text: expected a non-blank string")
        title = c.get("title") or ""
        if not isinstance(title, str):
            raise rec.error(name, f"{where}.title: expected a string")
        out.append((pid, _grade(rec, name, c.get("label"))))
        pending.append((pid, title, text))
    for pid, title, text in pending:  # after every check: a rejected record adds no passage
        clash = got.add_passage(pid, title, text, f"{rec.file} record {rec.index}")
        if clash:
            raise rec.error(name, clash)
    got.queries[qid] = (query, out, f"{rec.file} record {rec.index}")
    stats["candidates"] += len(out)
    return qid


def load_msmarco_jsonl(path: str | Path, *, source: str, language: str = "en", on_error: OnError = "fail"):
    """HELMET's preprocessed re-rank JSONL -> (documents, items, [report])."""
    got, stats = _Collected(source, language), Counter()
    _, report = validate_file(path, lambda r: _parse_json_query(r, got, stats), on_error=on_error)
    reports = [report]
    return (*got.frames(reports, stats), reports)


# --------------------------------------------------------------------------- TREC DL files


def _lines(path: Path, report: ValidationReport):
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            line = line.rstrip("\n").rstrip("\r")
            if line.strip():
                report.records += 1
                yield i + 1, line


def _read(path: str | Path, parse, on_error: OnError) -> ValidationReport:
    """Each non-blank line through ``parse(line_no, line)``, which raises RecordError for a bad one."""
    path = Path(path)
    report = ValidationReport(file=display_name(path), format="tsv")
    if not path.is_file():
        raise RecordError(report.file, None, None, "file", "no such file")
    for n, line in _lines(path, report):
        try:
            parse(n, line, report.file)
            report.accepted += 1
        except RecordError as err:
            if on_error == "fail":
                raise
            report.rejected.append(Rejected.from_error(err))
    if report.records == 0:
        raise RecordError(report.file, None, None, "file", "no records (empty file)")
    return report


def load_msmarco_trec(queries: str | Path, qrels: str | Path, candidates: str | Path, *, source: str,
                      language: str = "en", on_error: OnError = "fail"):
    """TREC DL queries, qrels and BM25 candidates -> (documents, items, reports: queries, qrels, candidates).

    Errors name the file, the line (as the record index) and the column."""
    got, stats = _Collected(source, language), Counter()
    text: dict[str, str] = {}
    grades: dict[str, dict[str, int]] = {}

    def query_line(n: int, line: str, file: str) -> None:
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise RecordError(file, n, parts[0] or None, "query", "expected 'qid<TAB>query'")
        if parts[0] in text:
            raise RecordError(file, n, parts[0], "qid", "duplicate qid")
        text[parts[0].strip()] = parts[1].strip()

    def qrel_line(n: int, line: str, file: str) -> None:
        parts = line.split()
        if len(parts) != 4:
            raise RecordError(file, n, parts[0] if parts else None, "qrels", "expected 'qid 0 pid grade'")
        qid, _, pid, grade = parts
        if grade not in {str(g) for g in _GRADES}:
            raise RecordError(file, n, qid, "grade", f"expected a grade 0-3, got {grade!r}")
        if qid not in text:
            raise RecordError(file, n, qid, "qid", "not in the queries file")
        grades.setdefault(qid, {})[pid] = int(grade)

    reports = [_read(queries, query_line, on_error), _read(qrels, qrel_line, on_error)]
    seen_pairs: set[tuple[str, str]] = set()

    def candidate_line(n: int, line: str, file: str) -> None:
        parts = line.split("\t")
        if len(parts) != 4 or not parts[3].strip():
            raise RecordError(file, n, parts[0] or None, "candidates", "expected 'qid<TAB>pid<TAB>query<TAB>passage'")
        qid, pid, _, passage = (p.strip() for p in parts)
        if qid not in grades:  # TREC DL judges a subset of its queries; the others are not evaluated
            stats["candidates of unjudged queries (not read)"] += 1
            return
        if (qid, pid) in seen_pairs:
            raise RecordError(file, n, qid, "pid", f"candidate {pid!r} listed twice for this query")
        clash = got.add_passage(pid, "", passage, f"{file} line {n}")
        if clash:
            raise RecordError(file, n, qid, "passage", clash)
        seen_pairs.add((qid, pid))
        grade = grades[qid].get(pid)
        if grade is None:
            stats["unjudged candidates (read as grade 0)"] += 1
        query = got.queries.setdefault(qid, (text[qid], [], f"{file} line {n}"))
        query[1].append((pid, grade or 0))

    reports.append(_read(candidates, candidate_line, on_error))
    judged_missing = sum(1 for q, g in grades.items() for pid in g if (q, pid) not in seen_pairs)
    stats["judged passages not among the candidates (no text: not shown)"] = judged_missing
    stats["judged queries without candidates"] = sum(1 for q in grades if q not in got.queries)
    return (*got.frames(reports, stats), reports)


def msmarco_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: msmarco``: ``data`` (HELMET's JSONL) or ``queries`` + ``qrels`` + ``candidates`` (TREC DL files);
    ``language`` (default en) and ``on_error``."""
    options = dict(config.options)
    data = options.pop("data", None)
    trec = {k: options.pop(k) for k in ("queries", "qrels", "candidates") if k in options}
    unknown = sorted(set(options) - {"language", "on_error"})
    if unknown:
        raise ValueError(f"source {config.name!r} (msmarco): unknown options {unknown}; known: data, queries, qrels, "
                         f"candidates, language, on_error")
    if data is not None and trec:
        raise ValueError(f"source {config.name!r} (msmarco): give either 'data' (JSONL) or the TREC files, not both")
    if data is not None:
        return accepted(load_msmarco_jsonl(data, source=config.name, **options))
    missing = [k for k in ("queries", "qrels", "candidates") if k not in trec]
    if missing:
        raise ValueError(f"source {config.name!r} (msmarco): options {missing} are required (or 'data': the "
                         f"preprocessed re-rank JSONL)")
    return accepted(load_msmarco_trec(trec["queries"], trec["qrels"], trec["candidates"], source=config.name,
                                      **options))
