"""HELMET's released preprocessed data -> source items, assembled as HELMET's ``data.py`` assembles them.

HELMET's ``scripts/download_data.sh`` fetches ``data.tar.gz`` and unpacks it into ``data/``. Source kind
``helmet_released`` reads one dataset of that folder (option ``data``: the unpacked ``data/`` folder; option
``dataset``: one of :data:`DATASETS`) at the levels of option ``levels`` (default all five), one file per level
(the file's length lever is the level: HELMET's table, spec helmet.md §2):

================  ====================================================  ===============================
dataset           test file per level (``data/...``)                    demonstrations
================  ====================================================  ===============================
nq, triviaqa      ``kilt/<d>-dev-multikilt_1000_k{K}_dep6.jsonl``       ``kilt/<d>-train-..._k3_dep6``
hotpotqa          ``kilt/hotpotqa-dev-multikilt_1000_k{K}_dep3.jsonl``  ``kilt/hotpotqa-train-..._k3_dep3``
popqa             ``kilt/popqa_test_1000_k{K}_dep6.jsonl``              ``kilt/popqa_test_1000_k3_dep6``
msmarco           ``msmarco/test_reranking_data_k{K}_dep3.jsonl``       ``msmarco/..._k10_dep3.jsonl``
json_kv           ``json_kv/test_k{N}_dep6.jsonl``                      the record's own ``demos``
ruler_mk_needle   ``ruler/niah_multikey_2/validation_{L}.jsonl``        none (RULER is zero-shot)
ruler_mk_uuid     ``ruler/niah_multikey_3/validation_{L}.jsonl``        none
ruler_mv          ``ruler/niah_multivalue/validation_{L}.jsonl``        none
asqa, qampari     ``alce/<d>_eval_gtr_top2000.json`` (every level)      option ``prompt_file``
================  ====================================================  ===============================

``K`` / ``N`` are the per-level counts of :data:`PER_LEVEL`, ``L`` the level in tokens (8192 ... 131072).
ALCE's eval file serves every level (HELMET's ``alce_<d>_<n>`` shows the first n passages, n by level: the
builder cuts them); its demonstrations come from ALCE's prompt file (HELMET's ``prompts/<d>_revised.json``,
option ``prompt_file``; only its ``demos`` are read). LongQA, Summ and ICL have no released files: HELMET
builds them from the datasets at run time (its configs give no test file); the packaged ``helmet-released``
config reads them with the constructed kinds (``narrativeqa``, ``infbench``, ``multi_lexsum``, ``icl``).

What each record must hold (HELMET's field names; an error names the file, the record and the field):

* RAG: ``question`` (str), ``answers`` (list of str), ``ctxs`` (list of ``{title, text}``); ``id`` when any
  record of the file has one (the query key, else ``question``); PopQA also ``s_pop`` (a positive number).
* MS MARCO: ``qid`` (str), ``query`` (str), ``ctxs`` (list of ``{id: str, text: str, label: int}``, ``title``
  optional; at least one label > 0, NDCG needs a relevant passage).
* JSON KV: ``context`` (str), ``question`` (str: the key), ``answer`` (str or list of str), ``demos`` (list of
  ``[key, value]``), ``num_kvs`` (int).
* RULER: ``context`` (str), ``query`` (or ``question``) (str), ``type_needle_v`` (str), ``outputs`` (or
  ``answer``) (list of str).
* ALCE: as the ``alce`` kind reads it (sources/alce.py: ``question``, ``qa_pairs`` or ``answers``, ``docs``).

Assembly, as HELMET's ``data.py`` does it (read it for the procedure; nothing of it is copied here):

* the test sample (``max_test_samples``, option ``max_queries``, default 100, 0 = all; ``seed`` 42, reset
  before each dataset as HELMET's ``run_test`` does): RAG and MS MARCO draw that many query keys with
  ``random.Random(seed).sample(sorted(keys))`` and keep every record of those keys (all depths /
  permutations, in file order); JSON KV and RULER keep the first records of the file shuffled as Hugging Face
  ``datasets`` shuffles (``numpy.random.default_rng(seed).permutation``); ALCE likewise, after each record of
  the file, in file order, has drawn its ``shots`` demonstrations with one ``random.Random(seed)`` (HELMET's
  ``random.sample`` on the generator ``run_test`` seeds, called record by record by ``data.map``);
* PopQA keeps records with ``log10(s_pop) < 3`` (HELMET's ``kilt_popqa_3``) in both files; a record dropped by
  the filter, or left out of the sample, is counted in the file's report notes, never silently;
* contexts: RAG ``Document (Title: t): text`` passages joined by a blank line; MS MARCO ``[ID: i] Document
  (Title: t): text`` (``[ID: i] Document: text`` when the file's passages have no title); JSON KV and RULER
  the released ``context`` verbatim;
* demonstrations (option ``shots``, default 2): RAG from the demo file shuffled with the seed
  ``sha256(str(key)) mod 2^31`` (PopQA without the test query), duplicates of a key dropped, the first
  ``shots``; each is its passages, the question and its first answer. MS MARCO likewise seeded by the qid,
  from the k10 file without the test queries (all of them at once when the file has more than twice as
  many records as the test sample, else the sample's own), each its passages, the query and the gold ranking
  (IDs by label, highest first). JSON KV: the record's first ``shots`` pairs.

Each kept record is one item: task = the dataset, ``context`` = its assembled context, ``record_fields`` =
``{dataset, level, file, index, key, demos, ...}`` (what the builder, benchmarks/helmet/released_build.py, puts
in the prompt with the task file's wording, and HELMET's own fields for the authors' templates). Item ids
``<source>-<level>-<5-digit line index>``; ``record_id`` ``<file stem>-<5-digit line index>``. An ALCE
question is one item for every level (``alce`` kind's ids; no ``context``: the builder shows its first n
``docs``), its ``demos`` the prompt file's ``{question, answer, docs}``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from lc_pipeline.config import level_tokens
from lc_pipeline.sources.validation import (
    FILE,
    Record,
    RecordError,
    ValidationReport,
    accepted,
    display_name,
    read_records,
    source_frames,
    source_stem,
    validate_file,
)

__all__ = ["DATASETS", "LEVELS", "PER_LEVEL", "Dataset", "datasets_shuffle", "helmet_released_source",
           "level_file", "load_helmet_released", "query_seed", "validate_released_files"]

LEVELS = ("8k", "16k", "32k", "64k", "128k")
RAG_K = {"4k": 20, "8k": 50, "16k": 105, "32k": 220, "64k": 440, "128k": 1000}
# The number in each level's file name (spec helmet.md §2 table; 4k: the repo's short configs, not the paper's).
PER_LEVEL: dict[str, dict[str, int]] = {
    "rag": RAG_K,
    "rerank": {"4k": 14, "8k": 50, "16k": 130, "32k": 285, "64k": 600, "128k": 1000},
    "json_kv": {"4k": 50, "8k": 105, "16k": 220, "32k": 440, "64k": 900, "128k": 1800},
    "alce": {"4k": 8, "8k": 30, "16k": 75, "32k": 165, "64k": 345, "128k": 700},  # passages shown (alce_<d>_<n>)
}
POPULARITY_THRESHOLD = 3.0  # HELMET's kilt_popqa_3: log10(s_pop) < 3
MAX_QUERIES = 100  # HELMET's max_test_samples
SEED = 42
SHOTS = 2


@dataclass(frozen=True)
class Dataset:
    name: str  # our task name (benchmarks/helmet/task_files/helmet*.yaml)
    category: str
    kind: str  # rag | rerank | json_kv | ruler | alce
    test: str  # file under data/, with {k} (the level's count) or {tokens} (the level in tokens)
    demos: str | None = None  # demonstrations file under data/
    popularity: float | None = None  # PopQA: keep log10(s_pop) below this


def _kilt(name: str, dep: int) -> Dataset:
    return Dataset(name, "RAG", "rag", f"kilt/{name}-dev-multikilt_1000_k{{k}}_dep{dep}.jsonl",
                   f"kilt/{name}-train-multikilt_1000_k3_dep{dep}.jsonl")


def _ruler(name: str, folder: str) -> Dataset:
    return Dataset(name, "Synthetic recall", "ruler", f"ruler/{folder}/validation_{{tokens}}.jsonl")


DATASETS: dict[str, Dataset] = {d.name: d for d in (
    _kilt("nq", 6), _kilt("triviaqa", 6), _kilt("hotpotqa", 3),
    Dataset("popqa", "RAG", "rag", "kilt/popqa_test_1000_k{k}_dep6.jsonl", "kilt/popqa_test_1000_k3_dep6.jsonl",
            POPULARITY_THRESHOLD),
    Dataset("msmarco", "Re-rank", "rerank", "msmarco/test_reranking_data_k{k}_dep3.jsonl",
            "msmarco/test_reranking_data_k10_dep3.jsonl"),
    Dataset("json_kv", "Synthetic recall", "json_kv", "json_kv/test_k{k}_dep6.jsonl"),
    _ruler("ruler_mk_needle", "niah_multikey_2"), _ruler("ruler_mk_uuid", "niah_multikey_3"),
    _ruler("ruler_mv", "niah_multivalue"),
    Dataset("asqa", "Cite", "alce", "alce/asqa_eval_gtr_top2000.json"),
    Dataset("qampari", "Cite", "alce", "alce/qampari_eval_gtr_top2000.json"),
)}
ALCE_DOCS = 700  # passages kept per ALCE question: HELMET's largest level shows 700


def level_file(dataset: Dataset, level: str) -> str:
    """The dataset's file for ``level``, relative to ``data/``."""
    if dataset.kind == "ruler":
        return dataset.test.format(tokens=level_tokens(level))
    if dataset.kind == "alce":
        return dataset.test
    table = PER_LEVEL[dataset.kind]
    if level not in table:
        raise ValueError(f"dataset {dataset.name!r}: HELMET releases no file for level {level!r} "
                         f"(levels: {', '.join(table)})")
    return dataset.test.format(k=table[level])


