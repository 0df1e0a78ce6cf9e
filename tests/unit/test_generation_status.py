"""Per-row statuses (issue 21): a generation is answered, empty, cut (max_new_tokens reached) or skipped (not sent);
skipped rows get no metric row; a metric that parses an answer (an MC letter, a label, a ranking, a letter after
"The correct answer is", an integer, a UUID) marks the rows it finds none in "unparsable", their scores unchanged;
a generation store written before these columns still loads."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.construct.truncation import SKIP
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationResult
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import generate_partition, plan_partition, result_rows
from lc_pipeline.generate.registry import ModelSpec
from lc_pipeline.score.metric_scores import score_frame

# An OpenAI-compatible server nobody runs: these tests never reach it (every row is given or stored).
SERVED = ModelSpec(slug="served", backend="openai", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                   max_model_len=32768, api_model="qwen", base_url="http://127.0.0.1:9/v1")


def qa_instances(n: int = 4) -> pl.DataFrame:
    return pl.DataFrame({
        "instance_id": [f"i{k}" for k in range(n)], "item_id": [f"item-{k}" for k in range(n)],
        "benchmark": ["qa"] * n, "task": ["single_hop_qa"] * n, "category": ["single-doc QA"] * n,
        "depth": [0.5] * n, "answers": [["Paris"]] * n, "prompt": [f"Question {k}: capital of France?" for k in range(n)],
        "context": ["ctx"] * n, "max_new_tokens": [8] * n, "target_tokens": [1000] * n,
    })


def test_each_row_says_answered_empty_cut_or_skipped_and_skipped_rows_are_not_scored():
    instances = qa_instances()
    plan = plan_partition(instances, SERVED, make_generator(SERVED), {"*": SKIP})
    by_key = {p.request.key: p for p in plan.items}
    k = [p.request.key for p in plan.items]
    results = [
        GenerationResult(k[0], "Paris", 20, 20, False, 2, "stop", 0.1, SKIP),
        GenerationResult(k[1], "  ", 20, 20, False, 8, "stop", 0.1, SKIP),
        GenerationResult(k[2], "The capital of France is", 20, 20, False, 8, "length", 0.1, SKIP),
        GenerationResult(k[3], "", 0, 40_000, False, 0, "stop", 0.0, SKIP, status="skipped"),
    ]
    rows = result_rows(plan, results, by_key)
    assert rows["status"].to_list() == ["answered", "empty", "cut", "skipped"]
    assert rows["target_tokens"].to_list() == [1000] * 4
    assert rows["truncation_policy"].to_list() == [SKIP] * 4

    scores = score_frame(rows, instances)
    assert set(scores["generation_id"]) == set(rows["generation_id"][:3])  # nothing for the skipped row
    assert dict(scores.filter(pl.col("metric") == "subem").select("generation_id", "status").iter_rows()) == {
        rows["generation_id"][0]: "answered", rows["generation_id"][1]: "empty", rows["generation_id"][2]: "cut"}


def test_a_stop_sequence_ending_the_output_is_an_answer_not_a_cut():
    instances = qa_instances(1)
    plan = plan_partition(instances, SERVED, make_generator(SERVED))
    item = plan.items[0]
    item.request = dataclasses.replace(item.request, stop=("\n",))
    rows = result_rows(plan, [GenerationResult(item.request.key, "Paris\nand more", 9, 9, False, 8, "length", 0.1)],
                       {item.request.key: item})
    assert rows.row(0, named=True)["finish_reason"] == "stop" and rows["status"].to_list() == ["answered"]


def test_a_store_written_before_the_status_columns_still_loads_with_derived_statuses(tmp_path):
    instances = qa_instances(3)
    plan = plan_partition(instances, SERVED, make_generator(SERVED))
    by_key = {p.request.key: p for p in plan.items}
    results = [GenerationResult(p.request.key, out, 20, 20, False, 3, finish, 0.1)
               for p, (out, finish) in zip(plan.items, [("Paris", "stop"), ("", "stop"), ("Par", "length")],
                                           strict=True)]
    new = set(schemas.GENERATIONS) - {"target_tokens", "status", "thinking", "prompt_ids_hash",
                                      "chat_template_source", "bos_tokens"}
    old = result_rows(plan, results, by_key).select([c for c in schemas.GENERATIONS if c in new])
    store = GenerationCheckpoint(tmp_path / "store")
    old.write_parquet(tmp_path / "old.parquet")  # as an older version wrote it: no new columns
    store.append(pl.read_parquet(tmp_path / "old.parquet"))
    assert "status" not in store.load().columns

    # Everything is stored, so the server (which does not exist) is never asked.
    outcome = generate_partition(plan, make_generator(SERVED), store, chunk=0)
    assert (outcome.generated, outcome.reused) == (0, 3)
    rows = outcome.rows
    assert rows.schema == schemas.GENERATIONS
    assert rows["status"].to_list() == ["answered", "empty", "cut"]
    assert rows["target_tokens"].to_list() == [1000] * 3  # from this plan's instances
    assert rows["prompt_ids_hash"].to_list() == [""] * 3 and rows["bos_tokens"].null_count() == 3


def _helmet_and_co() -> pl.DataFrame:
    """One instance per metric that parses an answer (the packaged tasks that use it)."""
    tasks = [("helmet", "infbench_mc", ["B", "B. the lighthouse"]),
             ("helmet", "trec_coarse", ["3"]),
             ("helmet", "rerank", ["7:2", "3:1", "9:0"]),
             ("longbench_v2", "longbench_v2", ["C"]),
             ("longbench100", "passage_count", ["12"]),
             ("longbench100", "kv_retrieval", ["0f8fad5b-d9cb-469f-a165-70867728950e"])]
    n = len(tasks)
    return pl.DataFrame({
        "instance_id": [f"{b}-{t}" for b, t, _ in tasks], "item_id": [t for _, t, _ in tasks],
        "benchmark": [b for b, _, _ in tasks], "task": [t for _, t, _ in tasks], "category": ["x"] * n,
        "depth": [0.5] * n, "answers": [a for _, _, a in tasks],
    })


def _scored(outputs: list[str]) -> dict[str, tuple[float, str]]:
    instances = _helmet_and_co()
    generations = pl.DataFrame({"generation_id": instances["instance_id"], "instance_id": instances["instance_id"],
                                "output": outputs})
    scores = score_frame(generations, instances)
    return {r["instance_id"]: (r["score"], r["status"]) for r in scores.iter_rows(named=True)}


def test_an_answer_the_metric_cannot_read_is_unparsable_and_still_scores_what_it_scored():
    wrong = _scored(["A. the harbour", "label: 5", "Ranking: 9 > 3", "The correct answer is (A)", "7 passages",
                     "The value is 1b4e28ba-2fa1-11d2-883f-0016d3cca427."])
    assert wrong == {
        "helmet-infbench_mc": (0.0, "answered"), "helmet-trec_coarse": (0.0, "answered"),
        "helmet-rerank": (pytest.approx(wrong["helmet-rerank"][0]), "answered"),
        "longbench_v2-longbench_v2": (0.0, "answered"), "longbench100-passage_count": (0.0, "answered"),
        "longbench100-kv_retrieval": (0.0, "answered")}
    assert wrong["helmet-rerank"][0] < 1.0

    unreadable = _scored(["I am not sure which one.", "It is about a location.", "These are all relevant.",
                          "Both could be right.", "\nseveral, I think", "I cannot find the key."])
    assert unreadable == {k: (0.0, "unparsable") for k in unreadable} and len(unreadable) == 6

    right = _scored(["B", "label: 3", "Ranking: 7 > 3 > 9", "The correct answer is (C)", "12", "The value is "
                     "0f8fad5b-d9cb-469f-a165-70867728950e"])
    assert right == {k: (1.0, "answered") for k in right}


def test_an_mc_reply_in_prose_with_the_article_a_is_not_read_as_option_a():
    got = _scored(["A lighthouse, probably.", "label: 3", "7", "", "12", "0f8fad5b-d9cb-469f-a165-70867728950e"])
    assert got["helmet-infbench_mc"] == (0.0, "unparsable")
    assert _scored(["(b)", "3", "7", "", "12", "x"])["helmet-infbench_mc"] == (1.0, "answered")
