"""Source adapters by kind, and file validation for `lcp sources validate`.

Every adapter returns (documents, items, reports): the two source tables and one
:class:`ValidationReport` per file read, whose rejected records (config ``on_error: reject``)
become rows of the ``rejected_records`` table. Nothing is skipped silently.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.validation import ValidationReport, read_records

Adapter = Callable[[SourceConfig], tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]]


@dataclass
class SourceLoad:
    documents: pl.DataFrame
    items: pl.DataFrame
    reports: list[ValidationReport] = field(default_factory=list)

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


# Kinds whose items bring their own contexts (ALCE's retrieved passages, MS MARCO's BM25 candidates, whole books and
# case files, labelled texts for in-context learning): their documents are not chunked into the retrieval corpus
# and their items get no hard negatives, so they neither cost embedding time nor leak into other tasks' distractors.
OWN_CONTEXT_KINDS = frozenset({"alce", "msmarco", "narrativeqa", "infbench", "multi_lexsum", "demo_long_documents",
                               "icl", "demo_labels"})


def retrieval_sources(sources) -> list[str]:
    """Names of the configured ``sources`` whose documents form the retrieval corpus (passages, hard negatives)."""
    return [s.name for s in sources if s.kind not in OWN_CONTEXT_KINDS]


DATA_DIR_VARIABLE = "LCP_DATA"  # where the released benchmarks' files live (default ./data)


def data_dir() -> Path:
    """``$LCP_DATA``, or ``./data`` when unset: the packaged benchmark configs read ``$LCP_DATA/<config>/``."""
    return Path(os.environ.get(DATA_DIR_VARIABLE) or "data")


def expand_data_dir(value: Any) -> Any:
    """``$LCP_DATA`` / ``${LCP_DATA}`` in a source option (a string or a list of them) -> :func:`data_dir`."""
    if isinstance(value, str):
        for token in ("${" + DATA_DIR_VARIABLE + "}", "$" + DATA_DIR_VARIABLE):
            value = value.replace(token, str(data_dir()))
        return value
    if isinstance(value, list | tuple):
        return [expand_data_dir(v) for v in value]
    return value


def load_source(source: SourceConfig) -> SourceLoad:
    if any("LCP_DATA" in str(v) for v in source.options.values()):
        source = source.replace(options={k: expand_data_dir(v) for k, v in source.options.items()})
    try:
        adapter = SOURCE_KINDS[source.kind]
    except KeyError:
        raise ValueError(f"source {source.name!r}: unknown kind {source.kind!r}; known kinds: {sorted(SOURCE_KINDS)}") from None
    try:
        return SourceLoad(*adapter(source))
    except TypeError as exc:  # unknown option names surface here
        raise ValueError(f"source {source.name!r} (kind {source.kind!r}): {exc}") from exc


# -- `lcp sources validate` ---------------------------------------------------------------

def _validate_longbench(path: Path) -> list[ValidationReport]:
    from lc_pipeline.sources.longbench import load_longbench

    return load_longbench(path, source="validate", on_error="reject")[2]


def _validate_longbench_v2(path: Path) -> list[ValidationReport]:
    from lc_pipeline.sources.longbench_v2 import validate_longbench_v2_file

    return validate_longbench_v2_file(path)


def _validate_lveval(path: Path) -> list[ValidationReport]:
    from lc_pipeline.sources.lveval import load_lveval

    return load_lveval(path, source="validate", on_error="reject")[2]


def _validate_loong(path: Path) -> list[ValidationReport]:
    from lc_pipeline.sources.loong import load_loong

    # Items only: a documents folder is a property of a benchmark config, not of the file.
    return load_loong(path, source="validate", on_error="reject")[2]


def _validate_kilt(path: Path) -> list[ValidationReport]:
    from lc_pipeline.sources.kilt import validate_kilt_file

    # A passages file or a QA file alone: gold passages are checked for shape, not looked up.
    return validate_kilt_file(path)


def _validate_multihop(path: Path) -> list[ValidationReport]:
    from lc_pipeline.sources.multihop import validate_multihop_file

    return validate_multihop_file(path)


# Kind -> (fields whose presence identifies the format, validator of one file in reject mode).
# When several match, the kind with the most identifying fields wins.
FILE_KINDS: dict[str, tuple[frozenset[str], Callable[[Path], list[ValidationReport]]]] = {
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


def detect_kind(path: Path) -> str | None:
    """The adapter whose identifying fields the file's first readable record has."""
    _, records = read_records(path)
    for _, rec in records:
        if isinstance(rec, dict):
            keys = set(rec)
            matches = [k for k, (fields, _) in FILE_KINDS.items() if fields <= keys]
            return max(matches, key=lambda k: len(FILE_KINDS[k][0])) if matches else None
    return None


def validate_path(path: Path, kind: str | None = None) -> tuple[str | None, list[ValidationReport]]:
    """Validate one file with every record checked (reject mode); returns (kind, reports)."""
    kind = kind or detect_kind(path)
    if kind is None:
        raise ValueError(f"{path}: no known source format matches its records (known: {sorted(FILE_KINDS)})")
    if kind not in FILE_KINDS:
        raise ValueError(f"{path}: unknown kind {kind!r} (known: {sorted(FILE_KINDS)})")
    return kind, FILE_KINDS[kind][1](path)