def datasets_shuffle(n: int, seed: int) -> list[int]:
    """The order Hugging Face ``Dataset.shuffle(seed=seed)`` puts ``n`` rows in: numpy's default generator's
    permutation (what HELMET's ``shuffle(seed=...)`` calls do)."""
    return [int(i) for i in np.random.default_rng(seed).permutation(n)]


def query_seed(key: Any) -> int:
    """HELMET's per-query demo seed: ``sha256(str(key))`` mod 2^31."""
    return int(hashlib.sha256(str(key).encode("utf-8")).hexdigest(), 16) % 2**31


# --------------------------------------------------------------------------- record checks


def _passages(rec: Record, *, ranked: bool) -> list[dict[str, Any]]:
    if "ctxs" not in rec.data:
        raise rec.error("ctxs", "missing")
    ctxs = rec.data["ctxs"]
    if not isinstance(ctxs, list):
        raise rec.error("ctxs", f"expected a list of passages, got {type(ctxs).__name__}")
    out = []
    for i, c in enumerate(ctxs):
        if not isinstance(c, dict):
            raise rec.error("ctxs", f"ctxs[{i}]: expected an object, got {type(c).__name__}")
        need = ("id", "text", "label") if ranked else ("title", "text")
        for name in need:
            value = c.get(name)
            wanted = int if name == "label" else str
            if value is None or isinstance(value, bool) or not isinstance(value, wanted):
                got = "missing" if name not in c else f"got {type(value).__name__}"
                raise rec.error("ctxs", f"ctxs[{i}].{name}: expected {wanted.__name__}, {got}")
        if ranked and "title" in c and not isinstance(c["title"], str):
            raise rec.error("ctxs", f"ctxs[{i}].title: expected str, got {type(c['title']).__name__}")
        out.append({k: c[k] for k in (*need, "title") if k in c})
    return out


