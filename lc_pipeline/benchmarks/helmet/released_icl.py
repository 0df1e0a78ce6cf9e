"""HELMET's many-shot ICL as its ``data.py`` builds it at run time (no released file): config ``helmet-released``.

HELMET reads the five labelled datasets from the Hub and, per test text, draws its demonstrations and its label
permutation from seeds it derives itself. The items of a ``kind: icl`` source (sources/icl.py: the dataset's
rows in split order, ``record_fields.row``) give the same rows, so the same draws are made here (HELMET's
``load_icl`` read for the procedure; written in our words):

* the demo pool and the test rows in the dataset's order; a ``holdout`` source (NLU, one split) in the order
  of ``datasets``' ``train_test_split(test_size, seed)``: one permutation of all rows
  (``numpy.random.default_rng(seed)``), the first ``ceil(test_size * n)`` the test rows, the rest the pool;
* the test sample (``max_test_sample``, here the config's ``helmet.n_per_task``), when the test rows are more:
  the rows shuffled as ``datasets`` shuffles with the seed, then :func:`balance_labels` with the seed;
* per test text, ``local_seed = (int(sha256(text)) + seed) mod 2^31``: the demonstrations are
  :func:`balance_labels` of the pool with the level's shot count and that seed; the labels 0..n-1 are permuted
  by ``random.seed(local_seed); random.shuffle`` (n = the dataset's number of labels);
* the context: each demonstration as ``{text}\\n<answer prefix> {its label's integer}``, joined by blank lines
  (the task's prompt then adds the test text and the prefix); ``answers`` = [the test label's integer].

The shot count per level is the task's ``builder.options.per_level`` (HELMET's dataset names, e.g.
``icl_trec_coarse_400shot_balance`` at 8k).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = ["balance_labels", "holdout_order", "icl_instances", "label_permutation", "local_seed"]

T = TypeVar("T")


def balance_labels(rows: Sequence[T], label_of: Callable[[T], Any], shots: int, seed: int) -> list[T]:
    """HELMET's balanced draw: ``ceil(shots / labels)`` rounds, one row of every label per round (a label's rows
    sampled without replacement while they last, then again), each round shuffled, the first ``shots``."""
    rand = random.Random(seed)
    by_label: dict[Any, list[T]] = {}
    for row in rows:
        by_label.setdefault(label_of(row), []).append(row)
    rounds_n = math.ceil(shots / len(by_label))
    rounds: list[list[T]] = [[] for _ in range(rounds_n)]
    for members in by_label.values():
        picks = rand.sample(range(len(members)), rounds_n % len(members))
        while len(picks) < rounds_n:
            picks += rand.sample(range(len(members)), min(rounds_n - len(picks), len(members)))
        for i, j in enumerate(picks):
            rounds[i].append(members[j])
    for r in rounds:
        rand.shuffle(r)
    return [row for r in rounds for row in r][:shots]


def local_seed(text: str, seed: int) -> int:
    """HELMET's per-test-text seed."""
    return (int(hashlib.sha256(text.encode("utf-8")).hexdigest(), 16) + seed) % 2**31


def label_permutation(n_labels: int, seed: int) -> list[int]:
    """Label i is written as ``permutation[i]`` (Python's generator seeded with ``seed``, as HELMET seeds the
    global one)."""
    mapping = list(range(n_labels))
    random.Random(seed).shuffle(mapping)
    return mapping


def holdout_order(n: int, test_size: float, seed: int) -> tuple[list[int], list[int]]:
    """(pool rows, test rows) in the order ``datasets``' ``train_test_split(test_size, seed)`` gives them."""
    permutation = [int(i) for i in np.random.default_rng(seed).permutation(n)]
    n_test = math.ceil(test_size * n)
    return permutation[n_test:], permutation[:n_test]


def icl_instances(items: list[dict[str, Any]], *, shots: int, n_test: int, seed: int, prefix: str,
                  holdout: tuple[float, int] | None) -> list[dict[str, Any]]:
    """[{item, context, answer, mapping, shown}] of one ICL source's items (``kind: icl``) at ``shots``."""
    from lc_pipeline.benchmarks.helmet.released_data import datasets_shuffle

    def fields(it: dict[str, Any]) -> dict[str, Any]:
        return json.loads(it["record_fields"])

    pool = [it for it in items if fields(it)["split"] == "demo"]
    tests = [it for it in items if fields(it)["split"] == "test"]
    if holdout is not None:
        by_row = {fields(it)["row"]: it for it in pool + tests}
        pool_rows, test_rows = holdout_order(len(by_row), *holdout)
        pool, tests = [by_row[r] for r in pool_rows], [by_row[r] for r in test_rows]
    else:
        pool.sort(key=lambda it: fields(it)["row"])
        tests.sort(key=lambda it: fields(it)["row"])
    labels = list(items[0]["all_classes"])
    label_index = {it["item_id"]: fields(it)["label_index"] for it in pool + tests}
    if n_test and len(tests) > n_test:
        tests = [tests[i] for i in datasets_shuffle(len(tests), seed)]
        tests = balance_labels(tests, lambda it: label_index[it["item_id"]], n_test, seed)
    out = []
    for item in tests:
        local = local_seed(item["question"], seed)
        shown = balance_labels(pool, lambda it: label_index[it["item_id"]], shots, local)
        mapping = label_permutation(len(labels), local)
        context = "\n\n".join(f"{d['question']}\n{prefix} {mapping[label_index[d['item_id']]]}" for d in shown)
        out.append({"item": item, "context": context, "answer": str(mapping[label_index[item["item_id"]]]),
                    "mapping": {labels[i]: m for i, m in enumerate(mapping)}, "shown": len(shown)})
    return out
