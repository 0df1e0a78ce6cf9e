"""The judges under ``protocol: official`` (issue 30, acceptance 2 for Loong and HELMET): the prompts our code
builds equal the authors' templates (read with the readers from ../shared/official) filled as the authors'
scripts fill them, written out here independently on records of our own making; their call settings; their
parse rules and the score of an unread verdict; ``ours`` unchanged; and no fallback to ours when the authors'
files are missing. The requests a real server receives: tests/integration/test_official_judge_server.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline.benchmarks.helmet import judging as helmet_judging
from lc_pipeline.benchmarks.helmet.rubrics import HELMET_LONGQA
from lc_pipeline.benchmarks.helmet.official_files import (
    longqa_judge_prompt,
    summ_judge_prompts,
)
from lc_pipeline.benchmarks.longbench100 import judging as lb100_judging
from lc_pipeline.benchmarks.loong import judging as loong_judging
from lc_pipeline.benchmarks.loong.official_files import (
    judge_prompt as loong_judge_prompt,
)
from lc_pipeline.config import load_config
from lc_pipeline.official import OfficialFileError
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.score import judge
from lc_pipeline.tasks.registry import OFFICIAL_RUBRICS, RUBRICS

REPO = Path(__file__).resolve().parents[2]
SHARED_OFFICIAL = REPO.parent / "shared" / "official"
needs_shared = pytest.mark.skipif(not SHARED_OFFICIAL.is_dir(),
                                  reason=f"the authors' files are not at {SHARED_OFFICIAL} (../shared/official)")
LB100_FILE = SHARED_OFFICIAL / "uservan+100-LongBench" / "utils" / "metrics.py"


@pytest.fixture
def shared_env(monkeypatch, tmp_path):
    """LCP_OFFICIAL at the shared checkouts, an empty cache, no network."""
    monkeypatch.setenv("LCP_OFFICIAL", str(SHARED_OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")


# --- Loong ------------------------------------------------------------------------------------------------------

# A record in loong.jsonl's layout (our own text); record_fields as the loong source keeps them, the answer as
# Python's str() of the released value.
LOONG_CLUSTERING = {
    "type": "financial", "level": 3, "set": 1, "language": "en",
    "question": "Which companies reported a loss?", "instruction": "Group the companies by outcome.",
    "prompt_template": "{docs}\n\nInstruction: {instruction}\nQuestion: {question}\nAnswer as JSON.",
    "answer": {"Loss": ["Orvel Ltd", "Brenn AG"], "Profit": ["Kestrel Inc"]},
}


def loong_input(record: dict, output: str) -> judge.JudgeInput:
    fields = {k: record[k] for k in ("type", "level", "set", "language", "question", "instruction",
                                     "prompt_template")}
    fields["answer"] = str(record["answer"])
    return judge.JudgeInput(record["question"], [json.dumps(record["answer"], sort_keys=True)], output, fields,
                            "clustering")


@needs_shared
def test_loong_prompt_is_the_authors_template_filled_as_get_evaluate_prompts(shared_env):
    rubric = judge.official_rubric("loong")
    output = 'Loss: Orvel Ltd, Brenn AG; Profit: Kestrel Inc'
    prompt = rubric.prompts(loong_input(LOONG_CLUSTERING, output))["score"]
    template = loong_judge_prompt()
    # Their filling, by hand: the template without {docs} (not a paper), question and instruction put in; the
    # answer as str() of the dict (single quotes, the file's key order); the prediction as it is.
    question = "\n\nInstruction: Group the companies by outcome.\nQuestion: Which companies reported a loss?\n" \
               "Answer as JSON."
    gold = "{'Loss': ['Orvel Ltd', 'Brenn AG'], 'Profit': ['Kestrel Inc']}"
    assert prompt == template.format(question, gold, output)
    assert gold in prompt and '"Loss"' not in prompt  # not our json.dumps rendering (LO3)
    # A paper item keeps the {docs} placeholder as it stands in the authors' judge question.
    paper = {**LOONG_CLUSTERING, "type": "paper", "answer": ["Paper A", "Paper B"]}
    prompt = rubric.prompts(loong_input(paper, "Paper A, Paper B"))["score"]
    assert prompt == template.format("{docs}\n\nInstruction: Group the companies by outcome.\nQuestion: Which "
                                     "companies reported a loss?\nAnswer as JSON.", "['Paper A', 'Paper B']",
                                     "Paper A, Paper B")


@needs_shared
def test_loong_settings_parse_and_unread_verdicts_are_the_authors(shared_env):
    rubric = judge.official_rubric("loong")
    s = rubric.settings
    assert (s.temperature, s.top_p, s.max_tokens, s.seed, s.system) == (0.0, None, None, None, None)
    assert s.messages("p") == [{"role": "user", "content": "p"}] and s.request() == {"temperature": 0.0}
    assert (s.tries, s.unparsed_score) == (5, None)  # an empty reply is asked again; an unread one is left out
    assert rubric.accept("score", "") is False and rubric.accept("score", "no rating") is True
    inp = loong_input(LOONG_CLUSTERING, "x")
    assert rubric.combine(inp, {"score": "Evaluation evidence: fine.\nRating: [[100]]"})[1:] == \
        (100.0, 1.0, {"score": 100.0}, True)
    assert rubric.combine(inp, {"score": "Rating: [85] then [[40]]"})[1] == 40.0  # [[n]] first, as extract_number
    assert rubric.combine(inp, {"score": "Rating: [85]"})[1] == 85.0
    assert rubric.combine(inp, {"score": "no rating"})[:3] == (judge.NO_SCORE, None, None)


@needs_shared
def test_loong_without_the_released_answer_names_the_field(shared_env):
    inp = loong_input(LOONG_CLUSTERING, "x")
    fields = {k: v for k, v in inp.record_fields.items() if k != "answer"}
    with pytest.raises(ValueError, match=r"record_fields\.answer: missing"):
        judge.official_rubric("loong").prompts(judge.JudgeInput(inp.question, inp.answers, "x", fields))
    # A dict would have lost its key order in record_fields (stored with sorted keys): only the rendering counts.
    with pytest.raises(ValueError, match=r"record_fields\.answer: expected a string"):
        judge.official_rubric("loong").prompts(judge.JudgeInput(
            inp.question, inp.answers, "x", {**inp.record_fields, "answer": LOONG_CLUSTERING["answer"]}))


# --- HELMET -----------------------------------------------------------------------------------------------------


@needs_shared
def test_helmet_longqa_prompt_is_the_authors_template_filled_as_check_metrics(shared_env):
    rubric = judge.official_rubric("helmet_longqa")
    inp = judge.JudgeInput("Where are the travellers headed?", ["the North Pole", "north pole"],
                           "answer: Answer: They head north.\nThen they rest.", {}, "narrativeqa")
    # Their filling: correct_answers is str() of the answers list; the parsed output is the rest of the line after
    # the first "Answer:" (case-insensitive), newlines flattened, one more leading "Answer:" removed.
    expected = longqa_judge_prompt().format(question="Where are the travellers headed?",
                                            correct_answers="['the North Pole', 'north pole']",
                                            parsed_output="They head north. Then they rest.")
    assert rubric.prompts(inp) == {"qa": expected}
    # Without the prefix the first line is graded (newlines were flattened: all of it).
    plain = judge.JudgeInput("Q?", ["x"], "Paris\nis the answer", {}, "narrativeqa")
    assert rubric.prompts(plain)["qa"].endswith(
        longqa_judge_prompt().format(question="Q?", correct_answers="['x']", parsed_output="Paris is the answer")[-60:])


@needs_shared
def test_helmet_longqa_settings_and_parse_rules(shared_env):
    rubric = judge.official_rubric("helmet_longqa")
    s = rubric.settings
    assert s.request() == {"temperature": 0.1, "top_p": 0.9, "max_tokens": 2048, "seed": 42}
    assert s.messages("p") == [{"role": "user", "content": "p"}] and s.unparsed_score is None
    inp = judge.JudgeInput("Q?", ["x"], "x", {}, "narrativeqa")
    assert rubric.combine(inp, {"qa": 'a {"fluency": 0} b {"fluency": 1, "correctness": 3}'})[:3] == ("ok", 3.0, 1.0)
    # Only the last {...} is tried (ours tries earlier ones): not JSON there, no verdict, left out.
    assert rubric.combine(inp, {"qa": '{"fluency": 1, "correctness": 2} then {oops}'})[:3] == \
        (judge.NO_SCORE, None, None)
    assert rubric.combine(inp, {"qa": '{"fluency": 1}'})[0] == judge.MISSING_FIELD


SUMMARY = "  The court approved a decree. The state moved people.  "
KEY_POINTS = ["The court approved the decree.", "About 1,100 people were moved.", "A monitor was named."]


@needs_shared
@pytest.mark.parametrize("task,variant", [("infbench_sum", "_book"), ("multi_lexsum", "")])
def test_helmet_summ_prompts_are_the_authors_variant_per_dataset(shared_env, task, variant):
    rubric = judge.official_rubric("helmet_summ")
    fields = {"key_points": KEY_POINTS, "reference_summary": "The long expert summary of the case."}
    inp = judge.JudgeInput("", ["The gold summary of the book."], SUMMARY, fields, task)
    templates = summ_judge_prompts()
    summary = "The court approved a decree. The state moved people."
    points = "1. The court approved the decree.\n2. About 1,100 people were moved.\n3. A monitor was named."
    # ∞Bench Sum: the _book prompts and its gold summary as the expert summary; Multi-LexSum: the civil-lawsuit
    # prompts and the case's long summary.
    expert = "The gold summary of the book." if variant else "The long expert summary of the case."
    assert rubric.prompts(inp) == {
        "fluency": templates[f"fluency_prompt{variant}"].format(text=summary),
        "recall": templates[f"recall_prompt{variant}"].format(keypoints=points, summary=summary),
        "precision": templates[f"precision_prompt{variant}"].format(expert_summary=expert, summary=summary),
    }
    assert ("civil lawsuit" in rubric.prompts(inp)["precision"]) == (variant == "")


@needs_shared
def test_helmet_summ_settings_parse_rules_and_no_stand_in_key_points(shared_env):
    rubric = judge.official_rubric("helmet_summ")
    assert rubric.settings.request() == {"temperature": 0.1, "top_p": 0.9, "max_tokens": 4096, "seed": 42}
    assert rubric.settings.system is None and rubric.settings.unparsed_score is None
    inp = judge.JudgeInput("", ["gold"], SUMMARY, {"key_points": KEY_POINTS}, "infbench_sum")
    replies = {"fluency": '{"fluency": 1}', "recall": 'Reasoning... {"recall": 2}',
               "precision": '```json\n{"precision": 3, "sentence_count": 4}\n```'}
    status, value, score, fields, _ = rubric.combine(inp, replies)
    r, p = 2 / 3, 3 / 4
    assert status == "ok" and value == score == pytest.approx(2 * r * p / (r + p)) and fields["variant"] == "book"
    # The last {...} not JSON: the last fenced json block is read instead.
    fenced = {**replies, "fluency": '```json\n{"fluency": 1}\n``` and {not json}'}
    assert rubric.combine(inp, fenced)[2] == pytest.approx(score)
    # Any reply unread: the item is left out (no score), as the authors' `continue`.
    assert rubric.combine(inp, {**replies, "recall": "two of three"})[:3] == (judge.NO_SCORE, None, None)
    with pytest.raises(ValueError, match=r"record_fields\.key_points"):
        rubric.prompts(judge.JudgeInput("", ["gold"], SUMMARY, {}, "infbench_sum"))
    with pytest.raises(ValueError, match=r"record_fields\.reference_summary"):
        rubric.prompts(judge.JudgeInput("", ["gold"], SUMMARY, {"key_points": KEY_POINTS}, "multi_lexsum"))


# --- 100-LongBench (the rules on templates of our own; the authors' file where it is present) -----------------

QA_TEMPLATE = "Grade it. Q: {question} | Gold: {correct_answers} | A: {parsed_output} {{\"fluency\": 0}}"
SUMM_TEMPLATES = {"judge_prompt": QA_TEMPLATE, "fluency_prompt": "Fluent? Text: \"{text}\"",
                  "precision_prompt": "Expert: \"{expert_summary}\" Summary: \"{summary}\""}


def test_lb100_qa_asks_per_gold_on_the_first_line_and_scores_unread_as_zero():
    rubric = lb100_judging.qa_rubric(QA_TEMPLATE)
    inp = judge.JudgeInput("Who?", ["Ada", "Ada Brenn"], "\n\nAda Brenn did.\nMore text", {}, "single_doc_qa")
    assert rubric.prompts(inp) == {
        "gold0": 'Grade it. Q: Who? | Gold: Ada | A: Ada Brenn did. {"fluency": 0}',
        "gold1": 'Grade it. Q: Who? | Gold: Ada Brenn | A: Ada Brenn did. {"fluency": 0}'}
    ok = rubric.combine(inp, {"gold0": '{"fluency": 2, "correctness": 1}', "gold1": 'x {"fluency": 2, '
                              '"correctness": 3}'})
    assert ok[:3] == ("ok", 6.0, 1.0)
    # One gold unread counts 0 for it; all unread: the authors' 0, not dropped (LB100-4).
    assert rubric.combine(inp, {"gold0": "unsure", "gold1": '{"fluency": 1, "correctness": 3}'})[:3] == \
        ("ok", 3.0, 0.5)
    frame = frame_of(rubric, inp, {"gold0": "unsure", "gold1": "no idea"})
    assert frame.row(0, named=True)["parse_status"] == judge.NO_SCORE
    assert (frame["score"][0], frame["value"][0]) == (0.0, 0.0)
    assert judge.judge_summary(frame)["mean_score_lb100_qa"] == 0.0  # counted, not left out
    # Leading newlines are skipped; an empty first line after them scores 0 and asks nothing.
    assert lb100_judging.prediction("\n\n\nlate text\nmore") == "late text"
    empty = judge.JudgeInput("Who?", ["Ada"], "\n", {}, "single_doc_qa")
    assert rubric.prompts(empty) == {}
    assert rubric.combine(empty, {})[:3] == ("ok", 0.0, 0.0)
    s = rubric.settings
    assert s.messages("p") == [{"role": "system", "content": "You are a helpful assistant"},
                               {"role": "user", "content": "p"}]
    assert s.request() == {"temperature": 0.1, "top_p": 0.9, "max_tokens": 1024} and s.tries == 1


def frame_of(rubric, inp, replies) -> pl.DataFrame:
    calls = {a: judge.JudgeCall(f"k-{a}", p, settings=rubric.settings) for a, p in rubric.prompts(inp).items()}
    inst = {"instance_id": "i1", "item_id": "it1", "suite": "s", "task": inp.task, "category": "c", "depth": 0.5}
    j = judge.Judgment("g1", inst, rubric, inp, calls)
    return judge.judge_frame([j], {f"k-{a}": r for a, r in replies.items()}, "m")


def test_lb100_summ_asks_an_unread_question_twice_then_scores_zero():
    rubric = lb100_judging.summ_rubric(SUMM_TEMPLATES)
    inp = judge.JudgeInput("", ["The gold summary."], " A summary. Two.\nsecond line", {}, "single_doc_sum")
    prompts = rubric.prompts(inp)
    assert prompts == {"fluency": 'Fluent? Text: "A summary. Two."',
                       "precision0": 'Expert: "The gold summary." Summary: "A summary. Two."'}
    calls = {a: judge.JudgeCall(f"k-{a}", p, settings=rubric.settings) for a, p in prompts.items()}
    j = judge.Judgment("g1", {"instance_id": "i1", "item_id": "it1", "suite": "s", "task": inp.task,
                              "category": "c", "depth": 0.5}, rubric, inp, calls)
    # The replies a judge gave, by question and try (a table of data, not a server).
    given = {"Fluent?": ['{"fluency": 1}'], "Expert:": ["I cannot tell.", '{"precision": 1, "sentence_count": 2}']}
    asked: list[list[str]] = []

    def ask(batch):
        asked.append([c.prompt for c in batch])
        return {c.key: given[c.prompt.split(" ")[0]][len(asked) - 1] for c in batch}

    replies = judge.ask_judgments([j], ask)
    assert [len(b) for b in asked] == [2, 1] and asked[1][0].startswith("Expert:")
    assert j.calls["precision0"].key == judge.retry_key("k-precision0", 1) != "k-precision0"
    row = judge.judge_frame([j], replies, "m").row(0, named=True)
    assert (row["parse_status"], row["score"], row["judge_calls"]) == ("ok", 0.5, 3)
    # Still unread after its 2 tries: 0, not dropped.
    frame = frame_of(rubric, inp, {"fluency": '{"fluency": 1}', "precision0": "still unsure"})
    assert (frame["parse_status"][0], frame["score"][0]) == (judge.NO_SCORE, 0.0)
    assert rubric.settings.tries == 2 and rubric.settings.unparsed_score == 0.0


@pytest.mark.skipif(not LB100_FILE.is_file(), reason=f"100-LongBench's utils/metrics.py is not at {LB100_FILE}")
def test_lb100_prompts_are_read_from_the_authors_file(shared_env):
    prompts = lb100_judging.judge_prompts()
    assert set(prompts) == {"judge_prompt", "fluency_prompt", "precision_prompt"}
    assert "civil lawsuit" in prompts["precision_prompt"]
    # The Sum prompts are HELMET's Multi-LexSum ones, unchanged.
    helmet = summ_judge_prompts()
    assert prompts["fluency_prompt"] == helmet["fluency_prompt"]
    assert prompts["precision_prompt"] == helmet["precision_prompt"]


# --- protocol plumbing ------------------------------------------------------------------------------------------


def frames(task="narrativeqa", benchmark="helmet"):
    instances = pl.DataFrame({
        "instance_id": ["i1"], "item_id": ["it1"], "suite": ["s"], "benchmark": [benchmark], "task": [task],
        "category": ["LongQA"], "depth": [0.5], "question": ["Where to?"], "answers": [["the North Pole"]],
        "record_fields": ["{}"]})
    generations = pl.DataFrame({"generation_id": ["g1"], "instance_id": ["i1"], "output": ["Answer: north"]})
    return generations, instances


@needs_shared
def test_official_and_ours_never_share_a_key_a_row_id_or_a_version(shared_env):
    generations, instances = frames()
    decoding = {"temperature": 0.0, "max_tokens": 512, "json_mode": False}
    ours = judge.plan_judgments(generations, instances, "m", decoding)
    official = judge.plan_judgments(generations, instances, "m", decoding, protocol="official")
    assert ours[0].rubric is HELMET_LONGQA and ours[0].calls["qa"].settings is None
    o = official[0]
    assert o.rubric.version == "official@4526dfb/v1" and o.rubric.protocol == "official@4526dfb"
    assert o.calls["qa"].settings == helmet_judging.LONGQA_SETTINGS
    assert o.calls["qa"].key != ours[0].calls["qa"].key
    assert judge.judgment_id("g1", o.rubric, "m") != judge.judgment_id("g1", ours[0].rubric, "m")
    row = judge.judge_frame(official, {o.calls["qa"].key: '{"fluency": 1, "correctness": 3}'}, "m").row(0, named=True)
    assert (row["rubric"], row["rubric_version"], row["score"]) == ("helmet_longqa", "official@4526dfb/v1", 1.0)
    # Ours: the key as it always was (judge model, rubric, version, aspect, prompt, our system prompt, decoding).
    blob = json.dumps(["m", "helmet_longqa", "1", "qa", ours[0].calls["qa"].prompt, judge.SYSTEM_PROMPT, decoding],
                      sort_keys=True, ensure_ascii=False)
    assert ours[0].calls["qa"].key == hashlib.sha256(blob.encode()).hexdigest()
    with pytest.raises(ValueError, match="judge protocol 'theirs'"):
        judge.plan_judgments(generations, instances, "m", decoding, protocol="theirs")


def test_official_without_the_authors_files_names_what_to_provide(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "empty"))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    generations, instances = frames()
    with pytest.raises(OfficialFileError, match=r"princeton-nlp/HELMET scripts/eval_gpt4_longqa\.py .*Provide it: "
                                                r"set LCP_OFFICIAL"):
        judge.plan_judgments(generations, instances, "m", {}, protocol="official")
    for name in ("loong", "helmet_summ", "lb100_qa", "lb100_summ"):
        with pytest.raises(OfficialFileError, match="set LCP_OFFICIAL"):
            judge.official_rubric(name)
    # Ours needs none of their files.
    assert judge.plan_judgments(generations, instances, "m", {})[0].rubric is HELMET_LONGQA


def test_every_rubric_has_one_official_version_declared_by_a_benchmark_package():
    modules = {name: OFFICIAL_RUBRICS.target(name).partition(":")[0] for name in OFFICIAL_RUBRICS.names()}
    assert modules == {"loong": "lc_pipeline.benchmarks.loong.judging",
                       "helmet_longqa": "lc_pipeline.benchmarks.helmet.judging",
                       "helmet_summ": "lc_pipeline.benchmarks.helmet.judging",
                       "lb100_qa": "lc_pipeline.benchmarks.longbench100.judging",
                       "lb100_summ": "lc_pipeline.benchmarks.longbench100.judging"}
    assert set(modules) == set(RUBRICS.names())
    for module in (loong_judging, helmet_judging, lb100_judging):
        for settings in (v for v in vars(module).values() if isinstance(v, judge.JudgeSettings)):
            assert settings.model  # the authors' judge, for the record


@needs_shared
def test_the_judge_protocol_is_the_resources_else_the_configs(shared_env):
    official = load_config("longbench")  # protocol unset, the authors' files found: official
    assert official.protocol_label() != "ours"
    assert JudgeResource().resolved_protocol(official) == "official"
    assert JudgeResource().resolved_protocol(official.replace(protocol="ours")) == "ours"
    assert JudgeResource().resolved_protocol(load_config("demo")) == "ours"  # a constructed suite
    assert JudgeResource().resolved_protocol() == "ours"
    assert JudgeResource(protocol="official").resolved_protocol(load_config("demo")) == "official"
    assert JudgeResource(protocol="ours").resolved_protocol(official) == "ours"
    with pytest.raises(ValueError, match="judge: field protocol: 'theirs'"):
        JudgeResource(protocol="theirs").resolved_protocol()