def _key_value(rec: Record, field: str) -> Any:
    value = rec.data.get(field)
    if value is None:
        raise rec.error(field, f"missing: the file's records are keyed by {field!r} (HELMET samples queries by it)")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise rec.error(field, f"expected a string or an integer, got {type(value).__name__}")
    return value


def _rag(rec: Record, dataset: Dataset, key_field: str | None) -> dict[str, Any]:
    out = {"question": rec.required_str("question"), "answers": rec.str_list("answers"),
           "ctxs": _passages(rec, ranked=False)}
    if key_field is not None:
        out["key"] = _key_value(rec, key_field)
    if dataset.popularity is not None:
        pop = rec.data.get("s_pop")
        if pop is None or isinstance(pop, bool) or not isinstance(pop, int | float) or pop <= 0:
            raise rec.error("s_pop", f"expected a positive number (PopQA's popularity), got {pop!r}")
        out["popular"] = math.log10(pop) >= dataset.popularity
    return out


def _rerank(rec: Record) -> dict[str, Any]:
    ctxs = _passages(rec, ranked=True)
    if ctxs and not any(c["label"] > 0 for c in ctxs):
        raise rec.error("ctxs", "no passage has a label above 0: NDCG@10 needs a relevant passage")
    if not ctxs:
        raise rec.error("ctxs", "empty: a re-ranking record needs passages")
    ids = [c["id"] for c in ctxs]
    if len(set(ids)) != len(ids):
        raise rec.error("ctxs", f"passage ids repeat: {sorted(i for i, n in Counter(ids).items() if n > 1)[:5]}")
    return {"key": _key_value(rec, "qid"), "query": rec.required_str("query"), "ctxs": ctxs, "index": rec.index}


