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

File-level problems (unknown extension, no records, a JSON document that does not parse)
always raise, whatever the policy: there is no record to reject, and an empty source must
not pass for a valid one.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

__all__ = [
    "FILE",
    "MAX_FIELD_CHARS",
    "RECORD",
    "Record",
    "RecordError",
    "Rejected",
    "ValidationReport",
    "display_name",
    "input_files",
    "read_records",
    "source_frames",
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
                value = json.loads(value)
            except json.JSONDecodeError:
                raise self.error(name, "expected a JSON-encoded list of strings, got a string that is not JSON") from None
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


# --------------------------------------------------------------------------- reading


def _detect_format(path: Path, name: str) -> str:
    fmt = _FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RecordError(name, None, None, FILE, f"unknown extension {path.suffix!r}; expected one of {sorted(_FORMATS)}")
    if fmt == "json":
        # Some dumps call JSON Lines ".json": a first value that is an object, followed by more
        # content, means JSONL (a JSON file holding one bare object is not a record list anyway).
        head = path.read_bytes()[:4096].lstrip()
        if head.startswith(b"{"):
            fmt = "jsonl"
    return fmt


def _jsonl(path: Path, name: str) -> Iterator[tuple[int, dict | RecordError]]:
    # Bytes are decoded per line so one bad byte costs one record, not the file. The index is
    # the 0-based line number (blank lines count) so it points straight at the line.
    with path.open("rb") as fh:
        for index, raw in enumerate(fh):
            if not raw.strip():
                continue  # a blank line holds no record
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield index, RecordError(name, index, None, RECORD, f"undecodable bytes (not UTF-8) at byte {exc.start} of the line")
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                yield index, RecordError(name, index, None, RECORD, f"invalid JSON: {exc.msg} at column {exc.colno}")
                continue
            yield index, value


def _json(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RecordError(name, None, None, FILE, f"undecodable bytes (not UTF-8) at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise RecordError(name, None, None, FILE, f"invalid JSON: {exc.msg} at line {exc.lineno}") from None
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
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise RecordError(name, None, None, FILE, f"undecodable bytes (not UTF-8) on line {line}") from None
    # Every CSV value is a string: list fields only pass if the adapter allows JSON strings.
    yield from enumerate(csv.DictReader(io.StringIO(text, newline="")))


_READERS = {"jsonl": _jsonl, "json": _json, "parquet": _parquet, "csv": _csv}


def read_records(path: str | Path) -> tuple[str, Iterator[tuple[int, dict | RecordError]]]:
    """Return (format, iterator of (index, record)).

    A record that cannot be read (bad UTF-8, bad JSON, not an object) comes out as a
    :class:`RecordError` in place of the dict, so the caller decides fail or reject.
    """
    p = Path(path)
    name = display_name(p)
    if not p.is_file():
        raise RecordError(name, None, None, FILE, "no such file")
    fmt = _detect_format(p, name)

    def records() -> Iterator[tuple[int, dict | RecordError]]:
        for index, value in _READERS[fmt](p, name):
            if not isinstance(value, dict | RecordError):
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
    fmt, records = read_records(path)
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
        raise RecordError(report.file, None, None, FILE, "no records (empty file)")
    assert report.consistent, report  # the contract the policy promises
    return accepted, report


def check_all(reports: Iterable[ValidationReport]) -> list[Rejected]:
    """All rejected records of several reports, in order."""
    return [r for rep in reports for r in rep.rejected]


# Extensions a directory is scanned for (read_records also accepts ".pq" when named directly).
SUPPORTED_EXTENSIONS = (".jsonl", ".ndjson", ".json", ".parquet", ".csv")


def input_files(paths_or_dir: str | Path | Iterable[str | Path], *, label: str, caller: str) -> list[Path]:
    """Files to read: each path as given, each directory's supported files in name order.

    A missing or odd file is kept: the reader reports it with its name. ``label`` names the
    format in the error for an empty directory (e.g. "LongBench").
    """
    given = [paths_or_dir] if isinstance(paths_or_dir, str | Path) else list(paths_or_dir)
    files: list[Path] = []
    for p in map(Path, given):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix.lower() in SUPPORTED_EXTENSIONS)
            if not found:
                raise ValueError(f"{p}: no {label} files ({', '.join(SUPPORTED_EXTENSIONS)})")
            files.extend(found)
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
