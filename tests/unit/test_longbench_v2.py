"""LongBench v2 as released (spec released_benchmarks.md "LongBench v2"): the adapter on fixture files written in
the released format (tests/fixtures/longbench_v2, invented text), the task file, answer extraction and the table."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline import schemas
from lc_pipeline.benchmarks.longbench_v2.sources import load_longbench_v2
from lc_pipeline.cli import main
from lc_pipeline.config import SourceConfig
from lc_pipeline.benchmarks.longbench_v2.metrics import (
    choice_score,
    extract_choice,
    format_v2_table,
    v2_rows,
    v2_table,
    v2_tables,
)
from lc_pipeline.score.benchmark_scores import benchmark_table
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.sources.loader import (
    detect_kind,
    load_source,
    validate_path,
)
from lc_pipeline.tasks.registry import SOURCE_KINDS
from lc_pipeline.sources.validation import RecordError
from lc_pipeline.tasks.catalog import benchmark_of_source_kind, load_catalog
from lc_pipeline.tasks.registry import METRICS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "longbench_v2"
GOOD = FIXTURES / "data.json"
MIXED = FIXTURES / "mixed.jsonl"


def raw(path: Path) -> list[dict]:
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --------------------------------------------------------------------------- the adapter


def test_each_released_record_becomes_one_item_with_its_context_as_one_evidence_document():
    documents, items, (report,) = load_longbench_v2(GOOD, source="v2")
    assert (report.format, report.records, report.accepted, report.rejected) == ("json", 3, 3, [])
    assert documents.schema == schemas.SOURCE_DOCUMENTS and items.schema == schemas.SOURCE_ITEMS
    records = raw(GOOD)
    assert documents["text"].to_list() == [r["context"] for r in records]
    for rec, item in zip(records, items.iter_rows(named=True), strict=True):
        assert item["task"] == "longbench_v2" and item["category"] == rec["domain"] and item["language"] == "en"
        assert item["answers"] == [rec["answer"]] and item["all_classes"] == ["A", "B", "C", "D"]
        assert item["evidence_doc_ids"] == [item["item_id"] + "-p1"] and item["hops"] == 1
        assert item["answer_keywords"] == [] and item["confusing_facts"] == []


def test_the_question_shows_the_four_choices_one_per_line_after_it():
    _, items, _ = load_longbench_v2(GOOD, source="v2")
    rec = raw(GOOD)[1]
    assert items["question"][1] == (
        f"{rec['question']}\n\n(A) {rec['choice_A']}\n(B) {rec['choice_B']}\n(C) {rec['choice_C']}\n(D) {rec['choice_D']}")


def test_the_record_keeps_its_id_its_context_verbatim_and_the_fields_its_table_is_cut_by():
    documents, items, _ = load_longbench_v2(GOOD, source="v2")
    records = raw(GOOD)
    assert items["item_id"].to_list() == [f"v2-longbench_v2-{r['_id']}" for r in records]
    assert items["record_id"].to_list() == [r["_id"] for r in records]
    assert items["context"].to_list() == [r["context"] for r in records]
    assert [json.loads(f) for f in items["record_fields"]] == [
        {k: r[k] for k in ("difficulty", "length", "domain", "sub_domain")} for r in records]
    assert documents["domain"][2] == "longbench_v2/Code Repository Understanding"


def test_a_field_outside_the_release_is_noted_not_stored():
    _, _, (report,) = load_longbench_v2(GOOD, source="v2")
    assert report.notes == ["fields ignored: note"]


def test_bad_records_are_rejected_each_naming_file_record_and_field():
    documents, items, (report,) = load_longbench_v2(MIXED, source="v2", on_error="reject")
    assert (report.records, report.accepted, len(report.rejected)) == (7, 2, 5)
    assert items["item_id"].to_list() == ["v2-longbench_v2-lbv2-fx-0101", "v2-longbench_v2-lbv2-fx-0107"]
    assert documents.height == 2
    got = [(r.file, r.index, r.record_id, r.field) for r in report.rejected]
    assert got == [
        ("longbench_v2/mixed.jsonl", 1, "lbv2-fx-0102", "choice_C"),
        ("longbench_v2/mixed.jsonl", 2, "lbv2-fx-0103", "answer"),
        ("longbench_v2/mixed.jsonl", 3, "lbv2-fx-0104", "difficulty"),
        ("longbench_v2/mixed.jsonl", 4, "lbv2-fx-0105", "length"),
        ("longbench_v2/mixed.jsonl", 5, "lbv2-fx-0106", "choice_D"),
    ]
    reasons = [r.reason for r in report.rejected]
    assert reasons[0] == "missing" and reasons[1] == "expected one of A, B, C, D, got 'E'"
    assert reasons[2] == "expected one of easy, hard, got 'medium'"
    assert reasons[3] == "expected one of short, medium, long, got '128k'"
    assert reasons[4] == "empty (blank) string"


def test_by_default_the_first_bad_record_fails_the_load_with_its_location():
    with pytest.raises(RecordError) as err:
        load_longbench_v2(MIXED, source="v2")
    assert str(err.value) == "longbench_v2/mixed.jsonl record 1 (id 'lbv2-fx-0102'): field 'choice_C': missing"


def test_a_record_id_loaded_from_an_earlier_file_is_rejected_in_the_later_one(tmp_path):
    again = tmp_path / "again.jsonl"
    again.write_text(json.dumps(raw(GOOD)[0]) + "\n", encoding="utf-8")
    _, items, reports = load_longbench_v2([GOOD, again], source="v2", on_error="reject")
    assert items.height == 3 and reports[1].rejected[0].field == "_id"
    assert reports[1].rejected[0].reason == "already loaded from longbench_v2/data.json"


def test_the_source_kind_loads_a_folder_and_its_items_belong_to_the_longbench_v2_benchmark(tmp_path):
    folder = tmp_path / "lbv2"
    folder.mkdir()
    (folder / "data.json").write_bytes(GOOD.read_bytes())
    assert "longbench_v2" in SOURCE_KINDS
    load = load_source(SourceConfig(name="v2", kind="longbench_v2", options={"paths": str(folder)}))
    assert load.items.height == 3 and load.rejected("v2").height == 0
    assert benchmark_of_source_kind("longbench_v2") == "longbench_v2"
    catalog = load_catalog()
    assert {catalog.resolve("longbench_v2", t).qualified_name for t in load.items["task"]} == {
        "longbench_v2/longbench_v2"}


def test_sources_validate_detects_the_format_and_counts_rejections():
    assert detect_kind(GOOD) == detect_kind(MIXED) == "longbench_v2"
    kind, (report,) = validate_path(MIXED)
    assert (kind, report.accepted, len(report.rejected)) == ("longbench_v2", 2, 5)
    result = CliRunner().invoke(main, ["sources", "validate", str(GOOD), str(MIXED), "--format", "json"])
    assert result.exit_code == 1  # a rejected record fails the check
    rows = json.loads(result.stdout)
    assert [(r["kind"], r["accepted"], r["rejected"]) for r in rows] == [("longbench_v2", 3, 0), ("longbench_v2", 2, 5)]


# --------------------------------------------------------------------------- the task file


def test_the_direct_mode_answers_in_128_tokens_and_says_the_authors_sample_where_we_decode_greedily():
    catalog = load_catalog()
    task = catalog.get("longbench_v2/longbench_v2")
    assert (task.max_new_tokens, task.truncation, task.chat_template, task.rubric) == (128, "middle", True, None)
    assert task.metric_names == ("longbench_v2.choice",) and task.builder.name == "qa.assemble"
    assert task.followup is None and task.aggregation.table == "direct"
    assert catalog.headlines["longbench_v2"].overall == "mean_of_instances"
    assert catalog.headlines["longbench_v2"].breakdown == ("difficulty", "length")  # the table's other columns
    assert "temperature 0.1; we decode greedily" in catalog.benchmarks["longbench_v2"]


def test_the_chain_of_thought_mode_runs_the_direct_modes_records_in_two_calls_of_1024_then_128_tokens():
    task = load_catalog().get("longbench_v2/cot")
    assert task.builder.name == "released.records" and task.builder.options == {"records_of": "longbench_v2"}
    assert task.max_new_tokens == 1024 and task.followup.max_new_tokens == 128
    assert "reason step by step" in task.prompt and "The correct answer is" not in task.prompt
    assert {"{prompt}", "{reasoning}"} <= set(re.findall(r"\{\w+\}", task.followup.prompt))
    assert "The correct answer is (X)" in task.followup.prompt
    assert task.metric_names == ("longbench_v2.choice",) and task.aggregation.table == "cot"  # a table apart


def test_the_prompt_fills_context_and_question_and_asks_for_the_answer_form_the_metric_reads():
    prompt = load_catalog().get("longbench_v2/longbench_v2").prompt
    fields = [f for _, f, _, _ in string.Formatter().parse(prompt) if f is not None]
    assert sorted(fields) == ["context", "question"]
    rendered = prompt.format(context="CONTEXT", question="QUESTION")
    assert "The correct answer is (X)" in rendered
    assert extract_choice(rendered.replace("(X)", "(C)")) == "C"


def test_lcp_tasks_show_prints_the_task():
    result = CliRunner().invoke(main, ["tasks", "show", "longbench_v2/longbench_v2"])
    assert result.exit_code == 0, result.output
    assert "metric           [\"longbench_v2.choice\"]" in result.stdout
    assert "max_new_tokens   128" in result.stdout and "truncation       middle" in result.stdout


# --------------------------------------------------------------------------- answer extraction and the metric


@pytest.mark.parametrize(("reply", "letter"), [
    ("The correct answer is (B)", "B"),
    ("**The correct answer is (C)**", "C"),  # markdown bold is removed first
    ("The correct answer is *(A)*.", "A"),
    ("The correct answer is D.", "D"),  # a bare letter
    ("The correct answer is **B**, because ...", "B"),
    ("The correct answer is D, or rather, The correct answer is (B)", "B"),  # a parenthesized letter wins
    ("The correct answer is (A). Then again, The correct answer is (C)", "A"),  # the first match
    ("Answer: B", None),
    ("the correct answer is (b)", None),  # case matters, as in the authors' pattern
    ("The correct answer is (E)", None),
    ("", None),
])
def test_the_letter_is_read_after_the_correct_answer_is(reply, letter):
    assert extract_choice(reply) == letter


def test_a_record_scores_one_when_the_letter_is_gold_and_unanswered_records_score_a_quarter_when_compensated():
    assert choice_score("The correct answer is (B)", "B") == 1.0
    assert choice_score("The correct answer is (A)", "B") == 0.0
    assert choice_score("I cannot tell.", "B") == 0.0
    assert choice_score("I cannot tell.", "B", compensated=True) == 0.25
    assert choice_score("The correct answer is (A)", "B", compensated=True) == 0.0  # a wrong answer earns nothing


def test_the_registered_metric_reads_the_gold_letter_and_the_compensated_option():
    metric = METRICS.get("longbench_v2.choice")
    task = load_catalog().get("longbench_v2/longbench_v2")
    instance = {"answers": ["C"], "task": "longbench_v2"}
    assert metric.label == "longbench_v2"
    assert metric("**The correct answer is (C)**", instance, task, {}) == 1.0
    assert metric("no idea", instance, task, {}) == 0.0
    assert metric("no idea", instance, task, {"compensated": True}) == 0.25
    with pytest.raises(ValueError, match="field answers"):
        metric("The correct answer is (C)", {"answers": ["C", "D"]}, task, {})


# --------------------------------------------------------------------------- the table


def test_the_table_is_accuracy_times_100_overall_and_per_difficulty_and_length():
    rows = [("easy", "short", 1.0), ("easy", "short", 1.0), ("easy", "long", 0.0), ("hard", "short", 0.0),
            ("hard", "medium", 1.0), ("hard", "long", 0.0), ("hard", "long", 0.0)]
    table = v2_table(rows)
    # By hand: 3 of 7 right; easy 2/3, hard 1/4; short 2/3, medium 1/1, long 0/3.
    assert table.row(0, named=True) == pytest.approx(
        {"overall": 300 / 7, "easy": 200 / 3, "hard": 25.0, "short": 200 / 3, "medium": 100.0, "long": 0.0, "n": 7})
    assert format_v2_table(table) == ["42.9", "66.7", "25.0", "66.7", "100.0", "0.0"]


def test_the_compensated_table_counts_an_unanswered_record_as_a_quarter():
    replies = [("The correct answer is (A)", "A"), ("no answer", "B"), ("The correct answer is (C)", "D")]
    rows = [("hard", "long", choice_score(r, g, compensated=True)) for r, g in replies]
    # By hand: (1 + 0.25 + 0) / 3 = 41.67%
    assert format_v2_table(v2_table(rows)) == ["41.7", "-", "41.7", "-", "-", "41.7"]


def v2_instances(items: pl.DataFrame, task: str = "longbench_v2") -> pl.DataFrame:
    return items.select("item_id", "category", "answers", "record_fields").with_columns(
        instance_id=pl.col("item_id") + f"#{task}", task=pl.lit(task), benchmark=pl.lit("longbench_v2"),
        depth=pl.lit(None, pl.Float64))


def test_one_models_metric_scores_make_the_table_through_the_instances_record_fields():
    _, items, _ = load_longbench_v2(GOOD, source="v2")  # easy/short, hard/medium, hard/long; gold B, A, B
    instances = v2_instances(items)
    generations = pl.DataFrame({"generation_id": ["g0", "g1", "g2"], "instance_id": instances["instance_id"],
                                "output": ["The correct answer is (B)", "**The correct answer is B**", "Hmm."]})
    scores = score_frame(generations, instances)
    assert scores["metric"].to_list() == ["longbench_v2"] * 3 and scores["score"].to_list() == [1.0, 0.0, 0.0]
    rows = v2_rows(scores, instances)
    assert rows.select("difficulty", "length").rows() == [("easy", "short"), ("hard", "medium"), ("hard", "long")]
    assert format_v2_table(v2_table(rows)) == ["33.3", "100.0", "0.0", "100.0", "0.0", "0.0"]


def test_the_direct_and_chain_of_thought_modes_are_tables_apart():
    _, items, _ = load_longbench_v2(GOOD, source="v2")
    instances = pl.concat([v2_instances(items), v2_instances(items, "cot")])
    outputs = ["The correct answer is (B)", "The correct answer is (C)", "The correct answer is (C)",  # direct: 1 of 3
               "The correct answer is (B)", "The correct answer is (A)", "The correct answer is (B)"]  # cot: 3 of 3
    generations = pl.DataFrame({"generation_id": [f"g{i}" for i in range(6)], "instance_id": instances["instance_id"],
                                "output": outputs})
    tables = v2_tables(score_frame(generations, instances), instances)
    assert tables["task"].to_list() == ["cot", "longbench_v2"]
    assert tables.select("overall", "easy", "hard", "n").rows() == [(100.0, 100.0, 100.0, 3), (pytest.approx(100 / 3),
                                                                                             100.0, 0.0, 3)]


def test_benchmark_scores_gives_each_mode_the_same_table_from_the_records_fields():
    _, items, _ = load_longbench_v2(GOOD, source="v2")
    instances = pl.concat([v2_instances(items), v2_instances(items, "cot")]).with_columns(length=pl.lit("all"))
    outputs = ["The correct answer is (B)", "The correct answer is (C)", "The correct answer is (B)",
               "The correct answer is (B)", "The correct answer is (A)", "Hmm."]
    generations = pl.DataFrame({"generation_id": [f"g{i}" for i in range(6)], "instance_id": instances["instance_id"],
                                "output": outputs})
    scores = score_frame(generations, instances).with_columns(length=pl.lit("all"))
    expected = {r["task"]: r for r in v2_tables(scores, instances).iter_rows(named=True)}
    table = benchmark_table(scores, instances, load_catalog(), "m").table
    for mode, task in (("direct", "longbench_v2"), ("cot", "cot")):
        rows = table.filter(pl.col("table") == mode)
        cells = {(r["level"], r["category"]): r["score"] for r in rows.iter_rows(named=True)}
        want = expected[task]
        assert cells[("overall", None)] == pytest.approx(want["overall"])
        for column, field in (("easy", "difficulty"), ("hard", "difficulty"), ("short", "length"),
                              ("medium", "length"), ("long", "length")):
            assert cells[("breakdown", f"{field}={column}")] == pytest.approx(want[column]), (mode, column)


def test_a_score_whose_instance_lacks_the_classes_is_an_error_naming_it():
    _, items, _ = load_longbench_v2(GOOD, source="v2")
    instances = v2_instances(items).with_columns(record_fields=pl.lit("{}"))
    generations = pl.DataFrame({"generation_id": ["g0"], "instance_id": instances["instance_id"][:1],
                                "output": ["The correct answer is (B)"]})
    with pytest.raises(ValueError, match="instance 'v2-longbench_v2-lbv2-fx-0001#longbench_v2': field record_fields "
                                         "lacks \['difficulty', 'length'\]"):
        v2_rows(score_frame(generations, instances.head(1)), instances)


def test_the_table_refuses_a_class_outside_the_release():
    with pytest.raises(ValueError, match="field length: expected one of short, medium, long, got \\['128k'\\]"):
        v2_table([("easy", "128k", 1.0)])
