"""100-LongBench's headline (issue 18, acceptance 4): one 8-task LongScore in which the QA and summarization
tasks take their scores from the LLM judge (their task files' rubrics lb100_qa / lb100_summ) and the other four
from their metric, with the QA prior-knowledge filter run by the judge (``prior_knowledge.scorer: judge``) and
its drop respected by judge rows as by metric rows. Spec 100longbench.md §5.1-§5.4, §6.2-§6.3, §10.7-§10.8.

The worked example below is computed by hand in the comments; the functions must give the same numbers.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for

from lc_pipeline import schemas
from lc_pipeline.benchmarks.longbench100.config import PriorKnowledgeConfig
from lc_pipeline.config import load_config
from lc_pipeline.construct.builders import build_plan
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import MODEL_DIM
from lc_pipeline.resources.parquet_io import (
    partition_path,
    read_judge_scores,
    write_parquet_atomic,
)
from lc_pipeline.score.longscore import (
    HEADLINE,
    HeadlineUnavailable,
    ScoreSource,
    headline_long_scores,
    headline_sources,
    leaderboard_frame,
)
from lc_pipeline.score.per_model import (
    judged_no_context,
    model_headline,
    no_context_judgments,
    no_context_questions,
)
from lc_pipeline.score.prior_knowledge import prior_knowledge_frame
from lc_pipeline.sources.loader import load_source
from lc_pipeline.tasks.catalog import catalog_for, load_catalog

BASE = ["2k", "4k"]
LONG = ["8k", "16k"]
LENGTHS = BASE + LONG
METRIC_TASKS = ["kv_retrieval", "counting_stars", "passage_retrieval", "passage_count"]
JUDGED_TASKS = {"single_doc_qa": "lb100_qa", "multi_doc_qa": "lb100_qa",
                "single_doc_sum": "lb100_summ", "multi_doc_sum": "lb100_summ"}

# Per task, per item (a, b; each item at every length, as the filter drops an item at every length),
# the instance score in [0, 1] at 2k, 4k, 8k, 16k.
# Metric tasks: accuracy 0/1 (metric_scores, metric label "lb100").
METRIC_SCORES = {
    "kv_retrieval": {"a": [1, 1, 1, 0], "b": [1, 1, 0, 0]},       # S = 100, 100,  50,   0
    "counting_stars": {"a": [1, 1, 1, 1], "b": [0, 1, 0, 0]},     # S =  50, 100,  50,  50
    "passage_retrieval": {"a": [1, 1, 1, 0], "b": [1, 0, 1, 1]},  # S = 100,  50, 100,  50
    "passage_count": {"a": [0, 1, 0, 1], "b": [0, 0, 0, 0]},      # S =   0,  50,   0,  50
}
# Judged tasks: judge_scores.score = lb100_qa's fluency x correctness / 6, lb100_summ's fluency x precision.
JUDGE_SCORES = {
    # item a is dropped by the prior-knowledge filter (the judge gave its no-context answer 6/6): its perfect
    # with-context verdicts must not count. Kept, item b alone:                 S =  50, 100, 33.33, 0
    "single_doc_qa": {"a": [1, 1, 1, 1], "b": [3 / 6, 6 / 6, 2 / 6, 0]},
    "multi_doc_qa": {"a": [1, 3 / 6, 3 / 6, 0], "b": [3 / 6, 3 / 6, 0, 0]},        # S =  75,  50, 25,  0
    "single_doc_sum": {"a": [0.8, 0.6, 0.4, 0.2], "b": [0.6, 0.6, 0.6, 0.2]},    # S =  70,  60, 50, 20
    "multi_doc_sum": {"a": [1, 0.5, 0.5, 0.25], "b": [0, 0.5, 0.25, 0.25]},      # S =  50,  50, 37.5, 25
}
# Per length, the mean over the 8 tasks (spec §6.2: average the raw task scores per length FIRST):
#   2k:  (100 +  50 + 100 +  0 +  50    + 75 + 70 + 50  ) / 8 = 495     / 8 = 61.875
#   4k:  (100 + 100 +  50 + 50 + 100    + 50 + 60 + 50  ) / 8 = 560     / 8 = 70
#   8k:  ( 50 +  50 + 100 +  0 +  33.33 + 25 + 50 + 37.5) / 8 = 345.833 / 8 = 43.2291666...
#   16k: (  0 +  50 +  50 + 50 +   0    +  0 + 20 + 25  ) / 8 = 195     / 8 = 24.375
# Base Ability = (61.875 + 70) / 2 = 65.9375
# LC_8k  = 100 * (43.2291666 - 65.9375) / 65.9375 = -34.4391...  -> -34.44 (each LC_l rounded, as §6.3)
# LC_16k = 100 * (24.375     - 65.9375) / 65.9375 = -63.0331...  -> -63.03
# LongScore = (-34.44 - 63.03) / 2 = -48.735;  old metric = (43.2291666 + 24.375) / 2 = 33.8020833...
EXPECTED = {"base": 65.9375, "8k": 43.2291666667, "16k": 24.375, "lc_8k": -34.44, "lc_16k": -63.03,
            "long_score": -48.735, "old_metric": 33.8020833333}


def metric_scores() -> pl.DataFrame:
    rows = [{"task": t, "length": lv, "item_id": f"{t}-{item}", "metric": "lb100", "score": float(s[i])}
            for t, items in METRIC_SCORES.items() for item, s in items.items() for i, lv in enumerate(LENGTHS)]
    # The judged tasks have metric rows too (100-LongBench's "original metric" mode, F1 / ROUGE-L): the
    # headline must not read them. A perfect 1.0 everywhere would show if it did.
    rows += [{"task": t, "length": lv, "item_id": f"{t}-{item}", "metric": "lb100", "score": 1.0}
             for t in JUDGED_TASKS for item in "ab" for lv in LENGTHS]
    return pl.DataFrame(rows)


def judge_scores() -> pl.DataFrame:
    rows = [{"task": t, "length": lv, "item_id": f"{t}-{item}", "rubric": JUDGED_TASKS[t], "parse_status": "ok",
             "score": float(s[i])}
            for t, items in JUDGE_SCORES.items() for item, s in items.items() for i, lv in enumerate(LENGTHS)]
    # A verdict the judge's reply did not hold is left out of the mean, not scored 0.
    rows.append({"task": "multi_doc_qa", "length": "16k", "item_id": "multi_doc_qa-c", "rubric": "lb100_qa",
                 "parse_status": "no_score", "score": None})
    return pl.DataFrame(rows)


def qa_instances() -> pl.DataFrame:
    """The QA items' instances (one per item and length), as the prior-knowledge filter reads them."""
    rows = []
    for task in ("single_doc_qa", "multi_doc_qa"):
        for item, (question, gold) in {"a": ("Where is the Louvre?", "Paris"),
                                       "b": ("Who wrote the ledger?", "Ada Vance")}.items():
            for lv in LENGTHS:
                rows.append({"instance_id": f"{task}-{item}@{lv}", "item_id": f"{task}-{item}",
                             "suite": "longbench100", "benchmark": "longbench100", "task": task,
                             "category": "Information Comprehension", "depth": 0.5, "question": question,
                             "answers": [gold]})
    return pl.DataFrame(rows)


