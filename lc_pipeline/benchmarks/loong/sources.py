"""Loong adapter (Wang et al. 2024, "Leave No Document Behind"): items -> (documents, items).

A Loong item (``loong.jsonl``, 1,600 lines) is ``id, type, level, set, length, language,
question, instruction, prompt_template, doc, answer, shuffle_doc`` (spec ``loong.md`` §12).
``doc`` lists the *names* of the documents the item is asked over; every one of them holds
evidence ("leave no document behind"), so all of them become ``evidence_doc_ids``.

The documents are not part of ``loong.jsonl``. With ``documents_dir`` they are read from the
release layout (``data/doc`` in the Loong repository):

* ``financial/*.txt`` (searched recursively): file stems look like ``2024-<Company>-j`` or
  ``<Company>-<report>``. As the authors' code does (``get_content``: ``*2024-<name>*.txt``, for
  Temporal Analysis, level 4, ``*<name>*.txt``), a name is first looked up as a file whose stem
  holds ``2024-<name>`` (level 4: ``<name>``), the closest such stem winning; else a ``doc`` name
  matches the whole stem, the stem without its ``<year>-`` prefix and one-letter ``-x`` tag, or
  the stem's tail after a ``-``;
* ``paper/<name>`` (``name`` is e.g. ``2402.01739.md``; the first line is ``# <Title>``);
* ``legal/legal.json`` (or ``legal.json`` at the top): ``{name: {"content": facts, "result": verdict}}``.

Every document is read from inside ``documents_dir``: a paper's name is one file name (no ``/``, ``\\``,
NUL, ``.`` or ``..``: ``../../etc/hostname`` or ``/etc/hostname`` is not looked up anywhere), and a file
whose real path (links followed) leaves ``documents_dir`` is not read. Either is an error naming the item,
the field ``doc`` and the rule (a rejected record with ``on_error: reject``).

``path`` may be the release's ``loong`` folder itself: its ``loong.jsonl`` is read, and its
``doc/`` folder is the ``documents_dir`` unless one is given (``$LCP_DATA/loong/``).

Each item keeps what a run as released needs (benchmarks/loong/released_build.py): ``record_id`` (the
item's ``id``) and ``record_fields`` (:func:`released_fields`: ``instruction``, ``prompt_template``,
the raw ``question``, ``set``, ``length``, ``type``, ``level``, ``language``, ``shuffle_doc``, ``doc``
(the names in the item's order), ``doc_ids`` (their document ids, position by position) and, with
documents, ``doc_headers``: the header line the authors' code puts above each document). ``context``
stays "": the context is assembled from the whole documents.

Without ``documents_dir`` every item still loads (documents frame empty) and the report says
how many documents are referenced and not loaded. With ``documents_dir``, an item whose
documents are not all there is an error naming the item and the missing document: raised
with ``on_error="fail"``, listed as rejected with ``"reject"``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.json_files import JsonProblem, decode_utf8
from lc_pipeline.json_files import parse as parse_json
from lc_pipeline.sources.hub import source_paths
from lc_pipeline.sources.validation import (
    FILE,
    OnError,
    Record,
    RecordError,
    Skipped,
    ValidationReport,
    accepted,
    display_name,
    note_skipped,
    validate_file,
)

__all__ = ["LEVEL_TASKS", "LoongDocument", "LoongDocuments", "answer_strings", "documents_folder", "load_loong",
           "loong_source", "released_fields"]

# Loong's ``level`` field is its task (spec §4, §12).
LEVEL_TASKS: dict[int, str] = {1: "spotlight_locating", 2: "comparison", 3: "clustering", 4: "chain_of_reasoning"}
TYPES = ("financial", "legal", "paper")
CATEGORY = "multi-doc QA"
_LINK_THE_LINKS = "判决结果"  # legal level-4 questions listing verdicts: documents must withhold theirs (spec §10.6)


def answer_strings(rec: Record, name: str = "answer") -> list[str]:
    """Loong gold answers as a one-element list of strings.

    Strings are kept as they are. Lists and dicts (ordered title lists, ``{group: [...]}``,
    ``{"Reference": [...], "Citation": [...]}``) are *one* structured answer, not several
    alternatives, so they are serialized deterministically as a single JSON string:
    ``json.dumps(value, ensure_ascii=False, sort_keys=True)``. Sorting the keys makes the
    string independent of the file's key order; list order (which is meaningful, e.g.
    Citation Chain) is kept. Numbers are written as JSON numbers.
    """
    if name not in rec.data:
        raise rec.error(name, "missing")
    value = rec.data[name]
    if isinstance(value, str):
        if not value.strip():
            raise rec.error(name, "empty (blank) string")
        return [value]
    if isinstance(value, bool) or value is None:
        raise rec.error(name, f"expected a string, list or dict, got {'null' if value is None else 'bool'}")
    if isinstance(value, int | float):
        return [json.dumps(value)]
    if isinstance(value, list | dict):
        if not value:
            raise rec.error(name, f"empty {type(value).__name__}")
        try:
            return [json.dumps(value, ensure_ascii=False, sort_keys=True)]
        except (TypeError, ValueError) as exc:
            raise rec.error(name, f"cannot serialize answer as JSON: {exc}") from None
    raise rec.error(name, f"expected a string, list or dict, got {type(value).__name__}")


class LoongDocument(NamedTuple):
    title: str  # our documents' title (the name; a paper's first heading)
    text: str  # the document (legal: facts and verdict)
    facts: str  # legal: the facts only (Link the Links withholds the verdict); else the text
    header: str  # the line the authors' code writes above it (get_content): financial 《<stem's last -token>》,
    # paper its title line without '#'; legal 《判决文书i》 is positional and written by the builder


class DocumentOutside(ValueError):
    """A ``doc`` name that is not a file name, or a document file whose real path leaves ``documents_dir``."""


class DocumentUnreadable(ValueError):
    """A document file that is not UTF-8 text (the message names the file and the byte offset)."""


def _read_document(p: Path) -> str:
    """A document file's text, decoded strictly as UTF-8 (issue 31 D26: ``errors="replace"`` turned a Latin-1
    ``Café`` into ``Caf\ufffd`` silently); a byte that is not UTF-8 is :class:`DocumentUnreadable`. Line ends
    are translated as a file opened in text mode translates them (``\r\n`` and ``\r`` become ``\n``), as the
    authors' ``open(...).read()`` and this reader's earlier ``read_text`` did."""
    text = decode_utf8(p.read_bytes(), f"document file {p}", DocumentUnreadable)
    return text.replace("\r\n", "\n").replace("\r", "\n")


class LoongDocuments:
    """Index of a Loong ``documents_dir``; ``get(type, name, level)`` gives a :class:`LoongDocument` or None
    (:class:`DocumentOutside` for a name or file that would be read from outside ``documents_dir``)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise RecordError(str(root), None, None, FILE, "documents_dir is not a directory")
        self._financial: dict[str, Path] = {}
        fin = self.root / "financial"
        self._financial_files = sorted(fin.rglob("*.txt")) if fin.is_dir() else []
        for p in self._financial_files:
            for key in self._financial_keys(p.stem):
                self._financial.setdefault(key, p)
        self._legal: dict[str, Any] | None = None
        self._read: dict[tuple, LoongDocument | None] = {}

    def financial_file(self, name: str, level: int | None = None) -> Path | None:
        """The report file of ``name``: the authors' ``*2024-<name>*.txt`` (level 4: ``*<name>*.txt``),
        the stem with the least text around the name winning (then the file name), else the stem keys."""
        wanted = name if level == 4 else f"2024-{name}"
        hits = [p for p in self._financial_files if wanted in p.stem]
        if hits:
            return min(hits, key=lambda p: (len(p.stem) - len(wanted), p.name))
        return self._financial.get(name)

    @staticmethod
    def _financial_keys(stem: str) -> list[str]:
        keys = [stem]
        core = re.sub(r"^\d{4}-", "", stem)
        keys.append(core)
        keys.append(re.sub(r"-[A-Za-z]$", "", core))
        parts = stem.split("-")
        keys.extend("-".join(parts[i:]) for i in range(1, len(parts)))  # tails after a "-"
        return keys

    def _legal_map(self) -> dict[str, Any]:
        if self._legal is None:
            for p in (self.root / "legal" / "legal.json", self.root / "legal.json"):
                if p.is_file():
                    try:
                        self._inside(p, "legal.json")
                    except DocumentOutside as exc:
                        raise RecordError(display_name(p), None, None, FILE, str(exc)) from None
                    try:  # nesting bounded, keys given twice and lone surrogates refused (json_files)
                        data = parse_json(decode_utf8(p.read_bytes(), str(p), DocumentUnreadable))
                    except (DocumentUnreadable, JsonProblem) as exc:
                        raise RecordError(display_name(p), None, None, FILE, f"unreadable legal.json: {exc}") from None
                    if not isinstance(data, dict):
                        raise RecordError(display_name(p), None, None, FILE, "expected a JSON object {name: {content, result}}")
                    self._legal = data
                    break
            else:
                self._legal = {}
        return self._legal

    def where(self, type_: str) -> str:
        return {"financial": f"{self.root}/financial/*.txt", "paper": f"{self.root}/paper/",
                "legal": f"{self.root}/legal/legal.json"}[type_]

    def expected(self, type_: str, name: str, level: int | None = None) -> str:
        """Where ``name`` was looked for, for the error that says it is missing."""
        if type_ == "financial":
            return f"{self.root}/financial/*{name if level == 4 else '2024-' + name}*.txt"
        if type_ == "paper":
            return f"{self.root}/paper/{name}"
        return f"{self.root}/legal/legal.json key {name!r}"

    def get(self, type_: str, name: str, level: int | None = None) -> LoongDocument | None:
        """The document, or None when it is not there (read once: items share their documents)."""
        key = (type_, name, level == 4 if type_ == "financial" else None)
        if key not in self._read:
            self._read[key] = self._get(type_, name, level)
        return self._read[key]

    def _inside(self, p: Path, what: str) -> Path:
        """``p`` if its real path (links followed) is inside ``documents_dir``, else :class:`DocumentOutside`."""
        real, root = p.resolve(), self.root.resolve()
        if not real.is_relative_to(root):
            raise DocumentOutside(f"{what}: {p} leads to {real}, outside documents_dir {root}; documents are read "
                                  "only from inside it")
        return p

    def paper_file(self, name: str) -> Path | None:
        """``paper/<name>`` (else ``<name>`` at the top of ``documents_dir``) when it is a regular file inside
        ``documents_dir``; ``name`` must be one file name."""
        if name in (".", "..") or any(c in name for c in ("/", "\\", "\x00")):
            raise DocumentOutside(f"document {name!r} (paper) is not a file name: a paper is named by its file in "
                                  f"{self.root}/paper/ (no '/', '\\', NUL, '.' or '..')")
        for p in (self.root / "paper" / name, self.root / name):
            if p.is_file():
                return self._inside(p, f"document {name!r} (paper)")
        return None

    def as_released(self, type_: str, name: str, level: int | None, position: int, *,
                    with_result: bool = True) -> str | None:
        """The document as the authors' ``get_content`` writes it into a prompt (``protocol: official``), None when
        it is not there: the file read whole, nothing stripped, under its header line, then a blank line (financial
        ``《<stem's last "-" token>》``; paper its first line without ``#`` above the whole file, that line
        included; legal ``《判决文书<position>》`` above ``content`` and, with ``with_result``, ``result``
        directly after it). Our documents (:meth:`get`) are stripped and a verdict follows its facts after a
        blank line: the run under ``ours`` keeps them."""
        if type_ == "financial":
            p = self.financial_file(name, level)
            if p is None:
                return None
            self._inside(p, f"document {name!r} (financial)")
            return f"《{p.stem.split('-')[-1]}》\n" + _read_document(p) + "\n\n"
        if type_ == "paper":
            p = self.paper_file(name)
            if p is None:
                return None
            content = _read_document(p)
            return content.split("\n", 1)[0].strip("#").strip() + "\n" + content + "\n\n"
        entry = self._legal_map().get(name)
        if not isinstance(entry, dict):
            return None
        content = str(entry.get("content") or "") + (str(entry.get("result") or "") if with_result else "")
        return f"《判决文书{position}》\n" + content + "\n\n"

    def _get(self, type_: str, name: str, level: int | None) -> LoongDocument | None:
        if type_ == "financial":
            p = self.financial_file(name, level)
            if p is None:
                return None
            self._inside(p, f"document {name!r} (financial)")
            text = _read_document(p).strip()
            return LoongDocument(name, text, text, f"《{p.stem.split('-')[-1]}》")
        if type_ == "paper":
            p = self.paper_file(name)
            if p is not None:
                text = _read_document(p).strip()
                first = text.partition("\n")[0]
                title = first.lstrip("#").strip() if first.startswith("#") else name
                return LoongDocument(title, text, text, first.strip("#").strip())
            return None
        entry = self._legal_map().get(name)
        if entry is None:
            return None
        if isinstance(entry, str):
            return LoongDocument(name, entry.strip(), entry.strip(), "")
        if not isinstance(entry, dict):
            return None
        content = str(entry.get("content") or "").strip()
        result = str(entry.get("result") or "").strip()
        return LoongDocument(name, "\n\n".join(x for x in (content, result) if x), content, "")


