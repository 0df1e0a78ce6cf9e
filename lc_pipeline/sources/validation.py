"""Record validation shared by the source adapters (pure logic, no Dagster).

Public datasets arrive in several containers (JSONL, JSON lists, Parquet, CSV) and with
small format drifts (a list stored as a string, an empty context, a repeated id). An
adapter reads a file with :func:`validate_file`, which hands each raw record to the
adapter's parse function wrapped in a :class:`Record`; the record's checkers raise
:class:`RecordError` naming the file, the record (index and id) and the field.

Policy (``on_error``): ``"fail"`` raises the first error; ``"reject"`` keeps going and
lists each bad record with its reason. Either way nothing is skipped silently: every
record of the file ends up accepted or rejected, so
``report.records == report.accepted + len(report.rejected)``.

File-level problems (unknown extension, no records, a JSON document that does not parse, a
UTF-16 file, CR-only line endings, a JSON array named ``.jsonl``) always raise, whatever the
policy, saying what was found: there is no record to reject, and an empty source must not pass
for a valid one.

Files may be compressed (``.jsonl.gz``, ``.json.bz2``, ``.csv.xz``; stdlib ``gzip`` / ``bz2`` /
``lzma``). A folder given as a source is listed by :func:`list_folder`: its files in name order,
each one read or counted as skipped with its name and the reason (a subfolder, an unknown
extension, a broken link); subfolders are not read (no adapter reads them, :func:`input_files`).
"""

from __future__ import annotations

import bz2
import csv
import errno
import gzip
import io
import lzma
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Literal, TypeVar

from lc_pipeline import json_files
from lc_pipeline.text import LONE_SURROGATE, byte_order_mark

__all__ = [
    "FILE",
    "MAX_FIELD_CHARS",
    "RECORD",
    "Record",
    "RecordError",
    "Rejected",
    "Skipped",
    "SourceListing",
    "ValidationReport",
    "collect_skipped",
    "display_name",
    "input_files",
    "list_folder",
    "note_skipped",
    "read_records",
    "source_frames",
    "source_stem",
    "source_suffix",
    "validate_file",
]

OnError = Literal["fail", "reject"]
T = TypeVar("T")

RECORD = "<record>"  # field name for errors about the record as a whole (bad bytes, bad JSON)
FILE = "<file>"  # field name for errors about the whole file

# Longer string fields are refused: such a value is a broken export (records run together, a
# whole corpus in one cell), not a document. At ~4 characters a token it exceeds every context
# window, and it would otherwise be chunked and embedded, passage by passage, for hours.
MAX_FIELD_CHARS = 16 * 1024 * 1024

_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
# Outer suffix -> (stdlib opener, name in messages). Parquet compresses itself: only text formats are compressed.
_COMPRESSIONS: dict[str, tuple[Callable[..., Any], str]] = {".gz": (gzip.open, "gzip"), ".bz2": (bz2.open, "bzip2"),
                                                          ".xz": (lzma.open, "xz")}
_TEXT_FORMATS = ("jsonl", "json", "csv")
_ARCHIVES = (".zip", ".tar", ".tgz", ".7z", ".rar")
_SNIFF_BYTES = 64 * 1024


def display_name(path: str | Path) -> str:
    """``longbench/hotpotqa.jsonl``: enough of the path to find the file, short enough to read."""
    p = Path(path)
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


class RecordError(ValueError):
    """One record (or, with ``index=None``, the whole file) does not meet the adapter's format."""

    def __init__(self, file: str, index: int | None, record_id: str | None, field: str, reason: str):
        self.file, self.index, self.record_id, self.field, self.reason = file, index, record_id, field, reason
        where = file if index is None else f"{file} record {index}"
        if record_id is not None:
            where += f" (id {record_id!r})"
        super().__init__(f"{where}: field {field!r}: {reason}")


@dataclass(frozen=True)
class Rejected:
    file: str
    index: int | None
    record_id: str | None
    field: str
    reason: str

    @classmethod
    def from_error(cls, err: RecordError) -> Rejected:
        return cls(err.file, err.index, err.record_id, err.field, err.reason)

    def __str__(self) -> str:
        return str(RecordError(self.file, self.index, self.record_id, self.field, self.reason))


