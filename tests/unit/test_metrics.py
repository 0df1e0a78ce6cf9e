"""Answer metrics: hand-checked examples, HELMET parsing, the METRIC_SCORES frame, and a
per-record comparison with LongBench's official QA F1 on real LongBench records."""

from __future__ import annotations

import json
import os
import re
import string
from collections import Counter
from pathlib import Path

import pytest

from lc_pipeline.score.metrics import (
    KNOWN_METRICS,
    exact_match,
    first_line,
    parse_answer,
    score_qa,
    substring_exact_match,
    token_f1,
)

# ---------------------------------------------------------------------------------------------
# exact_match / substring_exact_match / token_f1 on hand-checked cases
# ---------------------------------------------------------------------------------------------


def test_exact_match_ignores_case_punctuation_articles_and_spacing():
    assert exact_match("The  Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert exact_match("An apple.", ["apple"]) == 1.0
    assert exact_match("Eiffel Tower, Paris", ["Eiffel Tower"]) == 0.0
    # "a" is only dropped as a whole word: "Alpha" keeps its letter a.
    assert exact_match("Alpha", ["lpha"]) == 0.0


def test_exact_match_takes_the_best_gold():
    assert exact_match("NYC", ["New York City", "NYC"]) == 1.0
    assert exact_match("Boston", ["New York City", "NYC"]) == 0.0


def test_subem_is_containment_after_normalization():
    assert substring_exact_match("I think it was the Eiffel Tower, in Paris.", ["Eiffel tower"]) == 1.0
    assert substring_exact_match("Paris", ["Eiffel Tower", "paris"]) == 1.0
    assert substring_exact_match("Eiffel", ["Eiffel Tower"]) == 0.0


def test_subem_never_credits_a_gold_that_normalizes_to_nothing():
    # "The." normalizes to "", which is a substring of everything.
    assert substring_exact_match("anything at all", ["The."]) == 0.0
    assert substring_exact_match("", ["", "an"]) == 0.0


def test_token_f1_hand_computed():
    # pred tokens {barack, obama, was, president}, gold {barack, obama}: P = 2/4, R = 2/2, F1 = 2/3.
    assert token_f1("Barack Obama was president.", ["barack obama"]) == pytest.approx(2 / 3)
    # Articles and punctuation vanish before tokenizing: identical token bags.
    assert token_f1("The cat, the hat.", ["cat hat"]) == 1.0
    # Multiset intersection: "new" shared once, not twice. P = 1/2, R = 1/3, F1 = 0.4.
    assert token_f1("new new", ["new york city"]) == pytest.approx(0.4)
    assert token_f1("Boston", ["New York"]) == 0.0


def test_token_f1_takes_the_best_gold():
    assert token_f1("Obama", ["Barack Obama", "Obama"]) == 1.0


def test_empty_prediction_scores_zero_everywhere():
    assert exact_match("", ["Paris"]) == 0.0
    assert substring_exact_match("", ["Paris"]) == 0.0
    assert token_f1("", ["Paris"]) == 0.0
    assert score_qa("", ["Paris"]) == {"subem": 0.0, "em": 0.0, "f1": 0.0}


def test_golds_must_be_a_non_empty_list():
    with pytest.raises(ValueError, match="empty"):
        token_f1("Paris", [])
    with pytest.raises(TypeError, match="single str"):
        exact_match("Paris", "Paris")  # a str would be scored character by character


# ---------------------------------------------------------------------------------------------
# parse_answer (HELMET parse_output) and score_qa (max of raw and parsed)
# ---------------------------------------------------------------------------------------------


def test_parse_answer_takes_the_line_after_the_prefix():
    assert parse_answer("Answer: Paris\nmore text") == "Paris"
    assert parse_answer("Let me think.\nanswer:   Paris  \nBecause ...") == "Paris"  # case-insensitive
    assert parse_answer("Answer: Answer: Paris") == "Paris"  # echoed prefix


def test_parse_answer_falls_back_to_the_first_line():
    assert parse_answer("  Paris  \nThe capital of France.") == "Paris"
    assert parse_answer("") == ""
    assert parse_answer("Label: positive\nok", prefix="Label:") == "positive"


def test_first_line_rule():
    # LongBench few-shot tasks (e.g. triviaqa) score only the first line after leading newlines.
    assert first_line("\n\nParis\nQuestion: next one?") == "Paris"
    assert first_line("") == ""


def test_score_qa_keeps_the_max_of_raw_and_parsed():
    out = "Answer: Paris\nParis is the capital of France."
    # Raw output: SubEM hits, EM misses. Parsed "Paris": EM and F1 hit.
    assert score_qa(out, ["Paris"]) == {"subem": 1.0, "em": 1.0, "f1": 1.0}
    # No prefix at all: raw output "Paris" is already exact.
    assert score_qa("Paris", ["paris"], metrics=("em",)) == {"em": 1.0}
    # Raw wins when the answer sits on a later line without prefix: parsed = first line only.
    assert score_qa("Let me see.\nParis", ["Paris"], metrics=("subem", "em")) == {"subem": 1.0, "em": 0.0}


def test_score_qa_rejects_unknown_metrics_and_lists_the_known_ones():
    with pytest.raises(ValueError) as err:
        score_qa("Paris", ["Paris"], metrics=("em", "rouge"))
    for name in KNOWN_METRICS:
        assert name in str(err.value)
    assert "rouge" in str(err.value)


# ---------------------------------------------------------------------------------------------
# Real LongBench records: token_f1 must equal LongBench's official qa_f1_score per record
# ---------------------------------------------------------------------------------------------

QA_F1_TASKS = ["narrativeqa", "qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "musique", "triviaqa"]
FIRST_LINE_TASKS = {"trec", "triviaqa", "samsum", "lsht"}  # LongBench few-shot tasks


def _shared_data() -> Path:
    env = os.environ.get("LCP_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _official_qa_f1(prediction: str, ground_truth: str) -> float:
    """LongBench v1 metrics.qa_f1_score, re-written here independently of lc_pipeline."""

    def normalize(s: str) -> str:
        s = s.lower()
        s = "".join(ch for ch in s if ch not in set(string.punctuation))
        s = re.sub(r"\b(a|an|the)\b", " ", s)
        return " ".join(s.split())

    pred, gold = normalize(prediction).split(), normalize(ground_truth).split()
    num_same = sum((Counter(pred) & Counter(gold)).values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred)
    recall = 1.0 * num_same / len(gold)
    return (2 * precision * recall) / (precision + recall)


@pytest.mark.parametrize("task", QA_F1_TASKS)
def test_token_f1_matches_longbench_per_record(task):
    root = _shared_data() / "longbench"
    if not root.is_dir():
        pytest.skip(f"shared LongBench data not found at {root} (set LCP_SHARED_DATA to the shared/data directory)")
    path = root / f"{task}.jsonl"
    if not path.is_file():
        pytest.skip(f"no {path.name} in {root}")
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert records, f"{path} is empty"

    for rec in records:
        pred = rec["reference_prediction"]
        if task in FIRST_LINE_TASKS:
            # LongBench eval.py: prediction.lstrip('\n').split('\n')[0]
            pred_official = pred.lstrip("\n").split("\n")[0]
            pred = first_line(pred)
            assert pred == pred_official
        official = max(_official_qa_f1(pred, gold) for gold in rec["answers"])
        assert token_f1(pred, rec["answers"]) == official, rec["_id"]
