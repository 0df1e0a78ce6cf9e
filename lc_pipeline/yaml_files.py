"""The project's one way to read a YAML file it is given: configs, the model registry, task files.

``yaml.safe_load(path.read_text())`` let three kinds of bad file through as Python tracebacks or
silent surprises (issue 22, items 7, 8 and 9). :func:`read_yaml` reads the file's bytes and

- decodes them as UTF-8, strictly: a UTF-16 / UTF-32 file (byte-order mark or NUL bytes) or a byte
  that is not UTF-8 (a Latin-1 ``é``) is an error naming the file, the line and what was found;
- refuses a folder or a missing file with its own message;
- parses with :class:`StrictLoader`, PyYAML's ``SafeLoader`` with two rules more:
  a key given twice in one mapping, at any depth, is an error naming both lines (PyYAML keeps the
  last one silently), and a document whose aliases would expand past :data:`MAX_EXPANDED_NODES`
  nodes is refused once composed, before anything is built from it, so an "alias bomb" of a few
  hundred bytes costs milliseconds (it cost 9 s and 454 MB). Anchors themselves are accepted: PyYAML's
  own ``safe_dump`` writes them for a value used twice, so a generated task file has them. A
  recursive alias (a value containing itself) is refused;
- turns every ``yaml.YAMLError`` (a tab used for indentation, an unclosed quote, two documents)
  into the caller's error naming the file, the line and the column.

The error class is the caller's (``error=``): ``ConfigError`` for configs, ``ModelSpecError`` for
the model registry, ``TaskFileError`` for task files, so every place that handles those keeps
working. Nothing here imports Dagster.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import yaml

from lc_pipeline.text import byte_order_mark

# Nodes a document may hold once every alias is expanded. The packaged configs and task files hold at
# most a few thousand; the 330-byte alias bomb of issue 22 expands to millions.
MAX_EXPANDED_NODES = 200_000


class YamlFileError(ValueError):
    """A YAML file that cannot be read; the message names the file (and the line where there is one)."""


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Nodes under ``node`` counting every alias as a copy, computed once per distinct node (so the
    count itself never expands anything); ``open_nodes`` finds a node that contains itself."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise yaml.composer.ComposerError(None, None, "a recursive alias (a value that contains itself)",
                                          node.start_mark)
    open_nodes.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(child, sizes, open_nodes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, sizes, open_nodes) + _expanded_size(v, sizes, open_nodes) for k, v in node.value)
    open_nodes.discard(key)
    sizes[key] = size
    return size


class StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses duplicate keys and alias expansion past a bound (module docstring)."""

    def compose_document(self):  # type: ignore[no-untyped-def]
        node = super().compose_document()
        if node is not None and self.first_alias is not None:
            size = _expanded_size(node, {}, set())
            if size > MAX_EXPANDED_NODES:
                raise yaml.composer.ComposerError(
                    None, None, f"its aliases (*name) expand to {size:,} values, more than the "
                    f"{MAX_EXPANDED_NODES:,} a config may hold (an alias bomb?): write the values out",
                    self.first_alias)
        return node

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) and self.first_alias is None:
            self.first_alias = event.start_mark
        return super().compose_node(parent, index)

    first_alias = None  # where the document's first alias is; None: it has none, nothing to count

    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    seen = first_line.get(key)
                except TypeError:  # an unhashable key: SafeLoader's own error says so below
                    continue
                line = key_node.start_mark.line + 1
                if seen is not None:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first given on line {seen}); YAML would keep only "
                        "the last one", key_node.start_mark)
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def decode_utf8(data: bytes, where: str, error: type[Exception] = YamlFileError) -> str:
    """``data`` as text; not UTF-8 is ``error`` naming ``where``, the line and the encoding found.

    A UTF-8 byte-order mark is dropped (the file is UTF-8); UTF-16/32 and stray bytes are refused.
    """
    found = byte_order_mark(data)
    if found is not None:
        bom, encoding, order = found
        raise error(f"{where}: the file is {encoding}, {order}, not UTF-8 (it starts with a byte-order mark "
                    f"{bom.hex(' ')}); save it as UTF-8")
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise error(f"{where}: not UTF-8 text: NUL bytes at line {line} (UTF-16 without a "
                    "byte-order mark, or not a text file); save it as UTF-8")
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        column = len(data[line_start:exc.start].decode("utf-8", errors="replace")) + 1
        bad = data[exc.start:exc.end]
        latin1 = bad[:1].decode("cp1252", errors="replace")
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{where}: not UTF-8 at line {line}, column {column}: byte "
                    f"0x{bad[0]:02x} is not UTF-8 (in Latin-1 / Windows-1252 it would be {latin1!r}); "
                    "save the file as UTF-8") from None


def read_text(path: str | Path, what: str = "YAML file", error: type[Exception] = YamlFileError) -> str:
    """The file's text, decoded strictly as UTF-8; a folder, a missing or unreadable file is ``error``."""
    p = Path(path)
    where = f"{what} {p}"
    if p.is_dir():
        raise error(f"{where}: is a folder, not a {what}")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise error(f"{where}: no such file") from None
    except OSError as exc:
        raise error(f"{where}: cannot read it: {exc.strerror or exc}") from None
    return decode_utf8(data, where, error)


def parse_yaml(text: str, where: str, error: type[Exception] = YamlFileError) -> Any:
    """``text`` parsed by :class:`StrictLoader` (one document; ``None`` when empty); any YAML problem
    is ``error`` naming ``where``, the line and the column."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # StrictLoader is a SafeLoader
    except yaml.reader.ReaderError as exc:  # a control character; its position counts characters
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise error(f"{where}: not valid YAML at line {line}, column {column}: character {chr(exc.character)!r} "
                    "is not allowed") from None
    except yaml.YAMLError as exc:
        raise error(f"{where}: not valid YAML{_position(exc)}: {_problem(exc)}") from None


def read_yaml(path: str | Path, what: str = "YAML file", error: type[Exception] = YamlFileError) -> Any:
    """The one YAML document in ``path`` (``None`` for an empty file), read as the module docstring says.

    ``what`` names the file's role in messages (``config``, ``model registry``, ``task file``);
    every problem is raised as ``error`` with a message that starts ``<what> <path>``.
    """
    return parse_yaml(read_text(path, what, error), f"{what} {Path(path)}", error)


def _position(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return f" at line {mark.line + 1}, column {mark.column + 1}"
    return ""


def _problem(exc: yaml.YAMLError) -> str:
    if not isinstance(exc, yaml.MarkedYAMLError):
        return str(exc)
    parts = [p for p in (exc.context, exc.problem) if p]
    context_mark, problem_mark = exc.context_mark, exc.problem_mark
    if exc.context and context_mark is not None and problem_mark is not None \
            and context_mark.line != problem_mark.line:
        parts[0] = f"{exc.context} (line {context_mark.line + 1})"
    text = ", ".join(parts)
    if "'\\t'" in text:
        text += " (YAML indents with spaces; a tab cannot start a line's content)"
    return text