def _json_kv(rec: Record) -> dict[str, Any]:
    answer = rec.data.get("answer")
    answers = [answer] if isinstance(answer, str) else rec.str_list("answer")
    if not any(a.strip() for a in answers):
        raise rec.error("answer", "empty")
    demos = rec.data.get("demos")
    if not isinstance(demos, list):
        raise rec.error("demos", f"expected a list of [key, value] pairs, got {type(demos).__name__}")
    for i, pair in enumerate(demos):
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise rec.error("demos", f"demos[{i}]: expected a [key, value] pair of strings, got {pair!r}")
    n = rec.data.get("num_kvs")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise rec.error("num_kvs", f"expected a positive integer, got {n!r}")
    return {"context": rec.required_str("context"), "question": rec.required_str("question"), "answers": answers,
            "demos": [list(p) for p in demos], "num_kvs": n}


def _ruler(rec: Record) -> dict[str, Any]:
    query_field = "query" if "query" in rec.data else "question"
    answer_field = "answer" if "answer" in rec.data else "outputs"
    return {"context": rec.required_str("context"), "query": rec.required_str(query_field),
            "type_needle_v": rec.required_str("type_needle_v"), "answers": rec.str_list(answer_field)}


# --------------------------------------------------------------------------- one file


@dataclass
class _File:
    path: Path
    report: ValidationReport
    records: dict[int, dict[str, Any]]  # line index -> parsed record (accepted records only)


def _read(path: Path, parse: Callable[[Record], dict[str, Any]], on_error: str,
          light: frozenset[str] | None = None) -> _File:
    """Every record checked; with ``light`` only those fields of each kept (a test file at 128k holds ~1000
    passages per record: :func:`_complete` re-reads the sampled ones whole)."""
    indexed: list[tuple[int, dict[str, Any]]] = []

    def keep(rec: Record) -> None:
        parsed = parse(rec)
        indexed.append((rec.index, parsed if light is None else {k: v for k, v in parsed.items() if k in light}))

    _, report = validate_file(path, keep, on_error=on_error)
    return _File(path, report, dict(indexed))


def _complete(file: _File, parse: Callable[[Record], dict[str, Any]], indices: set[int]) -> None:
    """The records at ``indices`` (checked already) read again whole."""
    _, records = read_records(file.path)
    for index, raw in records:
        if index in indices:
            assert isinstance(raw, dict), raw  # validated by the first pass
            file.records[index] = parse(Record(file.report.file, index, raw))


def _key_field(path: Path, on_error: str) -> str:
    """HELMET's query key of a RAG file: ``id`` when any record has one, else ``question``."""
    found = _read(path, lambda r: {"has_id": r.data.get("id") is not None}, on_error)
    return "id" if any(r["has_id"] for r in found.records.values()) else "question"


