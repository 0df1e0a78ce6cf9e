"""LongBench v2 adapter: released records -> (source documents, source items).

A LongBench v2 record (spec released_benchmarks.md "LongBench v2") is ``_id, domain, sub_domain,
difficulty ("easy"|"hard"), length ("short"|"medium"|"long"), question, choice_A .. choice_D,
answer ("A".."D"), context``; the release is one JSON list (``data.json``), JSON Lines works too.

Each record becomes one item of task ``longbench_v2`` (item id ``{source}-longbench_v2-{_id}``) and one
document:

* the context is ONE document (it is the evidence; the release has no finer evidence labels), of domain
  ``longbench_v2/{domain}``;
* the item's ``question`` is the question followed by its four choices, one per line as
  ``(A) ...`` .. ``(D) ...`` (:func:`question_with_choices`): a builder fills only
  ``{context}`` and ``{question}``, and the prompt must show the choices;
* ``answers`` = [the gold letter], ``all_classes`` = ["A", "B", "C", "D"] (the label set);
* ``category`` = the record's ``domain`` (LongBench v2's six task domains);
* run as released (construct/released.py), the record keeps its ``_id`` (``record_id``), its context
  verbatim (``context``) and, in ``record_fields``, the classes its table is cut by: ``difficulty``
  (easy | hard), ``length`` (short | medium | long: a class, not a count), ``domain`` and ``sub_domain``.
  Instances copy ``record_fields``; the table's easy/hard and short/medium/long columns read them
  (benchmarks/longbench_v2/metrics.py ``v2_rows``; the task file's ``headline.breakdown``).
* the released question and choices, as the authors' ``pred.py`` fills them in (each stripped), come back from
  the item's ``question`` with :func:`released_question` (the official protocol, benchmarks/longbench_v2/
  protocol.py). Where the merged text cannot be split back into exactly those parts (a question holding a
  line ``(A) ...`` after a blank line, a choice holding a line ``(B) ...``), the record also keeps them in
  ``record_fields`` (``question``, ``choice_A`` .. ``choice_D``, stripped) and :func:`released_question` reads
  them there; every other record's ``record_fields`` stays as above, so runs under ``protocol: ours`` are
  unchanged.

Validation is strict: a missing or blank choice, an answer outside A-D, a difficulty or length
class not in the release's vocabulary name the file, the record (``_id``) and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from lc_pipeline.sources.hub import source_paths
from lc_pipeline.sources.validation import (
    OnError,
    Record,
    ValidationReport,
    accepted,
    input_files,
    source_frames,
    validate_file,
)

__all__ = [
    "DIFFICULTIES",
    "FIELDS",
    "LENGTHS",
    "LETTERS",
    "TASK",
    "load_longbench_v2",
    "longbench_v2_source",
    "question_with_choices",
    "released_question",
    "split_question",
]

TASK = "longbench_v2"
LETTERS = ("A", "B", "C", "D")
DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")
FIELDS = frozenset({"_id", "domain", "sub_domain", "difficulty", "length", "question", "answer", "context",
                    *(f"choice_{x}" for x in LETTERS)})
DOMAIN_PREFIX = "longbench_v2/"


def question_with_choices(question: str, choices: Iterable[str]) -> str:
    """The question, a blank line, then one ``(X) choice`` line per letter: what the prompt's ``{question}`` shows."""
    lines = [f"({letter}) {choice.strip()}" for letter, choice in zip(LETTERS, choices, strict=True)]
    return question.strip() + "\n\n" + "\n".join(lines)


_SPLIT = re.compile(r"(?s)(?P<question>.*?)\n\n\(A\) (?P<A>.*?)\n\(B\) (?P<B>.*?)\n\(C\) (?P<C>.*?)\n\(D\) (?P<D>.*)")


def split_question(merged: str) -> dict[str, str] | None:
    """The parts of a :func:`question_with_choices` text as the record names them (``question``, ``choice_A`` ..
    ``choice_D``), split at the first blank line followed by ``(A) `` and then at each next choice's line; None
    when the text does not have that form."""
    m = _SPLIT.fullmatch(merged)
    if m is None:
        return None
    return {"question": m["question"], **{f"choice_{x}": m[x] for x in LETTERS}}