@dataclass
class ValidationReport:
    file: str
    format: str
    records: int = 0  # every record read, good or bad
    accepted: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # format facts worth knowing that are not errors

    @property
    def consistent(self) -> bool:
        return self.records == self.accepted + len(self.rejected)

    def summary(self) -> str:
        s = f"{self.file} ({self.format}): {self.records} records, {self.accepted} accepted, {len(self.rejected)} rejected"
        return "; ".join([s, *self.notes])


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class Record:
    """A raw record plus where it came from, with checkers that raise located errors."""

    def __init__(self, file: str, index: int, data: dict[str, Any], id_field: str | None = None):
        self.file, self.index, self.data, self.id_field = file, index, data, id_field

    @property
    def record_id(self) -> str | None:
        value = self.data.get(self.id_field) if self.id_field else None
        return value if isinstance(value, str) and value else None

    def error(self, field: str, reason: str) -> RecordError:
        return RecordError(self.file, self.index, self.record_id, field, reason)

    def required_str(self, name: str, *, non_empty: bool = True) -> str:
        if name not in self.data:
            raise self.error(name, "missing")
        value = self.data[name]
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {_type_name(value)}")
        if non_empty and not value.strip():
            raise self.error(name, "empty (blank) string")
        if len(value) > MAX_FIELD_CHARS:
            raise self.error(name, f"{len(value):,} characters, more than the {MAX_FIELD_CHARS:,} a field may hold")
        return value

    def str_list(self, name: str, *, allow_json_string: bool = False, non_empty: bool = True) -> list[str]:
        """A list of strings. A JSON-encoded list (``'["a"]'``, common in CSV exports) is only
        decoded when the adapter opts in: otherwise a string would be taken as one answer."""
        if name not in self.data:
            raise self.error(name, "missing")
        value = self.data[name]
        if isinstance(value, str) and allow_json_string:
            try:
                value = json_files.parse(value)
            except json_files.JsonProblem as exc:
                reason = "a string that is not JSON" if exc.syntax is not None else f"a string whose JSON is refused: {exc}"
                raise self.error(name, f"expected a JSON-encoded list of strings, got {reason}") from None
        elif hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays from Parquet readers
            value = value.tolist()
        if not isinstance(value, list | tuple):
            raise self.error(name, f"expected a list of strings, got {_type_name(value)}")
        for i, v in enumerate(value):
            if not isinstance(v, str):
                raise self.error(name, f"expected a list of strings, element {i} is {_type_name(v)}")
        if non_empty and not any(v.strip() for v in value):
            raise self.error(name, "expected at least one non-blank string, got an empty list" if not value
                             else "expected at least one non-blank string, all are blank")
        return list(value)

    def optional(self, name: str, types: type | tuple[type, ...], default: Any = None) -> Any:
        """Absent or null gives ``default``; present must have one of ``types``."""
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise self.error(name, f"expected {_types_text(types)} or null, got bool")  # bool is an int subclass
        if not isinstance(value, types):
            raise self.error(name, f"expected {_types_text(types)} or null, got {_type_name(value)}")
        return value

    def optional_str_list(self, name: str, *, allow_json_string: bool = False) -> list[str] | None:
        if self.data.get(name) is None:
            return None
        return self.str_list(name, allow_json_string=allow_json_string, non_empty=False)


def _types_text(types: type | tuple[type, ...]) -> str:
    ts = types if isinstance(types, tuple) else (types,)
    return " or ".join(t.__name__ for t in ts)


# --------------------------------------------------------------------------- file names


def _name_parts(path: str | Path) -> tuple[str, str, str | None]:
    """(stem, format suffix, compression suffix) of a file name: ``hotpotqa_e.jsonl.gz`` ->
    ``("hotpotqa_e", ".jsonl", ".gz")``; ``trec.jsonl`` -> ``("trec", ".jsonl", None)``."""
    name = PurePath(str(path)).name
    outer = PurePath(name).suffix.lower()
    compression = outer if outer in _COMPRESSIONS else None
    inner = PurePath(name[: -len(outer)]) if compression else PurePath(name)
    return inner.stem, inner.suffix.lower(), compression


