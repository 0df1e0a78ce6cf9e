"""Source adapters by kind, and file validation for `lcp sources validate`.

Every adapter returns (documents, items, reports): the two source tables and one
:class:`ValidationReport` per file read, whose rejected records (config ``on_error: reject``)
become rows of the ``rejected_records`` table. Nothing is skipped silently: the entries of a
source folder that are not read (a subfolder, an unknown extension) are the load's ``skipped``,
in its notes and in the asset's metadata.

`lcp sources validate` (:func:`check_paths`) runs the same adapter loaders on the same file
listing (:func:`validation.list_folder`), a folder's files of one kind loaded together, so ids
repeated across files are caught as a run catches them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.config import SourceConfig
from lc_pipeline.settings import expand_data_dir
from lc_pipeline.sources.validation import (
    RecordError,
    Skipped,
    ValidationReport,
    collect_skipped,
    display_name,
    list_folder,
    read_records,
)

Adapter = Callable[[SourceConfig], tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]]


@dataclass
class SourceLoad:
    documents: pl.DataFrame
    items: pl.DataFrame
    reports: list[ValidationReport] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # entries of a source folder not read, with the reason

    def notes(self) -> list[str]:
        """Each report's notes (``file: note``), then each skipped entry (``file: skipped (reason)``)."""
        return [f"{r.file}: {note}" for r in self.reports for note in r.notes] + [str(s) for s in self.skipped]

    def rejected(self, source: str) -> pl.DataFrame:
        rows = [
            {"source": source, "file": r.file, "record_index": r.index, "record_id": r.record_id,
             "field": r.field, "reason": r.reason}
            for report in self.reports
            for r in report.rejected
        ]
        return schemas.conform(pl.DataFrame(rows, schema=schemas.REJECTED_RECORDS), "rejected_records")


def _demo_corpus(source: SourceConfig):
    from lc_pipeline.sources.demo_corpus import build_demo_corpus

    documents, items = build_demo_corpus(source=source.name, **source.options)
    return documents, items, []


def _lazy(module: str, function: str) -> Adapter:
    """Import an adapter on first use: `lcp` and the definitions load without every parser."""

    def adapter(source: SourceConfig):
        import importlib

        return getattr(importlib.import_module(f"lc_pipeline.sources.{module}"), function)(source)

    adapter.target = f"lc_pipeline.sources.{module}:{function}"  # what it names (test_registered_names.py)
    return adapter


SOURCE_KINDS: dict[str, Adapter] = {
    "demo_corpus": _demo_corpus,
    "longbench": _lazy("longbench", "longbench_source"),
    "longbench_v2": _lazy("longbench_v2", "longbench_v2_source"),
    "lveval": _lazy("lveval", "lveval_source"),
    "loong": _lazy("loong", "loong_source"),
    "generic": _lazy("generic", "generic_source"),
    "kilt": _lazy("kilt", "kilt_source"),
    "msmarco": _lazy("msmarco", "msmarco_source"),
    "multihop": _lazy("multihop", "multihop_source"),
    "narrativeqa": _lazy("helmet_longdoc", "narrativeqa_source"),
    "infbench": _lazy("helmet_longdoc", "infbench_source"),
    "multi_lexsum": _lazy("helmet_longdoc", "multi_lexsum_source"),
    "demo_long_documents": _lazy("demo_long_documents", "demo_long_documents_source"),
    "icl": _lazy("icl", "icl_source"),
    "demo_labels": _lazy("demo_labels", "demo_labels_source"),
    "alce": _lazy("alce", "alce_source"),
}


def _lazy_from(module: str, function: str) -> Adapter:
    """:func:`_lazy` for an adapter in a benchmark's package (``lc_pipeline.benchmarks.<name>``)."""

    def adapter(source: SourceConfig):
        import importlib

        return getattr(importlib.import_module(module), function)(source)

    adapter.target = f"{module}:{function}"
    return adapter