# The model's no-context answers (one per QA item) and what the judge (lb100_qa) replies to each.
NO_CONTEXT = {
    "multi_doc_qa-a": ("Unanswerable.", None),  # says "unanswerable": never judged, never dropped
    "multi_doc_qa-b": ("Ada Vance", "I cannot grade this."),  # an unreadable verdict: kept, score null
    "single_doc_qa-a": ("Paris", 'Reasoning... {"fluency": 2, "correctness": 3}'),  # 6/6 >= 0.5: dropped
    "single_doc_qa-b": ("Bob Vance", 'Wrong person. {"fluency": 2, "correctness": 1}'),  # 2/6 < 0.5: kept
}


HEADLINES = load_catalog().headlines  # benchmark -> its task file's headline (longbench100: source judge)


def lb100_tasks():
    """The packaged 100-LongBench task file's tasks (what the config builds)."""
    return load_catalog().tasks("longbench100")


@pytest.fixture
def prior_knowledge() -> pl.DataFrame:
    """The filter run with ``scorer: judge``: no-context answers graded by the judge with the task's rubric."""
    pk = PriorKnowledgeConfig(scorer="judge")
    instances = qa_instances()
    items = no_context_questions(instances, pk)
    assert items["item_id"].to_list() == sorted(NO_CONTEXT)
    outputs = [{"output": NO_CONTEXT[i][0], "completion_tokens": 3, "finish_reason": "stop"} for i in items["item_id"]]
    judgments = no_context_judgments(items, outputs, instances, "judge-m", {"temperature": 0.0})
    assert sorted(j.instance["item_id"] for j in judgments) == ["multi_doc_qa-b", "single_doc_qa-a", "single_doc_qa-b"]
    assert {j.rubric.name for j in judgments} == {"lb100_qa"}  # the tasks' rubric (task file)
    replies = {c.key: NO_CONTEXT[j.instance["item_id"]][1] for j in judgments for c in j.calls.values()}
    judged = judged_no_context(judgments, replies, "judge-m")
    return prior_knowledge_frame(items, outputs, metric=pk.metric, threshold=pk.threshold, judged=judged)