def source_stem(path: str | Path) -> str:
    """The file name without its format and compression suffixes: what adapters read a task or variant from
    (``qasper_e.jsonl.gz`` -> ``qasper_e``, as ``qasper_e.jsonl``)."""
    return _name_parts(path)[0]


def source_suffix(path: str | Path) -> str:
    """The format suffix, lower case, under any compression suffix (``x.CSV.gz`` -> ``.csv``)."""
    return _name_parts(path)[1]


def _unsupported(path: Path) -> str | None:
    """Why a file of a source folder is not read (None: it is)."""
    _, suffix, compression = _name_parts(path)
    if suffix in _FORMATS and not (compression and _FORMATS[suffix] not in _TEXT_FORMATS):
        return None
    outer = path.suffix.lower()
    if outer in _ARCHIVES or suffix == ".tar":
        return "an archive: unpack it into the folder"
    if compression:
        return (f"compressed file of unknown format ({path.name!r}); expected one of "
                f"{', '.join(s + compression for s in _FORMATS if _FORMATS[s] in _TEXT_FORMATS)}")
    return f"unknown extension {outer!r}" if outer else "no extension"


def _supported_text() -> str:
    return ", ".join(SUPPORTED_EXTENSIONS) + " (JSONL, JSON and CSV also compressed: .gz, .bz2, .xz)"


# --------------------------------------------------------------------------- reading


def _open(path: Path) -> io.BufferedIOBase:
    """The file's bytes, decompressed when its name ends in .gz / .bz2 / .xz."""
    compression = _name_parts(path)[2]
    return _COMPRESSIONS[compression][0](path, "rb") if compression else path.open("rb")


def _where(path: Path) -> str:
    compression = _name_parts(path)[2]
    return f" after {_COMPRESSIONS[compression][1]} decompression" if compression else ""


def _decompression_error(name: str, path: Path, exc: Exception, after_line: int | None = None) -> RecordError | None:
    """The file-level error for ``exc`` raised while decompressing ``path`` (``after_line``: where reading stopped);
    None when ``path`` is not compressed, so the OSError is the file's own and goes up as it is."""
    compression = _name_parts(path)[2]
    if compression is None:
        return None
    at = f" after line {after_line}" if after_line is not None else ""
    return RecordError(name, None, None, FILE, f"not readable as {_COMPRESSIONS[compression][1]}{at}: {exc}")


_DECOMPRESSION_ERRORS = (OSError, EOFError, lzma.LZMAError)  # gzip.BadGzipFile is an OSError


def _read_bytes(path: Path, name: str, limit: int = -1) -> bytes:
    try:
        with _open(path) as fh:
            return fh.read(limit)
    except _DECOMPRESSION_ERRORS as exc:
        error = _decompression_error(name, path, exc)
        if error is None:
            raise
        raise error from None


def _utf16(head: bytes) -> str | None:
    """How a file's first bytes show UTF-16 / UTF-32 text (None: they do not)."""
    found = byte_order_mark(head)
    if found is not None:
        bom, encoding, order = found
        return f"{encoding} encoded (BOM {bom.hex(' ').upper()}, {order})"
    sample = head[:2048]
    if b"\x00" not in sample:
        return None  # JSON and CSV text never holds a NUL byte: UTF-8 text has none
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    if odd > len(sample) // 4 and even < odd // 8:
        return "UTF-16 encoded (little-endian, no BOM)"
    if even > len(sample) // 4 and odd < even // 8:
        return "UTF-16 encoded (big-endian, no BOM)"
    return "binary, not text (it holds NUL bytes)"