# HELMET's released preprocessed files (data.tar.gz, its scripts/download_data.sh), one dataset per source.
SOURCE_KINDS["helmet_released"] = _lazy_from("lc_pipeline.benchmarks.helmet.released_data", "helmet_released_source")


# Kinds whose items bring their own contexts (ALCE's retrieved passages, MS MARCO's BM25 candidates, whole books and
# case files, labelled texts for in-context learning): their documents are not chunked into the retrieval corpus
# and their items get no hard negatives, so they neither cost embedding time nor leak into other tasks' distractors.
OWN_CONTEXT_KINDS = frozenset({"alce", "msmarco", "narrativeqa", "infbench", "multi_lexsum", "demo_long_documents",
                               "icl", "demo_labels"})
OWN_CONTEXT_KINDS |= {"helmet_released"}  # HELMET's released records: their contexts are the records' own


def retrieval_sources(sources) -> list[str]:
    """Names of the configured ``sources`` whose documents form the retrieval corpus (passages, hard negatives)."""
    return [s.name for s in sources if s.kind not in OWN_CONTEXT_KINDS]


def load_source(source: SourceConfig) -> SourceLoad:
    if any("LCP_DATA" in str(v) for v in source.options.values()):
        source = source.replace(options={k: expand_data_dir(v) for k, v in source.options.items()})
    try:
        adapter = SOURCE_KINDS[source.kind]
    except KeyError:
        raise ValueError(f"source {source.name!r}: unknown kind {source.kind!r}; known kinds: {sorted(SOURCE_KINDS)}") from None
    with collect_skipped() as skipped:
        try:
            loaded = SourceLoad(*adapter(source))
        except TypeError as exc:  # unknown option names surface here
            raise ValueError(f"source {source.name!r} (kind {source.kind!r}): {exc}") from exc
    loaded.skipped = list(skipped)
    return loaded


# -- `lcp sources validate` ---------------------------------------------------------------
# Each validator loads a group of files of its format as a run loads a source's ``paths`` (the same loader, in
# reject mode: every record checked), so the rules across files (an id already loaded from another file) apply.

def _validate_longbench(paths: list[Path]) -> list[ValidationReport]:
    from lc_pipeline.sources.longbench import load_longbench

    return load_longbench(paths, source="validate", on_error="reject")[2]


def _validate_longbench_v2(paths: list[Path]) -> list[ValidationReport]:
    from lc_pipeline.sources.longbench_v2 import load_longbench_v2

    return load_longbench_v2(paths, source="validate", on_error="reject")[2]


def _validate_lveval(paths: list[Path]) -> list[ValidationReport]:
    from lc_pipeline.sources.lveval import load_lveval

    return load_lveval(paths, source="validate", on_error="reject")[2]


def _validate_loong(paths: list[Path]) -> list[ValidationReport]:
    from lc_pipeline.sources.loong import load_loong

    # Items only: a documents folder is a property of a benchmark config, not of the file. A run loads one file.
    return [report for path in paths for report in load_loong(path, source="validate", on_error="reject")[2]]


def _validate_kilt(paths: list[Path]) -> list[ValidationReport]:
    from lc_pipeline.sources.kilt import is_passages_file, load_passages, load_qa

    # Passages files and QA files (option ``passages`` and ``qa`` of a run): gold passages are checked for shape,
    # not looked up.
    passages = [p for p in paths if is_passages_file(p)]
    qa = [p for p in paths if p not in passages]
    return ((load_passages(passages, source="validate", on_error="reject")[2] if passages else [])
            + (load_qa(qa, None, source="validate", on_error="reject")[1] if qa else []))


def _validate_multihop(paths: list[Path]) -> list[ValidationReport]:
    from lc_pipeline.sources.multihop import load_multihop

    # The loader detects each file's format (HotpotQA, 2Wiki, MuSiQue) itself.
    return load_multihop(paths, source="validate", on_error="reject")[2]