def _popular(file: _File, dataset: Dataset) -> dict[int, dict[str, Any]]:
    if dataset.popularity is None:
        return file.records
    kept = {i: r for i, r in file.records.items() if not r["popular"]}
    file.report.notes.append(f"{len(file.records) - len(kept)} of {len(file.records)} records left out by PopQA's "
                             f"popularity filter (log10(s_pop) >= {dataset.popularity:g})")
    return kept


def _sample_keys(records: dict[int, dict[str, Any]], n: int, seed: int, report: ValidationReport) -> set[Any]:
    keys = {r["key"] for r in records.values()}
    try:
        order = sorted(keys)
    except TypeError:
        raise RecordError(report.file, None, None, FILE, "the query keys mix strings and integers: HELMET sorts "
                          "them to sample queries") from None
    chosen = set(random.Random(seed).sample(order, min(n, len(order)))) if n else keys
    kept = sum(r["key"] in chosen for r in records.values())
    report.notes.append(f"{len(chosen)} of {len(keys)} queries sampled (HELMET's max_test_samples {n or 'all'}, "
                        f"seed {seed}): {kept} of {len(records)} records kept")
    return chosen


def _first_shuffled(records: dict[int, dict[str, Any]], n: int, seed: int, report: ValidationReport) -> list[int]:
    indices = sorted(records)
    order = [indices[i] for i in datasets_shuffle(len(indices), seed)]
    kept = order[: min(n, len(order))] if n else order
    report.notes.append(f"{len(kept)} of {len(records)} records kept (HELMET's shuffle with seed {seed}, first "
                        f"{n or 'all'})")
    return kept


def _demo_pick(pool: list[dict[str, Any]], seed: int, shots: int, where: str) -> list[dict[str, Any]]:
    """HELMET's demo choice: the pool shuffled with ``seed``, later records of a key dropped, the first ``shots``."""
    picked, seen = [], set()
    for i in datasets_shuffle(len(pool), seed):
        d = pool[i]
        if d["key"] in seen:
            continue
        seen.add(d["key"])
        picked.append(d)
        if len(picked) == shots:
            return picked
    raise ValueError(f"{where}: {shots} demonstrations needed, the demo file gives {len(picked)} distinct queries")


def rag_passage(c: dict[str, Any]) -> str:
    return f"Document (Title: {c['title']}): {c['text']}"


def ranked_passage(c: dict[str, Any], titled: bool) -> str:
    return f"[ID: {c['id']}] Document (Title: {c['title']}): {c['text']}" if titled else \
        f"[ID: {c['id']}] Document: {c['text']}"


def gold_ranking(ctxs: list[dict[str, Any]]) -> str:
    return " > ".join(c["id"] for c in sorted(ctxs, key=lambda c: c["label"], reverse=True))


# --------------------------------------------------------------------------- the loader


def load_helmet_released(data: str | Path, dataset: str, *, source: str, levels: tuple[str, ...] = LEVELS,
                         max_queries: int = MAX_QUERIES, seed: int = SEED, shots: int = SHOTS,
                         prompt_file: str | Path | None = None,
                         on_error: str = "fail") -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """(documents, items, reports) of one HELMET dataset at ``levels`` (module docstring); documents are empty
    (every context is the record's own)."""
    if dataset not in DATASETS:
        raise ValueError(f"source {source!r}: option 'dataset' {dataset!r}: expected one of {sorted(DATASETS)}")
    if isinstance(max_queries, bool) or not isinstance(max_queries, int) or max_queries < 0:
        raise ValueError(f"source {source!r}: option 'max_queries': expected an integer >= 0, got {max_queries!r}")
    if isinstance(shots, bool) or not isinstance(shots, int) or shots < 0:
        raise ValueError(f"source {source!r}: option 'shots': expected an integer >= 0, got {shots!r}")
    spec, root = DATASETS[dataset], Path(data)
    if not root.is_dir():
        raise ValueError(f"source {source!r}: option 'data' {str(root)!r} is not a folder: give the data/ folder "
                         "HELMET's scripts/download_data.sh unpacks")
    if spec.kind == "alce":
        return _alce(root, spec, source=source, max_queries=max_queries, seed=seed, shots=shots,
                     prompt_file=prompt_file, on_error=on_error)
    if prompt_file is not None:
        raise ValueError(f"source {source!r}: option 'prompt_file' is ALCE's (datasets asqa, qampari), not {dataset}'s")
    items: list[tuple] = []
    reports: list[ValidationReport] = []
    for level in levels:
        rows, file_reports = _level_items(root, spec, level, source=source, max_queries=max_queries, seed=seed,
                                          shots=shots, on_error=on_error)
        items.extend(rows)
        reports.extend(file_reports)
    return (*source_frames([], items), reports)


