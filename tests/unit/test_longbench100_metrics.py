"""100-LongBench per-task scores (spec 100longbench.md §5.2, original-metric mode), each task scored with
the metric its task file declares."""

import pytest

from lc_pipeline.benchmarks.longbench100.metrics import first_integer_score, kv_retrieval_score
from lc_pipeline.score.metric_scores import score_instance
from lc_pipeline.tasks import load_catalog


def task_score(task: str, output: str, answers) -> float:
    return score_instance(load_catalog().get(f"longbench100/{task}"), {"answers": answers}, output)["lb100"]

UUID_A = "3f2b8c1e-9a4d-4e7b-8c2f-1a2b3c4d5e6f"
UUID_B = "0a1b2c3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d"


def test_accuracy_tasks_compare_the_first_integer():
    assert first_integer_score("Passage 7 is the one, not 8", "7") == 1.0
    assert first_integer_score("It is 17", "7") == 0.0  # whole digit runs, not substrings
    assert first_integer_score("no number", "7") == 0.0
    assert task_score("counting_stars", "2", ["2"]) == 1.0


def test_kv_retrieval_takes_the_last_uuid():
    assert kv_retrieval_score(f"The value of {UUID_B} is {UUID_A}", UUID_A) == 1.0
    assert kv_retrieval_score(f"{UUID_A} ... {UUID_B}", UUID_A) == 0.0


def test_only_the_first_line_counts_and_empty_scores_zero():
    assert task_score("passage_retrieval", "\n\nPassage 3\nPassage 4", ["3"]) == 1.0
    assert task_score("passage_retrieval", "Passage 4\nPassage 3", ["3"]) == 0.0
    assert task_score("single_doc_qa", "\n\n", ["Paris"]) == 0.0
    # max over golds; QA is LongBench token F1
    assert task_score("single_doc_qa", "the city of Paris", ["London", "Paris"]) == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))


def test_summaries_use_rouge_l_of_the_first_line():
    gold = "The committee approved the budget after a long debate."
    assert task_score("single_doc_sum", gold, [gold]) == pytest.approx(1.0)
    assert task_score("multi_doc_sum", "\nUnrelated words here.", [gold]) == 0.0


def test_bad_records_name_the_field():
    with pytest.raises(ValueError, match="unknown task 'longbench100/trec'"):
        task_score("trec", "x", ["y"])
    with pytest.raises(ValueError, match="field answers"):
        task_score("passage_count", "3", "3")