# Kind -> (fields whose presence identifies the format, validator of a group of files in reject mode).
# When several match, the kind with the most identifying fields wins.
FILE_KINDS: dict[str, tuple[frozenset[str], Callable[[list[Path]], list[ValidationReport]]]] = {
    "longbench": (frozenset({"_id", "dataset", "context", "input", "answers"}), _validate_longbench),
    "longbench_v2": (frozenset({"_id", "domain", "difficulty", "length", "question", "choice_A", "answer"}),
                     _validate_longbench_v2),
    "lveval": (frozenset({"input", "context", "answers", "answer_keywords"}), _validate_lveval),
    "loong": (frozenset({"id", "doc", "question", "instruction", "answer", "level", "type"}), _validate_loong),
    # kind "kilt": its QA files (KILT or simple shape) and its passages file
    "kilt": (frozenset({"id", "input", "output"}), _validate_kilt),
    "kilt_qa": (frozenset({"id", "question", "answers", "positive_ids"}), _validate_kilt),
    "kilt_qa_gold_ids": (frozenset({"id", "question", "answers", "gold_ids"}), _validate_kilt),
    "kilt_passages": (frozenset({"id", "title", "text"}), _validate_kilt),
    # kind "multihop": the validator detects the format itself
    "hotpotqa": (frozenset({"question", "answer", "supporting_facts", "context"}), _validate_multihop),
    "2wikimqa": (frozenset({"question", "answer", "supporting_facts", "context", "evidences"}), _validate_multihop),
    "musique": (frozenset({"question", "answer", "paragraphs"}), _validate_multihop),
}


def _validate_helmet_released(paths: list[Path]) -> list[ValidationReport]:
    import importlib

    # HELMET's released files: the kind of each (RAG, re-rank, JSON KV, RULER) is told by its name
    return importlib.import_module("lc_pipeline.benchmarks.helmet.released_data").validate_released_files(paths)


FILE_KINDS.update({
    "helmet_rag": (frozenset({"question", "answers", "ctxs"}), _validate_helmet_released),
    "helmet_rerank": (frozenset({"qid", "query", "ctxs"}), _validate_helmet_released),
    "helmet_json_kv": (frozenset({"context", "question", "answer", "demos", "num_kvs"}), _validate_helmet_released),
    "helmet_ruler": (frozenset({"context", "query", "type_needle_v", "outputs"}), _validate_helmet_released),
})


def detect_kind(path: Path) -> str | None:
    """The adapter whose identifying fields the file's first readable record has.

    A file-level problem (empty, UTF-16, CR-only lines, a JSON array named .jsonl) raises the reader's
    :class:`RecordError` saying what was found."""
    _, records = read_records(path)
    for _, rec in records:
        if isinstance(rec, dict):
            keys = set(rec)
            matches = [k for k, (fields, _) in FILE_KINDS.items() if fields <= keys]
            return max(matches, key=lambda k: len(FILE_KINDS[k][0])) if matches else None
    return None


def _detected(path: Path) -> str:
    """:func:`detect_kind`, or a ValueError saying what the file holds instead of a known format."""
    kind = detect_kind(path)
    if kind is not None:
        return kind
    _, records = read_records(path)
    first_error = None
    found = "no record could be read"
    for _, rec in records:
        if isinstance(rec, dict):
            found = f"its first record has the fields {sorted(map(str, rec))[:20]}"
            break
        first_error = first_error or rec
    if first_error is not None and "fields" not in found:
        found += f" (first: {first_error})"
    raise ValueError(f"{path}: no known source format matches its records: {found} (known: {sorted(FILE_KINDS)})")


def validate_path(path: Path, kind: str | None = None) -> tuple[str | None, list[ValidationReport]]:
    """Validate one file with every record checked (reject mode); returns (kind, reports)."""
    kind = kind or _detected(path)
    if kind not in FILE_KINDS:
        raise ValueError(f"{path}: unknown kind {kind!r} (known: {sorted(FILE_KINDS)})")
    return kind, FILE_KINDS[kind][1]([Path(path)])