def _item(source: str, spec: Dataset, level: str, path: Path, index: int, question: str, answers: list[str],
          context: str, fields: dict[str, Any]) -> tuple:
    fields = {"dataset": spec.name, "level": level, "file": display_name(path), "index": index, **fields}
    return (f"{source}-{level}-{index:05d}", source, spec.name, spec.category, "en", question, answers, [], [], 1, [],
            [], f"{source_stem(path)}-{index:05d}", context, json.dumps(fields, ensure_ascii=False, sort_keys=True))


def _level_items(root: Path, spec: Dataset, level: str, *, source: str, max_queries: int, seed: int, shots: int,
                 on_error: str) -> tuple[list[tuple], list[ValidationReport]]:
    path = root / level_file(spec, level)
    if not path.is_file():
        raise RecordError(display_name(path), None, None, FILE,
                          f"no such file: HELMET's {spec.name} at {level} is data/{level_file(spec, level)}")
    if spec.kind == "rag":
        return _rag_items(root, spec, level, path, source, max_queries, seed, shots, on_error)
    if spec.kind == "rerank":
        return _rerank_items(root, spec, level, path, source, max_queries, seed, shots, on_error)
    parse = _json_kv if spec.kind == "json_kv" else _ruler
    file = _read(path, parse, on_error, light=frozenset())
    kept = _first_shuffled(file.records, max_queries, seed, file.report)
    _complete(file, parse, set(kept))
    rows = []
    for index in kept:
        r = file.records[index]
        if spec.kind == "json_kv":
            demos = [{"key": k, "value": v} for k, v in r["demos"][:shots]]
            rows.append(_item(source, spec, level, path, index, r["question"], r["answers"], r["context"],
                              {"key": r["question"], "demos": demos, "num_kvs": r["num_kvs"]}))
        else:
            rows.append(_item(source, spec, level, path, index, r["query"], r["answers"], r["context"],
                              {"key": r["query"], "query": r["query"], "type_needle_v": r["type_needle_v"]}))
    return rows, [file.report]


def _demo_file(root: Path, spec: Dataset) -> Path:
    assert spec.demos is not None
    path = root / spec.demos
    if not path.is_file():
        raise RecordError(display_name(path), None, None, FILE, f"no such file: HELMET's {spec.name} demonstrations "
                          f"are data/{spec.demos}")
    return path


def _rag_items(root: Path, spec: Dataset, level: str, path: Path, source: str, max_queries: int, seed: int,
               shots: int, on_error: str) -> tuple[list[tuple], list[ValidationReport]]:
    key_field = _key_field(path, on_error)
    parse = functools.partial(_rag, dataset=spec, key_field=key_field)
    test = _read(path, parse, on_error, light=frozenset({"key", "popular"}))
    records = _popular(test, spec)
    chosen = _sample_keys(records, max_queries, seed, test.report)
    records = {i: r for i, r in records.items() if r["key"] in chosen}
    _complete(test, parse, set(records))
    records = {i: test.records[i] for i in records}
    reports = [test.report]
    demos: list[dict[str, Any]] = []
    if shots:
        demo_path = _demo_file(root, spec)
        demo_file = _read(demo_path, lambda r: _rag(r, spec, key_field), on_error)
        demos = [demo_file.records[i] for i in sorted(_popular(demo_file, spec))]
        reports.append(demo_file.report)
    rows = []
    for index in sorted(records):
        r = records[index]
        if r["key"] not in chosen:
            continue
        shown = []
        if shots:
            pool = [d for d in demos if d["key"] != r["key"]] if spec.popularity is not None else demos
            where = f"{display_name(path)} record {index} (key {r['key']!r})"
            shown = [{"passages": "\n\n".join(rag_passage(c) for c in d["ctxs"]), "question": d["question"],
                      "answer": d["answers"][0]} for d in _demo_pick(pool, query_seed(r["key"]), shots, where)]
        context = "\n\n".join(rag_passage(c) for c in r["ctxs"])
        rows.append(_item(source, spec, level, path, index, r["question"], r["answers"], context,
                          {"key": r["key"], "demos": shown, "n_passages": len(r["ctxs"])}))
    return rows, reports


