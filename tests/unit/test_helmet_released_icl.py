"""HELMET's many-shot ICL drawn as its data.py draws it (benchmarks/helmet/released_icl.py), checked against the
library HELMET calls (Hugging Face ``datasets``: its shuffle and train_test_split orders) and against the draws
written out here: the per-text seed sha256(text) + 42, the label permutation of Python's generator so seeded, the
balanced rounds. Items come from the constructed config's ICL fixtures (tests/fixtures/helmet/icl, our text)."""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from pathlib import Path

import datasets
import pytest

from lc_pipeline.benchmarks.helmet.released_data import datasets_shuffle
from lc_pipeline.benchmarks.helmet.released_icl import (
    balance_labels,
    holdout_order,
    icl_instances,
)
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.loader import load_source

ICL = Path(__file__).resolve().parents[1] / "fixtures" / "helmet" / "icl"


def test_the_orders_are_those_of_the_datasets_library():
    rows = datasets.Dataset.from_dict({"row": list(range(37))})
    assert datasets_shuffle(37, 42) == rows.shuffle(seed=42)["row"]
    assert datasets_shuffle(37, 7) == rows.shuffle(seed=7)["row"]
    split = rows.train_test_split(test_size=0.1, seed=42)
    assert holdout_order(37, 0.1, 42) == (split["train"]["row"], split["test"]["row"])


def test_balanced_rounds_hold_every_label_once_and_repeat_a_short_label_only_when_it_runs_out():
    rows = [("a", 0), ("b", 0), ("c", 0), ("d", 1), ("e", 2), ("f", 2)]
    drawn = balance_labels(rows, lambda r: r[1], 9, seed=5)
    assert len(drawn) == 9
    for start in (0, 3, 6):  # rounds of one row per label, in shuffled order
        assert sorted(r[1] for r in drawn[start:start + 3]) == [0, 1, 2]
    assert Counter(r[0] for r in drawn if r[1] == 0) == Counter({"a": 1, "b": 1, "c": 1})  # 3 rounds, 3 rows
    assert [r[0] for r in drawn if r[1] == 1] == ["d", "d", "d"]  # one row: repeated
    assert Counter(r[0] for r in drawn if r[1] == 2) == Counter({"e": 2, "f": 1}) or \
        Counter(r[0] for r in drawn if r[1] == 2) == Counter({"e": 1, "f": 2})  # each once before any twice
    assert balance_labels(rows, lambda r: r[1], 9, seed=5) == drawn  # deterministic in its seed
    assert balance_labels(rows, lambda r: r[1], 7, seed=5) == drawn[:7]  # the last round cut to the shots


@pytest.mark.parametrize(("name", "options"), [("trec_coarse", {"path": str(ICL / "trec"), "label": "coarse_label"}),
                                               ("nlu", {"path": str(ICL / "nlu"), "holdout": 0.1})])
def test_each_test_text_gets_helmets_seeded_permutation_and_its_shots(name, options):
    items = load_source(SourceConfig(name, "icl", options)).items.to_dicts()
    labels = items[0]["all_classes"]
    built = icl_instances(items, shots=12, n_test=4, seed=42, prefix="label:",
                          holdout=(0.1, 42) if "holdout" in options else None)
    n_tests = sum(json.loads(it["record_fields"])["split"] == "test" for it in items)
    assert len(built) == min(4, n_tests)  # HELMET keeps every test text when there are no more than asked
    demo_texts = {it["question"] for it in items if json.loads(it["record_fields"])["split"] == "demo"}
    for b in built:
        text = b["item"]["question"]
        seed = (int(hashlib.sha256(text.encode()).hexdigest(), 16) + 42) % 2**31
        permutation = list(range(len(labels)))
        random.Random(seed).shuffle(permutation)
        label = json.loads(b["item"]["record_fields"])["label_index"]
        assert b["answer"] == str(permutation[label])
        assert b["mapping"] == {labels[i]: p for i, p in enumerate(permutation)}
        shown = b["context"].split("\n\n")
        assert len(shown) == 12 and all(s.rsplit("\nlabel: ", 1)[0] in demo_texts for s in shown)
