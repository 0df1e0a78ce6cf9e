"""HELMET/KILT-style passage collections with QA files: -> (source documents, source items).

HELMET's RAG tasks (spec ``helmet.md`` §2.2) take NQ, TriviaQA and HotpotQA from KILT: each
query is annotated with gold passages (provenance) of a Wikipedia collection split into
~100-word passages, and the context is those gold passages among retrieved distractors.
This adapter loads both halves; our assembler (and ``hard_negatives``) rebuilds contexts at
any length.

**Passages** (``passages``: JSONL/JSON/Parquet/CSV, a directory or a list): one record per
passage, every passage one document (doc id ``{source}-{id}``, domain ``kilt/{collection}``)::

    id            str or int, unique over all passage files
    title         str (may be blank)
    text          str, non-blank
    wikipedia_id  optional str/int: the KILT page the passage comes from
    paragraph_id  optional int, or start_paragraph_id / end_paragraph_id: the KILT paragraphs
                  the passage covers (a 100-word passage can straddle two)

**QA files** (``qa``): every record is detected on its own as one of two shapes.

* KILT (Petroni et al. 2021): ``id, input, output: [{answer, provenance: [{wikipedia_id,
  title, start_paragraph_id, end_paragraph_id, ...}]}], meta``. Answers are the distinct
  non-blank ``answer`` strings of all outputs (outputs with provenance only are normal);
  evidence is every passage any provenance entry resolves to; ``hops`` is the largest number
  of distinct pages one output cites (HotpotQA: 2; NQ lists alternative annotations of one
  page: 1).
* Simple: ``id, question, answers: [str], positive_ids | gold_ids: [passage id]`` (optional
  ``hops``, default the number of gold ids). In CSV the two lists may be JSON strings.

* PopQA (Mallen et al. 2023; spec helmet.md §2.2): ``id, question, possible_answers`` (a list, or its JSON
  string as PopQA ships it), ``s_pop`` (the subject's monthly Wikipedia page views), ``subj``, ``s_wiki_title``,
  ``prop``, ... PopQA has no provenance: evidence is empty and HELMET's builder finds the gold passage in the
  collection (``benchmarks/helmet/construction/pools.answer_search_gold``, which reads ``subj`` / ``s_wiki_title`` from the item's
  ``record_fields``). Option ``max_popularity`` (HELMET: 1000, i.e. ``log10(s_pop) < 3``) keeps records with
  ``s_pop < max_popularity``; the others are counted in the file's report (``popularity filter``), never dropped
  silently.

A record with none of these shapes is an error naming it and its missing ``question`` field.

A provenance entry resolves to passages, in this order: its ``passage_id`` (an exact passage
id, for exports that carry one); else the passages whose ``wikipedia_id`` is the entry's and
whose paragraph span overlaps ``start_paragraph_id..end_paragraph_id`` (all of the page's
passages when either side has no paragraph numbers); else passages whose id is
``{wikipedia_id}_{paragraph}`` or ``{wikipedia_id}`` (paragraph- or page-level collections).
**A gold passage that is not in the collection is an error** of the QA record (raised with
``on_error: fail``, a ``rejected_records`` row with ``reject``), never a silent skip: an item
without its evidence would be unanswerable by construction.

Item ids are ``{source}-{task}-{id}``, ``task`` the QA file's stem (``nq``, ``hotpotqa-dev-kilt``);
category ``multi-doc QA`` when ``hops > 1``, else ``single-doc QA``.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from lc_pipeline.sources.hub import HUB_OPTIONS, source_paths
from lc_pipeline.sources.validation import (
    OnError,
    Record,
    ValidationReport,
    accepted,
    display_name,
    input_files,
    read_records,
    source_frames,
    source_stem,
    source_suffix,
    validate_file,
)

__all__ = ["GOLD_FIELDS", "PassageCollection", "is_passages_file", "kilt_source", "load_kilt", "load_passages"]

GOLD_FIELDS = ("positive_ids", "gold_ids")  # simple form: the gold passage ids, under either name
_PASSAGE_FIELDS = {"id", "title", "text", "wikipedia_id", "paragraph_id", "start_paragraph_id", "end_paragraph_id"}
_KILT_FIELDS = {"id", "input", "output", "meta"}
_SIMPLE_FIELDS = {"id", "question", "answers", "hops", *GOLD_FIELDS}
_POPQA_FIELDS = {"id", "question", "possible_answers", "s_pop", "subj", "s_wiki_title", "prop"}
POPQA_RECORD_FIELDS = ("s_pop", "subj", "s_wiki_title", "prop")  # kept in the item's record_fields


# --------------------------------------------------------------------------- small checkers


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _id_value(rec: Record, name: str, value: Any, where: str | None = None) -> str:
    """A string or int id as a string (Parquet/DPR dumps store passage ids as ints)."""
    where = where or name
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise rec.error(name, f"{where}: expected a string or int id, got {_type_name(value)}")
    text = str(value).strip()
    if not text:
        raise rec.error(name, f"{where}: empty (blank) id")
    return text


def _record_id(rec: Record, name: str = "id") -> str:
    if name not in rec.data:
        raise rec.error(name, "missing")
    rid = _id_value(rec, name, rec.data[name])
    # Store the id as text so every later error of this record names it (Record names str ids only).
    rec.data = {**rec.data, name: rid}
    rec.id_field = name
    return rid


def _opt_int(rec: Record, name: str, value: Any, where: str | None = None) -> int | None:
    """Absent/null/'' -> None; an int, or a string of digits (CSV), -> int >= 0."""
    where = where or name
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise rec.error(name, f"{where}: expected an int or null, got {_type_name(value)} {value!r}")
    if value < 0:
        raise rec.error(name, f"{where}: expected a non-negative int, got {value}")
    return value


def _span(rec: Record, data: dict, name: str, where: str) -> tuple[int | None, int | None]:
    """(start, end) paragraph numbers of a passage or a provenance entry; end defaults to start."""
    single = _opt_int(rec, name, data.get("paragraph_id"), f"{where}paragraph_id")
    start = _opt_int(rec, name, data.get("start_paragraph_id"), f"{where}start_paragraph_id")
    end = _opt_int(rec, name, data.get("end_paragraph_id"), f"{where}end_paragraph_id")
    start = start if start is not None else single
    if start is None:
        if end is not None:
            raise rec.error(name, f"{where}end_paragraph_id given without start_paragraph_id")
        return None, None
    end = start if end is None else end
    if end < start:
        raise rec.error(name, f"{where}end_paragraph_id {end} is before start_paragraph_id {start}")
    return start, end


def _list(rec: Record, name: str, *, allow_json_string: bool) -> list:
    value = rec.data[name]
    if isinstance(value, str) and allow_json_string:
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise rec.error(name, "expected a JSON-encoded list, got a string that is not JSON") from None
    elif hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays from Parquet readers
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise rec.error(name, f"expected a list, got {_type_name(value)}")
    return list(value)


# --------------------------------------------------------------------------- passages


@dataclass
class PassageCollection:
    """Passages by id and by KILT page, to resolve gold ids and provenance entries."""

    source: str
    files: list[str] = field(default_factory=list)
    doc_ids: dict[str, str] = field(default_factory=dict)  # passage id -> doc id
    where: dict[str, str] = field(default_factory=dict)  # passage id -> "file record i"
    pages: dict[str, list[tuple[int | None, int | None, str]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, pid: str, wikipedia_id: str | None, span: tuple[int | None, int | None], where: str) -> str:
        doc_id = f"{self.source}-{pid}"
        self.doc_ids[pid] = doc_id
        self.where[pid] = where
        if wikipedia_id is not None:
            self.pages[wikipedia_id].append((*span, doc_id))
        return doc_id

    def names(self) -> str:
        return ", ".join(self.files) or "the passages collection"

    def resolve(self, wikipedia_id: str, start: int | None, end: int | None) -> list[str]:
        """Doc ids of the passages a provenance entry points at ([] when none is in the collection)."""
        page = self.pages.get(wikipedia_id)
        if page:
            if start is None:
                return [d for _, _, d in page]
            return [d for s, e, d in page if s is None or (s <= end and start <= e)]
        candidates = [f"{wikipedia_id}_{p}" for p in range(start, end + 1)] if start is not None else []
        return [self.doc_ids[c] for c in [*candidates, wikipedia_id] if c in self.doc_ids]


def _parse_passage(rec: Record, *, collection: PassageCollection, language: str, domain: str,
                   stats: Counter) -> tuple:
    pid = _record_id(rec)
    if pid in collection.where:
        raise rec.error("id", f"duplicate passage id {pid!r}, first seen in {collection.where[pid]}")
    title = rec.required_str("title", non_empty=False)
    text = rec.required_str("text")
    wid = rec.data.get("wikipedia_id")
    wid = None if wid is None or wid == "" else _id_value(rec, "wikipedia_id", wid)
    span = _span(rec, rec.data, "paragraph_id", "")
    if not title.strip():
        stats["untitled"] += 1
    if wid is not None:
        stats["with wikipedia_id"] += 1
    if set(rec.data) - _PASSAGE_FIELDS:
        stats.update(f"field ignored: {k}" for k in set(rec.data) - _PASSAGE_FIELDS)
    doc_id = collection.add(pid, wid, span, f"{rec.file} record {rec.index}")  # after every check
    return (doc_id, collection.source, title, text, language, domain, "")


def load_passages(
    paths_or_dir: str | Path | Iterable[str | Path],
    *,
    source: str,
    collection: str | None = None,
    language: str = "en",
    on_error: OnError = "fail",
) -> tuple[list[tuple], PassageCollection, list[ValidationReport]]:
    """Passage files -> (document rows, the collection index, one report per file)."""
    files = input_files(paths_or_dir, label="passage", caller="load_passages")
    if collection is None:
        given = Path(paths_or_dir) if isinstance(paths_or_dir, str | Path) else None
        collection = given.name if given is not None and given.is_dir() else source_stem(files[0])
    domain = f"kilt/{collection}"
    index = PassageCollection(source=source, files=[display_name(f) for f in files])
    rows: list[tuple] = []
    reports = []
    for path in files:
        stats: Counter = Counter()
        parsed, report = validate_file(
            path, lambda r: _parse_passage(r, collection=index, language=language, domain=domain, stats=stats),  # noqa: B023
            on_error=on_error)
        report.notes.append(f"passages of collection {collection!r} (domain {domain!r}): {len(parsed)} documents")
        report.notes.extend(f"{k}: {v}" for k, v in sorted(stats.items()))
        reports.append(report)
        rows.extend(parsed)
    return rows, index, reports


# --------------------------------------------------------------------------- QA records


def _kilt_record(rec: Record, collection: PassageCollection | None, stats: Counter):
    """KILT shape -> (question, answers, evidence doc ids, hops)."""
    question = rec.required_str("input")
    if "output" not in rec.data:
        raise rec.error("output", "missing (a KILT record needs its outputs: answers and provenance; "
                                  "KILT test files hide them)")
    outputs = rec.data["output"]
    if hasattr(outputs, "tolist"):
        outputs = outputs.tolist()
    if not isinstance(outputs, list | tuple):
        raise rec.error("output", f"expected a list of {{answer, provenance}} objects, got {_type_name(outputs)}")
    if not outputs:
        raise rec.error("output", "empty list: no answer and no provenance")
    answers: list[str] = []
    evidence: list[str] = []
    hops = 0
    entries = 0
    for i, out in enumerate(outputs):
        if not isinstance(out, dict):
            raise rec.error("output", f"output[{i}]: expected an object, got {_type_name(out)}")
        answer = out.get("answer")
        if answer is not None and not isinstance(answer, str):
            raise rec.error("output", f"output[{i}].answer: expected a string, got {_type_name(answer)}")
        if answer and answer.strip() and answer not in answers:
            answers.append(answer)
        prov = out.get("provenance")
        if prov is None:
            continue
        if hasattr(prov, "tolist"):
            prov = prov.tolist()
        if not isinstance(prov, list | tuple):
            raise rec.error("output", f"output[{i}].provenance: expected a list, got {_type_name(prov)}")
        pages = set()
        for j, entry in enumerate(prov):
            where = f"output[{i}].provenance[{j}]"
            if not isinstance(entry, dict):
                raise rec.error("output", f"{where}: expected an object, got {_type_name(entry)}")
            entries += 1
            title = entry.get("title")
            if title is not None and not isinstance(title, str):
                raise rec.error("output", f"{where}.title: expected a string, got {_type_name(title)}")
            if entry.get("passage_id") not in (None, ""):
                pid = _id_value(rec, "output", entry["passage_id"], f"{where}.passage_id")
                pages.add(pid)
                if collection is not None:
                    if pid not in collection.doc_ids:
                        raise rec.error("output", f"{where}: gold passage {pid!r} is not in {collection.names()}")
                    evidence.append(collection.doc_ids[pid])
                continue
            if entry.get("wikipedia_id") in (None, ""):
                raise rec.error("output", f"{where}.wikipedia_id: missing (needed to find the gold passage)")
            wid = _id_value(rec, "output", entry["wikipedia_id"], f"{where}.wikipedia_id")
            start, end = _span(rec, entry, "output", f"{where}.")
            pages.add(wid)
            if collection is not None:
                found = collection.resolve(wid, start, end)
                if not found:
                    paras = "" if start is None else f" paragraphs {start}..{end}"
                    raise rec.error("output", f"{where}: gold passage not in {collection.names()}: wikipedia_id "
                                              f"{wid!r}{paras} (title {title!r})")
                evidence.extend(found)
        hops = max(hops, len(pages))
        if prov and not (answer or "").strip():
            stats["outputs with provenance only"] += 1
    if not answers:
        raise rec.error("output", "no answer: every output's 'answer' is absent or blank")
    if not entries:
        raise rec.error("output", "no provenance in any output: the item has no gold passage")
    return question, answers, list(dict.fromkeys(evidence)), max(hops, 1)


def _simple_record(rec: Record, collection: PassageCollection | None, csv: bool):
    """Simple shape -> (question, answers, evidence doc ids, hops)."""
    question = rec.required_str("question")
    answers = rec.str_list("answers", allow_json_string=csv)
    if not answers or any(not a.strip() for a in answers):
        raise rec.error("answers", "a blank answer string")
    present = [g for g in GOLD_FIELDS if rec.data.get(g) is not None]
    if not present:
        raise rec.error("positive_ids", f"missing: the simple form needs the gold passage ids ({' or '.join(GOLD_FIELDS)})")
    name = present[0]
    gold = [_id_value(rec, name, v, f"element {k}") for k, v in enumerate(_list(rec, name, allow_json_string=csv))]
    if not gold:
        raise rec.error(name, "empty list: the item has no gold passage")
    if len(present) == 2:
        other = [str(v).strip() for v in _list(rec, present[1], allow_json_string=csv)]
        if other != gold:
            raise rec.error(present[1], f"differs from {name!r}; give one of them")
    gold = list(dict.fromkeys(gold))
    hops = _opt_int(rec, "hops", rec.data.get("hops"))
    if hops == 0:
        raise rec.error("hops", "expected at least 1")
    evidence = []
    if collection is not None:
        for pid in gold:
            if pid not in collection.doc_ids:
                raise rec.error(name, f"gold passage {pid!r} is not in {collection.names()}")
            evidence.append(collection.doc_ids[pid])
    return question, answers, evidence, hops or len(gold)


def _popqa_record(rec: Record, csv: bool, max_popularity: int | None):
    """PopQA shape -> (question, answers, record_fields), or None when the popularity filter leaves it out."""
    question = rec.required_str("question")
    answers = rec.str_list("possible_answers", allow_json_string=True)
    if not answers or any(not a.strip() for a in answers):
        raise rec.error("possible_answers", "a blank answer string (or none)")
    pop = rec.data.get("s_pop")
    if isinstance(pop, str) and pop.strip().isdigit():
        pop = int(pop)
    if isinstance(pop, float) and pop.is_integer():
        pop = int(pop)
    if isinstance(pop, bool) or not isinstance(pop, int) or pop < 0:
        raise rec.error("s_pop", f"expected a non-negative int (monthly page views), got {_type_name(pop)} {pop!r}")
    if max_popularity is not None and pop >= max_popularity:
        return None
    fields = {k: rec.data[k] for k in POPQA_RECORD_FIELDS if rec.data.get(k) not in (None, "")}
    fields["s_pop"] = pop
    return question, list(dict.fromkeys(answers)), fields


def _parse_qa(rec: Record, *, source: str, task: str, language: str, collection: PassageCollection | None,
              csv: bool, seen: dict[str, str], stats: Counter, max_popularity: int | None = None):
    rid = _record_id(rec)
    keys = set(rec.data)
    fields = None
    if "possible_answers" in keys:
        shape = "PopQA"
        popqa = _popqa_record(rec, csv, max_popularity)
        if popqa is None:
            stats[f"popularity filter: s_pop >= {max_popularity}, left out"] += 1
            return None
        question, answers, fields = popqa
        evidence, hops = [], 1
        extra = keys - _POPQA_FIELDS
    elif "input" in keys or "output" in keys:
        shape = "KILT"
        question, answers, evidence, hops = _kilt_record(rec, collection, stats)
        extra = keys - _KILT_FIELDS
    elif "question" in keys:
        shape = "simple"
        question, answers, evidence, hops = _simple_record(rec, collection, csv)
        extra = keys - _SIMPLE_FIELDS
    else:
        raise rec.error("question", "missing: the record is neither KILT (id, input, output) nor the simple form "
                                    f"(id, question, answers, {' or '.join(GOLD_FIELDS)})")
    item_id = f"{source}-{task}-{rid}"
    if item_id in seen:
        raise rec.error("id", f"duplicate id {rid!r}, first seen in {seen[item_id]}")
    seen[item_id] = f"{rec.file} record {rec.index}"  # after every check: a rejected record claims no id
    stats[f"{shape} records"] += 1
    stats.update(f"field ignored: {k}" for k in extra)
    category = "multi-doc QA" if hops > 1 else "single-doc QA"
    if fields is not None:
        return (item_id, source, task, category, language, question, answers, [], evidence, hops, [], [], rid, "",
                json.dumps(fields, ensure_ascii=False, sort_keys=True))
    return (item_id, source, task, category, language, question, answers, [], evidence, hops, [], [])


def load_qa(
    paths_or_dir: str | Path | Iterable[str | Path],
    collection: PassageCollection | None,
    *,
    source: str,
    language: str = "en",
    on_error: OnError = "fail",
    max_popularity: int | None = None,
) -> tuple[list[tuple], list[ValidationReport]]:
    """QA files -> (item rows, one report per file). Without a collection the gold passages are
    checked for shape only (``lcp sources validate`` of a lone QA file) and evidence is empty.
    ``max_popularity``: PopQA records with ``s_pop`` at or above it are left out, counted in the report."""
    if max_popularity is not None and (isinstance(max_popularity, bool) or not isinstance(max_popularity, int)
                                       or max_popularity < 1):
        raise ValueError(f"option 'max_popularity': expected a positive int, got {max_popularity!r}")
    rows: list[tuple] = []
    reports = []
    seen: dict[str, str] = {}
    for path in input_files(paths_or_dir, label="KILT QA", caller="load_qa"):
        stats: Counter = Counter()
        task = source_stem(path)
        parsed, report = validate_file(
            path, lambda r: _parse_qa(r, source=source, task=task, language=language,  # noqa: B023
                                      collection=collection, csv=source_suffix(path) == ".csv",  # noqa: B023
                                      seen=seen, stats=stats, max_popularity=max_popularity),  # noqa: B023
            on_error=on_error)
        parsed = [row for row in parsed if row is not None]  # PopQA's popularity filter, counted in stats
        hops = Counter(row[9] for row in parsed)
        report.notes.append(f"task {task!r}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items()))
                            + "; hops " + ", ".join(f"{k}: {v}" for k, v in sorted(hops.items())))
        if collection is None:
            report.notes.append("no passages collection given: gold passages checked for shape only, not looked up")
        else:
            n_gold = sum(len(row[8]) for row in parsed)
            report.notes.append(f"{n_gold} gold passages resolved in {collection.names()}")
        reports.append(report)
        rows.extend(parsed)
    return rows, reports


def load_kilt(
    passages: str | Path | Iterable[str | Path],
    qa: str | Path | Iterable[str | Path],
    *,
    source: str,
    collection: str | None = None,
    language: str = "en",
    on_error: OnError = "fail",
    max_popularity: int | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Load a passage collection and its QA files; returns (documents, items, reports: passage
    files first, then QA files). Every passage is a document; each item's evidence is its gold
    passages (see the module docstring for the accepted shapes)."""
    doc_rows, index, reports = load_passages(passages, source=source, collection=collection, language=language,
                                             on_error=on_error)
    item_rows, qa_reports = load_qa(qa, index, source=source, language=language, on_error=on_error,
                                    max_popularity=max_popularity)
    return (*source_frames(doc_rows, item_rows), reports + qa_reports)


