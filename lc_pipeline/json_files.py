"""The project's one way to read JSON and JSON Lines a user gives it (sources, imported predictions).

Python's ``json`` lets four kinds of bad input through as tracebacks or silent surprises (issue 31,
D10, D11, D20, D25, D12). Here:

- :func:`parse` refuses a value nested deeper than :data:`MAX_DEPTH` (``json.loads`` of 200,000 ``[``
  raised RecursionError out of every reader; now it is a :class:`JsonProblem` naming the field), a key given twice in one object at any depth
  (``json`` keeps the last one silently; the YAML readers refuse it too) and a lone UTF-16 surrogate in
  a string or key (``"\\ud800"`` decodes to a str that cannot be written as UTF-8). Each is a
  :class:`JsonProblem` naming the top-level field and the path inside it, so a caller rejects that
  record or line, not the file;
- :func:`jsonl_lines` splits JSON Lines on ``\\n`` only (a trailing ``\\r`` dropped): U+2028, U+2029
  and U+0085 are data inside JSON strings, and ``str.splitlines()`` split lines at them;
- :func:`read_regular_file` reads a file once, and only a regular file (a FIFO, a device, a process
  substitution ``<(…)`` is refused before anything is read), bounded in size;
- :func:`decode_utf8` decodes strictly, naming the file, the line and the byte offset of a byte that is
  not UTF-8.

Nothing here imports Dagster.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lc_pipeline.text import LONE_SURROGATE

__all__ = ["MAX_DEPTH", "DuplicateKeys", "JsonProblem", "decode_utf8", "find_problem", "jsonl_lines", "parse",
           "read_regular_file"]

# Arrays/objects one value may nest. Every dataset and predictions file we read nests a handful; Python's
# json recurses once per level and fails near 1,000.
MAX_DEPTH = 100

_BOM = b"\xef\xbb\xbf"
# A JSON string (unrolled, so a long string costs one pass) or a bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class JsonProblem(ValueError):
    """A JSON text that is not accepted: ``field`` is the top-level key it concerns (None: the value as a whole),
    ``path`` where inside it (``doc.pages[3]``), ``reason`` what was found."""

    def __init__(self, reason: str, field: str | None = None, path: str | None = None,
                 syntax: json.JSONDecodeError | None = None):
        self.reason, self.field, self.path = reason, field, path
        self.syntax = syntax  # the parser's own error when the text is not JSON at all
        super().__init__(f"{path}: {reason}" if path and path != field else reason)


class DuplicateKeys(dict):
    """An object that gave a key twice (``duplicates``); :func:`find_problem` reports it."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    flagged = DuplicateKeys(out)
    flagged.duplicates = [k for k, _ in pairs if k in seen or seen.add(k)]
    return flagged


