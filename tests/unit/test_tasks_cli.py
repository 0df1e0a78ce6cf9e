"""`lcp tasks list / show`: every declared task with what changes its numbers, as a table or JSON."""

from __future__ import annotations

import json

from click.testing import CliRunner

from lc_pipeline.cli import main

KEYS = {"name", "benchmark", "category", "metric", "truncation", "max_new_tokens", "rubric", "builder",
        "chat_template", "answer_prefix", "prompt"}
COUNTS = {"qa": 3, "longbench": 21, "lveval": 11, "loong": 4, "helmet": 28, "longbench100": 8}


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_list_as_json_has_every_task_of_every_benchmark_with_what_changes_its_numbers():
    tasks = json.loads(lcp("tasks", "list", "--format", "json"))
    assert all(KEYS <= set(t) for t in tasks)
    counts = {b: sum(t["benchmark"] == b for t in tasks) for b in COUNTS}
    assert counts == COUNTS
    narrativeqa = next(t for t in tasks if t["benchmark"] == "longbench" and t["name"] == "narrativeqa")
    assert (narrativeqa["metric"], narrativeqa["truncation"], narrativeqa["max_new_tokens"]) == (
        ["longbench.qa_f1"], "middle", 128)
    summ = next(t for t in tasks if t["benchmark"] == "helmet" and t["name"] == "summ")
    assert (summ["rubric"], summ["truncation"], summ["chat_template"]) == ("helmet_summ", "end_of_context", True)


def test_helmet_lists_its_citation_and_many_shot_icl_datasets_with_their_metrics():
    """Issue 19: ALCE ASQA / QAMPARI (correctness + citation recall and precision, helmet.md §2.4) and the five ICL
    datasets (label accuracy, §2.7), each its own task beside the per-dataset RAG, re-rank, LongQA and Summ tasks."""
    tasks = {t["name"]: t for t in json.loads(lcp("tasks", "list", "--benchmark", "helmet", "--format", "json"))}
    assert tasks["asqa"]["metric"] == ["helmet.str_em", "alce.citation_recall", "alce.citation_precision"]
    assert tasks["qampari"]["metric"] == ["helmet.qampari_rec5", "alce.citation_recall", "alce.citation_precision"]
    for name in ("trec_coarse", "trec_fine", "nlu", "banking77", "clinc150"):
        assert (tasks[name]["category"], tasks[name]["metric"], tasks[name]["chat_template"],
                tasks[name]["max_new_tokens"]) == ("ICL", ["helmet.label"], False, 20)
    assert {tasks[n]["category"] for n in ("asqa", "qampari")} == {"Cite"}
    assert {t["category"] for t in tasks.values()} == {"Synthetic recall", "RAG", "Re-rank", "Cite", "LongQA", "Summ",
                                                        "ICL"}
    table = lcp("tasks", "list", "--benchmark", "helmet")
    for name in ("asqa", "qampari", "trec_coarse", "trec_fine", "nlu", "banking77", "clinc150"):
        assert f"\n{name} " in table


def test_list_filters_by_benchmark_and_prints_a_table():
    out = lcp("tasks", "list", "--benchmark", "loong")
    assert "(4 rows)" in out and "drop_documents" in out and "narrativeqa" not in out
    result = CliRunner().invoke(main, ["tasks", "list", "--benchmark", "ruler"])
    assert result.exit_code != 0 and "no task of benchmark 'ruler'" in result.output


def test_show_prints_every_field_and_the_prompt_template():
    out = lcp("tasks", "show", "helmet/json_kv")
    assert "answer_prefix    Corresponding value:" in out and "truncation       end_of_context" in out
    assert out.split("prompt:\n", 1)[1].startswith("JSON data:\n{context}")
    result = CliRunner().invoke(main, ["tasks", "show", "passage_count"])  # LongBench's and 100-LongBench's
    assert result.exit_code != 0 and "write benchmark/passage_count" in result.output


def test_a_configs_task_files_are_listed_with_the_packaged_ones(tmp_path):
    (tmp_path / "mine.yaml").write_text("benchmark: mine\ntasks:\n  - {name: terse_rag, base: helmet/rag, "
                                        "max_new_tokens: 8}\n")
    (tmp_path / "c.yaml").write_text("name: c\nsources: [{name: demo}]\nlengths: [1k]\nbase_lengths: [1k]\n"
                                     "long_lengths: [1k]\ntask_files: [mine.yaml]\n")
    tasks = json.loads(lcp("tasks", "list", "--benchmark", "mine", "--config", str(tmp_path / "c.yaml"),
                           "--format", "json"))
    assert [(t["qualified_name"], t["max_new_tokens"], t["metric"]) for t in tasks] == [
        ("mine/terse_rag", 8, ["helmet.subem"])]
    assert tasks[0]["declared_in"] == str(tmp_path / "mine.yaml")