def _doc_key(source: str, type_: str, name: str) -> str:
    return f"{source}-{type_}-{name}"


def _parse(rec: Record, *, source: str, docs: LoongDocuments | None, doc_rows: dict[str, tuple],
           stats: dict[str, Counter], notes: set[str]):
    rid = rec.required_str("id")
    type_ = rec.required_str("type")
    if type_ not in TYPES:
        raise rec.error("type", f"expected one of {list(TYPES)}, got {type_!r}")
    level = rec.optional("level", int)
    if level is None:
        raise rec.error("level", "missing")
    if level not in LEVEL_TASKS:
        raise rec.error("level", f"expected 1..4 (Loong's four tasks), got {level}")
    set_ = rec.optional("set", int)
    if set_ is not None and set_ not in (1, 2, 3, 4):
        raise rec.error("set", f"expected 1..4, got {set_}")
    length = rec.optional("length", int)
    if length is not None and length < 0:
        raise rec.error("length", f"expected a non-negative int, got {length}")
    language = rec.required_str("language")
    if language not in ("en", "zh"):
        raise rec.error("language", f"expected 'en' or 'zh', got {language!r}")
    question = rec.required_str("question", non_empty=False)
    raw_question = question
    instruction = rec.optional("instruction", str, "")
    template = rec.optional("prompt_template", str)
    shuffle = rec.optional("shuffle_doc", bool)
    names = rec.str_list("doc")
    if any(not n.strip() for n in names):
        raise rec.error("doc", "a document name is blank")
    answers = answer_strings(rec)

    if not question.strip():
        # Citation Chain has no question: the instruction is the whole task (spec §4.1).
        if not instruction.strip():
            raise rec.error("question", "empty, and no instruction to stand in for it")
        question = instruction
        notes.add("items with an empty question (Citation Chain) use their instruction as the question")
    unique = list(dict.fromkeys(names))
    if len(unique) != len(names):
        notes.add("some items list a document twice; evidence_doc_ids keeps one of each")
    facts_only = type_ == "legal" and level == 4 and _LINK_THE_LINKS in question

    new_docs: dict[str, tuple] = {}
    headers: dict[str, str] = {}
    if docs is not None:
        for name in unique:
            try:
                found = docs.get(type_, name, level)
            except (DocumentOutside, DocumentUnreadable) as exc:
                raise rec.error("doc", str(exc)) from None
            if found is None:
                raise rec.error("doc", f"document {name!r} ({type_}) not found under {docs.where(type_)}: "
                                       f"expected {docs.expected(type_, name, level)}")
            text = found.facts if facts_only else found.text
            if not text.strip():
                raise rec.error("doc", f"document {name!r} ({type_}) is empty")
            key = _doc_key(source, type_, name) + ("#facts" if facts_only else "")
            new_docs[key] = (key, source, found.title, text, language, f"loong/{type_}", "")
            headers[name] = found.header
    doc_ids = [_doc_key(source, type_, n) + ("#facts" if facts_only else "") for n in names]
    evidence = list(dict.fromkeys(doc_ids))

    doc_rows.update(new_docs)  # only after every check: a rejected item adds no documents
    task = LEVEL_TASKS[level]
    stats["task"][task] += 1
    stats["type"][type_] += 1
    stats["set"][f"set{set_}" if set_ is not None else "set?"] += 1
    extra = sorted(set(rec.data) - {"id", "type", "level", "set", "length", "language", "question", "instruction",
                                     "prompt_template", "doc", "answer", "shuffle_doc"})
    if extra:
        notes.add(f"fields ignored: {', '.join(extra)}")
    hops = 1 if level == 1 else len(unique)
    fields = released_fields(
        type_=type_, level=level, set_=set_, length=length, language=language, question=raw_question,
        instruction=instruction, prompt_template=template, shuffle_doc=shuffle, names=names, doc_ids=doc_ids,
        headers=[headers[n] if type_ != "legal" else f"《判决文书{i}》" for i, n in enumerate(names, 1)]
        if docs is not None else None)
    return (f"{source}-{rid}", source, task, CATEGORY, language, question, answers, [], evidence, hops, [], [],
            rid, "", json.dumps(fields, ensure_ascii=False, sort_keys=True))


