"""HELMET generation with citations: ALCE's released files read as items, cite instances built with the
top-k passages of the level (IDs 1..k in rank order) after two cited demonstrations, and ALCE's
correctness metrics (ASQA STR-EM, QAMPARI recall-top-5) on worked examples (spec helmet.md §2.4, §3)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.benchmarks.helmet.construction import build_helmet
from lc_pipeline.benchmarks.helmet.config import HelmetConfig
from lc_pipeline.config import SourceConfig
from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.benchmarks.helmet.alce_correctness import (
    qampari_rec_top5,
    remove_citations,
    str_em,
)
from lc_pipeline.sources.alce import CATEGORY, DEMO_CATEGORY, load_alce
from lc_pipeline.sources.demo_corpus import build_demo_corpus
from lc_pipeline.sources.loader import load_source
from lc_pipeline.sources.validation import RecordError
from lc_pipeline.tasks import load_catalog
from lc_pipeline.tasks.registry import METRICS
from lc_pipeline.text import contains_answer, normalize_answer

ALCE = Path(__file__).resolve().parents[1] / "fixtures" / "helmet" / "alce"  # mirrors $LCP_DATA/helmet/alce/
SPEC_TABLE = {"8k": 30, "16k": 75, "32k": 165, "64k": 345, "128k": 700}  # helmet.md §2, ALCE passages per level
# The fixture questions have 12 passages each, so the tests scale the table down to 6 at 8k and 12 at 16k
# through a user task file (a catalog override of the packaged tasks' builder options).
SCALED = {"8k": 6, "16k": 12}
DOC_LINE = re.compile(r"^Document \[(\d+)\]\(Title: (.*?)\): (.*)$")


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.load()


@pytest.fixture(scope="module")
def alce_items() -> pl.DataFrame:
    asqa = load_alce(ALCE / "asqa_eval_gtr_top2000.json", source="asqa", demos=ALCE / "asqa_revised.json")
    qampari = load_alce(ALCE / "qampari_eval_gtr_top2000.json", source="qampari", demos=ALCE / "qampari_revised.json")
    return pl.concat([asqa[1], qampari[1]])


def scaled_specs(tmp_path: Path, table: dict) -> dict:
    """The packaged asqa / qampari tasks with ``per_level`` overridden by a user task file."""
    lines = ["benchmark: helmet", "tasks:"]
    for name in ("asqa", "qampari"):
        options = {"kind": "cite", "source": name, "per_level": table}
        lines += [f"- name: {name}", f"  builder: {json.dumps({'name': 'helmet', 'options': options})}"]
    path = tmp_path / "scaled_cite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return {s.name: s for s in load_catalog([path]).tasks("helmet")}


def build(items: pl.DataFrame, specs: list, level: str, counter: TokenCounter, *, documents=None, passages=None,
          negatives=None, n_per_task: int = 3) -> pl.DataFrame:
    return build_helmet(
        documents if documents is not None else pl.DataFrame(schema=schemas.SOURCE_DOCUMENTS), items,
        passages if passages is not None else pl.DataFrame(schema=schemas.PASSAGES),
        negatives if negatives is not None else pl.DataFrame(schema=schemas.HARD_NEGATIVES),
        level=level, config=HelmetConfig(n_per_task=n_per_task), seed=42, counter=counter, tasks=specs)


def context_lines(row: dict) -> list[tuple[int, str, str]]:
    out = []
    for line in row["context"].split("\n"):
        m = DOC_LINE.match(line)
        assert m, f"not a passage line: {line!r}"
        out.append((int(m.group(1)), m.group(2), m.group(3)))
    return out


# --------------------------------------------------------------------------- the source


def test_each_alce_question_is_an_item_with_its_passages_in_rank_order():
    raw = json.loads((ALCE / "asqa_eval_gtr_top2000.json").read_text())
    _, items, reports = load_alce(ALCE / "asqa_eval_gtr_top2000.json", source="asqa")
    assert items.height == 3 and set(items["category"]) == {CATEGORY} and set(items["task"]) == {"asqa"}
    first = items.filter(pl.col("record_id") == raw[0]["sample_id"]).row(0, named=True)
    assert first["item_id"] == f"asqa-{raw[0]['sample_id']}"
    assert first["answers"] == ["1911", "1934", "May 1934"]  # every distinct short answer
    fields = json.loads(first["record_fields"])
    assert fields["style"] == "asqa"
    assert fields["qa_pairs"] == [["1911"], ["1934", "May 1934"]]
    assert fields["docs"] == [{"title": d["title"], "text": d["text"]} for d in raw[0]["docs"]]  # rank order
    assert reports[0].accepted == 3 and not reports[0].rejected


def test_qampari_answers_are_the_first_alias_of_each_cluster_and_max_docs_keeps_the_top_passages():
    raw = json.loads((ALCE / "qampari_eval_gtr_top2000.json").read_text())
    _, items, _ = load_alce(ALCE / "qampari_eval_gtr_top2000.json", source="qampari", max_docs=5)
    row = items.filter(pl.col("record_id") == raw[0]["id"]).row(0, named=True)
    assert row["answers"] == [c[0] for c in raw[0]["answers"]]
    fields = json.loads(row["record_fields"])
    assert fields["style"] == "qampari" and fields["answer_clusters"] == raw[0]["answers"]
    assert [d["text"] for d in fields["docs"]] == [d["text"] for d in raw[0]["docs"][:5]]


def test_the_demos_file_gives_demonstration_items_through_the_configured_source(monkeypatch):
    monkeypatch.setenv("LCP_DATA", str(ALCE.parents[1]))  # the packaged helmet config's layout: $LCP_DATA/helmet/alce/
    loaded = load_source(SourceConfig("asqa", "alce", {"paths": "$LCP_DATA/helmet/alce/asqa_eval_gtr_top2000.json",
                                                       "demos": "$LCP_DATA/helmet/alce/asqa_revised.json",
                                                       "style": "asqa", "max_docs": 700}))
    assert loaded.items.filter(pl.col("category") == CATEGORY).height == 3
    demos = loaded.items.filter(pl.col("category") == DEMO_CATEGORY)
    shipped = json.loads((ALCE / "asqa_revised.json").read_text())["demos"]
    assert demos["question"].to_list() == [d["question"] for d in shipped]
    assert [json.loads(f)["answer"] for f in demos["record_fields"]] == [d["answer"] for d in shipped]
    assert [r.file for r in loaded.reports] == ["alce/asqa_eval_gtr_top2000.json", "alce/asqa_revised.json"]


def test_a_bad_question_names_file_record_and_field_and_reject_keeps_the_others(tmp_path):
    raw = json.loads((ALCE / "qampari_eval_gtr_top2000.json").read_text())
    raw[1]["docs"][3]["text"] = "  "
    raw[2]["answers"] = "Kelby"
    path = tmp_path / "qampari_eval_gtr_top2000.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(RecordError) as err:
        load_alce(path, source="q")
    assert (err.value.file, err.value.index, err.value.record_id, err.value.field) == (
        f"{tmp_path.name}/qampari_eval_gtr_top2000.json", 1, raw[1]["id"], "docs")
    assert "docs[3].text" in str(err.value)
    _, items, reports = load_alce(path, source="q", on_error="reject")
    assert items["record_id"].to_list() == [raw[0]["id"]]
    assert [(r.index, r.field) for r in reports[0].rejected] == [(1, "docs"), (2, "answers")]
    with pytest.raises(RecordError, match="qa_pairs"):
        load_alce(path, source="q", style="asqa")  # a QAMPARI record in an ASQA source


# --------------------------------------------------------------------------- the instances


def test_packaged_cite_tasks_carry_the_spec_table_chat_template_and_300_new_tokens():
    specs = {s.name: s for s in load_catalog().tasks("helmet")}
    for name, metric in (("asqa", "helmet.str_em"), ("qampari", "helmet.qampari_rec5")):
        spec = specs[name]
        assert spec.builder.options == {"kind": "cite", "source": name, "per_level": SPEC_TABLE}
        assert spec.chat_template and spec.max_new_tokens == 300 and spec.answer_prefix == "Answer:"
        assert [(m.name, dict(m.options)) for m in spec.metrics] == [
            (metric, {}), ("alce.citation_recall", {"style": name}), ("alce.citation_precision", {"style": name})]
        assert spec.category == spec.aggregation.group == "Cite"
        assert spec.aggregation.score == "mean_of_metrics"
    assert "per_level" not in specs["cite"].builder.options and "source" not in specs["cite"].builder.options
    assert [m.name for m in specs["cite"].metrics] == ["helmet.str_em", "alce.citation_recall", "alce.citation_precision"]


@pytest.mark.parametrize("level", ["8k", "16k"])
def test_cite_instances_hold_the_top_k_passages_of_the_level_with_ids_in_rank_order(
        tmp_path, alce_items, counter, level):
    specs = scaled_specs(tmp_path, SCALED)
    out = build(alce_items, [specs["asqa"], specs["qampari"]], level, counter)
    assert out.height == 6 and out.filter(pl.col("task") == "asqa").height == 3
    assert (out["input_tokens"] <= out["target_tokens"]).all() and set(out["max_new_tokens"]) == {300}
    items = {r["item_id"]: r for r in alce_items.iter_rows(named=True)}
    k = SCALED[level]
    for row in out.iter_rows(named=True):
        item = items[row["item_id"]]
        docs = json.loads(item["record_fields"])["docs"]
        lines = context_lines(row)
        assert [i for i, _, _ in lines] == list(range(1, k + 1))  # IDs 1..k
        assert [(t, x) for _, t, x in lines] == [(d["title"], d["text"]) for d in docs[:k]]  # rank order
        fields = json.loads(row["record_fields"])
        assert fields["passages"] == docs[:k] and fields["question"] == row["question"]
        assert fields["style"] == row["task"]
        slots = fields["qa_pairs"] if row["task"] == "asqa" else fields["answer_clusters"]
        item_fields = json.loads(item["record_fields"])
        assert slots == item_fields["qa_pairs" if row["task"] == "asqa" else "answer_clusters"]
        prompt = row["prompt"]
        assert prompt.endswith(f"Question: {row['question']}\n\n{row['context']}\n\nAnswer:")
        # Two demonstrations (5 passages and a cited answer each) before the test's instruction.
        assert prompt.count("\nQuestion: ") == 3 and prompt.count("Instruction:") == 3
        demos, test = prompt.rsplit("\n\n\n", 1)
        assert test.startswith("Instruction:") and row["question"] not in demos
        for demo in demos.split("\n\n\n"):
            assert demo.count("Document [") == 5 and "Document [5](" in demo
            assert re.search(r"\nAnswer: .+\[\d+\]", demo)


def test_the_same_questions_and_demonstrations_at_every_level(tmp_path, alce_items, counter):
    specs = scaled_specs(tmp_path, SCALED)
    small, large = (build(alce_items, [specs["qampari"]], lvl, counter, n_per_task=2) for lvl in ("8k", "16k"))
    assert small["item_id"].to_list() == large["item_id"].to_list()
    demos = {p.rsplit("\n\n\n", 1)[0] for p in [*small["prompt"], *large["prompt"]]}
    assert len(demos) == 1  # drawn once per task from the demos file, the same for every question
    shipped = {d["question"] for d in json.loads((ALCE / "qampari_revised.json").read_text())["demos"]}
    asked = set(re.findall(r"\nQuestion: (.*)\n", demos.pop()))
    assert len(asked) == 2 and asked <= shipped


def test_a_level_missing_from_per_level_is_an_error_naming_the_task_and_the_level(tmp_path, alce_items, counter):
    specs = scaled_specs(tmp_path, SCALED)
    with pytest.raises(ValueError, match=r"task 'asqa'.*per_level.*level '32k'"):
        build(alce_items, [specs["asqa"]], "32k", counter)


def test_a_question_with_fewer_passages_than_the_table_asks_is_an_error_naming_it(alce_items, counter):
    packaged = {s.name: s for s in load_catalog().tasks("helmet")}
    with pytest.raises(ValueError, match=r"task 'asqa' at 8k: item 'asqa-.*' .* 12 passages, .*asks for 30"):
        build(alce_items, [packaged["asqa"]], "8k", counter)


def test_without_a_demos_file_the_demonstrations_are_other_questions_with_cited_gold_answers(tmp_path, counter):
    _, items, _ = load_alce(ALCE / "qampari_eval_gtr_top2000.json", source="qampari")
    specs = scaled_specs(tmp_path, SCALED)
    out = build(items, [specs["qampari"]], "8k", counter, n_per_task=1)
    row = out.row(0, named=True)
    demos = row["prompt"].rsplit("\n\n\n", 1)[0]
    asked = re.findall(r"\nQuestion: (.*)\n", demos)
    assert len(asked) == 2 and row["question"] not in asked
    # e.g. "Kelby [1], Ormsby [1], Dockside [1]." : each answer cited to a passage holding it
    for answer in re.findall(r"\nAnswer: (.*)", demos):
        assert re.fullmatch(r"[^,\[\]]+ \[\d\](, [^,\[\]]+ \[\d\])*\.", answer)


def test_any_corpus_cite_puts_the_gold_passage_among_hard_negatives_filled_to_the_level(counter):
    docs, items = build_demo_corpus(n_entities=40, seed=5)
    passages = chunk_documents(docs, 100, counter)
    # Hard negatives: every passage of another document without the answer, by words shared with the question.
    rows = []
    for it in items.iter_rows(named=True):
        q = set(normalize_answer(it["question"]).split())
        cands = [p for p in passages.iter_rows(named=True)
                 if p["doc_id"] not in it["evidence_doc_ids"] and not contains_answer(p["text"], it["answers"])]
        cands.sort(key=lambda p: (-len(q & set(normalize_answer(p["text"]).split())), p["passage_id"]))
        rows += [(it["item_id"], r, p["passage_id"], p["doc_id"], 0.0, r) for r, p in enumerate(cands[:60])]
    negatives = pl.DataFrame(rows, schema=schemas.HARD_NEGATIVES, orient="row")
    spec = {s.name: s for s in load_catalog().tasks("helmet")}["cite"]
    out = build(items, [spec], "4k", counter, documents=docs, passages=passages, negatives=negatives, n_per_task=2)
    assert out.height == 2
    assert ((out["input_tokens"] <= 4096) & (out["input_tokens"] >= 4096 * 0.95)).all()  # filled to the level
    for row in out.iter_rows(named=True):
        fields = json.loads(row["record_fields"])
        lines = context_lines(row)
        assert [i for i, _, _ in lines] == list(range(1, len(lines) + 1)) and len(lines) > 10
        assert [{"title": t, "text": x} for _, t, x in lines] == fields["passages"]
        assert fields["style"] == "asqa" and fields["qa_pairs"] == [row["answers"]]
        gold = [i for i, _, x in lines if contains_answer(x, row["answers"])]
        assert len(gold) >= 1 and row["evidence_doc_ids"]
        assert row["prompt"].count("\nQuestion: ") == 3


# --------------------------------------------------------------------------- correctness metrics


def test_asqa_str_em_is_the_share_of_qa_pairs_whose_short_answer_is_in_the_output():
    pairs = [["1911"], ["1934", "May 1934"]]
    assert str_em("The first section opened in 1911 [1].", pairs) == 0.5
    assert str_em("It opened in 1911 [1]; the extension followed in May 1934 [2].", pairs) == 1.0
    assert str_em("Answer: It opened in 1911 [1].\nThe rest followed in 1934 [2].", pairs, "Answer:") == 1.0
    assert str_em("Nobody knows.", pairs) == 0.0


def test_citations_are_removed_before_matching():
    assert remove_citations("Opened in 1911 [1][2]. Extended in 1934 [3].") == "Opened in 1911. Extended in 1934."
    # A citation marker is not an answer: "[2]" cites document 2, it does not say "2".
    assert str_em("The line has three sections [2].", [["2"]]) == 0.0
    assert str_em("The line has 2 sections [1].", [["2"]]) == 1.0
    # A QAMPARI answer followed by its citation still matches exactly.
    assert qampari_rec_top5("Kelby [1], Ormsby [2].", [["Kelby"], ["Ormsby"]]) == 1.0


def test_qampari_recall_top5_counts_at_most_five_of_the_clusters():
    seven = [["The Glass Orchard"], ["Salt and Iron"], ["The Long Quay"], ["Winter Lamps"], ["A House of Reeds"],
             ["Copper Sky"], ["The Ninth Bell"]]
    assert qampari_rec_top5("The Glass Orchard [1], Salt and Iron [1], The Long Quay [1], Harbor Days [2].",
                            seven) == 3 / 5
    assert qampari_rec_top5(", ".join(c[0] for c in seven) + ".", seven) == 1.0  # 7 hits count as 5
    # An alias hits its cluster; a partial name does not (exact match after normalization).
    assert qampari_rec_top5("Tessel [1], Hale [1]", [["Tessel River", "Tessel"], ["Hale Brook"]]) == 0.5


def test_registered_metrics_read_the_instance_record_fields():
    task = {s.name: s for s in load_catalog().tasks("helmet")}["asqa"]
    instance = {"instance_id": "i1", "task": "asqa", "answers": ["1911", "1934"],
                "record_fields": json.dumps({"style": "asqa", "qa_pairs": [["1911"], ["1934"]]})}
    metric = METRICS.get("helmet.str_em")
    assert metric.label == "str_em" and metric("Answer: 1911 [1].", instance, task, {}) == 0.5
    rec5 = METRICS.get("helmet.qampari_rec5")
    clusters = {**instance, "record_fields": json.dumps({"answer_clusters": [["Ada"], ["Bo"], ["Cy"]]})}
    assert rec5.label == "rec_top5" and rec5("Ada [1], Cy [2]", clusters, task, {}) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match=r"instance 'i1'.*record_fields.answer_clusters"):
        rec5("Ada", instance, task, {})


def test_metric_scores_of_built_cite_instances_are_the_correctness_numbers(tmp_path, alce_items, counter):
    from lc_pipeline.score.metric_scores import score_frame

    specs = scaled_specs(tmp_path, SCALED)
    out = build(alce_items, [specs["asqa"], specs["qampari"]], "8k", counter, n_per_task=3)
    replies = {"When did the Harbor Line open?": "It opened in 1911 [1].",  # 1 of 2 QA pairs
               "Which novels did Mira Talbot write?": "The Glass Orchard [1], Salt and Iron [1], Copper Sky [2]."}
    outputs = [replies.get(q, "I do not know.") for q in out["question"]]
    generations = pl.DataFrame({"generation_id": [f"g{i}" for i in range(out.height)],
                                "instance_id": out["instance_id"], "output": outputs})
    instances = out.with_columns(benchmark=pl.lit("helmet"))  # the instances asset names the benchmark
    scores = score_frame(generations, instances, load_catalog([tmp_path / "scaled_cite.yaml"]))
    # One row per generation: the correctness metric (citation recall / precision are the NLI asset's).
    assert scores.height == out.height and set(scores["metric"]) == {"str_em", "rec_top5"}
    by_gen = dict(zip(scores["generation_id"], scores["score"]))
    got = {q: by_gen[f"g{i}"] for i, q in enumerate(out["question"])}
    assert got["When did the Harbor Line open?"] == 0.5
    assert got["Which novels did Mira Talbot write?"] == 3 / 5  # 3 of 7 clusters, at most 5 counted
    assert all(v == 0.0 for q, v in got.items() if q not in replies)