def is_passages_file(path: str | Path) -> bool:
    """Whether ``path`` is a passages file (``id, title, text``; option ``passages``) rather than a QA file
    (option ``qa``), from its first record: what `lcp sources validate` loads it as."""
    _, records = read_records(path)
    first = next((r for _, r in records if isinstance(r, dict)), None)
    return first is not None and "text" in first and not {"input", "output", "question"} & set(first)


def _input_option(options: dict, key: str, *, source: str) -> Any:
    """``{key}`` (paths) or ``{key}_hf_dataset`` (+ ``_hf_name``, ``_hf_split``, ``_hf_revision``)."""
    prefix = f"{key}_"
    hub = {k.removeprefix(prefix): options.pop(k) for k in list(options) if k.startswith(prefix + "hf_")}
    unknown = sorted(prefix + k for k in hub if k not in HUB_OPTIONS)
    if unknown:
        raise ValueError(f"source {source!r} (kilt): unknown options {unknown}; known: "
                         f"{[prefix + k for k in HUB_OPTIONS]}")
    if key in options:
        hub["paths"] = options.pop(key)
    if "paths" not in hub and "hf_dataset" not in hub:
        raise ValueError(f"source {source!r} (kilt): option {key!r} (file, directory or list) or "
                         f"'{prefix}hf_dataset' is required")
    return source_paths(hub, source=source, kind="kilt")


def kilt_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: kilt``: options ``passages`` and ``qa`` (each a file, directory or list; or
    ``passages_hf_dataset`` / ``qa_hf_dataset`` with ``_hf_name``, ``_hf_split``, ``_hf_revision``,
    e.g. ``qa_hf_dataset: facebook/kilt_tasks, qa_hf_name: nq, qa_hf_split: validation``),
    ``collection`` (domain name; default the passages file's stem), ``language``, ``on_error`` and, for PopQA
    files, ``max_popularity`` (HELMET: 1000)."""
    options = dict(config.options)
    passages = _input_option(options, "passages", source=config.name)
    qa = _input_option(options, "qa", source=config.name)
    return accepted(load_kilt(passages, qa, source=config.name, **options))


def validate_kilt_files(paths: list[Path]) -> list[ValidationReport]:
    """`lcp sources validate`: passages files and QA files (options ``passages`` and ``qa`` of a run); gold passages
    are checked for shape, not looked up."""
    passages = [p for p in paths if is_passages_file(p)]
    qa = [p for p in paths if p not in passages]
    return ((load_passages(passages, source="validate", on_error="reject")[2] if passages else [])
            + (load_qa(qa, None, source="validate", on_error="reject")[1] if qa else []))