def test_the_judge_filter_drops_the_item_the_model_answers_from_memory(prior_knowledge):
    assert prior_knowledge.schema == schemas.PRIOR_KNOWLEDGE
    got = {r["item_id"]: (r["metric"], r["score"], r["dropped"]) for r in prior_knowledge.iter_rows(named=True)}
    assert got == {
        "single_doc_qa-a": ("judge:lb100_qa", 1.0, True),  # fluency 2 x correctness 3 / 6 = 1.0 >= 0.5
        "single_doc_qa-b": ("judge:lb100_qa", pytest.approx(2 / 6), False),
        "multi_doc_qa-a": ("judge", None, False),  # "unanswerable": not asked
        "multi_doc_qa-b": ("judge:lb100_qa", None, False),  # no verdict in the reply: kept
    }


def test_each_task_takes_its_score_from_its_task_file():
    sources = headline_sources(lb100_tasks(), [*METRIC_TASKS, *JUDGED_TASKS], headlines=HEADLINES)
    assert sources == {**{t: ScoreSource("metric", "lb100") for t in METRIC_TASKS},
                       **{t: ScoreSource("judge", r) for t, r in JUDGED_TASKS.items()}}
    # The judge's rubric_overrides win, as for judge_scores: "none" scores a task by its metric again.
    overridden = headline_sources(lb100_tasks(), ["single_doc_qa"], {"longbench100/single_doc_qa": "none"},
                                  HEADLINES)
    assert overridden == {"single_doc_qa": ScoreSource("metric", "lb100")}
    # The task file's headline says "source: judge"; without it a task with a metric keeps its metric (the
    # rule benchmark_scores follows too).
    assert set(headline_sources(lb100_tasks(), JUDGED_TASKS).values()) == {ScoreSource("metric", "lb100")}


