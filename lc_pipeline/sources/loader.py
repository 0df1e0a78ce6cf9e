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
from lc_pipeline.tasks import registry

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


def own_context_kinds() -> frozenset[str]:
    """Source kinds whose items bring their own contexts (tasks.registry.OWN_CONTEXT_SOURCE_KINDS, packages' too)."""
    registry.load_benchmark_packages()
    return frozenset(registry.OWN_CONTEXT_SOURCE_KINDS)


def retrieval_sources(sources) -> list[str]:
    """Names of the configured ``sources`` whose documents form the retrieval corpus (passages, hard negatives)."""
    own = own_context_kinds()
    return [s.name for s in sources if s.kind not in own]


def load_source(source: SourceConfig) -> SourceLoad:
    if any("LCP_DATA" in str(v) for v in source.options.values()):
        source = source.replace(options={k: expand_data_dir(v) for k, v in source.options.items()})
    if source.kind not in registry.SOURCE_KINDS:
        raise ValueError(f"source {source.name!r}: unknown kind {source.kind!r}; known kinds: "
                         f"{registry.SOURCE_KINDS.names()}")
    adapter = registry.SOURCE_KINDS.get(source.kind)
    with collect_skipped() as skipped:
        try:
            loaded = SourceLoad(*adapter(source))
        except TypeError as exc:  # unknown option names surface here
            raise ValueError(f"source {source.name!r} (kind {source.kind!r}): {exc}") from exc
    loaded.skipped = list(skipped)
    return loaded


# -- `lcp sources validate` ---------------------------------------------------------------
# Each file kind's validator (tasks.registry.FILE_KINDS) loads a group of files of its format as a run loads a
# source's ``paths`` (the same loader, in reject mode: every record checked), so the rules across files (an id
# already loaded from another file) apply.

def file_kinds() -> dict[str, tuple[frozenset[str], Callable[[list[Path]], list[ValidationReport]]]]:
    """Kind -> (fields whose presence identifies the format, validator of a group of files in reject mode)."""
    return {kind: (registry.FILE_KINDS.get(kind).fields, _validator(kind)) for kind in registry.FILE_KINDS.names()}


def _validator(kind: str) -> Callable[[list[Path]], list[ValidationReport]]:
    return registry.resolve(registry.FILE_KINDS.get(kind).validator)


def detect_kind(path: Path) -> str | None:
    """The adapter whose identifying fields the file's first readable record has.

    A file-level problem (empty, UTF-16, CR-only lines, a JSON array named .jsonl) raises the reader's
    :class:`RecordError` saying what was found."""
    _, records = read_records(path)
    for _, rec in records:
        if isinstance(rec, dict):
            keys = set(rec)
            kinds = {kind: registry.FILE_KINDS.get(kind).fields for kind in registry.FILE_KINDS.names()}
            matches = [k for k, fields in kinds.items() if fields <= keys]
            return max(matches, key=lambda k: len(kinds[k])) if matches else None
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
    raise ValueError(f"{path}: no known source format matches its records: {found} "
                     f"(known: {registry.FILE_KINDS.names()})")


def validate_path(path: Path, kind: str | None = None) -> tuple[str | None, list[ValidationReport]]:
    """Validate one file with every record checked (reject mode); returns (kind, reports)."""
    kind = kind or _detected(path)
    if kind not in registry.FILE_KINDS:
        raise ValueError(f"{path}: unknown kind {kind!r} (known: {registry.FILE_KINDS.names()})")
    return kind, _validator(kind)([Path(path)])


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
    if kind is not None and kind not in registry.FILE_KINDS:
        raise ValueError(f"unknown kind {kind!r} (known: {registry.FILE_KINDS.names()})")
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
        groups.setdefault(_validator(detected), []).append((f, detected))
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