def released_question(question: str, record_fields: str | dict) -> dict[str, str]:
    """The released ``question`` and ``choice_A`` .. ``choice_D`` (each stripped, as ``pred.py`` fills them in) of
    an item or instance: from its ``record_fields`` when the adapter kept them there, else split back from its
    ``question`` (module docstring). A text that is neither is an error naming the field."""
    fields = json.loads(record_fields or "{}") if isinstance(record_fields, str) else dict(record_fields)
    kept = ("question", *(f"choice_{x}" for x in LETTERS))
    if all(k in fields for k in kept):
        return {k: fields[k] for k in kept}
    parts = split_question(question)
    if parts is None:
        raise ValueError("field 'question': not a LongBench v2 question with its choices (A)-(D) "
                         "(benchmarks/longbench_v2/sources.py question_with_choices), and record_fields keeps no "
                         "released question and choices")
    return parts


def _one_of(rec: Record, name: str, allowed: tuple[str, ...]) -> str:
    value = rec.required_str(name)
    if value not in allowed:
        raise rec.error(name, f"expected one of {', '.join(allowed)}, got {value!r}")
    return value


def _parse(rec: Record, *, source: str, notes: set[str]):
    rid = rec.required_str("_id")
    domain = rec.required_str("domain")
    sub_domain = rec.required_str("sub_domain")
    difficulty = _one_of(rec, "difficulty", DIFFICULTIES)
    length = _one_of(rec, "length", LENGTHS)
    question = rec.required_str("question")
    choices = [rec.required_str(f"choice_{x}") for x in LETTERS]
    answer = _one_of(rec, "answer", LETTERS)
    context = rec.required_str("context")

    extra = sorted(set(rec.data) - FIELDS)
    if extra:
        notes.add(f"fields ignored: {', '.join(extra)}")
    item_id = f"{source}-{TASK}-{rid}"
    doc_id = f"{item_id}-p1"
    doc_row = (doc_id, source, "", context, "en", f"{DOMAIN_PREFIX}{domain}", "")
    fields = {"difficulty": difficulty, "length": length, "domain": domain, "sub_domain": sub_domain}
    merged = question_with_choices(question, choices)
    released = {"question": question.strip(), **{f"choice_{x}": c.strip() for x, c in zip(LETTERS, choices, strict=True)}}
    if split_question(merged) != released:  # the merged text does not give the parts back: keep them apart
        fields.update(released)
    item_row = (item_id, source, TASK, domain, "en", merged, [answer], [],
                [doc_id], 1, list(LETTERS), [], rid, context, json.dumps(fields, sort_keys=True))
    return doc_row, item_row


def load_longbench_v2(
    paths_or_dir: str | Path | Iterable[str | Path],
    *,
    source: str,
    on_error: OnError = "fail",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """Load LongBench v2 files (or every supported file of a directory).

    Returns (documents, items, one report per file), the frames conforming to
    ``schemas.SOURCE_DOCUMENTS`` / ``SOURCE_ITEMS`` (layout in the module docstring). A ``_id`` seen
    in an earlier file is an error of the later record, as within a file.
    """
    doc_rows: list[tuple] = []
    item_rows: list[tuple] = []
    reports: list[ValidationReport] = []
    seen: dict[str, str] = {}  # _id -> file that loaded it
    for path in input_files(paths_or_dir, label="LongBench v2", caller="load_longbench_v2"):
        notes: set[str] = set()

        def parse(rec: Record, notes: set[str] = notes):
            rid = rec.required_str("_id")
            if rid in seen:
                raise rec.error("_id", f"already loaded from {seen[rid]}")
            rows = _parse(rec, source=source, notes=notes)
            seen[rid] = rec.file  # only after every check: a rejected record claims no id
            return rows

        parsed, report = validate_file(path, parse, id_field="_id", on_error=on_error)
        report.notes.extend(sorted(notes))
        reports.append(report)
        for doc, item in parsed:
            doc_rows.append(doc)
            item_rows.append(item)
    return (*source_frames(doc_rows, item_rows), reports)


def longbench_v2_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``SOURCE_KINDS["longbench_v2"]`` entry: options ``paths`` (file, directory or list) or
    ``hf_dataset: THUDM/LongBench-v2`` (``hf_split: train``), and ``on_error``. Rejected records are
    listed in the raised error / kept in the reports."""
    options = dict(config.options)
    paths = source_paths(options, source=config.name, kind="longbench_v2")
    return accepted(load_longbench_v2(paths, source=config.name, **options))


def validate_longbench_v2_files(paths: list[Path]) -> list[ValidationReport]:
    """`lcp sources validate`: LongBench v2 files loaded together as a run loads them, every record checked."""
    return load_longbench_v2(paths, source="validate", on_error="reject")[2]