def _rerank_items(root: Path, spec: Dataset, level: str, path: Path, source: str, max_queries: int, seed: int,
                  shots: int, on_error: str) -> tuple[list[tuple], list[ValidationReport]]:
    test = _read(path, _rerank, on_error, light=frozenset({"key"}))
    chosen = _sample_keys(test.records, max_queries, seed, test.report)
    _complete(test, _rerank, {i for i, r in test.records.items() if r["key"] in chosen})
    kept = {i: r for i, r in test.records.items() if r["key"] in chosen}
    reports = [test.report]
    demos: list[dict[str, Any]] = []
    if shots:
        demo_file = _read(_demo_file(root, spec), _rerank, on_error)
        demos = [demo_file.records[i] for i in sorted(demo_file.records)]
        reports.append(demo_file.report)
        if kept and "title" in kept[min(kept)]["ctxs"][0]:  # HELMET writes the demos in the test records' format
            for d in demos:
                untitled = [i for i, c in enumerate(d["ctxs"]) if "title" not in c]
                if untitled:
                    raise RecordError(demo_file.report.file, d["index"], d["key"], "ctxs",
                                      f"ctxs[{untitled[0]}].title: missing, but the test file's passages have "
                                      "titles and the demonstrations are written like them")
        # HELMET leaves every test query out of the demo pool at once when the pool is large enough, else each
        # record's own query only.
        filtered = len(demos) > 2 * len(kept)
        if filtered:
            demos = [d for d in demos if d["key"] not in chosen]
    rows = []
    for index in sorted(kept):
        r = kept[index]
        titled = "title" in r["ctxs"][0]
        shown = []
        if shots:
            pool = demos if filtered else [d for d in demos if d["key"] != r["key"]]
            where = f"{display_name(path)} record {index} (qid {r['key']!r})"
            shown = [{"passages": "\n\n".join(ranked_passage(c, titled) for c in d["ctxs"]), "question": d["query"],
                      "answer": gold_ranking(d["ctxs"])} for d in _demo_pick(pool, query_seed(r["key"]), shots, where)]
        context = "\n\n".join(ranked_passage(c, titled) for c in r["ctxs"])
        answers = [f"{c['id']}:{c['label']}" for c in r["ctxs"] if c["label"] > 0]
        rows.append(_item(source, spec, level, path, index, r["query"], answers, context,
                          {"key": r["key"], "qid": r["key"], "demos": shown, "n_passages": len(r["ctxs"]),
                           "qrels": {c["id"]: c["label"] for c in r["ctxs"]}, "ranking": gold_ranking(r["ctxs"])}))
    return rows, reports


