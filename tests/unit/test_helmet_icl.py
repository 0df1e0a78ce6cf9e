"""HELMET many-shot ICL (spec helmet.md §2.7): labelled datasets read from their Hugging Face layouts
(tests/fixtures/helmet/icl/, our own texts), labels mapped to integers by a seeded permutation,
demonstrations in balanced rounds, as many as the level's shot count, and the label metric."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import datasets
import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.benchmarks.helmet import construction as helmet
from lc_pipeline.benchmarks.helmet.construction.icl import (
    balanced_rounds,
    shots_for_level,
)
from lc_pipeline.benchmarks.helmet.config import HelmetConfig
from lc_pipeline.config import SourceConfig
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.sources.demo_labels import LABELS, demo_labels
from lc_pipeline.sources.hub import HubError
from lc_pipeline.sources.loader import load_source
from lc_pipeline.sources.validation import RecordError
from lc_pipeline.tasks import load_catalog
from lc_pipeline.tasks.registry import METRICS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "helmet" / "icl"
# The sources as the packaged `helmet` config names them (relative paths under $LCP_DATA/helmet/).
SOURCES = {
    "trec_coarse": {"path": "icl/trec", "label": "coarse_label"},
    "trec_fine": {"path": "icl/trec", "label": "fine_label"},
    "banking77": {"path": "icl/banking77"},
    "clinc150": {"path": "icl/clinc150", "config": "plus", "label": "intent", "test_split": "validation"},
    "nlu": {"path": "icl/nlu", "holdout": 0.1},
}
# The fixtures hold 5-12 labels and a few texts each: the tests scale the spec's shot counts down
# (a user task file overriding per_level), 8k 40 and 16k 80 demonstrations for every dataset.
SCALED = {"8k": 40, "16k": 80}
TASKS = tuple(SOURCES)


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # local folders need no network
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no writes to the user's cache
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_home" / "datasets")


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.load()


def source(name: str, **extra):
    options = {k: (str(FIXTURES.parent / v) if k == "path" else v) for k, v in SOURCES[name].items()}
    return load_source(SourceConfig(name, "icl", {**options, **extra}))


def scaled_catalog(tmp_path, per_level=SCALED):
    """The packaged ICL tasks with per_level overridden by a user task file (the fixtures are small)."""
    lines = ["benchmark: helmet", "tasks:"]
    for task in TASKS:
        lines += [f"  - name: {task}", "    builder:", "      name: helmet", "      options:", "        kind: icl",
                  f"        source: {task}", f"        per_level: {json.dumps(per_level)}"]
    path = tmp_path / "scaled.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_catalog([path])


def all_items() -> pl.DataFrame:
    return pl.concat([source(name).items for name in SOURCES])


def build(items, counter, specs, level="8k", seed=42, n_per_task=2, documents=None):
    return helmet.build_helmet(documents if documents is not None else schemas.empty("source_documents"), items,
                               schemas.empty("passages"), schemas.empty("hard_negatives"), level=level,
                               config=HelmetConfig(n_per_task=n_per_task), seed=seed, counter=counter, tasks=specs)


def demonstrations(row: dict) -> list[tuple[str, int]]:
    """(text, integer) of every demonstration in an instance's context."""
    out = []
    for block in row["context"].split("\n\n"):
        text, label = block.rsplit("\nlabel: ", 1)
        out.append((text, int(label)))
    return out


# --------------------------------------------------------------------------- the source