def _plain(text: str) -> str:
    """``text`` with any lone surrogate written as ``\\udXXX``: safe to print and to store."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def nesting_problem(text: str, limit: int = MAX_DEPTH) -> JsonProblem | None:
    """A :class:`JsonProblem` when ``text`` nests arrays/objects deeper than ``limit`` (brackets inside strings
    do not count), found without recursion; None otherwise. The field is the top-level key being read."""
    if text.count("[") + text.count("{") <= limit:
        return None
    depth, key = 0, None
    for m in _TOKENS.finditer(text):
        token = m.group()
        if token[0] == '"':
            if depth == 1:
                key = token  # in an object, the latest string at depth 1 is the key whose value is being read
            continue
        if token in "[{":
            depth += 1
            if depth > limit:
                field = None
                if key is not None:
                    try:
                        field = _plain(json.loads(key))
                    except ValueError:
                        field = None
                line = text.count("\n", 0, m.start()) + 1
                where = f" (line {line}, character {m.start() - text.rfind(chr(10), 0, m.start())})"
                return JsonProblem(f"nested more than {limit} arrays/objects deep{where}",
                                   field, field)
        else:
            depth -= 1
    return None


def find_problem(value: Any, where: str = "") -> tuple[str, str] | None:
    """(path, reason) of the first key given twice or lone UTF-16 surrogate in a parsed value, or None."""
    if isinstance(value, str):
        m = LONE_SURROGATE.search(value)
        return None if m is None else (where, (f"lone surrogate U+{ord(m.group()):04X} at character {m.start()} "
                                               "(half of a UTF-16 pair, escaped in the JSON; not valid Unicode text)"))
    if isinstance(value, dict):
        if isinstance(value, DuplicateKeys):
            key = _plain(value.duplicates[0])
            return (f"{where}.{key}" if where else key,
                    f"key {key!r} given twice in one object (a JSON reader would silently keep one)")
        for k, v in value.items():
            key = _plain(str(k))
            path = f"{where}.{key}" if where else key
            if isinstance(k, str) and LONE_SURROGATE.search(k):
                return path, "lone surrogate in the field name (not valid Unicode text)"
            found = find_problem(v, path)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = find_problem(v, f"{where}[{i}]")
            if found:
                return found
    return None


def parse(text: str, *, limit: int = MAX_DEPTH, check: bool = True) -> Any:
    """``text`` parsed as one JSON value, or :class:`JsonProblem`: not JSON, nested deeper than ``limit``, and
    (``check``) a key given twice or a lone surrogate anywhere (see :func:`find_problem`; a caller that
    walks the value itself passes ``check=False`` and calls it on the parts it wants)."""
    bracketed = text.count("[") + text.count("{") > limit  # else it cannot nest deeper than the limit
    try:
        value = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise JsonProblem(f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", syntax=exc) from None
    except RecursionError:  # json's C parser stops itself near 1,000 levels; name the field that nests
        raise nesting_problem(text, limit) or JsonProblem(f"nested more than {limit} arrays/objects deep") from None
    if bracketed and _depth(value) > limit:
        raise nesting_problem(text, limit) or JsonProblem(f"nested more than {limit} arrays/objects deep")
    if check:
        found = find_problem(value)
        if found is not None:
            path, reason = found
            raise JsonProblem(reason, _top(path), path)
    return value


def _depth(value: Any) -> int:
    """How many arrays/objects ``value`` nests, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
                         if isinstance(child, dict | list))
    return deepest


def _top(path: str) -> str | None:
    top = path.split(".")[0].split("[")[0]
    return top or None


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of JSON Lines ``text``, split on ``\\n`` only (a ``\\r`` before it dropped):
    U+2028, U+2029, U+0085, form feeds and lone ``\\r`` stay inside their line, as JSON reads them."""
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.removesuffix("\r")


def read_regular_file(path: str | Path, max_bytes: int, *, what: str = "file",
                      error: type[Exception] = ValueError, option: str | None = None) -> bytes:
    """The bytes of ``path``, read once: it must be a regular file (links followed) of at most ``max_bytes``.

    A FIFO, a device, a socket or a pipe (``<(zcat x.gz)``) is refused before a byte is read (opening a FIFO
    does not wait for a writer), and so is a larger file, naming ``option`` (the flag that raises the bound).
    Every problem is ``error`` naming the file."""
    p = Path(path)
    where = f"{what} {p}"
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except IsADirectoryError:
        raise error(f"{where}: is a folder, not a file") from None
    except OSError as exc:
        raise error(f"{where}: cannot open it: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a named pipe (FIFO) or a pipe such as <(…)" if stat.S_ISFIFO(info.st_mode)
                    else "a folder" if stat.S_ISDIR(info.st_mode)
                    else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                    else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
            raise error(f"{where}: is {kind}, not a regular file; write it to a file first and give that file "
                        "(it is read once, hashed and kept as imported)")
        raise_it = f" ({option} raises the bound)" if option else ""
        if info.st_size > max_bytes:
            raise error(f"{where}: {info.st_size:,} bytes, more than the {max_bytes:,} allowed{raise_it}")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while being read
        raise error(f"{where}: more than the {max_bytes:,} bytes allowed (it grew while read){raise_it}")
    return data


def decode_utf8(data: bytes, where: str, error: type[Exception] = ValueError) -> str:
    """``data`` decoded strictly as UTF-8 (a leading BOM dropped), or ``error`` naming ``where``, the line and
    the byte offset of the first byte that is not UTF-8."""
    body = data.removeprefix(_BOM)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + (len(data) - len(body))
        line = data.count(b"\n", 0, offset) + 1
        bad = data[offset:offset + 1]
        latin1 = bad.decode("cp1252", errors="replace")
        raise error(f"{where}: not UTF-8 text at byte offset {offset} (line {line}): byte 0x{bad[0]:02x} is not "
                    f"UTF-8 (in Latin-1 / Windows-1252 it would be {latin1!r}); save the file as UTF-8") from None
