"""HELMET metrics: SubEM on raw and parsed output, RULER recall, NDCG@10 of a parsed ranking,
ROUGE-L, and the dataset -> category -> HELMET aggregation; each task scored as its task file declares
(metric by registered name, the answer prefix declared once), wired into score_frame."""

from __future__ import annotations

import math

import polars as pl
import pytest

from lc_pipeline.benchmarks.helmet import metrics as helmet
from lc_pipeline.score.metric_scores import score_frame, score_instance
from lc_pipeline.tasks import load_catalog


def task_score(task: str, output: str, answers: list[str]) -> float:
    """HELMET ``task`` scores ``output`` with the metric and answer prefix its task file declares."""
    return score_instance(load_catalog().get(f"helmet/{task}"), {"answers": answers}, output)["helmet"]


def test_rag_subem_reads_the_answer_line_or_the_whole_output():
    assert task_score("rag", "Answer: The Orvel river.\nExplanation: ...", ["Orvel River"]) == 1.0
    assert task_score("rag", "It is the Orvel River", ["orvel river"]) == 1.0
    assert task_score("rag", "Answer: Tamsk", ["Orvel"]) == 0.0


def test_json_kv_value_after_its_prefix():
    value = "6f1c2a4e-1d2b-4c3a-9e8f-0a1b2c3d4e5f"
    assert task_score("json_kv", f'Corresponding value: "{value}"', [value]) == 1.0
    assert task_score("json_kv", "I do not know", [value]) == 0.0


def test_ruler_recall_gives_partial_credit():
    golds = ["1234567", "2345678", "3456789", "4567890"]
    assert task_score("ruler_mv", "The numbers are 1234567 and 3456789.", golds) == 0.5
    assert task_score("ruler_mk_uuid", "ABCDEF01-aaaa", ["abcdef01-AAAA"]) == 1.0  # case-insensitive


def test_parse_ranking_takes_the_longest_chain_and_strips_id_markup():
    assert helmet.parse_ranking("Ranking: [ID: 3] > [ID: 1] > [ID: 2]") == ["3", "1", "2"]
    assert helmet.parse_ranking("Ranking: ID3 > ID1\nbut also 5 > 4 > 3 > 2") == ["5", "4", "3", "2"]
    assert helmet.parse_ranking("7 > 7 > 8") == ["7", "8"]  # a repeat keeps its first place
    assert helmet.parse_ranking("no idea") == []


def test_ndcg_at_10_with_graded_labels():
    qrels = {"11": 2, "22": 1}
    # Ideal: 11 then 22. Swapped: DCG = 1/log2(2) + 2/log2(3), IDCG = 2/log2(2) + 1/log2(3).
    swapped = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert task_score("rerank", "Ranking: 11 > 22 > 33", ["11:2", "22:1"]) == pytest.approx(1.0)
    assert helmet.ndcg_at_10(["22", "11", "33"], qrels) == pytest.approx(swapped)
    assert task_score("rerank", "I cannot rank these.", ["11:2"]) == 0.0
    # Only the top 10 count.
    late = [str(i) for i in range(100, 110)] + ["11"]
    assert helmet.ndcg_at_10(late, {"11": 2}) == 0.0
    with pytest.raises(ValueError, match="expected '<ID>:<grade>'"):
        task_score("rerank", "1 > 2", ["11"])


def test_rouge_l_for_long_document_tasks():
    assert task_score("longqa", "Answer: the lighthouse keeper", ["The lighthouse keeper"]) == 1.0
    partial = task_score("summ", "The court approved the settlement in 2011.",
                                ["In 2011 the court approved a consent decree settling the case."])
    assert 0.3 < partial < 1.0


def test_unknown_task():
    with pytest.raises(ValueError, match="unknown task 'helmet/no_such_task'"):
        task_score("no_such_task", "x", ["y"])


def test_summarization_scores_the_better_of_the_raw_and_the_parsed_output_as_helmet_does():
    # A reply that echoes the prompt's "Summary:" cue: HELMET parses after it and keeps the better score.
    gold = "The court approved a consent decree settling the case in 2011."
    echoed = "Here is my summary of the case documents.\nSummary: The court approved a consent decree settling the case in 2011."
    parsed = helmet.rouge_l("The court approved a consent decree settling the case in 2011.", [gold])
    assert task_score("summ", echoed, [gold]) == pytest.approx(parsed) == pytest.approx(1.0)
    assert helmet.rouge_l(echoed, [gold]) < 0.9  # the raw reply alone scores lower
    assert load_catalog().get("helmet/summ").answer_prefix == "Summary:"  # declared once, in the task file


def test_score_frame_dispatches_helmet_instances():
    instances = pl.DataFrame({
        "instance_id": ["a", "b"], "item_id": ["i", "j"], "suite": ["helmet", "helmet"],
        "benchmark": ["helmet", "helmet"], "task": ["rag", "rerank"],
        "category": ["RAG", "Re-rank"], "depth": [0.2, 0.0], "answers": [["Orvel"], ["11:2", "22:1"]],
    })
    generations = pl.DataFrame({"generation_id": ["g1", "g2"], "instance_id": ["a", "b"],
                                "output": ["Answer: Orvel", "Ranking: 22 > 11"]})
    out = score_frame(generations, instances)
    assert out["metric"].to_list() == ["helmet", "helmet"]
    assert out["score"][0] == 1.0 and 0 < out["score"][1] < 1
