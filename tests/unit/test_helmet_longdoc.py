"""HELMET's per-dataset long-document tasks (spec helmet.md §2.5, §2.6, §4.2): NarrativeQA, ∞Bench QA / MC /
Sum and Multi-LexSum read in their released layouts, cut by the table's rule at 8k and 16k, with their
demonstrations, MC options and scoring, and the summarization judge reading the key points and the long
reference; the demo dossiers feed the generic longqa and summ tasks.

Fixtures: tests/fixtures/helmet/{narrativeqa,infbench,multi_lexsum}/, our own text, written by
tests/fixtures/helmet/make_longdoc_fixtures.py (an opening paragraph with the facts asked about, then
generated paragraphs to just over 17,000 tokens: longer than every cut at 8k and 16k)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline.benchmarks.helmet import construction as helmet
from lc_pipeline.benchmarks.helmet.construction.long_document import document_budget
from lc_pipeline.benchmarks.helmet.config import HelmetConfig
from lc_pipeline.config import SourceConfig
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.benchmarks.helmet.rubrics import HELMET_SUMM
from lc_pipeline.score import judge
from lc_pipeline.sources.loader import load_source
from lc_pipeline.sources.validation import RecordError
from lc_pipeline.tasks import load_catalog
from lc_pipeline.tasks.registry import METRICS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "helmet"
TASKS = ("narrativeqa", "infbench_qa", "infbench_mc", "infbench_sum", "multi_lexsum")
HELMET = {spec.name: spec for spec in load_catalog().tasks("helmet")}
EMPTY_PASSAGES = pl.DataFrame(schema={"passage_id": pl.String, "doc_id": pl.String, "title": pl.String,
                                      "text": pl.String, "position": pl.Int32})
EMPTY_NEGATIVES = pl.DataFrame(schema={"item_id": pl.String, "rank": pl.Int32, "passage_id": pl.String})

# The packaged helmet config's sources for these tasks, named like the tasks, on the fixtures.
SOURCES = [
    SourceConfig("narrativeqa", "narrativeqa", {"test": str(FIXTURES / "narrativeqa/test.jsonl"),
                                                "train": str(FIXTURES / "narrativeqa/train.jsonl"),
                                                "min_document_tokens": 16_384}),
    SourceConfig("infbench_qa", "infbench", {"paths": str(FIXTURES / "infbench/longbook_qa_eng.jsonl")}),
    SourceConfig("infbench_mc", "infbench", {"paths": str(FIXTURES / "infbench/longbook_choice_eng.jsonl")}),
    SourceConfig("infbench_sum", "infbench", {"paths": str(FIXTURES / "infbench/longbook_sum_eng.jsonl"),
                                              "keypoints": str(FIXTURES / "infbench/longbook_sum_eng_keypoints.jsonl")}),
    SourceConfig("multi_lexsum", "multi_lexsum", {"test": str(FIXTURES / "multi_lexsum/multi_lexsum_val.jsonl"),
                                                  "train": str(FIXTURES / "multi_lexsum/multi_lexsum_train.jsonl"),
                                                  "keypoints": str(FIXTURES / "multi_lexsum/keypoints.jsonl")}),
]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.load()


@pytest.fixture(scope="module")
def loaded():
    return {s.name: load_source(s) for s in SOURCES}


@pytest.fixture(scope="module")
def frames(loaded):
    return (pl.concat([x.documents for x in loaded.values()]), pl.concat([x.items for x in loaded.values()]))


def build(frames, counter, level, tasks=TASKS, n_per_task=2):
    documents, items = frames
    return helmet.build_helmet(documents, items, EMPTY_PASSAGES, EMPTY_NEGATIVES, level=level,
                               config=HelmetConfig(tasks=tasks, n_per_task=n_per_task), seed=42, counter=counter,
                               tasks=[HELMET[t] for t in tasks])


@pytest.fixture(scope="module")
def built(frames, counter):
    return {level: build(frames, counter, level) for level in ("8k", "16k")}


def fields(row) -> dict:
    return json.loads(row["record_fields"])


# --------------------------------------------------------------------------- sources


def test_narrativeqa_reads_test_stories_and_train_pairs_and_filters_short_stories(loaded):
    nqa = loaded["narrativeqa"]
    test = nqa.items.filter(pl.col("record_fields") == "{}")
    assert test["question"].to_list() == ["Who kept the lighthouse at Vell Point?",
                                          "What did Tobin bring his sister every spring?"]
    assert test["answers"].to_list()[0] == ["Maren Osk", "His sister Maren"]
    assert nqa.documents["doc_id"].to_list() == ["narrativeqa-nqa-lighthouse"]  # one document, two questions
    assert set(test["category"]) == {"long-document QA"}  # never a RAG item
    train = nqa.items.filter(pl.col("record_fields") != "{}")
    assert train.height == 3 and all(json.loads(f) == {"split": "train"} for f in train["record_fields"])
    assert all(e == [] for e in train["evidence_doc_ids"].to_list())  # demonstrations need no story
    assert any("filtered: document of at most 16384 tokens: 1" in n for n in nqa.reports[0].notes)


def test_infbench_mc_keeps_its_options_and_sum_its_key_points(loaded):
    mc = loaded["infbench_mc"].items.row(0, named=True)
    assert mc["answers"] == ["grey"] and fields(mc) == {"options": ["red", "grey", "blue", "white"]}
    sums = loaded["infbench_sum"].items
    assert set(sums["category"]) == {"summarization"}
    assert fields(sums.row(0, named=True))["key_points"][0] == "Maren Osk keeps the lighthouse at Vell Point."
    qa = loaded["infbench_qa"]
    assert qa.documents.height == 3 and qa.items["record_id"].to_list() == ["0", "1", "2"]


def test_multi_lexsum_keys_points_from_the_record_or_the_file_and_the_long_summary_as_reference(loaded):
    mls = loaded["multi_lexsum"]
    test = {r["record_id"]: r for r in mls.items.iter_rows(named=True) if "split" not in fields(r)}
    assert sorted(test) == ["mls-coldwater", "mls-harrowgate"]  # mls-no-short: null short summary, filtered
    harrowgate, coldwater = fields(test["mls-harrowgate"]), fields(test["mls-coldwater"])
    assert harrowgate["key_points"][1] == "The board had closed the school's only ramp."  # summary/short_keypoints
    assert coldwater["key_points"][0] == "Inmates sued the sheriff of Coldwater County."  # the key-points file
    assert harrowgate["reference_summary"].startswith("Parents of pupils at Harrowgate")  # the LONG summary
    assert test["mls-harrowgate"]["answers"] == [
        "Parents sued the Harrowgate School Board over a closed ramp; the court ordered it reopened."]  # the short one
    assert len(test["mls-harrowgate"]["evidence_doc_ids"]) == 2  # one document per source
    assert coldwater["reference_summary"].startswith("Inmates of the Coldwater")  # nested summary: {long, short}
    notes = " ".join(n for r in mls.reports for n in r.notes)
    assert "filtered: no short summary: 1" in notes and "train summaries (demonstrations): 3" in notes


def test_an_mc_answer_outside_its_options_names_file_record_and_field(tmp_path):
    bad = tmp_path / "longbook_choice_eng.jsonl"
    bad.write_text(json.dumps({"id": 7, "context": "A story.", "input": "Which?", "answer": ["purple"],
                               "options": ["red", "grey", "blue", "white"]}) + "\n")
    with pytest.raises(RecordError, match=r"longbook_choice_eng.jsonl record 0 \(id '7'\): field 'answer'"):
        load_source(SourceConfig("mc", "infbench", {"paths": str(bad)}))
    rejected = load_source(SourceConfig("mc", "infbench", {"paths": [str(bad), str(FIXTURES / "infbench/longbook_choice_eng.jsonl")],
                                                           "on_error": "reject"}))
    assert rejected.rejected("mc")["field"].to_list() == ["answer"] and rejected.items.height == 3


# --------------------------------------------------------------------------- instances


@pytest.mark.parametrize("level", ["8k", "16k"])
def test_every_task_builds_at_8k_and_16k_cut_by_the_tables_rule(built, counter, frames, level):
    out = built[level]
    assert sorted(out["task"].unique()) == sorted(TASKS)
    assert out.group_by("task").len()["len"].to_list() == [2] * len(TASKS)
    documents, _ = frames
    text = dict(documents.select("doc_id", "text").iter_rows())
    for row in out.iter_rows(named=True):
        spec = HELMET[row["task"]]
        buffer = spec.builder.options["buffer"]
        budget = document_budget(row["target_tokens"], buffer, spec.max_new_tokens)
        assert budget == {"narrativeqa": 200 + 100, "infbench_qa": 210, "infbench_mc": 210, "infbench_sum": 1400,
                          "multi_lexsum": 700}[row["task"]] * -1 + row["target_tokens"]  # the spec's table, L - x
        assert row["context"].endswith(helmet.OMITTED)
        body = row["context"].removesuffix(helmet.OMITTED)
        assert "\n\n".join(text[d].strip() for d in row["evidence_doc_ids"]).startswith(body)  # the beginning kept
        assert row["context_tokens"] <= budget  # the marker's tokens inside the budget
        assert row["input_tokens"] + row["max_new_tokens"] <= row["target_tokens"]  # prompt + generation fit L
        if row["task"] != "infbench_sum":  # short demonstrations: the table's cut is the document's length
            assert row["context_tokens"] >= budget - 5
        assert row["max_new_tokens"] == {"narrativeqa": 100, "infbench_qa": 10, "infbench_mc": 10,
                                         "infbench_sum": 1200, "multi_lexsum": 400}[row["task"]]


def test_the_same_items_at_every_level(built):
    ids = {lv: sorted(built[lv].select("task", "item_id").iter_rows()) for lv in built}
    assert ids["8k"] == ids["16k"]


def test_infbench_demos_replace_the_document_by_a_placeholder(built):
    out = built["8k"]
    for task in ("infbench_qa", "infbench_mc", "infbench_sum"):
        for row in out.filter(pl.col("task") == task).iter_rows(named=True):
            demos = row["prompt"].split(row["context"])[0]
            assert demos.count(helmet.DEMO_PLACEHOLDER) == 2, task
            assert row["question"] not in demos or task == "infbench_sum"  # never the test question
    mc = out.filter(pl.col("task") == "infbench_mc").row(0, named=True)
    assert mc["prompt"].split(mc["context"])[0].count("Options:\nA. ") == 2  # each demo shows its options


def test_narrativeqa_demos_are_train_pairs_without_a_document(built):
    train_questions = {"Where did the miller live?", "What did the miller grind?", "Who paid the miller in eggs?"}
    for row in built["8k"].filter(pl.col("task") == "narrativeqa").iter_rows(named=True):
        demos = row["prompt"].split(row["context"])[0]
        assert helmet.DEMO_PLACEHOLDER not in demos
        assert sum(f"Question: {q}\nAnswer: " in demos for q in train_questions) == 2
        assert "Tobin" not in demos  # no test item among the demonstrations


def test_multi_lexsum_demos_are_short_summaries_from_train_and_its_row_keeps_what_the_judge_reads(built):
    for row in built["8k"].filter(pl.col("task") == "multi_lexsum").iter_rows(named=True):
        demos = row["prompt"].split("Legal documents:")[0]
        assert demos.count("Summary: ") == 2 and helmet.DEMO_PLACEHOLDER not in demos
        assert "Tenants sued" in demos or "A union challenged" in demos or "Voters challenged" in demos
        rf = fields(row)
        assert rf["key_points"] and rf["reference_summary"] != row["answers"][0]  # long summary vs short gold


def test_mc_rows_render_options_and_answer_with_letter_and_option(built):
    rows = {r["question"]: r for r in built["16k"].filter(pl.col("task") == "infbench_mc").iter_rows(named=True)}
    for question, row in rows.items():
        options = fields(row)["options"]
        assert f"Question: {question}\nOptions:\n" + "\n".join(
            f"{letter}. {o}" for letter, o in zip("ABCD", options, strict=False)) + "\nAnswer:" in row["prompt"]
        letter = row["answers"][0]
        assert row["answers"][1] == f"{letter}. {options['ABCD'.index(letter)]}"
    if "What colour was Tobin's boat?" in rows:
        assert rows["What colour was Tobin's boat?"]["answers"] == ["B", "B. grey"]


def test_mc_metric_scores_the_letter_raw_or_parsed_or_the_option_written_out(built):
    metric = METRICS.get("helmet.mc")
    row = {"answers": ["B", "B. grey"]}
    spec = HELMET["infbench_mc"]
    assert [metric(o, row, spec, {}) for o in ("B", "Answer: B", " b.", "I pick B. Grey, clearly", "A", "",
                                               "Answer:", "grey")] == [1, 1, 1, 1, 0, 0, 0, 0]


def test_a_choice_task_must_show_its_options(frames, counter):
    spec = HELMET["infbench_mc"]
    broken = spec.model_copy(update={"prompt": spec.prompt.replace("Options:\n{options}\n", "")})
    with pytest.raises(ValueError, match="task 'infbench_mc'.*needs \\{options\\}"):
        helmet.build_helmet(*frames, EMPTY_PASSAGES, EMPTY_NEGATIVES, level="8k",
                            config=HelmetConfig(tasks=("infbench_mc",)), seed=42, counter=counter, tasks=[broken])


def test_train_demos_need_a_train_split(frames, counter):
    documents, items = frames
    no_train = items.filter(~pl.col("record_fields").str.contains('"split"'))
    with pytest.raises(ValueError, match="task 'narrativeqa': 2 demonstrations need train-split items of its source"):
        helmet.build_helmet(documents, no_train, EMPTY_PASSAGES, EMPTY_NEGATIVES, level="8k",
                            config=HelmetConfig(tasks=("narrativeqa",)), seed=42, counter=counter,
                            tasks=[HELMET["narrativeqa"]])


# --------------------------------------------------------------------------- the summarization judge


def _plan(instances: pl.DataFrame):
    gens = pl.DataFrame({"generation_id": [f"g{i}" for i in range(instances.height)],
                         "instance_id": instances["instance_id"],
                         "output": ["The parents won. The ramp was reopened."] * instances.height})
    return judge.plan_judgments(gens, instances.with_columns(benchmark=pl.lit("helmet")), "judge", {})


def test_summ_judge_asks_for_the_released_key_points_and_judges_precision_against_the_long_summary(built):
    rows = built["8k"].filter(pl.col("task") == "multi_lexsum")
    for j in _plan(rows):
        rf = json.loads(j.instance["record_fields"])
        recall, precision = j.calls["recall"].prompt, j.calls["precision"].prompt
        assert "\n".join(f"{i}. {kp}" for i, kp in enumerate(rf["key_points"], 1)) in recall
        assert rf["reference_summary"] in precision and j.instance["answers"][0] not in precision
        replies = {j.calls["fluency"].key: '{"fluency": 1}', j.calls["recall"].key: '{"recall": 2}',
                   j.calls["precision"].key: '{"precision": 1, "sentence_count": 2}'}
        parsed = json.loads(judge.judge_frame([j], replies, "judge")["parsed_fields"][0])
        assert parsed["key_points_from"] == "record_fields" and parsed["reference_from"] == "reference_summary"
        assert parsed["key_points"] == len(rf["key_points"])


def test_summ_judge_without_record_fields_falls_back_to_the_gold_and_says_so():
    inp = judge.JudgeInput("", ["First fact here. Second fact here."], "A summary.")
    prompts = HELMET_SUMM.prompts(inp)
    assert "1. First fact here.\n2. Second fact here." in prompts["recall"]
    _, _, _, parsed, _ = HELMET_SUMM.combine(inp, {"fluency": '{"fluency": 1}', "recall": '{"recall": 1}',
                                                         "precision": '{"precision": 1, "sentence_count": 1}'})
    assert (parsed["key_points_from"], parsed["reference_from"]) == ("gold_sentences", "gold_answer")
    assert HELMET_SUMM.version == "2"


def test_narrativeqa_is_judged_by_the_longqa_rubric_without_the_story(built):
    (j, *_) = _plan(built["8k"].filter(pl.col("task") == "narrativeqa"))
    assert j.rubric.name == "helmet_longqa" and "Chapter 2." not in j.calls["qa"].prompt


# --------------------------------------------------------------------------- demo dossiers (helmet-demo)


@pytest.fixture(scope="module")
def dossiers():
    return load_source(SourceConfig("demo_long", "demo_long_documents", {"n_entities": 240, "seed": 7}))


def test_demo_dossiers_are_long_with_answerable_questions_and_key_points(dossiers, counter):
    assert dossiers.documents.height >= 4
    assert min(counter.count_many(dossiers.documents["text"].to_list())) >= 10_000
    text = dict(dossiers.documents.select("doc_id", "text").iter_rows())
    qa = dossiers.items.filter(pl.col("category") == "long-document QA")
    for row in qa.iter_rows(named=True):  # the answer within the first 3,000 tokens: it survives a 4k cut
        head = counter.encoding.decode(counter.encoding.encode(text[row["evidence_doc_ids"][0]])[:3_400])
        assert any(a in head for a in row["answers"])
    summ = dossiers.items.filter(pl.col("category") == "summarization")
    for row in summ.iter_rows(named=True):
        points = fields(row)["key_points"]
        assert len(points) == 6 and all(p in text[row["evidence_doc_ids"][0]] for p in points)
    again = load_source(SourceConfig("demo_long", "demo_long_documents", {"n_entities": 240, "seed": 7}))
    assert again.items.equals(dossiers.items) and again.documents.equals(dossiers.documents)


@pytest.mark.parametrize("level", ["4k", "8k"])
def test_generic_longqa_and_summ_run_on_the_demo_dossiers(dossiers, counter, level):
    out = helmet.build_helmet(dossiers.documents, dossiers.items, EMPTY_PASSAGES, EMPTY_NEGATIVES, level=level,
                              config=HelmetConfig(tasks=("longqa", "summ"), n_per_task=2), seed=42, counter=counter,
                              tasks=[HELMET["longqa"], HELMET["summ"]])
    assert sorted(out["task"]) == ["longqa", "longqa", "summ", "summ"]
    assert (out["input_tokens"] <= out["target_tokens"]).all()
    for row in out.iter_rows(named=True):
        assert row["context"].endswith(helmet.OMITTED)
        if row["task"] == "longqa":
            assert any(a in row["context"] for a in row["answers"])
        else:
            assert fields(row)["key_points"]  # the summ judge reads the dossier's key points


def test_long_demonstrations_cut_the_document_further_so_prompt_and_generation_fit_the_level(frames, counter):
    """∞Bench Sum's demonstrations are whole gold summaries: HELMET's model-side fit (§5.2) then cuts the document
    below the table's budget. Here the fixture's summaries are made ~900 tokens long."""
    documents, items = frames
    long_summary = " ".join(["The keeper climbs the stair and trims the wick before the storm comes in."] * 60)
    items = items.with_columns(answers=pl.when(pl.col("source") == "infbench_sum").then(
        pl.col("answers").list.eval(pl.lit(long_summary))).otherwise(pl.col("answers")))
    out = helmet.build_helmet(documents, items, EMPTY_PASSAGES, EMPTY_NEGATIVES, level="8k",
                              config=HelmetConfig(tasks=("infbench_sum",)), seed=42, counter=counter,
                              tasks=[HELMET["infbench_sum"]])
    for row in out.iter_rows(named=True):
        assert row["context_tokens"] < document_budget(8192, 200, 1200) - 1500  # two ~900-token demos
        assert 8192 - 1200 - 10 <= row["input_tokens"] <= 8192 - 1200  # filled to L - max_new_tokens, not beyond
        assert row["context"].endswith(helmet.OMITTED)