def test_each_hugging_face_layout_gives_one_item_per_record_with_its_label_name():
    trec = datasets.load_from_disk(str(FIXTURES / "trec"))  # a save_to_disk folder
    coarse = source("trec_coarse").items
    assert coarse.height == trec["train"].num_rows + trec["test"].num_rows
    names = trec["train"].features["coarse_label"].names
    row = coarse.row(0, named=True)
    assert row["question"] == trec["train"][0]["text"] and row["answers"] == [names[trec["train"][0]["coarse_label"]]]
    assert row["all_classes"] == names and row["category"] == "classification" and row["evidence_doc_ids"] == []
    assert json.loads(row["record_fields"])["split"] == "demo"
    assert len(source("trec_fine").items["all_classes"][0]) == len(trec["train"].features["fine_label"].names)
    # Per-split Parquet files (ClassLabel in the schema), a config folder declared in the README, one JSONL split.
    banking = source("banking77")
    assert Counter(json.loads(f)["split"] for f in banking.items["record_fields"]) == {"demo": 20, "test": 10}
    clinc = source("clinc150").items
    assert {json.loads(f)["dataset_split"] for f in clinc["record_fields"]} == {"train", "validation"}
    assert "oos" in clinc["all_classes"][0].to_list()
    nlu = source("nlu").items
    assert nlu["all_classes"][0].to_list() == sorted({a[0] for a in nlu["answers"]})  # string labels: their sorted values


def test_a_single_split_is_held_out_as_helmet_does_with_the_seed():
    nlu = source("nlu").items
    split = datasets.load_dataset(str(FIXTURES / "nlu"))["train"].train_test_split(test_size=0.1, seed=42)
    tests = [q for q, f in zip(nlu["question"], nlu["record_fields"]) if json.loads(f)["split"] == "test"]
    assert sorted(tests) == sorted(split["test"]["text"]) and len(tests) == round(0.1 * nlu.height + 0.5)
    other = source("nlu", holdout_seed=7).items
    assert other["record_fields"].to_list() != nlu["record_fields"].to_list()


def test_label_numbers_take_their_names_from_the_option_and_a_bad_label_names_its_record(tmp_path):
    folder = tmp_path / "intents"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps({"text": t, "label": lab}) + "\n"
                                                for t, lab in [("hi there", 0), ("bye now", 1), ("hello", 0)]))
    (folder / "test.jsonl").write_text(json.dumps({"text": "see you", "label": 1}) + "\n"
                                       + json.dumps({"text": "what", "label": 5}) + "\n")
    cfg = {"path": str(folder), "label_names": ["greet", "leave"]}
    with pytest.raises(RecordError, match=r"split test record 1: field 'label': label 5 is outside 0..1"):
        load_source(SourceConfig("intents", "icl", cfg))
    loaded = load_source(SourceConfig("intents", "icl", {**cfg, "on_error": "reject"}))
    assert loaded.items["answers"].to_list() == [["greet"], ["leave"], ["greet"], ["leave"]]
    assert [(r.index, r.field) for rep in loaded.reports for r in rep.rejected] == [(1, "label")]
    with pytest.raises(ValueError, match=r"label numbers without a ClassLabel feature; give the names as option "
                                         r"'label_names'"):
        load_source(SourceConfig("intents", "icl", {"path": str(folder), "on_error": "reject"}))
    with pytest.raises(ValueError, match=r"test_split 'validation' is not a split of the dataset"):
        load_source(SourceConfig("intents", "icl", {**cfg, "test_split": "validation"}))
    with pytest.raises(ValueError, match=r"no column 'sentence'"):
        load_source(SourceConfig("intents", "icl", {**cfg, "text": "sentence"}))


def test_the_hub_switched_off_is_an_error_that_says_what_to_do():
    with pytest.raises(HubError, match=r"CogComp/trec: the Hub is offline \(HF_HUB_OFFLINE is set\).*'path'"):
        load_source(SourceConfig("trec_coarse", "icl", {"hf_dataset": "CogComp/trec", "label": "coarse_label"}))


# --------------------------------------------------------------------------- instances


def test_every_icl_dataset_builds_at_8k_and_16k_with_the_levels_shot_count(tmp_path, counter):
    catalog = scaled_catalog(tmp_path)
    specs = [catalog.get(f"helmet/{t}") for t in TASKS]
    items = all_items()
    for level in ("8k", "16k"):
        out = build(items, counter, specs, level=level)
        assert out.height == 2 * len(TASKS) and set(out["category"]) == {"ICL"}
        assert (out["input_tokens"] <= out["target_tokens"]).all() and set(out["max_new_tokens"]) == {20}
        for row in out.iter_rows(named=True):
            assert len(demonstrations(row)) == SCALED[level] == json.loads(row["record_fields"])["shots"]
            assert row["prompt"].endswith(f"\n\n{row['question']}\nlabel:")
            assert row["source"] == row["task"]  # each task reads only its own dataset