@dataclass
class FileCheck:
    """One line of `lcp sources validate`: a file read (its report), a file that could not be, or a skipped entry."""

    file: str
    status: str = "read"  # "read", "error" (the file could not be read) or "skipped" (not read, reasons say why)
    kind: str | None = None
    format: str | None = None
    records: int | None = None  # counts of a file read; None for the others
    accepted: int | None = None
    rejected: int | None = None
    reasons: list[str] = field(default_factory=list)  # every rejected record, the file's error or why it is skipped
    notes: list[str] = field(default_factory=list)  # the loader's notes (e.g. "fields ignored: all_clases")

    @property
    def failed(self) -> bool:
        return self.status == "error" or bool(self.rejected)

    def shown_reasons(self, limit: int) -> list[str]:
        """The reasons to print: a file read shows its first ``limit`` rejected records; an error or a skip its one."""
        return self.reasons[:limit] if self.status == "read" else self.reasons


def check_paths(paths: Iterable[str | Path], kind: str | None = None) -> list[FileCheck]:
    """`lcp sources validate`: every file of ``paths`` checked as a run would load it (nothing is written).

    A folder is listed as a run lists it (:func:`validation.list_folder`: its own files, not subfolders; each
    entry not read is a ``skipped`` line); an empty folder, or one with nothing to read, is an ``error`` line.
    The files of one argument are grouped by detected format and each group loaded together, in reject mode.
    """
    if kind is not None and kind not in FILE_KINDS:
        raise ValueError(f"unknown kind {kind!r} (known: {sorted(FILE_KINDS)})")
    out: list[FileCheck] = []
    for given in map(Path, paths):
        if not given.is_dir():
            out.extend(_check_files([given], kind))
            continue
        try:
            listing = list_folder(given)
        except ValueError as exc:
            out.append(FileCheck(str(given), "error", reasons=[str(exc)]))
            continue
        skipped = [FileCheck(str(given / s.file.rsplit("/", 1)[-1]), "skipped", reasons=[s.reason])
                   for s in listing.skipped]
        if not listing.files:
            held = "the folder is empty" if not listing.skipped else f"all {len(listing.skipped)} entries skipped"
            out.extend([*skipped, FileCheck(str(given), "error", reasons=[f"{given}: no source files to read: {held}"])])
            continue
        out.extend(sorted([*skipped, *_check_files(listing.files, kind)], key=lambda c: c.file))  # stable: name order
    return out


def _check_files(files: list[Path], kind: str | None) -> list[FileCheck]:
    checks: dict[Path, list[FileCheck]] = {f: [] for f in files}
    groups: dict[Callable, list[tuple[Path, str]]] = {}
    for f in files:
        try:
            detected = kind or _detected(f)
        except (RecordError, ValueError) as exc:  # file-level problems: unreadable, empty, unknown format
            checks[f].append(FileCheck(str(f), "error", kind=kind, reasons=[str(exc)]))
            continue
        groups.setdefault(FILE_KINDS[detected][1], []).append((f, detected))
    for validator, pending in groups.items():
        while pending:
            try:
                reports = validator([f for f, _ in pending])
            except (RecordError, ValueError) as exc:
                # A file-level error stops a load, as in a run; the others of the group are loaded again without it.
                culprit = next((m for m in pending if isinstance(exc, RecordError) and exc.file == display_name(m[0])), None)
                for f, k in [culprit] if culprit else pending:
                    checks[f].append(FileCheck(str(f), "error", kind=k, reasons=[str(exc)]))
                pending = [m for m in pending if m is not culprit] if culprit else []
                continue
            by_name = {display_name(f): (f, k) for f, k in pending}
            for r in reports:
                f, k = by_name.get(r.file, (pending[0][0], pending[0][1]))
                checks[f].append(FileCheck(str(f), kind=k, format=r.format, records=r.records, accepted=r.accepted,
                                           rejected=len(r.rejected), reasons=[str(x) for x in r.rejected],
                                           notes=list(r.notes)))
            break
    return [c for f in files for c in checks[f]]
