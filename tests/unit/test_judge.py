"""Judge rubrics: prompts on the papers' scales, replies parsed into a value and a parse status
(never an exception), rows for judge_scores, the reply cache, the leaderboard join, and the
key kept out of everything recorded. The real server round trip is tests/integration/test_judge_server.py."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.resources.judge import JudgeCache, JudgeClient, JudgeResource, scrub
from lc_pipeline.score import judge
from lc_pipeline.tasks import load_catalog
from lc_pipeline.tasks.registry import RUBRICS
from lc_pipeline.score.longscore import judge_leaderboard
from conftest import free_port


def combine(name: str, replies: dict[str, str], question="Who founded the Orvel Society?",
            answers=("Ada Brenn",), output="Answer: Ada Brenn founded it.") -> tuple:
    return RUBRICS.get(name).combine(judge.JudgeInput(question, list(answers), output), replies)


def test_last_json_object_wins_and_fences_are_read():
    reply = 'Step 1: fluent {"fluency": 0}. Final: {"fluency": 1, "correctness": 3}'
    assert judge.last_json_object(reply) == {"fluency": 1, "correctness": 3}
    assert judge.last_json_object("```json\n{\"recall\": 2}\n```") == {"recall": 2}
    assert judge.last_json_object("no json {here") is None


def test_helmet_longqa_is_fluency_times_correctness_over_3():
    status, value, score, fields, perfect = combine("helmet_longqa", {"qa": 'ok {"fluency": 1, "correctness": 2}'})
    assert (status, value, score, perfect) == ("ok", 2.0, pytest.approx(2 / 3), None)
    assert combine("helmet_longqa", {"qa": '{"fluency": 0, "correctness": 3}'})[2] == 0.0
    assert combine("helmet_longqa", {"qa": '{"fluency": 1, "correctness": 4}'})[0] == judge.OUT_OF_RANGE
    assert combine("helmet_longqa", {"qa": '{"fluency": 1}'})[0] == judge.MISSING_FIELD
    assert combine("helmet_longqa", {"qa": "I think it is correct."})[:3] == (judge.NO_SCORE, None, None)


def test_helmet_longqa_prompt_grades_the_parsed_answer_line():
    prompts = RUBRICS.get("helmet_longqa").prompts(
        judge.JudgeInput("Q?", ["Ada Brenn", "Brenn"], "Answer: Ada Brenn\nSome chatter"))
    assert prompts["qa"].endswith('Reference answers: ["Ada Brenn", "Brenn"]\nAnswer to grade: Ada Brenn Some chatter')


def test_helmet_summ_is_fluency_times_f1_of_key_point_recall_and_sentence_precision():
    gold = "The court approved the decree in 2011. The state moved 1,100 people. A monitor was named."
    replies = {"fluency": '{"fluency": 1}', "recall": '{"supported_key_points": [1, 3], "recall": 2}',
               "precision": '{"precision": 3, "sentence_count": 4}'}
    status, value, score, fields, _ = combine("helmet_summ", replies, answers=(gold,), output="A summary.")
    r, p = 2 / 3, 3 / 4
    assert status == "ok" and fields["key_points"] == 3 and score == pytest.approx(2 * r * p / (r + p))
    zero_fluency = {**replies, "fluency": '{"fluency": 0}'}
    assert combine("helmet_summ", zero_fluency, answers=(gold,))[2] == 0.0
    # One unreadable aspect makes the whole verdict unreadable, never a guess.
    assert combine("helmet_summ", {**replies, "recall": "two"}, answers=(gold,))[0] == judge.NO_SCORE
    assert combine("helmet_summ", {**replies, "recall": '{"recall": 5}'}, answers=(gold,))[0] == judge.OUT_OF_RANGE
    prompts = RUBRICS.get("helmet_summ").prompts(judge.JudgeInput("", [gold], "A summary."))
    assert "1. The court approved the decree in 2011.\n2. The state moved 1,100 people." in prompts["recall"]


def test_loong_reads_double_brackets_then_single():
    assert combine("loong", {"score": "Evidence: good.\nRating: [[100]]"})[1:] == (100.0, 1.0, {"score": 100.0}, True)
    assert combine("loong", {"score": "Rating: [85]"})[1:3] == (85.0, 0.85)
    assert combine("loong", {"score": "Rating: [[85]] and later [[20]]"})[1] == 85.0  # the first one
    assert combine("loong", {"score": "Rating: eighty"})[0] == judge.NO_SCORE
    assert combine("loong", {"score": "Rating: [[150]]"})[0] == judge.OUT_OF_RANGE


def test_lb100_qa_takes_the_best_gold_and_divides_by_6():
    replies = {"gold0": '{"fluency": 2, "correctness": 1}', "gold1": '{"fluency": 2, "correctness": 3}'}
    status, value, score, fields, _ = combine("lb100_qa", replies, answers=("Ada Brenn", "Brenn"))
    assert (status, value, score) == ("ok", 6.0, 1.0) and fields == {"fluency": 2, "correctness": 3}
    assert combine("lb100_qa", {"gold0": "?"}, answers=("x",))[0] == judge.NO_SCORE


def test_lb100_summ_zero_sentences_scores_zero():
    ok = {"fluency": '{"fluency": 1}', "precision": '{"precision": 2, "sentence_count": 4}'}
    assert combine("lb100_summ", ok, answers=("gold",))[2] == 0.5
    none = {"fluency": '{"fluency": 1}', "precision": '{"precision": 0, "sentence_count": 0}'}
    assert combine("lb100_summ", none, answers=("gold",))[2] == 0.0


def rubric_of(benchmark: str, task: str, overrides: dict | None = None) -> str | None:
    spec = load_catalog().resolve(benchmark, task)
    return judge.rubric_for(benchmark, task, spec.rubric, overrides)


def test_rubric_for_defaults_and_overrides():
    assert rubric_of("helmet", "longqa") == "helmet_longqa"
    assert rubric_of("helmet", "rag") is None  # deterministic metrics only
    assert rubric_of("qa", "single_hop_qa") == "loong"
    assert rubric_of("qa", "x", {"qa/*": "none"}) is None
    assert rubric_of("helmet", "rag", {"helmet/rag": "helmet_longqa"}) == "helmet_longqa"
    with pytest.raises(ValueError, match="unknown; known rubrics"):
        rubric_of("qa", "x", {"qa/*": "gpt"})


def test_each_benchmark_has_its_own_default_rubric_and_lveval_is_never_judged_with_loongs():
    catalog = load_catalog()
    rubrics = {b: {t.rubric for t in catalog.tasks(b)} for b in catalog.benchmarks}
    assert rubrics["lveval"] == {None}  # LV-Eval scores by keyword recall; it has no judge (lveval.md §7)
    assert rubrics["longbench"] == {None}  # LongBench has no judge either
    assert rubrics["loong"] == {"loong"}
    assert rubrics["helmet"] == {None, "helmet_longqa", "helmet_summ"}
    assert rubrics["longbench100"] == {None, "lb100_qa", "lb100_summ"}
    assert all(rubric_of("lveval", t.name) != "loong" for t in catalog.tasks("lveval"))


def frames():
    instances = pl.DataFrame({
        "instance_id": ["i1", "i2", "i3"], "item_id": ["a", "b", "c"], "suite": ["qa", "helmet", "helmet"],
        "benchmark": ["qa", "helmet", "helmet"],
        "task": ["single_hop_qa", "longqa", "rag"], "category": ["single-doc QA", "LongQA", "RAG"],
        "depth": [0.0, 0.0, 0.4], "question": ["Q1?", "Q2?", "Q3?"], "answers": [["A1"], ["A2"], ["A3"]],
    })
    generations = pl.DataFrame({"generation_id": ["g1", "g2", "g3"], "instance_id": ["i1", "i2", "i3"],
                                "output": ["A1", "Answer: A2", "A3"]})
    return generations, instances


def test_plan_and_rows_keep_raw_parsed_and_status():
    generations, instances = frames()
    plan = judge.plan_judgments(generations, instances, "judge-m", {"temperature": 0.0})
    assert [(j.generation_id, j.rubric.name) for j in plan] == [("g1", "loong"), ("g2", "helmet_longqa")]
    replies = {plan[0].calls["score"].key: "Rating: [[90]]", plan[1].calls["qa"].key: "no verdict today"}
    out = judge.judge_frame(plan, replies, "judge-m")
    assert out.schema == schemas.JUDGE_SCORES
    first, second = out.row(0, named=True), out.row(1, named=True)
    assert (first["parse_status"], first["value"], first["score"], first["perfect"]) == ("ok", 90.0, 0.9, False)
    assert (second["parse_status"], second["score"], second["raw"]) == ("no_score", None, "no verdict today")
    summary = judge.judge_summary(out)
    assert summary["parse_failures"] == 1 and summary["parse_rate"] == 0.5
    assert summary["mean_score_loong"] == 0.9 and summary["perfect_rate_loong"] == 0.0
    assert summary["mean_score_helmet_longqa"] is None  # failures stay out of the means


def test_cache_keys_change_with_model_rubric_version_and_decoding():
    rubric = RUBRICS.get("loong")
    k = judge.call_key("m", rubric, "score", "prompt", {"temperature": 0.0})
    assert k != judge.call_key("m2", rubric, "score", "prompt", {"temperature": 0.0})
    assert k != judge.call_key("m", rubric, "score", "prompt", {"temperature": 0.1})
    bumped = judge.Rubric(rubric.name, "2", rubric.scale, rubric.prompts, rubric.combine)
    assert k != judge.call_key("m", bumped, "score", "prompt", {"temperature": 0.0})


def test_cached_replies_make_no_server_call(tmp_path, monkeypatch):
    generations, instances = frames()
    cache = JudgeCache(tmp_path / "judge.sqlite")
    # Nothing listens on this port: any request would fail after its retries.
    client = JudgeClient("judge-m", f"http://127.0.0.1:{free_port()}/v1", cache=cache, max_retries=0, timeout_s=2)
    plan = judge.plan_judgments(generations, instances, client.model, client.decoding)
    calls = [c for j in plan for c in j.calls.values()]
    for c in calls:
        cache.put(c.key, client.model, "Rating: [[70]]")
    replies = client.ask(calls)
    assert client.calls == 0 and client.cache_hits == len(calls) == 2
    assert set(replies.values()) == {"Rating: [[70]]"}
    with pytest.raises(RuntimeError, match="failed after 0 retries"):
        JudgeClient("judge-m", client.base_url, max_retries=0, timeout_s=2).ask(calls)


def test_the_key_is_never_a_field_and_is_scrubbed_from_errors(monkeypatch):
    monkeypatch.setenv("LCP_TEST_JUDGE_KEY", "sk-test-secret-123456")
    res = JudgeResource(model="m", base_url="http://127.0.0.1:9/v1", api_key_env="LCP_TEST_JUDGE_KEY")
    assert "sk-test" not in json.dumps(res.model_dump()) + repr(res)
    client = res.client()
    assert "sk-test" not in json.dumps(vars(client), default=str)
    assert scrub("Incorrect API key provided: sk-test-secret-123456.", "sk-test-secret-123456") == \
        "Incorrect API key provided: ***."
    assert scrub("key sk-proj-ab12****************wxyz rejected", None) == "key sk-*** rejected"
    assert JudgeClient("m", "http://user:pw@10.0.0.1:8000/v1").server() == "http://10.0.0.1:8000"


def test_a_model_name_is_required(monkeypatch):
    monkeypatch.delenv("LCP_JUDGE_MODEL", raising=False)
    with pytest.raises(ValueError, match="LCP_JUDGE_MODEL"):
        JudgeResource().client()
    monkeypatch.setenv("LCP_JUDGE_MODEL", "from-env")
    assert JudgeResource().client().model == "from-env"


def test_judge_rubrics_join_the_leaderboard_as_their_own_metric():
    rows = []
    for model, base, long in (("m1", 0.8, 0.4), ("m2", 0.6, 0.6)):
        for length, s in (("1k", base), ("2k", long)):
            rows += [{"model": model, "length": length, "task": "single_hop_qa", "rubric": "loong", "score": s,
                      "parse_status": "ok"},
                     {"model": model, "length": length, "task": "single_hop_qa", "rubric": "loong", "score": None,
                      "parse_status": "no_score"}]
    board, left_out = judge_leaderboard(pl.DataFrame(rows), ["1k"], ["2k"])
    assert left_out == [] and set(board["metric"]) == {"judge:loong"}
    by_model = {r["model"]: r for r in board.iter_rows(named=True)}
    assert by_model["m1"]["long_score"] == pytest.approx(-50.0) and by_model["m2"]["long_score"] == 0.0
    assert by_model["m2"]["rank_long_score"] == 1 and by_model["m1"]["n_instances"] == 2  # unparsed left out
    only_base = [r for r in rows if r["length"] == "1k"]
    board, left_out = judge_leaderboard(pl.DataFrame(only_base), ["1k"], ["2k"])
    assert board.is_empty() and len(left_out) == 2 and "2k" in left_out[0]
    assert math.isclose(by_model["m1"]["old_metric"], 40.0)


def test_json_mode_applies_to_json_rubrics_and_keys_the_cache():
    generations, instances = frames()
    plan = judge.plan_judgments(generations, instances, "m", JudgeClient("m", "http://x/v1", json_mode=True).decoding)
    assert [c.json_reply for j in plan for c in j.calls.values()] == [False, True]  # Loong's [[n]] is not JSON
    free = judge.plan_judgments(generations, instances, "m", JudgeClient("m", "http://x/v1").decoding)
    assert plan[1].calls["qa"].key != free[1].calls["qa"].key  # forced-JSON replies are other replies