def test_the_spec_tables_shot_counts_are_the_packaged_ones(counter):
    packaged = {t: load_catalog().get(f"helmet/{t}").builder.options["per_level"] for t in TASKS}
    assert packaged["trec_coarse"] == {"4k": 200, "8k": 400, "16k": 800, "32k": 1600, "64k": 3300, "128k": 6600}
    assert {t: packaged[t]["128k"] for t in TASKS} == {"trec_coarse": 6600, "trec_fine": 6400, "banking77": 5900,
                                                       "clinc150": 7050, "nlu": 8296}
    assert {t: packaged[t]["8k"] for t in TASKS} == {"trec_coarse": 400, "trec_fine": 400, "banking77": 360,
                                                     "clinc150": 440, "nlu": 510}
    # Our short fixture texts hold TREC coarse's 400 demonstrations in 8k tokens: the packaged task as shipped.
    out = build(source("trec_coarse").items, counter, [load_catalog().get("helmet/trec_coarse")], n_per_task=1)
    assert len(demonstrations(out.row(0, named=True))) == 400 and out["input_tokens"][0] <= 8192


def test_demonstrations_come_in_balanced_rounds_of_every_label(tmp_path, counter):
    catalog = scaled_catalog(tmp_path)
    items = all_items()
    label_of = {(s, q): a[0] for s, q, a in items.select("source", "question", "answers").iter_rows()}
    classes = {s: c for s, c in items.select("source", "all_classes").unique("source").iter_rows()}
    out = build(items, counter, [catalog.get(f"helmet/{t}") for t in TASKS], level="16k")
    for row in out.iter_rows(named=True):
        n = len(classes[row["source"]])
        demos = [label_of[(row["source"], text)] for text, _ in demonstrations(row)]
        full = len(demos) // n * n
        for start in range(0, full, n):
            assert sorted(demos[start:start + n]) == sorted(classes[row["source"]])  # one of each label per round
        counts = Counter(demos).values()
        assert max(counts) - min(counts) <= 1  # balanced however the last round is cut
        demo_texts = {t for t, _ in demonstrations(row)}
        assert row["question"] not in demo_texts  # the test text is never a demonstration


def test_the_integer_mapping_is_consistent_within_an_instance_and_changes_with_the_seed(tmp_path, counter):
    catalog = scaled_catalog(tmp_path)
    spec = catalog.get("helmet/trec_coarse")
    items = source("trec_coarse").items
    label_of = {q: a[0] for q, a in items.select("question", "answers").iter_rows()}
    mappings = {}
    for seed in (42, 43):
        for level in ("8k", "16k"):
            out = build(items, counter, [spec], level=level, seed=seed, n_per_task=3)
            for row in out.iter_rows(named=True):
                fields = json.loads(row["record_fields"])
                mapping = fields["label_mapping"]
                assert sorted(mapping.values()) == list(range(6))  # a permutation of 0..n-1 (TREC coarse: 6)
                for text, integer in demonstrations(row):
                    assert integer == mapping[label_of[text]]  # every demonstration of a label: one integer
                assert row["answers"] == [str(mapping[fields["label"]])]
                mappings[(seed, level, row["item_id"])] = mapping
    for seed in (42, 43):  # the same test items and mappings at every level
        assert {i: m for (s, lv, i), m in mappings.items() if (s, lv) == (seed, "8k")} == \
            {i: m for (s, lv, i), m in mappings.items() if (s, lv) == (seed, "16k")}
    both = {i for s, _, i in mappings if s == 42} & {i for s, _, i in mappings if s == 43}
    assert both and any(mappings[(42, "8k", i)] != mappings[(43, "8k", i)] for i in both)  # another seed: another map
    assert len({json.dumps(m, sort_keys=True) for (s, lv, _), m in mappings.items() if (s, lv) == (42, "8k")}) > 1