def _alce(root: Path, spec: Dataset, *, source: str, max_queries: int, seed: int, shots: int,
          prompt_file: str | Path | None, on_error: str) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """ALCE's questions as HELMET samples them, each with its demonstrations (every level shows the same)."""
    from lc_pipeline.sources.alce import CATEGORY, load_alce, load_alce_demos

    path = root / spec.test
    if not path.is_file():
        raise RecordError(display_name(path), None, None, FILE, f"no such file: HELMET's {spec.name} questions are "
                          f"data/{spec.test}")
    _, questions, reports = load_alce(path, source=source, style=spec.name, max_docs=ALCE_DOCS, on_error=on_error)
    demos: list[dict[str, Any]] = []
    if shots:
        if prompt_file is None:
            raise ValueError(f"source {source!r}: option 'prompt_file' is required for {spec.name} with shots "
                             f"{shots}: ALCE's prompt file (HELMET's prompts/{spec.name}_revised.json)")
        demo_rows, demo_report = load_alce_demos(prompt_file, source=source, on_error=on_error)
        reports.append(demo_report)
        demos = [{"question": r[5], "answer": json.loads(r[14])["answer"], "docs": json.loads(r[14])["docs"]}
                 for r in demo_rows]
        if len(demos) < shots:
            raise ValueError(f"source {source!r}: {display_name(Path(prompt_file))} has {len(demos)} "
                             f"demonstrations, {shots} are needed")
    rows = questions.filter(pl.col("category") == CATEGORY).to_dicts()  # in file order
    draw = random.Random(seed)
    picks = [draw.sample(range(len(demos)), shots) if shots else [] for _ in rows]
    order = datasets_shuffle(len(rows), seed)
    kept = order[: min(max_queries, len(order))] if max_queries else order
    reports[0].notes.append(f"{len(kept)} of {len(rows)} questions kept (HELMET's shuffle with seed {seed}, first "
                            f"{max_queries or 'all'}; each question's {shots} demonstrations drawn in file order)")
    items = []
    for i in kept:
        row = rows[i]
        fields = {"dataset": spec.name, "file": display_name(path), "index": i, **json.loads(row["record_fields"]),
                  "demos": [demos[j] for j in picks[i]]}
        items.append((row["item_id"], source, spec.name, spec.category, row["language"], row["question"],
                      row["answers"], [], [], 1, [], [], row["record_id"], "",
                      json.dumps(fields, ensure_ascii=False, sort_keys=True)))
    return (*source_frames([], items), reports)


def _file_kind(path: Path) -> tuple[str, Dataset | None]:
    """(kind, dataset) of a released file by its name (the layout's names, module docstring)."""
    name = path.name
    if "-multikilt_" in name or name.startswith("popqa_test_"):
        return "rag", DATASETS["popqa"] if name.startswith("popqa") else None
    if name.startswith("test_reranking_data_"):
        return "rerank", None
    if name.startswith("test_k") and "_dep" in name:
        return "json_kv", None
    if name.startswith("validation_"):
        return "ruler", None
    raise ValueError(f"{display_name(path)}: not a file name of HELMET's released data (kilt/*-multikilt_*, "
                     "popqa_test_*, msmarco/test_reranking_data_*, json_kv/test_k*_dep*, ruler/*/validation_*)")


def validate_released_files(paths: list[Path]) -> list[ValidationReport]:
    """`lcp sources validate`: every record of HELMET's released files checked (reject mode), each file's kind
    told by its name; nothing sampled or assembled."""
    reports = []
    for path in map(Path, paths):
        kind, dataset = _file_kind(path)
        if kind == "rag":
            spec = dataset or DATASETS["nq"]
            key_field = _key_field(path, "reject")
            reports.append(_read(path, functools.partial(_rag, dataset=spec, key_field=key_field), "reject",
                                 light=frozenset()).report)
        else:
            parse = {"rerank": _rerank, "json_kv": _json_kv, "ruler": _ruler}[kind]
            reports.append(_read(path, parse, "reject", light=frozenset()).report)
        reports[-1].notes.append(f"HELMET's released {kind} file (by its name)")
    return reports


def helmet_released_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: helmet_released``: options ``data`` (the unpacked ``data/`` folder), ``dataset`` (one of
    :data:`DATASETS`), ``levels`` (default all five; ALCE's file serves every level), ``max_queries`` (100),
    ``seed`` (42), ``shots`` (2), ``prompt_file`` (ALCE's, for asqa / qampari), ``on_error``."""
    options = dict(config.options)
    unknown = sorted(set(options) - {"data", "dataset", "levels", "max_queries", "seed", "shots", "prompt_file",
                                     "on_error"})
    if unknown:
        raise ValueError(f"source {config.name!r}: unknown options {unknown} for kind helmet_released")
    for name in ("data", "dataset"):
        if name not in options:
            raise ValueError(f"source {config.name!r}: option {name!r} is required for kind helmet_released")
    levels = options.pop("levels", LEVELS)
    if isinstance(levels, str) or not all(isinstance(v, str) for v in levels):
        raise ValueError(f"source {config.name!r}: option 'levels': expected a list of levels, got {levels!r}")
    return accepted(load_helmet_released(options.pop("data"), options.pop("dataset"), source=config.name,
                                         levels=tuple(levels), **options))