def test_the_headline_of_the_worked_example_equals_the_hand_computation(prior_knowledge):
    sources = headline_sources(lb100_tasks(), [*METRIC_TASKS, *JUDGED_TASKS], headlines=HEADLINES)
    out = model_headline(metric_scores(), judge_scores(), prior_knowledge, sources, BASE, LONG)
    assert out.schema == schemas.LONG_SCORES and set(out["metric"]) == {HEADLINE}
    overall = {r["length_level"]: r for r in out.filter(pl.col("task") == "overall").iter_rows(named=True)}
    assert overall["avg"]["base_ability"] == pytest.approx(EXPECTED["base"])
    assert overall["8k"]["score"] == pytest.approx(EXPECTED["8k"])
    assert overall["16k"]["score"] == pytest.approx(EXPECTED["16k"])
    assert overall["8k"]["long_score"] == EXPECTED["lc_8k"]
    assert overall["16k"]["long_score"] == EXPECTED["lc_16k"]
    assert overall["avg"]["long_score"] == pytest.approx(EXPECTED["long_score"])
    assert overall["avg"]["score"] == pytest.approx(EXPECTED["old_metric"])
    # Instances behind the overall row: 8 tasks x 2 items x 4 lengths, less the dropped item's 4 (the
    # unparsed verdict never counted): 64 - 4 = 60.
    assert overall["avg"]["n_instances"] == 60

    # single_doc_qa alone, item b only: base (50 + 100) / 2 = 75; 8k 33.33 -> 100 * (33.33 - 75) / 75 = -55.56;
    # 16k 0 -> -100; LongScore (-55.56 - 100) / 2 = -77.78.
    sqa = {r["length_level"]: r for r in out.filter(pl.col("task") == "single_doc_qa").iter_rows(named=True)}
    assert sqa["avg"]["base_ability"] == pytest.approx(75.0)
    assert sqa["8k"]["long_score"] == -55.56 and sqa["16k"]["long_score"] == -100.0
    assert sqa["avg"]["long_score"] == pytest.approx(-77.78)
    assert sqa["avg"]["n_instances"] == 4  # item b at 4 lengths

    # The headline is one leaderboard row beside the metric rows.
    board = leaderboard_frame(out.with_columns(model=pl.lit("m")))
    row = board.row(0, named=True)
    assert {k: row[k] for k in ("model", "metric", "base_ability", "old_metric", "long_score", "rank_old_metric",
                                "rank_long_score", "n_instances")} | {"scores_by_length": None} == {
        "model": "m", "metric": HEADLINE, "base_ability": pytest.approx(EXPECTED["base"]),
        "old_metric": pytest.approx(EXPECTED["old_metric"]), "long_score": pytest.approx(EXPECTED["long_score"]),
        "rank_old_metric": 1, "rank_long_score": 1, "scores_by_length": None, "n_instances": 60}


def test_without_the_drop_the_dropped_items_perfect_verdicts_would_lift_the_headline(prior_knowledge):
    # The same example with a filter that drops nothing: single_doc_qa at 8k = (1 + 2/6) / 2 = 66.67 instead
    # of 33.33, so the 8k mean rises by 33.33 / 8 = 4.17. The drop is what makes the worked example's number.
    sources = headline_sources(lb100_tasks(), [*METRIC_TASKS, *JUDGED_TASKS], headlines=HEADLINES)
    kept_all = prior_knowledge.with_columns(dropped=pl.lit(False))
    out = model_headline(metric_scores(), judge_scores(), kept_all, sources, BASE, LONG)
    row = out.filter((pl.col("task") == "overall") & (pl.col("length_level") == "8k")).row(0, named=True)
    assert row["score"] == pytest.approx(EXPECTED["8k"] + (100 / 3) / 8)


def test_a_judged_task_without_verdicts_at_a_length_is_named_not_guessed():
    sources = headline_sources(lb100_tasks(), [*METRIC_TASKS, *JUDGED_TASKS], headlines=HEADLINES)
    judged = judge_scores().filter(~((pl.col("task") == "single_doc_sum") & (pl.col("length") == "16k")))
    with pytest.raises(HeadlineUnavailable, match=r"single_doc_sum@16k \(judge:lb100_summ\)"):
        headline_long_scores(metric_scores(), judged, sources, BASE, LONG)
    # Nothing judged (the task file's headline without "source: judge"): the
    # headline would repeat the metric rows, so there is none and long_scores stays as it was.
    metric_only = headline_sources(lb100_tasks(), [*METRIC_TASKS, *JUDGED_TASKS])
    with pytest.raises(HeadlineUnavailable, match="no task is judge-scored"):
        model_headline(metric_scores(), judge_scores(), pl.DataFrame({"item_id": ["x"], "dropped": [False]}),
                       metric_only, BASE, LONG)
    with pytest.raises(HeadlineUnavailable, match="'no_such_task' is not a task the config builds"):
        headline_sources(lb100_tasks(), ["no_such_task"])
    # Two built benchmarks with a task of one name: which source is meant cannot be told from the name.
    with pytest.raises(HeadlineUnavailable, match=r"'passage_count' is built by several benchmarks \(longbench, "):
        headline_sources(load_catalog().tasks(), ["passage_count"])