def test_too_many_shots_for_the_level_name_the_task_the_level_and_the_counts(tmp_path, counter):
    catalog = scaled_catalog(tmp_path, {"8k": 2000})
    with pytest.raises(ValueError, match=r"task 'trec_coarse' at 8k: 2000 demonstrations \(per_level\) make a "
                                         r"prompt of \d+ tokens, over the level's 8192-token target"):
        build(source("trec_coarse").items, counter, [catalog.get("helmet/trec_coarse")])
    with pytest.raises(ValueError, match=r"task 'trec_coarse': field 'builder.options.per_level': no shot count for "
                                         r"level '16k'"):
        build(source("trec_coarse").items, counter, [catalog.get("helmet/trec_coarse")], level="16k")
    assert shots_for_level({"8K": 3, "16384": 5}, "16k", "t") == 5


def test_balanced_rounds_repeat_a_short_label_only_after_using_all_of_it():
    import random

    pool = {"a": [1, 2], "b": [10, 20, 30, 40, 50]}
    drawn = balanced_rounds(pool, 10, random.Random(0))
    assert sorted(x for x in drawn[:4] if x < 10) == [1, 2]  # the first pass of "a" before any repeat
    assert sorted(Counter(x for x in drawn if x < 10).values()) == [2, 3]
    assert sorted(x for x in drawn if x >= 10) == [10, 20, 30, 40, 50]
    assert drawn[:6] == balanced_rounds(pool, 6, random.Random(0))  # fewer shots: a prefix of more
    once = balanced_rounds(pool, 10, random.Random(0), repeat=False)  # test items: never twice
    assert sorted(once) == [1, 2, 10, 20, 30, 40, 50]


# --------------------------------------------------------------------------- the metric


def test_the_right_integer_scores_one_and_the_label_name_zero(tmp_path, counter):
    metric = METRICS.get("helmet.label")
    spec = load_catalog().get("helmet/trec_coarse")
    catalog = scaled_catalog(tmp_path)
    row = build(source("trec_coarse").items, counter, [catalog.get("helmet/trec_coarse")], n_per_task=1).row(0, named=True)
    gold, name = row["answers"][0], json.loads(row["record_fields"])["label"]
    assert metric.label == "helmet"
    assert metric(f" {gold}", row, spec, {}) == 1.0  # completion after "label:"
    assert metric(f"label: {gold}", row, spec, {}) == 1.0  # the prefix repeated
    assert metric(f"{gold}\n\nWhat is a fjord?\nlabel: {int(gold) + 1}", row, spec, {}) == 1.0  # goes on: first line
    assert metric(f" {name}", row, spec, {}) == 0.0  # the label's name is not its integer
    assert metric(f" {int(gold) + 1}", row, spec, {}) == 0.0
    assert metric(f" 1{gold}", row, spec, {}) == 0.0  # the whole first integer, not a digit of it


# --------------------------------------------------------------------------- helmet-demo


def test_the_demo_world_gives_a_labelled_set_the_generic_task_builds_on(counter):
    records = demo_labels()
    assert records == demo_labels()  # deterministic
    demo_counts = Counter(lab for role, _, _, _, lab in records if role == "demo")
    assert len(LABELS) >= 6 and set(demo_counts) == set(range(len(LABELS)))
    per_level = load_catalog().get("helmet/icl").builder.options["per_level"]
    assert min(demo_counts.values()) * len(LABELS) >= per_level["8k"]  # no label repeats at helmet-demo's levels
    labels = load_source(SourceConfig("labels", "demo_labels", {}))
    docs, qa = build_demo_corpus(n_entities=40, seed=7)
    items = pl.concat([qa, labels.items])  # the QA items of the demo corpus are not classification items
    for level in ("4k", "8k"):
        out = build(items, counter, [load_catalog().get("helmet/icl")], level=level, documents=docs)
        assert out.height == 2 and set(out["source"]) == {"labels"} and (out["input_tokens"] <= out["target_tokens"]).all()
        assert all(len(demonstrations(r)) == per_level[level] for r in out.iter_rows(named=True))
        texts = [t for t, _ in demonstrations(out.row(0, named=True))]
        assert len(set(texts)) == len(texts)  # enough demonstrations: none repeated
    assert re.fullmatch(r"\d+", out["answers"][0][0])