def _sniff(path: Path, name: str, fmt: str) -> str:
    """File-level checks of a text file before its records are read; returns the format (a ``.json``
    file holding JSON Lines is ``jsonl``). Raises a :class:`RecordError` saying what was found."""
    head = _read_bytes(path, name, _SNIFF_BYTES)
    if not head:
        raise RecordError(name, None, None, FILE, f"no records: file is empty (0 bytes{_where(path)})")
    encoding = _utf16(head)
    if encoding is not None:
        raise RecordError(name, None, None, FILE, f"file is {encoding}; save it as UTF-8")
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if fmt == "json" and stripped.startswith(b"{"):
        # Some dumps call JSON Lines ".json": a first value that is an object, followed by more
        # content, means JSONL (a JSON file holding one bare object is not a record list anyway).
        fmt = "jsonl"
    if fmt == "jsonl" and b"\n" not in head and len([x for x in head.split(b"\r") if x.strip()]) > 1:
        raise RecordError(name, None, None, FILE, "lines end with CR only (classic Mac line endings), so the file "
                          "reads as one line; convert the line endings to LF (or CRLF)")
    if fmt == "jsonl" and stripped.startswith(b"[") and source_suffix(path) != ".json":
        try:
            whole = json_files.parse(_read_bytes(path, name).decode("utf-8-sig"), check=False)
        except (UnicodeDecodeError, json_files.JsonProblem):
            whole = None  # lines that are each a list: rejected one by one
        if isinstance(whole, list):
            raise RecordError(name, None, None, FILE, f"a JSON array in a {source_suffix(path)} file (one document, "
                              f"{len(whole)} elements): rename it .json or write one object per line")
    return fmt


def _detect_format(path: Path, name: str) -> str:
    _, suffix, compression = _name_parts(path)
    fmt = _FORMATS.get(suffix)
    if fmt is None or (compression and fmt not in _TEXT_FORMATS):
        reason = _unsupported(path) or ""
        if not compression:
            reason = f"{reason}; expected one of {_supported_text()}"
        raise RecordError(name, None, None, FILE, reason)
    return _sniff(path, name, fmt) if fmt in _TEXT_FORMATS else fmt


def _jsonl(path: Path, name: str) -> Iterator[tuple[int, dict | RecordError]]:
    # Bytes are decoded per line so one bad byte costs one record, not the file. The index is
    # the 0-based line number (blank lines count) so it points straight at the line. A binary file's
    # lines end at b"\n" only: U+2028 and the like stay inside their JSON string (issue 31 D10).
    index = -1
    try:
        with _open(path) as fh:
            for index, raw in enumerate(fh):
                if not raw.strip():
                    continue  # a blank line holds no record
                try:
                    line = raw.decode("utf-8-sig" if index == 0 else "utf-8")
                except UnicodeDecodeError as exc:
                    yield index, RecordError(name, index, None, RECORD,
                                             f"undecodable bytes (not UTF-8) at byte {exc.start} of line {index + 1}")
                    continue
                try:  # nesting bounded before parsing (D11); keys twice, lone surrogates: read_records
                    value = json_files.parse(line, check=False)
                except json_files.JsonProblem as exc:
                    if exc.syntax is None:
                        yield index, RecordError(name, index, None, exc.field or RECORD, str(exc))
                        continue
                    hint = " (the line holds CR characters: do lines end with CR only?)" if "\r" in line.rstrip() else ""
                    yield index, RecordError(name, index, None, RECORD,
                                             f"invalid JSON: {exc.syntax.msg} at column {exc.syntax.colno}{hint}")
                    continue
                yield index, value
    except _DECOMPRESSION_ERRORS as exc:
        error = _decompression_error(name, path, exc, after_line=index + 1)
        if error is None:
            raise
        raise error from None