def test_no_context_judging_needs_a_rubric_on_every_filtered_task():
    pk = PriorKnowledgeConfig(scorer="judge", tasks=("single_doc_qa", "kv_retrieval"))
    instances = pl.concat([qa_instances(), qa_instances().filter(pl.col("task") == "single_doc_qa").with_columns(
        task=pl.lit("kv_retrieval"), item_id=pl.lit("kv-a"), instance_id=pl.col("instance_id") + "-kv")])
    items = no_context_questions(instances, pk)
    outputs = [{"output": "x", "completion_tokens": 1, "finish_reason": "stop"}] * items.height
    with pytest.raises(ValueError, match=r"task\(s\) \['kv_retrieval'\] have no judge rubric"):
        no_context_judgments(items, outputs, instances, "judge-m", {})


def test_the_leaderboards_judge_rows_leave_the_dropped_items_out(tmp_path, prior_knowledge):
    lake = tmp_path / "data_lake"
    for lv in LENGTHS:
        path = lake / "judge_scores" / f"length={lv}" / "model=m" / "data.parquet"
        path.parent.mkdir(parents=True)
        judge_scores().filter(pl.col("length") == lv).drop("length").write_parquet(path)
    pk_path = lake / "prior_knowledge" / "model=m" / "data.parquet"
    pk_path.parent.mkdir(parents=True)
    prior_knowledge.write_parquet(pk_path)
    everything = read_judge_scores(lake, respect_drops=False)
    kept = read_judge_scores(lake)
    assert everything.height == kept.height + 4  # single_doc_qa-a at 4 lengths
    assert "single_doc_qa-a" not in kept["item_id"].to_list() and set(kept["model"]) == {"m"}
    assert read_judge_scores(lake, "other").is_empty()
    assert sorted(set(kept["length"])) == sorted(LENGTHS)


# --------------------------------------------------------------------------- the packaged config


def test_the_packaged_config_is_the_papers_judged_setting():
    config = load_config("longbench100")
    assert config.base_lengths == ("2k", "4k", "6k") and config.long_lengths == ("8k", "16k", "32k", "64k", "128k")
    assert config.items_per_length == 0 and config.longbench100.n_per_task == 100
    assert config.prior_knowledge.scorer == "judge" and config.prior_knowledge.threshold == 0.5
    built = [spec for _, specs in build_plan(config, catalog_for(config)) for spec in specs]
    assert sorted(s.name for s in built) == sorted([*METRIC_TASKS, *JUDGED_TASKS])
    assert headline_sources(built, [s.name for s in built], headlines=catalog_for(config).headlines) == {
        **{t: ScoreSource("metric", "lb100") for t in METRIC_TASKS},
        **{t: ScoreSource("judge", r) for t, r in JUDGED_TASKS.items()}}


def test_the_packaged_config_reads_longbench_files_from_lcp_data(tmp_path, monkeypatch):
    shared = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "longbench"
    files = ["qasper", "multifieldqa_en", "hotpotqa", "2wikimqa", "gov_report", "multi_news", "passage_count",
             "passage_retrieval_en"]  # the paper's LongBench sources the shared sample has
    if not all((shared / f"{f}.jsonl").exists() for f in files):
        pytest.skip(f"shared LongBench sample not found at {shared}")
    (tmp_path / "longbench100").mkdir()
    for f in files:
        (tmp_path / "longbench100" / f"{f}.jsonl").symlink_to(shared / f"{f}.jsonl")
    monkeypatch.setenv("LCP_DATA", str(tmp_path))
    source = load_source(load_config("longbench100").sources[0])
    # Every pool the 8 tasks draw from has items (benchmarks/longbench100/construction.py).
    assert {"single-doc QA", "multi-doc QA", "summarization", "synthetic"} <= set(source.items["category"])