def released_fields(*, type_: str, level: int, set_: int | None, length: int | None, language: str, question: str,
                    instruction: str, prompt_template: str | None, shuffle_doc: bool | None, names: list[str],
                    doc_ids: list[str], headers: list[str] | None) -> dict[str, Any]:
    """The item's ``record_fields``: what the run as released reads (benchmarks/loong/released_build.py).

    ``question`` is the item's own (Citation Chain's is empty: its template has no ``{question}``);
    ``doc`` the names and ``doc_ids`` the document ids in the item's order, one per position (a name
    listed twice stays twice, as the authors' code renders it); ``shuffle_doc`` is true when the item
    does not say (the authors' ``item.get("shuffle_doc", True)``); ``doc_headers`` (documents loaded
    only) the header line above each document: financial ``《<file stem's last "-" token>》``, paper its
    title, legal ``《判决文书i》`` with i its 1-based position (gold answers cite these titles).
    """
    fields: dict[str, Any] = {
        "type": type_, "level": level, "set": set_, "length": length, "language": language, "question": question,
        "instruction": instruction, "prompt_template": prompt_template,
        "shuffle_doc": True if shuffle_doc is None else shuffle_doc, "doc": list(names), "doc_ids": list(doc_ids),
    }
    if headers is not None:
        fields["doc_headers"] = list(headers)
    return fields


