"""HELMET's released preprocessed data (issue 30, "HELMET as released"): source kind ``helmet_released``
(benchmarks/helmet/released_data.py) and builder ``helmet.released`` (benchmarks/helmet/released_build.py).

The fixtures (tests/fixtures/helmet_released/data, made by its make_fixtures.py) are HELMET's released layout at
8k and 16k in our own text. Each test writes what HELMET's data.py would produce independently of the loader:
the passage formats, the seeded query sample (Python's random after seeding, as HELMET's run_test reseeds it),
the Hugging Face shuffle (numpy's default generator), the per-query demo seed (sha256 of the key mod 2^31)."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml

from lc_pipeline import schemas
from lc_pipeline.benchmarks.helmet.released_build import (
    alce_context,
    alce_demos,
    prompt_fields,
)
from lc_pipeline.benchmarks.helmet.released_data import DATASETS, load_helmet_released
from lc_pipeline.config import SourceConfig, load_config
from lc_pipeline.construct.builders import BuildError, LevelInputs, level_batches
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.score.metric_scores import score_instance
from lc_pipeline.sources.loader import check_paths, load_source
from lc_pipeline.sources.validation import RecordError
from lc_pipeline.tasks import catalog_for
from lc_pipeline.tasks.catalog import load_catalog

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "helmet_released" / "data"
RAG_K = {"8k": 50, "16k": 105}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def load(dataset: str, data: Path = DATA, **options):
    return load_helmet_released(data, dataset, source=dataset, levels=options.pop("levels", ("8k", "16k")), **options)


def fields(items: pl.DataFrame) -> list[dict]:
    return [json.loads(f) for f in items["record_fields"]]


FILES = {  # the release's file per dataset at 8k and 16k (spec helmet.md §2 table)
    "nq": ("kilt/nq-dev-multikilt_1000_k50_dep6.jsonl", "kilt/nq-dev-multikilt_1000_k105_dep6.jsonl"),
    "triviaqa": ("kilt/triviaqa-dev-multikilt_1000_k50_dep6.jsonl", "kilt/triviaqa-dev-multikilt_1000_k105_dep6.jsonl"),
    "hotpotqa": ("kilt/hotpotqa-dev-multikilt_1000_k50_dep3.jsonl", "kilt/hotpotqa-dev-multikilt_1000_k105_dep3.jsonl"),
    "popqa": ("kilt/popqa_test_1000_k50_dep6.jsonl", "kilt/popqa_test_1000_k105_dep6.jsonl"),
    "msmarco": ("msmarco/test_reranking_data_k50_dep3.jsonl", "msmarco/test_reranking_data_k130_dep3.jsonl"),
    "json_kv": ("json_kv/test_k105_dep6.jsonl", "json_kv/test_k220_dep6.jsonl"),
    "ruler_mk_needle": ("niah_multikey_2/validation_8192.jsonl", "niah_multikey_2/validation_16384.jsonl"),
    "ruler_mk_uuid": ("niah_multikey_3/validation_8192.jsonl", "niah_multikey_3/validation_16384.jsonl"),
    "ruler_mv": ("niah_multivalue/validation_8192.jsonl", "niah_multivalue/validation_16384.jsonl"),
}


@pytest.mark.parametrize("dataset", sorted(FILES))
def test_every_released_dataset_loads_at_two_levels_each_record_in_the_level_of_its_file(dataset):
    _, items, reports = load(dataset)
    assert set(items["task"]) == {dataset} and items["category"].unique().to_list() == [DATASETS[dataset].category]
    for level, name in zip(("8k", "16k"), FILES[dataset], strict=True):
        mine = [f for f in fields(items) if f["level"] == level]
        assert mine and {f["file"] for f in mine} == {name}
        assert all(f["file"] == name for f in mine)
    assert all(r.records == r.accepted + len(r.rejected) for r in reports)


def test_rag_contexts_are_the_released_passages_and_demos_follow_helmets_seeded_choice():
    _, items, _ = load("triviaqa", levels=("8k",))
    test = lines(DATA / "kilt" / "triviaqa-dev-multikilt_1000_k50_dep6.jsonl")
    train = lines(DATA / "kilt" / "triviaqa-train-multikilt_1000_k3_dep6.jsonl")
    assert items.height == len(test)  # 3 queries x 2 depths, all kept (fewer than 100 queries)
    for (context, question, answers), rec, f in zip(items.select("context", "question", "answers").iter_rows(), test,
                                                     fields(items), strict=True):
        assert context == "\n\n".join("Document (Title: " + c["title"] + "): " + c["text"] for c in rec["ctxs"])
        assert question == rec["question"] and answers == rec["answers"]
        # the demo file shuffled with sha256(id) mod 2^31 (numpy's generator, as datasets.shuffle), first 2 ids
        order = np.random.default_rng(int(hashlib.sha256(rec["id"].encode()).hexdigest(), 16) % 2**31).permutation(
            len(train))
        ids: list[str] = []
        for i in order:
            if train[i]["id"] not in ids:
                ids.append(train[i]["id"])
        picked = [next(d for d in train if d["id"] == i) for i in ids[:2]]
        assert [d["question"] for d in f["demos"]] == [d["question"] for d in picked]
        assert [d["answer"] for d in f["demos"]] == [d["answers"][0] for d in picked]
        assert f["demos"][0]["passages"] == "\n\n".join(
            "Document (Title: " + c["title"] + "): " + c["text"] for c in picked[0]["ctxs"])


def test_the_query_sample_is_helmets_seeded_draw_of_sorted_keys_keeping_every_depth():
    _, items, reports = load("nq", levels=("8k",), max_queries=2)
    test = lines(DATA / "kilt" / "nq-dev-multikilt_1000_k50_dep6.jsonl")  # no ids: keyed by the question
    chosen = set(random.Random(42).sample(sorted({r["question"] for r in test}), 2))
    assert items["question"].to_list() == [r["question"] for r in test if r["question"] in chosen]
    assert any("2 of 3 queries sampled" in n for n in reports[0].notes)


def test_popqa_keeps_long_tail_subjects_and_never_shows_the_test_question_as_a_demo():
    _, items, reports = load("popqa", levels=("8k",))
    test = lines(DATA / "kilt" / "popqa_test_1000_k50_dep6.jsonl")
    assert items.height == sum(r["s_pop"] < 1000 for r in test) < len(test)
    assert any("left out by PopQA's popularity filter" in n for n in reports[0].notes)
    for question, f in zip(items["question"], fields(items), strict=True):
        assert question not in [d["question"] for d in f["demos"]]


def test_msmarco_ranked_passages_qrels_and_demo_rankings():
    _, items, _ = load("msmarco", levels=("16k",))
    test = lines(DATA / "msmarco" / "test_reranking_data_k130_dep3.jsonl")
    for (context, answers), rec, f in zip(items.select("context", "answers").iter_rows(), test, fields(items),
                                          strict=True):
        assert context == "\n\n".join(f"[ID: {c['id']}] Document: {c['text']}" for c in rec["ctxs"])  # no titles
        assert f["qrels"] == {c["id"]: c["label"] for c in rec["ctxs"]}
        assert sorted(answers) == sorted(f"{c['id']}:{c['label']}" for c in rec["ctxs"] if c["label"] > 0)
        for demo in f["demos"]:
            ids = [line.split("]")[0].removeprefix("[ID: ") for line in demo["passages"].split("\n\n")]
            assert demo["answer"] == " > ".join(ids)  # the fixture's demo labels fall with position


def test_msmarco_with_titles_uses_the_titled_format(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA / "msmarco", data / "msmarco")
    path = data / "msmarco" / "test_reranking_data_k50_dep3.jsonl"
    recs = lines(path)
    for r in recs:
        for c in r["ctxs"]:
            c["title"] = "Harbour notes"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(RecordError, match=r"test_reranking_data_k10_dep3.jsonl record 0 \(id '80'\): field 'ctxs': "
                                          r"ctxs\[0\].title: missing"):
        load("msmarco", data, levels=("8k",))  # the demonstrations are written like the test records
    demo_path = data / "msmarco" / "test_reranking_data_k10_dep3.jsonl"
    demos = lines(demo_path)
    for r in demos:
        for c in r["ctxs"]:
            c["title"] = "Market notes"
    demo_path.write_text("".join(json.dumps(r) + "\n" for r in demos))
    _, items, _ = load("msmarco", data, levels=("8k",))
    assert items["context"][0] == "\n\n".join(f"[ID: {c['id']}] Document (Title: Harbour notes): {c['text']}"
                                               for c in recs[0]["ctxs"])


def test_json_kv_and_ruler_keep_the_released_context_and_helmets_shuffled_sample():
    _, items, _ = load("json_kv", levels=("8k",), max_queries=2)
    recs = lines(DATA / "json_kv" / "test_k105_dep6.jsonl")
    order = list(np.random.default_rng(42).permutation(len(recs))[:2])
    assert items["context"].to_list() == [recs[i]["context"] for i in order]
    assert [f["demos"] for f in fields(items)] == [[{"key": k, "value": v} for k, v in recs[i]["demos"][:2]]
                                                   for i in order]
    _, items, _ = load("ruler_mv", levels=("16k",))
    recs = lines(DATA / "ruler" / "niah_multivalue" / "validation_16384.jsonl")
    order = list(np.random.default_rng(42).permutation(len(recs)))
    assert items["context"].to_list() == [recs[i]["context"] for i in order]
    assert items["answers"].to_list() == [recs[i]["outputs"] for i in order]


def test_prompts_are_the_task_files_wording_around_the_released_context():
    catalog = load_catalog()
    _, items, _ = load("nq", levels=("8k",))
    item = items.row(0, named=True)
    f = json.loads(item["record_fields"])
    spec = catalog.get("helmet/nq")
    demos = "".join(d["passages"] + "\n\nQuestion: " + d["question"] + "\nAnswer: " + d["answer"] + "\n\n"
                    for d in f["demos"])
    assert spec.prompt.format_map(prompt_fields("rag", item, f, spec.answer_prefix)) == spec.prompt.format(
        demos=demos, context=item["context"], question=item["question"])
    _, items, _ = load("json_kv", levels=("8k",))
    item = items.row(0, named=True)
    f = json.loads(item["record_fields"])
    values = prompt_fields("json_kv", item, f, "Corresponding value:")
    assert values["question"] == item["question"].strip('"')  # the task's template quotes the key itself
    assert values["demos"] == "".join(f'Key: {d["key"]}\nCorresponding value: {d["value"]}\n\n' for d in f["demos"])
    _, items, _ = load("ruler_mk_uuid", levels=("8k",))
    item = items.row(0, named=True)
    assert prompt_fields("ruler", item, json.loads(item["record_fields"]), None)["kind"] == "uuid"


# --------------------------------------------------------------------------- bad records, missing files


def bad_copy(tmp_path: Path, rel: str, edit) -> Path:
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    path = data / rel
    recs = lines(path)
    edit(recs)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return data


@pytest.mark.parametrize(("dataset", "rel", "edit", "field", "reason"), [
    ("nq", "kilt/nq-dev-multikilt_1000_k50_dep6.jsonl", lambda r: r[1]["ctxs"][2].pop("title"), "ctxs",
     "ctxs[2].title: expected str, missing"),
    ("triviaqa", "kilt/triviaqa-dev-multikilt_1000_k50_dep6.jsonl", lambda r: r[1].pop("id"), "id", "missing"),
    ("popqa", "kilt/popqa_test_1000_k50_dep6.jsonl", lambda r: r[1].update(s_pop="many"), "s_pop", "positive number"),
    ("msmarco", "msmarco/test_reranking_data_k50_dep3.jsonl",
     lambda r: [c.update(label=0) for c in r[1]["ctxs"]], "ctxs", "no passage has a label above 0"),
    ("json_kv", "json_kv/test_k105_dep6.jsonl", lambda r: r[1].update(demos=[["only-a-key"]]), "demos",
     "demos[0]: expected a [key, value] pair"),
    ("ruler_mk_needle", "ruler/niah_multikey_2/validation_8192.jsonl", lambda r: r[1].pop("type_needle_v"),
     "type_needle_v", "missing"),
])
def test_a_bad_record_is_an_error_naming_the_file_the_line_and_the_field(tmp_path, dataset, rel, edit, field, reason):
    data = bad_copy(tmp_path, rel, edit)
    with pytest.raises(RecordError) as err:
        load(dataset, data, levels=("8k",))
    name = "/".join(Path(rel).parts[-2:])
    assert err.value.file == name and err.value.index == 1 and err.value.field == field, str(err.value)
    assert reason in err.value.reason and f"{name} record 1" in str(err.value)
    # on_error: reject lists it in the report and goes on: nothing is dropped silently
    _, items, reports = load(dataset, data, levels=("8k",), on_error="reject")
    rejected = [r for rep in reports for r in rep.rejected]
    assert [(r.file, r.index, r.field) for r in rejected] == [(name, 1, field)]
    assert all(rep.records == rep.accepted + len(rep.rejected) for rep in reports)
    assert items.height and not any(f["file"] == name and f["index"] == 1 for f in fields(items))


def test_a_missing_level_file_names_the_file_helmet_ships(tmp_path):
    with pytest.raises(RecordError, match=r"nq-dev-multikilt_1000_k220_dep6.jsonl.*HELMET's nq at 32k"):
        load("nq", levels=("32k",))
    with pytest.raises(ValueError, match="option 'dataset' 'nq_bad'"):
        load("nq_bad")


def test_source_options_are_checked():
    with pytest.raises(ValueError, match=r"unknown options \['depths'\]"):
        load_source(SourceConfig("nq", "helmet_released", {"data": str(DATA), "dataset": "nq", "depths": 6}))
    with pytest.raises(ValueError, match="option 'data' is required"):
        load_source(SourceConfig("nq", "helmet_released", {"dataset": "nq"}))


def test_the_builder_makes_one_instance_per_record_of_the_level_and_names_the_file_of_a_level_without_one(tmp_path):
    body = {"name": "hr", "sources": [{"name": "nq", "kind": "helmet_released", "dataset": "nq", "data": str(DATA),
                                       "levels": ["8k"]}],
            "released": {"benchmark": "helmet", "builder": "helmet.released", "level_by": "record_level",
                         "tasks": ["nq"]},
            "lengths": ["8k", "16k"]}
    (tmp_path / "hr.yaml").write_text(yaml.safe_dump(body))
    config = load_config(tmp_path / "hr.yaml")
    loaded = load_source(config.sources[0])
    empty = schemas.empty

    def build(level: str) -> pl.DataFrame:
        inputs = LevelInputs(loaded.items, loaded.documents, empty("passages"), empty("hard_negatives"),
                             empty("confusing_facts"), empty("replacement_rules"), level, config,
                             TokenCounter.load("cl100k_base"), catalog_for(config))
        return pl.concat(list(level_batches(inputs)))

    rows = build("8k")
    assert rows.height == loaded.items.height and set(rows["benchmark"]) == {"helmet"}
    assert rows["context"].to_list() == loaded.items["context"].to_list()
    assert all(c in p for c, p in rows.select("context", "prompt").iter_rows())
    with pytest.raises(BuildError, match=r"task nq at 16k: no released record; HELMET ships it as "
                                         r"data/kilt/nq-dev-multikilt_1000_k105_dep6.jsonl"):
        build("16k")


def test_alce_questions_are_helmets_shuffled_sample_each_with_the_demos_drawn_in_file_order():
    _, items, reports = load("qampari", max_queries=2, prompt_file=DATA.parent / "prompts" / "qampari_revised.json")
    recs = json.loads((DATA / "alce" / "qampari_eval_gtr_top2000.json").read_text())
    demos = json.loads((DATA.parent / "prompts" / "qampari_revised.json").read_text())["demos"]
    draw = random.Random(42)  # HELMET's generator, drawing 2 demonstrations per record in file order
    drawn = [draw.sample(demos, 2) for _ in recs]
    order = list(np.random.default_rng(42).permutation(len(recs))[:2])
    assert items["question"].to_list() == [recs[i]["question"] for i in order]
    for f, i in zip(fields(items), order, strict=True):
        assert [d["question"] for d in f["demos"]] == [d["question"] for d in drawn[i]]
        assert [d["title"] for d in f["docs"]] == [d["title"] for d in recs[i]["docs"]]
        assert f["answer_clusters"] == recs[i]["answers"]
    assert "2 of 3 questions kept" in reports[0].notes[-1]
    with pytest.raises(ValueError, match="option 'prompt_file' is required for qampari"):
        load("qampari")


def test_alce_contexts_and_demos_in_the_task_wording():
    catalog = load_catalog()
    spec = catalog.get("helmet/asqa")
    docs = [{"title": "Ostrel harbour", "text": "Dredged in 1903."}, {"title": "Quillby harbour", "text": "Not yet."}]
    assert alce_context(docs) == ("Document [1](Title: Ostrel harbour): Dredged in 1903.\n\n"
                                  "Document [2](Title: Quillby harbour): Not yet.")
    demo = {"question": "When was Ostrel dredged?", "answer": "In 1903 [1].", "docs": docs}
    one = spec.prompt.format(demos="", question=demo["question"], context=alce_context(docs)).rstrip()
    assert one.endswith("Answer:")
    assert alce_demos(spec.prompt, spec.answer_prefix, [demo, demo]) == (one + " In 1903 [1].\n\n\n") * 2


def test_the_released_rows_score_a_perfect_answer_full_marks_with_the_task_files_metrics(tmp_path):
    """The rows carry what HELMET's metrics read (answers, MS MARCO's graded IDs, ALCE's QA pairs / clusters)."""
    datasets = ["nq", "hotpotqa", "popqa", "msmarco", "json_kv", "ruler_mk_needle", "ruler_mv", "asqa", "qampari"]
    prompts = DATA.parent / "prompts"
    sources = [{"name": d, "kind": "helmet_released", "dataset": d, "data": str(DATA), "levels": ["8k"],
                **({"prompt_file": str(prompts / f"{d}_revised.json")} if d in ("asqa", "qampari") else {})}
               for d in datasets]
    scaled = [{"name": d, "builder": {"name": "helmet", "options": {"kind": "cite", "source": d,
                                                                     "per_level": {"8k": 4}}}}
              for d in ("asqa", "qampari")]  # ALCE: the fixture's questions have 12 passages, not 30
    (tmp_path / "scaled.yaml").write_text(yaml.safe_dump({"benchmark": "helmet", "tasks": scaled}))
    body = {"name": "hr", "sources": sources, "task_files": [str(tmp_path / "scaled.yaml")], "lengths": ["8k"],
            "released": {"benchmark": "helmet", "builder": "helmet.released", "level_by": "record_level",
                         "tasks": datasets}}
    (tmp_path / "hr.yaml").write_text(yaml.safe_dump(body))
    config = load_config(tmp_path / "hr.yaml")
    loads = [load_source(s) for s in config.sources]
    empty = schemas.empty
    inputs = LevelInputs(pl.concat([x.items for x in loads]), pl.concat([x.documents for x in loads]),
                         empty("passages"), empty("hard_negatives"), empty("confusing_facts"),
                         empty("replacement_rules"), "8k", config, TokenCounter.load("cl100k_base"),
                         catalog_for(config))
    rows = pl.concat(list(level_batches(inputs)))
    catalog = catalog_for(config)
    for row in rows.unique("task").iter_rows(named=True):
        f = json.loads(row["record_fields"])
        if row["task"] == "msmarco":
            perfect = f["ranking"]  # every passage, by grade
        elif row["task"] == "asqa":
            perfect = " ".join(f"{pair[0]} [1]." for pair in f["qa_pairs"])
        elif row["task"] == "qampari":
            perfect = ", ".join(f"{c[0]} [1]" for c in f["answer_clusters"]) + "."
        else:
            perfect = " ".join(row["answers"])
        scores = score_instance(catalog.get(f"helmet/{row['task']}"), row, perfect)
        assert scores and all(v == 1.0 for v in scores.values()), (row["task"], perfect, scores)
        if row["task"] in ("asqa", "qampari"):
            assert len(f["passages"]) == 4 and row["context"].count("Document [") == 4


def test_lcp_sources_validate_knows_the_released_files_and_lists_every_bad_record(tmp_path):
    data = bad_copy(tmp_path, "json_kv/test_k105_dep6.jsonl", lambda r: r[2].pop("num_kvs"))
    files = [data / "kilt" / "popqa_test_1000_k50_dep6.jsonl", data / "msmarco" / "test_reranking_data_k10_dep3.jsonl",
             data / "json_kv" / "test_k105_dep6.jsonl", data / "ruler" / "niah_multivalue" / "validation_8192.jsonl"]
    checks = check_paths(files)
    assert [c.kind for c in checks] == ["helmet_rag", "helmet_rerank", "helmet_json_kv", "helmet_ruler"]
    assert [c.rejected for c in checks] == [0, 0, 1, 0]
    reason = "json_kv/test_k105_dep6.jsonl record 2: field 'num_kvs': expected a positive integer, got None"
    assert checks[2].reasons == [reason]