def _json(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    raw = _read_bytes(path, name)
    try:
        data = json_files.parse(raw.decode("utf-8-sig"), check=False)
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecordError(name, None, None, FILE, f"undecodable bytes (not UTF-8) on line {line} (byte {exc.start})") from None
    except json_files.JsonProblem as exc:
        reason = str(exc) if exc.syntax is None else f"invalid JSON: {exc.syntax.msg} at line {exc.syntax.lineno}"
        raise RecordError(name, None, None, FILE, reason) from None
    if not isinstance(data, list):
        raise RecordError(name, None, None, FILE, f"expected a JSON list of records, got {_type_name(data)}")
    yield from enumerate(data)


def _parquet(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for broken files
        raise RecordError(name, None, None, FILE, f"unreadable Parquet: {exc}") from exc
    yield from enumerate(table.to_pylist())


def _csv(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    raw = _read_bytes(path, name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecordError(name, None, None, FILE, f"undecodable bytes (not UTF-8) on line {line}") from None
    # Every CSV value is a string: list fields only pass if the adapter allows JSON strings.
    yield from enumerate(csv.DictReader(io.StringIO(text, newline="")))


_READERS = {"jsonl": _jsonl, "json": _json, "parquet": _parquet, "csv": _csv}


def read_records(path: str | Path, *, id_field: str | None = None) -> tuple[str, Iterator[tuple[int, dict | RecordError]]]:
    """Return (format, iterator of (index, record)).

    A record that cannot be read (bad UTF-8, bad JSON, not an object, a lone surrogate in a
    JSON string) comes out as a :class:`RecordError` in place of the dict, so the caller decides
    fail or reject; ``id_field`` names the record's id in those errors. File-level problems raise here,
    before any record is read.
    """
    p = Path(path)
    name = display_name(p)
    if not p.is_file():
        problem = _link_problem(p) or ("a folder, not a file" if p.is_dir() else "no such file")
        raise RecordError(name, None, None, FILE, problem)
    fmt = _detect_format(p, name)

    def records() -> Iterator[tuple[int, dict | RecordError]]:
        for index, value in _READERS[fmt](p, name):
            if isinstance(value, dict) and fmt in ("jsonl", "json"):
                found = json_files.find_problem(value)  # a lone surrogate, a key given twice (D25)
                if found is not None:
                    rid = value.get(id_field) if id_field else None
                    rid = rid if isinstance(rid, str) and rid and not LONE_SURROGATE.search(rid) else None
                    field_path, reason = found
                    top = field_path.split(".")[0].split("[")[0]
                    if field_path != top:
                        reason = f"{field_path}: {reason}"
                    value = RecordError(name, index, rid, top, reason)
            elif not isinstance(value, dict | RecordError):
                value = RecordError(name, index, None, RECORD, f"expected an object (mapping), got {_type_name(value)}")
            yield index, value

    return fmt, records()


# --------------------------------------------------------------------------- driver


def validate_file(
    path: str | Path,
    parse: Callable[[Record], T],
    *,
    id_field: str | None = None,
    on_error: OnError = "fail",
) -> tuple[list[T], ValidationReport]:
    """Read ``path`` and run ``parse`` on every record; return (parsed values, report).

    ``parse`` raises :class:`RecordError` (usually via the Record checkers) for a bad record.
    With ``id_field`` a repeated id is an error of the later record, so a file never yields
    two items with one id.
    """
    if on_error not in ("fail", "reject"):
        raise ValueError(f"on_error must be 'fail' or 'reject', got {on_error!r}")
    fmt, records = read_records(path, id_field=id_field)
    report = ValidationReport(file=display_name(path), format=fmt)
    accepted: list[T] = []
    first_seen: dict[str, int] = {}
    for index, raw in records:
        report.records += 1
        try:
            if isinstance(raw, RecordError):
                raise raw
            record = Record(report.file, index, raw, id_field)
            if id_field:
                rid = record.required_str(id_field)
                if rid in first_seen:
                    raise record.error(id_field, f"duplicate id, first seen at record {first_seen[rid]}")
                first_seen[rid] = index
            accepted.append(parse(record))
        except RecordError as err:
            if on_error == "fail":
                raise
            report.rejected.append(Rejected.from_error(err))
    report.accepted = len(accepted)
    if report.records == 0:
        what = {"jsonl": "only blank lines", "json": "an empty JSON list", "csv": "a header and no rows"}
        raise RecordError(report.file, None, None, FILE, f"no records ({what.get(fmt, 'no rows')})")
    assert report.consistent, report  # the contract the policy promises
    return accepted, report


def check_all(reports: Iterable[ValidationReport]) -> list[Rejected]:
    """All rejected records of several reports, in order."""
    return [r for rep in reports for r in rep.rejected]


# Extensions a folder is read for, each also compressed (.gz, .bz2, .xz) except Parquet.
SUPPORTED_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".csv")


@dataclass(frozen=True)
class Skipped:
    """A file or folder of a source folder that is not read, and why."""

    file: str  # display name, as in reports
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: skipped ({self.reason})"


@dataclass
class SourceListing:
    files: list[Path]  # read, in name order
    skipped: list[Skipped]


def _link_problem(entry: Path) -> str | None:
    if not entry.is_symlink():
        return None
    try:
        os.stat(entry)
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else f"a broken symlink (target {os.readlink(entry)!r} missing)"
    return None


def list_folder(folder: str | Path) -> SourceListing:
    """The files a source folder gives, and the entries it does not (with the reason).

    Only the folder's own files are read, in name order, symlinks to files included: no adapter reads
    subfolders (Loong's ``doc/`` is its documents folder, read by that adapter). Every other entry (a
    subfolder, an unsupported extension, a broken or looping link) is a :class:`Skipped`, never dropped silently.
    """
    folder = Path(folder)
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise ValueError(f"{folder}: cannot list the folder: {exc.strerror or exc}") from None
    files: list[Path] = []
    skipped: list[Skipped] = []
    for entry in entries:
        reason = _link_problem(entry)
        if reason is None:
            if entry.is_dir():
                reason = "a folder: only the files directly in a source folder are read"
            elif not entry.is_file():
                reason = "not a regular file"
            else:
                reason = _unsupported(entry)
        if reason is None:
            files.append(entry)
        else:
            skipped.append(Skipped(display_name(entry), reason))
    return SourceListing(files, skipped)


_SKIPPED: ContextVar[list[Skipped] | None] = ContextVar("lcp_skipped_files", default=None)


@contextmanager
def collect_skipped() -> Iterator[list[Skipped]]:
    """Collect what :func:`input_files` skips while an adapter runs (``loader.load_source`` wraps each load),
    so skipped files reach the load's notes and the asset's metadata without every adapter returning them."""
    found: list[Skipped] = []
    token = _SKIPPED.set(found)
    try:
        yield found
    finally:
        _SKIPPED.reset(token)


def note_skipped(skipped: Iterable[Skipped]) -> None:
    """Add to the skipped files of the load under way (see :func:`collect_skipped`); no-op outside one."""
    found = _SKIPPED.get()
    if found is not None:
        found.extend(s for s in skipped if s not in found)


def input_files(paths_or_dir: str | Path | Iterable[str | Path], *, label: str, caller: str) -> list[Path]:
    """Files to read: each path as given, each folder's files as :func:`list_folder` lists them.

    A missing or odd file given by name is kept: the reader reports it with its name. A folder's
    skipped entries are noted (:func:`note_skipped`); a folder with no file to read is an error naming
    what it holds. ``label`` names the format in that error (e.g. "LongBench").
    """
    given = [paths_or_dir] if isinstance(paths_or_dir, str | Path) else list(paths_or_dir)
    files: list[Path] = []
    for p in map(Path, given):
        if p.is_dir():
            listing = list_folder(p)
            note_skipped(listing.skipped)
            if not listing.files:
                held = "; ".join(map(str, listing.skipped)) if listing.skipped else "the folder is empty"
                raise ValueError(f"{p}: no {label} files ({_supported_text()}): {held}")
            files.extend(listing.files)
        else:
            files.append(p)
    if not files:
        raise ValueError(f"{caller}: no paths given")
    return files


def source_frames(doc_rows: list[tuple], item_rows: list[tuple]):
    """Adapter row tuples -> (documents, items) conforming to the source table schemas."""
    import polars as pl

    from lc_pipeline import schemas

    docs = pl.DataFrame(doc_rows, schema=list(schemas.SOURCE_DOCUMENTS), orient="row")
    # Adapters of sources without released records give the columns before the record columns.
    defaults = tuple(schemas.RECORD_COLUMN_DEFAULTS.values())
    width = len(schemas.SOURCE_ITEMS)
    item_rows = [row if len(row) == width else (*row, *defaults[len(row) - width:]) for row in item_rows]
    items = pl.DataFrame(item_rows, schema=schemas.SOURCE_ITEMS, orient="row")
    return schemas.conform(docs, "source_documents"), schemas.conform(items, "source_items")


def accepted(loaded: tuple) -> tuple:
    """An adapter's (documents, items, reports), or a RecordError naming its files when no record was
    accepted: a source that yields nothing is an error, never an empty partition."""
    documents, items, reports = loaded
    if not len(items):
        raise RecordError(", ".join(r.file for r in reports), None, None, FILE, "no accepted records")
    return documents, items, reports