def documents_folder(path: str | Path, documents_dir: str | Path | None) -> str | Path | None:
    """The documents folder of a source: ``documents_dir`` when given, else ``<path>/doc`` when ``path`` is the
    release's folder holding one, else None."""
    if documents_dir is None and Path(path).is_dir() and (Path(path) / "doc").is_dir():
        return Path(path) / "doc"
    return documents_dir


def load_loong(
    path: str | Path,
    documents_dir: str | Path | None = None,
    *,
    source: str,
    on_error: OnError = "fail",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Load ``loong.jsonl`` (any format :func:`validate_file` reads) and, optionally, its documents.

    Item ids are ``{source}-{id}``; doc ids ``{source}-{type}-{doc name}`` (documents are
    shared between items and loaded once). Legal Link-the-Links items (level 4, verdicts
    listed in the question) point at ``…#facts`` documents that withhold the verdict.
    ``set``, ``length``, ``instruction``, ``prompt_template``, ``shuffle_doc``, the document order and
    headers (legal: the positional titles 《判决文书i》 that gold answers cite) are kept in
    ``record_fields`` (:func:`released_fields`) for the run as released; the QA suite's assembler
    does not read them.
    """
    documents_dir = documents_folder(path, documents_dir)
    if Path(path).is_dir():  # the release's folder: loong.jsonl, and doc/ unless documents_dir says otherwise
        folder = Path(path)
        path = folder / "loong.jsonl"
        note_skipped(Skipped(display_name(e), "not read: a Loong folder gives loong.jsonl and its doc/ folder")
                     for e in sorted(folder.iterdir()) if e.name not in ("loong.jsonl", "doc"))
    docs = LoongDocuments(documents_dir) if documents_dir is not None else None
    doc_rows: dict[str, tuple] = {}
    stats: dict[str, Counter] = {"task": Counter(), "type": Counter(), "set": Counter()}
    notes: set[str] = set()
    parsed, report = validate_file(
        path,
        lambda r: _parse(r, source=source, docs=docs, doc_rows=doc_rows, stats=stats, notes=notes),
        id_field="id",
        on_error=on_error,
    )
    items_df = pl.DataFrame(parsed, schema=schemas.SOURCE_ITEMS, orient="row")
    if docs is None:
        referenced = {e for ev in items_df.get_column("evidence_doc_ids").to_list() for e in ev}
        report.notes.append(
            f"documents_dir not given: {len(referenced)} documents referenced by {len(parsed)} items, none loaded "
            "(items carry evidence_doc_ids only)"
        )
    else:
        report.notes.append(f"documents loaded from {docs.root}: {len(doc_rows)}")
    for key in ("task", "type", "set"):
        report.notes.append(f"by {key}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats[key].items())))
    report.notes.extend(sorted(notes))
    report.notes.append("set, length, instruction, prompt_template, shuffle_doc and the document order are kept in "
                        "record_fields (run as released); legal documents are cited by position (《判决文书i》) in "
                        "gold answers, titles hold the case name")
    docs_df = pl.DataFrame(list(doc_rows.values()), schema=list(schemas.SOURCE_DOCUMENTS), orient="row")
    return schemas.conform(docs_df, "source_documents"), schemas.conform(items_df, "source_items"), [report]


def loong_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: loong``: options ``path`` (``loong.jsonl``, or the release's folder holding it and
    ``doc/``; ``paths`` accepted too), ``documents_dir`` (optional) and ``on_error``; or ``hf_dataset`` (+ ``hf_name``,
    ``hf_split``, ``hf_revision``) in place of ``path``."""
    options = dict(config.options)
    path = source_paths(options, source=config.name, kind="loong", path_keys=("path", "paths"), file_stem="loong")
    if isinstance(path, list | tuple):
        if len(path) != 1:
            raise ValueError(f"source {config.name!r} (loong): expected one items file, got {len(path)}")
        path = path[0]
    return accepted(load_loong(path, options.pop("documents_dir", None), source=config.name, **options))


def validate_loong_files(paths: list[Path]) -> list[ValidationReport]:
    """`lcp sources validate`: Loong item files, every record checked. Items only: a documents folder is a property
    of a benchmark config, not of the file. A run loads one file."""
    return [report for path in paths for report in load_loong(path, source="validate", on_error="reject")[2]]