# --------------------------------------------------------------------------- the long_scores asset


def _write(lake: Path, table: str, dims: dict[str, str], frame: pl.DataFrame) -> None:
    write_parquet_atomic(frame, partition_path(lake, table, dims))


def test_the_long_scores_asset_adds_the_headline_once_the_judge_has_scored_every_length(tmp_path, prior_knowledge):
    """long_scores on a lake holding the worked example's metric_scores, prior_knowledge and (in the second
    run) judge_scores partitions, as the pipeline writes them: no model is asked anything."""
    model = "smollm2-135m"
    config = {"name": "lb100-headline", "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 20}],
              "lengths": LENGTHS, "base_lengths": BASE, "long_lengths": LONG, "items_per_length": 0,
              "longbench100": {"tasks": "all", "n_per_task": 1},
              "prior_knowledge": {"scorer": "judge", "threshold": 0.5}, "models": [model]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    settings = settings_for(tmp_path, tmp_path / "c.yaml")
    lake = settings.lake_dir
    scores = metric_scores().with_columns(
        score_id=pl.col("item_id") + "@" + pl.col("length"), generation_id=pl.col("item_id") + "@" + pl.col("length"),
        instance_id=pl.col("item_id") + "@" + pl.col("length"), category=pl.lit("c"), depth=pl.lit(0.5), status=pl.lit("answered"))
    for lv in LENGTHS:
        part = scores.filter(pl.col("length") == lv).select(schemas.METRIC_SCORES.names())
        _write(lake, "metric_scores", {"length": lv, MODEL_DIM: model}, part)
    _write(lake, "prior_knowledge", {MODEL_DIM: model}, prior_knowledge)
    pipeline = build_pipeline(settings)

    def long_scores(instance) -> tuple[pl.DataFrame, dict]:
        result = dg.materialize(pipeline.assets, selection=["long_scores"], partition_key=model,
                                resources=pipeline.resources, instance=instance)
        meta = result.asset_materializations_for_node("long_scores")[0].metadata
        return pl.read_parquet(partition_path(lake, "long_scores", {MODEL_DIM: model})), meta

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, [model])
        # No judge_scores yet: the metric rows as before, and the metadata says what the headline waits for.
        out, meta = long_scores(instance)
        assert set(out["metric"]) == {"lb100"}
        assert "multi_doc_qa@2k (judge:lb100_qa)" in meta["headline_unavailable"].value

        judged = judge_scores()
        for lv in LENGTHS:
            part = judged.filter(pl.col("length") == lv).with_columns(
                judgment_id=pl.col("item_id") + "@" + lv, generation_id=pl.col("item_id") + "@" + lv,
                instance_id=pl.col("item_id") + "@" + lv, suite=pl.lit("longbench100"), category=pl.lit("c"),
                depth=pl.lit(0.5), rubric_version=pl.lit("1"), judge_model=pl.lit("j"), raw=pl.lit("{}"),
                parsed_fields=pl.lit("{}"), value=pl.col("score"), perfect=pl.lit(None, pl.Boolean),
                judge_calls=pl.lit(1, pl.Int32)).select(schemas.JUDGE_SCORES.names())
            _write(lake, "judge_scores", {"length": lv, MODEL_DIM: model}, part)
        out, meta = long_scores(instance)
    headline = out.filter(pl.col("metric") == HEADLINE)
    overall = headline.filter((pl.col("task") == "overall") & (pl.col("length_level") == "avg")).row(0, named=True)
    assert overall["base_ability"] == pytest.approx(EXPECTED["base"])
    assert overall["long_score"] == pytest.approx(EXPECTED["long_score"])
    assert overall["score"] == pytest.approx(EXPECTED["old_metric"])
    assert "single_doc_qa: judge:lb100_qa" in meta["headline_sources"].value
    assert meta["long_score_headline"].value == pytest.approx(EXPECTED["long_score"])
    assert out.filter(pl.col("metric") == "lb100").height == 8 * 3 + 3  # per task and overall: 2 long + avg
