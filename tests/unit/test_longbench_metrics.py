"""LongBench's official metrics, per record, against values computed by LongBench's own code.

The oracle values in tests/fixtures/longbench/ come from THUDM/LongBench's metrics.py/eval.py
(see the README there); nothing in them was computed by lc_pipeline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lc_pipeline.benchmarks.longbench.metrics import (
    classification_score,
    code_sim_score,
    score_record,
    tasks,
)
from lc_pipeline.score.token_scores import normalize_zh_answer, zh_tokens
from lc_pipeline.tasks import load_catalog

TASKS = tasks()

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "longbench"
SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_all_21_tasks_are_known_and_the_few_shot_ones_use_the_first_line():
    assert len(TASKS) == 21
    first_line = {t.name for t in load_catalog().tasks("longbench") if any(m.options.get("first_line") for m in t.metrics)}
    assert first_line == {"trec", "triviaqa", "samsum", "lsht"}


def test_reference_predictions_score_exactly_the_official_values_per_record():
    root = SHARED / "longbench"
    if not root.is_dir():
        pytest.skip(f"shared LongBench data not found at {root} (set LCP_SHARED_DATA to the shared/data directory)")
    official = {r["_id"]: r["official_score"] for r in _jsonl(FIXTURES / "official_scores_shared.jsonl")}
    seen = 0
    for path in sorted(root.glob("*.jsonl")):
        for rec in _jsonl(path):
            got = score_record(rec["dataset"], rec["reference_prediction"], rec["answers"], rec["all_classes"])
            assert got == official[rec["_id"]], rec["_id"]  # bit for bit, not approximately
            seen += 1
    assert seen == len(official) == 136


@pytest.mark.parametrize("rec", _jsonl(FIXTURES / "synthetic_records.jsonl"), ids=lambda r: r["_id"])
def test_tasks_missing_from_the_sample_and_edge_cases_match_the_official_code(rec):
    got = score_record(rec["dataset"], rec["prediction"], rec["answers"], rec["all_classes"])
    assert got == rec["official_score"], rec["note"]


def test_synthetic_records_cover_every_task_the_shared_sample_lacks():
    covered = {r["dataset"] for r in _jsonl(FIXTURES / "synthetic_records.jsonl")}
    shared = {r["dataset"] for r in _jsonl(FIXTURES / "official_scores_shared.jsonl")}
    assert covered | shared == set(TASKS)


def test_rouge_recursion_limit_does_not_depend_on_the_callers_stack():
    # The official scorer gets 0 from a RecursionError inside `rouge` for a 991-word sentence
    # and a real score for 990 words; we must agree however deep we are called from.
    gold = " ".join(f"g{i}" for i in range(20)) + " shared"

    def nested(depth: int, words: int) -> float:
        if depth:
            return nested(depth - 1, words)
        return score_record("gov_report", "shared " + " ".join(f"p{i}" for i in range(words - 1)), [gold])

    for depth in (0, 200):
        assert nested(depth, 990) > 0
        assert nested(depth, 991) == 0.0


def test_chinese_normalization_keeps_the_opening_title_mark_and_middle_dot():
    assert normalize_zh_answer("《毕业风暴》·导演。") == "《毕业风暴·导演"
    assert "《" in zh_tokens("电影《毕业风暴》")


def test_classification_keeps_the_official_remove_while_iterating_quirk():
    classes = ["Description", "Description of", "Description of a person"]
    # "Description" is dropped, the loop then skips "Description of": two matches remain.
    assert classification_score("Description of a person", "Description of a person", classes) == 0.5


def test_code_similarity_takes_the_first_line_without_comment_markers():
    assert code_sim_score("\n# note\n// other\n    return x\n", "    return x") == 1.0


def test_bad_records_name_the_field():
    with pytest.raises(ValueError, match="unknown LongBench task 'nqa'"):
        score_record("nqa", "x", ["x"])
    with pytest.raises(ValueError, match="field 'answers'"):
        score_record("hotpotqa", "x", "x")
    with pytest.raises(ValueError, match="field 'all_classes'"):
        score_record("trec", "City", ["City"], None)
    with pytest.raises(ValueError, match="names no paragraph"):
        score_record("passage_retrieval_en", "3", ["the third one"])
