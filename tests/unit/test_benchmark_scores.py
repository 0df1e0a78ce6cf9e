"""Each benchmark's table is aggregated as its paper reports it, from the task files' aggregation:
LongBench's category and Avg per table (English and Chinese apart, code in both), HELMET's mean of
categories, LV-Eval's mean of tasks, Loong's mean of instances, a group's weights; LV-Eval variants do
not count. Judge-scored cells (a rubric and no metric, or a headline ``source: judge``) come from
judge_scores with Loong's three numbers (score, perfect rate, scoring success); a judged task without
verdicts is reported, not dropped, nor scored by its metric; a headline ``breakdown`` gives the overall
per record-field value (LongBench v2's easy / hard / short / medium / long) (score/benchmark_scores.py)."""

from __future__ import annotations

import json
import textwrap

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.score.benchmark_scores import COLUMNS, benchmark_table
from lc_pipeline.tasks.catalog import load_catalog
from lc_pipeline.tasks.registry import METRICS

CATALOG = load_catalog()


def frames(rows: list[tuple], metric: str, length: str = "4k") -> tuple[pl.DataFrame, pl.DataFrame]:
    """(metric_scores, instances) of rows (benchmark, task, score[, variant]), one instance each."""
    ids = [f"i{k}" for k in range(len(rows))]
    instances = pl.DataFrame({
        "instance_id": ids, "benchmark": [r[0] for r in rows], "task": [r[1] for r in rows],
        "variant": [r[3] if len(r) > 3 else "plain" for r in rows], "length": length})
    scores = pl.DataFrame({"instance_id": ids, "metric": metric, "score": [float(r[2]) for r in rows]})
    return scores, instances


def cell(frame: pl.DataFrame, **where) -> dict:
    [row] = frame.filter(*(pl.col(k).is_null() if v is None else pl.col(k) == v for k, v in where.items())).to_dicts()
    return row


# One task of each LongBench category other than Single-Doc QA and Code Completion, per table, each at 10.
OTHER_EN = [("longbench", t, 0.1) for t in ("hotpotqa", "gov_report", "trec", "passage_count")]
OTHER_ZH = [("longbench", t, 0.1) for t in ("dureader", "vcsum", "lsht", "passage_retrieval_zh")]
PARTIAL_LONGBENCH = [
    ("longbench", "narrativeqa", 0.5), ("longbench", "narrativeqa", 0.7),  # task 60
    ("longbench", "qasper", 0.2),                                           # task 20 -> Single-Doc QA 40
    ("longbench", "multifieldqa_zh", 0.3),                                  # zh Single-Doc QA 30
    ("longbench", "lcc", 0.9), ("longbench", "lcc", 0.5),                   # Code Completion 70, both tables
]


def test_longbench_categories_and_avg_are_computed_per_table_with_code_in_both():
    scores, instances = frames([*PARTIAL_LONGBENCH, *OTHER_EN, *OTHER_ZH], metric="longbench")
    result = benchmark_table(scores, instances, CATALOG, "m")
    table = result.table
    assert table.columns == list(COLUMNS) and set(table["model"]) == {"m"}
    assert cell(table, table="en", level="task", task="narrativeqa")["score"] == pytest.approx(60.0)
    assert cell(table, table="en", level="group", category="Single-Doc QA")["score"] == pytest.approx(40.0)
    assert cell(table, table="zh", level="group", category="Single-Doc QA")["score"] == pytest.approx(30.0)
    for lang in ("en", "zh"):
        assert cell(table, table=lang, level="group", category="Code Completion")["score"] == pytest.approx(70.0)
    en, zh = cell(table, table="en", level="overall"), cell(table, table="zh", level="overall")
    # the mean of the six categories, not of the tasks
    assert en["score"] == pytest.approx((40 + 4 * 10 + 70) / 6) and en["n"] == 9 and en["missing_groups"] == []
    assert zh["score"] == pytest.approx((30 + 4 * 10 + 70) / 6) and zh["n"] == 7
    assert (en["metric"], en["aggregation"], en["length"], en["protocol"]) == (
        "longbench", "mean_of_groups", "4k", "ours")
    assert table.filter(pl.col("table") == "zh", pl.col("level") == "task")["task"].sort().to_list() == [
        "dureader", "lcc", "lsht", "multifieldqa_zh", "passage_retrieval_zh", "vcsum"]
    assert result.unjudged == {} and result.variant_rows == 0 and result.unscored == {}


def test_a_longbench_avg_without_some_category_is_null_and_names_it():
    scores, instances = frames(PARTIAL_LONGBENCH, metric="longbench")
    table = benchmark_table(scores, instances, CATALOG, "m").table
    en = cell(table, table="en", level="overall")
    assert en["score"] is None and en["ci_low"] is None and en["n"] == 5  # not (40 + 70) / 2 over what is there
    assert en["missing_groups"] == ["Few-shot Learning", "Multi-Doc QA", "Summarization", "Synthetic"]
    assert cell(table, table="en", level="group", category="Single-Doc QA")["score"] == pytest.approx(40.0)


def test_a_selected_longbench_task_without_a_score_nulls_its_category_and_the_avg():
    # The run selects (released.tasks) every task present plus musique, which has no instance: its category and
    # the Avg are null and say so; its own row is there, null, n 0.
    rows = [*PARTIAL_LONGBENCH, *OTHER_EN, *OTHER_ZH]
    scores, instances = frames(rows, metric="longbench")
    selected = {"longbench": tuple(sorted({r[1] for r in rows} | {"musique"}))}
    table = benchmark_table(scores, instances, CATALOG, "m", selected=selected).table
    musique = cell(table, level="task", task="musique")
    assert (musique["score"], musique["n"], musique["category"]) == (None, 0, "Multi-Doc QA")
    group = cell(table, table="en", level="group", category="Multi-Doc QA")
    assert group["score"] is None and group["missing_groups"] == ["musique"]
    assert cell(table, table="en", level="overall")["missing_groups"] == ["Multi-Doc QA"]
    assert cell(table, table="zh", level="overall")["score"] == pytest.approx((30 + 4 * 10 + 70) / 6)


def test_longbench_and_lveval_round_each_task_score_to_two_decimals_before_averaging():
    # LongBench's eval.py and LV-Eval's evaluation.py: round(100 * mean, 2) per task; the category and the
    # overall are means of those (headline round: 2).
    scores, instances = frames([("lveval", "loogle_SD_mixup", 1.0), ("lveval", "loogle_SD_mixup", 1.0),
                                ("lveval", "loogle_SD_mixup", 0.0), ("lveval", "cmrc_mixup", 1 / 3),
                                ("lveval", "hotpotwikiqa_mixup", 0.123456)], metric="lveval", length="16k")
    table = benchmark_table(scores, instances, CATALOG, "m").table
    assert cell(table, level="task", task="loogle_SD_mixup")["score"] == 66.67
    assert cell(table, level="task", task="cmrc_mixup")["score"] == 33.33
    assert cell(table, level="task", task="hotpotwikiqa_mixup")["score"] == 12.35
    assert cell(table, level="overall")["score"] == pytest.approx((66.67 + 33.33 + 12.35) / 3)
    assert cell(table, level="group", category="single-hop QA")["score"] == pytest.approx((66.67 + 33.33) / 2)
    rows = [*PARTIAL_LONGBENCH, *OTHER_EN, *OTHER_ZH, ("longbench", "qasper", 0.0), ("longbench", "qasper", 0.0)]
    scores, instances = frames(rows, metric="longbench")  # qasper 20 / 3 = 6.666... -> 6.67
    table = benchmark_table(scores, instances, CATALOG, "m").table
    assert cell(table, table="en", level="task", task="qasper")["score"] == 6.67
    assert cell(table, table="en", level="overall")["score"] == pytest.approx(((60 + 6.67) / 2 + 40 + 70) / 6)


def helmet_frames() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(metric_scores, instances, judge_scores) of a HELMET run with every category: RAG 60, Re-rank 30,
    Synthetic recall 100, ICL 50, Cite 40 (one ASQA instance: STR-EM 0.6, citation recall 0.3 and precision
    0.3), LongQA 20 and Summ 70 (the judge's)."""
    scores, instances = frames([
        ("helmet", "rag", 0.4), ("helmet", "rag_multi", 0.8),  # RAG 60: not (40+80+...)/n of the tasks
        ("helmet", "rerank", 0.3), ("helmet", "json_kv", 1.0), ("helmet", "icl", 0.5),
        ("helmet", "asqa", 0.6), ("helmet", "longqa", 0.0), ("helmet", "summ", 0.0),
    ], metric="helmet")
    asqa = "i5"
    scores = pl.concat([scores.filter(pl.col("instance_id") != asqa), pl.DataFrame({
        "instance_id": asqa, "metric": ["str_em", "citation_rec", "citation_prec"], "score": [0.6, 0.3, 0.3]})])
    judge = pl.DataFrame({"instance_id": ["i6", "i7"], "rubric": ["helmet_longqa", "helmet_summ"],
                          "score": [0.2, 0.7], "parse_status": "ok"})
    return scores, instances, judge


def test_helmet_average_is_the_mean_of_its_categories():
    scores, instances, judge = helmet_frames()
    table = benchmark_table(scores, instances, CATALOG, "m", judge).table
    assert set(table["table"]) == {"all"}
    assert cell(table, level="group", category="RAG")["score"] == pytest.approx(60.0)
    assert cell(table, level="group", category="Cite")["score"] == pytest.approx(40.0)
    overall = cell(table, level="overall", metric="helmet+judge:helmet_longqa+judge:helmet_summ+str_em+citation_rec"
                                                  "+citation_prec")
    assert overall["score"] == pytest.approx((60 + 30 + 100 + 50 + 40 + 20 + 70) / 7)
    assert overall["missing_groups"] == []


def test_a_helmet_run_without_the_judge_has_no_average_and_names_longqa_and_summ():
    scores, instances, _ = helmet_frames()
    result = benchmark_table(scores, instances, CATALOG, "m")
    overall = result.table.filter(pl.col("level") == "overall").to_dicts()
    assert [(r["score"], r["missing_groups"]) for r in overall] == [(None, ["LongQA", "Summ"])]  # not the mean of 5
    assert cell(result.table, level="group", category="Summ")["missing_groups"] == ["summ"]
    assert cell(result.table, level="task", task="longqa")["score"] is None
    assert result.unjudged == {"helmet/longqa": 1, "helmet/summ": 1}


def test_lveval_level_score_is_the_mean_of_its_tasks_and_variants_do_not_count():
    scores, instances = frames([
        ("lveval", "loogle_SD_mixup", 0.9), ("lveval", "cmrc_mixup", 0.3),  # single-hop QA 60
        ("lveval", "hotpotwikiqa_mixup", 0.3),                              # multi-hop QA 30
        ("lveval", "loogle_SD_mixup", 0.0, "cfi"), ("lveval", "cmrc_mixup", 0.0, "kpr"),  # the ablation's rows
    ], metric="lveval", length="16k")
    result = benchmark_table(scores, instances, CATALOG, "m")
    overall = cell(result.table, level="overall")
    assert overall["score"] == pytest.approx((90 + 30 + 30) / 3) and overall["n"] == 3  # not (60+30)/2
    assert cell(result.table, level="task", task="loogle_SD_mixup")["score"] == pytest.approx(90.0)
    assert result.variant_rows == 2


def test_loong_overall_weighs_every_instance_the_same():
    instances = instances_of([("a", "loong", "spotlight_locating"), ("b", "loong", "spotlight_locating"),
                              ("c", "loong", "comparison")])
    judge = verdicts([("a", 100), ("b", 100), ("c", 0)])
    table = benchmark_table(NO_SCORES, instances, CATALOG, "m", judge).table
    overall = cell(table, level="overall", metric="judge:loong", length="set1")
    assert overall["score"] == pytest.approx(200 / 3)  # micro; the mean of tasks is 50
    # Loong's task file: the judge is the headline (source: judge), not its first declared metric
    assert cell(table, level="task", task="spotlight_locating", metric="judge:loong", length="set1")["score"] == 100


def test_only_the_first_declared_metric_of_a_task_is_its_headline():
    scores, instances = frames([("qa", "single_hop_qa", 1.0)], metric="subem")
    scores = pl.concat([scores, scores.with_columns(metric=pl.lit("f1"), score=pl.lit(0.25))])
    table = benchmark_table(scores, instances, CATALOG, "m").table
    assert table.filter(pl.col("level") == "task").select("metric", "score").rows() == [("subem", 100.0)]


MY_TASKS = textwrap.dedent("""\
    benchmark: mine
    headline: {overall: mean_of_groups}
    defaults: {truncation: end_of_context, builder: {name: qa.assemble}}
    tasks:
      - {name: heavy, category: g, metrics: [subem], aggregation: {group: g, weight: 3}}
      - {name: light, category: g, metrics: [subem], aggregation: {group: g, weight: 1}}
      - {name: other, category: h, metrics: [subem], aggregation: {group: h}}
      - {name: judged, category: h, metrics: [], rubric: loong, aggregation: {group: h}}
    """)


@pytest.fixture
def my_catalog(tmp_path):
    (tmp_path / "mine.yaml").write_text(MY_TASKS)
    return load_catalog([tmp_path / "mine.yaml"])


def test_a_groups_mean_weighs_its_tasks_by_their_weight(my_catalog):
    scores, instances = frames([("mine", "heavy", 1.0), ("mine", "light", 0.0), ("mine", "other", 0.5)], "subem")
    table = benchmark_table(scores, instances, my_catalog, "m").table
    assert cell(table, level="group", category="g")["score"] == pytest.approx(75.0)  # (3*100 + 1*0) / 4
    assert cell(table, level="overall")["score"] == pytest.approx((75 + 50) / 2)


def test_a_judged_task_whose_judge_has_not_run_is_reported_not_dropped(my_catalog):
    scores, instances = frames([("mine", "other", 0.5)], "subem")
    instances = pl.concat([instances, pl.DataFrame({
        "instance_id": ["j1", "j2"], "benchmark": "mine", "task": "judged", "variant": "plain", "length": "4k"})])
    result = benchmark_table(scores, instances, my_catalog, "m")
    assert result.unjudged == {"mine/judged": 2}
    judged = cell(result.table, level="task", task="judged")
    assert (judged["score"], judged["n"], judged["metric"]) == (None, 0, "judge:loong")  # its rubric never stands in
    group = cell(result.table, level="group", category="h")
    assert (group["score"], group["n"], group["missing_groups"]) == (None, 1, ["judged"])  # not "other" alone


def test_instances_of_a_task_with_no_headline_score_are_counted_as_unscored():
    scores, instances = frames([("helmet", "rag", 1.0), ("helmet", "json_kv", 0.0), ("helmet", "summ", 0.0)],
                               metric="helmet")
    result = benchmark_table(scores.head(1), instances, CATALOG, "m")
    assert result.unscored == {"helmet/json_kv": 1}
    assert result.unjudged == {"helmet/summ": 1}  # HELMET's summarization is the judge's (helmet.md §4.2)


def test_lengths_are_rows_of_their_own_in_size_order():
    s16, i16 = frames([("lveval", "cmrc_mixup", 1.0)], "lveval", length="16k")
    s4, i4 = frames([("lveval", "cmrc_mixup", 0.0)], "lveval", length="4k")
    i4 = i4.with_columns(instance_id=pl.lit("j0"))
    s4 = s4.with_columns(instance_id=pl.lit("j0"))
    table = benchmark_table(pl.concat([s16, s4]), pl.concat([i16, i4]), CATALOG, "m").table
    overall = table.filter(pl.col("level") == "overall")
    assert overall.select("length", "score").rows() == [("4k", 0.0), ("16k", 100.0)]


def test_a_score_whose_instance_is_missing_is_an_error_naming_it():
    scores, instances = frames([("helmet", "rag", 1.0)], "helmet")
    with pytest.raises(ValueError, match="instance_id 'i0'"):
        benchmark_table(scores, instances.head(0), CATALOG, "m")


def test_no_scores_give_an_empty_table_with_the_schemas_columns():
    scores, instances = frames([("helmet", "rag", 1.0)], "helmet")
    table = benchmark_table(scores.head(0), instances, CATALOG, "m").table
    assert table.is_empty() and table.drop("model").schema == schemas.BENCHMARK_SCORES


# --------------------------------------------------------------------------- judge-scored cells

JUDGED_TASKS = textwrap.dedent("""\
    benchmark: judged
    headline: {overall: mean_of_instances, source: judge}
    defaults: {truncation: drop_documents, builder: {name: qa.assemble}, metrics: [subem], rubric: loong}
    tasks:
      - {name: spot, category: s, aggregation: {group: Spot}}
      - {name: chain, category: c, aggregation: {group: Chain}}
    """)
MIXED_TASKS = textwrap.dedent("""\
    benchmark: mixed
    headline: {overall: mean_of_groups}
    defaults: {truncation: end_of_context, builder: {name: qa.assemble}}
    tasks:
      - {name: recall, category: r, metrics: [subem], aggregation: {group: Recall}}
      - {name: qa, category: q, metrics: [subem], rubric: helmet_longqa, aggregation: {group: QA}}
      - {name: summ, category: q, metrics: [], rubric: helmet_summ, aggregation: {group: QA}}
    """)


@pytest.fixture
def judged_catalog(tmp_path):
    (tmp_path / "judged.yaml").write_text(JUDGED_TASKS)
    (tmp_path / "mixed.yaml").write_text(MIXED_TASKS)
    return load_catalog([tmp_path / "judged.yaml", tmp_path / "mixed.yaml"])


def verdicts(rows: list[tuple], rubric: str = "loong") -> pl.DataFrame:
    """judge_scores rows (instance_id, value on the rubric's scale or None when unparsed) of a 1-100 rubric."""
    return pl.DataFrame({
        "instance_id": [r[0] for r in rows], "rubric": rubric,
        "value": [r[1] for r in rows], "score": [None if r[1] is None else r[1] / 100 for r in rows],
        "parse_status": ["no_score" if r[1] is None else "ok" for r in rows],
        "perfect": [None if r[1] is None else r[1] == 100 for r in rows]},
        schema_overrides={"value": pl.Float64, "score": pl.Float64, "perfect": pl.Boolean})


def instances_of(rows: list[tuple], length: str = "set1") -> pl.DataFrame:
    """instances (instance_id, benchmark, task[, record_fields]) at one length."""
    return pl.DataFrame({
        "instance_id": [r[0] for r in rows], "benchmark": [r[1] for r in rows], "task": [r[2] for r in rows],
        "variant": "plain", "length": length,
        "record_fields": [r[3] if len(r) > 3 else "{}" for r in rows]})


NO_SCORES = pl.DataFrame(schema={"instance_id": pl.String, "metric": pl.String, "score": pl.Float64})


def test_a_judge_headline_takes_loongs_three_numbers_per_cell_from_the_verdicts(judged_catalog):
    instances = instances_of([("a", "judged", "spot"), ("b", "judged", "spot"), ("c", "judged", "spot"),
                              ("d", "judged", "chain"), ("e", "judged", "chain")])
    judge = verdicts([("a", 100), ("b", 40), ("c", None), ("d", 100), ("e", 70)])
    subem = pl.DataFrame({"instance_id": list("abcde"), "metric": "subem", "score": 0.0})  # not the headline here
    result = benchmark_table(subem, instances, judged_catalog, "m", judge)
    table = result.table
    spot = {r["metric"]: r for r in table.filter(pl.col("task") == "spot").to_dicts()}
    assert set(spot) == {"judge:loong", "perfect_rate", "scoring_success"}
    assert spot["judge:loong"]["score"] == pytest.approx(70.0) and spot["judge:loong"]["n"] == 2  # (100+40)/2
    assert spot["perfect_rate"]["score"] == pytest.approx(0.5) and spot["perfect_rate"]["n"] == 2
    assert spot["scoring_success"]["score"] == pytest.approx(2 / 3) and spot["scoring_success"]["n"] == 3
    overall = {r["metric"]: r for r in table.filter(pl.col("level") == "overall").to_dicts()}
    assert overall["judge:loong"]["score"] == pytest.approx((100 + 40 + 100 + 70) / 4)  # micro over the ok verdicts
    assert overall["perfect_rate"]["score"] == pytest.approx(2 / 4)
    assert overall["scoring_success"]["score"] == pytest.approx(4 / 5) and overall["scoring_success"]["n"] == 5
    assert cell(table, level="group", category="Chain", metric="judge:loong")["score"] == pytest.approx(85.0)
    assert set(table["length"]) == {"set1"} and result.unjudged == {} and result.unscored == {}


def test_judge_and_metric_cells_mix_in_one_table_and_the_rates_count_only_judged_instances(judged_catalog):
    instances = instances_of([("r1", "mixed", "recall"), ("q1", "mixed", "qa"), ("s1", "mixed", "summ"),
                              ("s2", "mixed", "summ")], length="8k")
    scores = pl.DataFrame({"instance_id": ["r1", "q1"], "metric": "subem", "score": [1.0, 0.0]})
    judge = verdicts([("s1", 60), ("s2", None)], rubric="helmet_summ").with_columns(perfect=pl.lit(None, pl.Boolean))
    table = benchmark_table(scores, instances, judged_catalog, "m", judge).table
    # source metric (the default): qa keeps its metric; summ has no metric, so its rubric scores it
    assert cell(table, level="task", task="qa")["metric"] == "subem"
    assert cell(table, level="task", task="summ", metric="judge:helmet_summ")["score"] == pytest.approx(60.0)
    qa_group = cell(table, level="group", category="QA", metric="judge:helmet_summ+subem")
    assert qa_group["score"] == pytest.approx((0 + 60) / 2) and qa_group["n"] == 2
    assert cell(table, level="overall", metric="judge:helmet_summ+subem")["score"] == pytest.approx((100 + 30) / 2)
    success = cell(table, level="overall", metric="scoring_success")
    assert (success["score"], success["n"]) == (0.5, 2)  # the judged instances only
    assert table.filter(pl.col("metric") == "perfect_rate").is_empty()  # helmet_summ marks no top score


def test_a_judged_task_without_verdicts_is_counted_and_its_metric_never_stands_in(judged_catalog):
    instances = instances_of([("a", "judged", "spot"), ("b", "judged", "chain")])
    subem = pl.DataFrame({"instance_id": ["a", "b"], "metric": "subem", "score": 1.0})
    result = benchmark_table(subem, instances, judged_catalog, "m", verdicts([("a", 80)]))
    assert result.unjudged == {"judged/chain": 1}
    scored = result.table.filter(pl.col("level") == "task", pl.col("score").is_not_null())
    assert scored["task"].unique().to_list() == ["spot"]
    assert cell(result.table, level="task", task="chain")["score"] is None  # its subem never stands in
    overall = cell(result.table, level="overall", length="set1", metric="judge:loong")
    assert (overall["score"], overall["missing_groups"]) == (None, ["chain"])
    assert benchmark_table(subem, instances, judged_catalog, "m").unjudged == {"judged/chain": 1, "judged/spot": 1}


def test_verdicts_on_metric_scored_tasks_and_other_variants_are_ignored(judged_catalog):
    instances = instances_of([("r1", "mixed", "recall"), ("q1", "mixed", "qa")]).vstack(
        instances_of([("q2", "mixed", "qa")]).with_columns(variant=pl.lit("cfi")))
    scores = pl.DataFrame({"instance_id": ["r1", "q1"], "metric": "subem", "score": [1.0, 1.0]})
    table = benchmark_table(scores, instances, judged_catalog, "m",
                            verdicts([("q1", 10), ("q2", 10)], rubric="helmet_longqa")).table
    assert set(table["metric"]) == {"subem"}


def test_a_verdict_whose_instance_is_missing_or_twice_judged_is_an_error_naming_it(judged_catalog):
    instances = instances_of([("a", "judged", "spot")])
    with pytest.raises(ValueError, match="judge_scores rows have no instance .*'zz'"):
        benchmark_table(NO_SCORES, instances, judged_catalog, "m", verdicts([("a", 50), ("zz", 50)]))
    with pytest.raises(ValueError, match="instance 'a' has 2 judge verdicts"):
        benchmark_table(NO_SCORES, instances, judged_catalog, "m", verdicts([("a", 50), ("a", 60)]))


def test_the_packaged_benchmarks_judge_only_where_a_task_has_no_metric_unless_the_headline_says_judge():
    from lc_pipeline.score.benchmark_scores import score_source
    from lc_pipeline.tasks.spec import Headline

    longqa = CATALOG.resolve("helmet", "longqa")
    assert score_source(longqa, Headline()) == "metric"
    assert score_source(longqa, Headline(source="judge")) == "judge"
    assert score_source(CATALOG.resolve("helmet", "rag"), Headline(source="judge")) == "metric"  # no rubric


# --------------------------------------------------------------------------- breakdown by record fields

V2_TASKS = textwrap.dedent("""\
    benchmark: v2
    headline: {overall: mean_of_instances, breakdown: [difficulty, length]}
    defaults: {truncation: middle, builder: {name: qa.assemble}, metrics: [longbench_v2.choice]}
    tasks:
      - {name: direct, category: mc, aggregation: {group: LongBench v2}}
    """)


def test_a_headline_breakdown_gives_the_overall_per_record_field_value(tmp_path):
    (tmp_path / "v2.yaml").write_text(V2_TASKS)
    catalog = load_catalog([tmp_path / "v2.yaml"])
    records = [("easy", "short", 1.0), ("easy", "long", 1.0), ("hard", "short", 0.0), ("hard", "medium", 1.0),
               ("hard", "long", 0.0)]
    instances = instances_of([(f"r{k}", "v2", "direct", json.dumps({"difficulty": d, "length": n, "domain": "x"}))
                              for k, (d, n, _) in enumerate(records)], length="all")
    label = METRICS.get("longbench_v2.choice").label
    scores = pl.DataFrame({"instance_id": [f"r{k}" for k in range(len(records))], "metric": label,
                           "score": [s for *_, s in records]})
    result = benchmark_table(scores, instances, catalog, "m")
    rows = result.table.filter(pl.col("level") == "breakdown")
    assert dict(rows.select("category", "score").rows()) == pytest.approx({
        "difficulty=easy": 100.0, "difficulty=hard": 100 / 3,
        "length=long": 50.0, "length=medium": 100.0, "length=short": 50.0})
    assert cell(rows, category="difficulty=hard")["n"] == 3
    assert set(rows["metric"]) == {label} and set(rows["length"]) == {"all"} and rows["task"].is_null().all()
    assert cell(result.table, level="overall")["score"] == pytest.approx(60.0)
    assert result.breakdown_missing == {}


def test_records_without_a_breakdown_field_are_counted_not_given_a_row(tmp_path):
    (tmp_path / "v2.yaml").write_text(V2_TASKS)
    catalog = load_catalog([tmp_path / "v2.yaml"])
    instances = instances_of([("a", "v2", "direct", '{"difficulty": "easy"}'), ("b", "v2", "direct", "{}")])
    scores = pl.DataFrame({"instance_id": ["a", "b"], "metric": METRICS.get("longbench_v2.choice").label,
                           "score": [1.0, 0.0]})
    result = benchmark_table(scores, instances, catalog, "m")
    assert result.breakdown_missing == {"v2/difficulty": 1, "v2/length": 2}
    assert result.table.filter(pl.col("level") == "breakdown")["category"].to_list() == ["difficulty=easy"]


def test_a_breakdown_under_mean_of_groups_averages_the_groups_of_that_value(tmp_path):
    (tmp_path / "g.yaml").write_text(textwrap.dedent("""\
        benchmark: g
        headline: {overall: mean_of_groups, breakdown: [lang]}
        defaults: {truncation: middle, builder: {name: qa.assemble}, metrics: [subem]}
        tasks:
          - {name: a, category: x, aggregation: {group: X}}
          - {name: b, category: y, aggregation: {group: Y}}
        """))
    catalog = load_catalog([tmp_path / "g.yaml"])
    instances = instances_of([("1", "g", "a", '{"lang": "en"}'), ("2", "g", "a", '{"lang": "en"}'),
                              ("3", "g", "b", '{"lang": "en"}'), ("4", "g", "b", '{"lang": "zh"}')])
    scores = pl.DataFrame({"instance_id": list("1234"), "metric": "subem", "score": [1.0, 1.0, 0.0, 1.0]})
    table = benchmark_table(scores, instances, catalog, "m").table
    assert cell(table, level="breakdown", category="lang=en")["score"] == pytest.approx((100 + 0) / 2)
    assert cell(table, level="breakdown", category="lang=zh")["score"] == pytest.approx(100.0)


# --------------------------------------------------------------------------- as `lcp report` shows them

def test_the_report_shows_loongs_three_numbers_and_the_breakdown_rows_in_their_places(judged_catalog, tmp_path):
    from lc_pipeline.commands.report import benchmark_pivots

    instances = instances_of([("a", "judged", "spot"), ("b", "judged", "spot"), ("d", "judged", "chain")])
    loong = benchmark_table(NO_SCORES, instances, judged_catalog, "m",
                            verdicts([("a", 100), ("b", None), ("d", 50)])).table
    [(benchmark, table, aggregation, pivot)] = benchmark_pivots(loong)
    assert (benchmark, table, aggregation) == ("judged", "all", "mean_of_instances")
    assert pivot.columns == ["level", "group", "task", "number", "m / set1"]
    assert pivot.rows() == [
        ("task", "Chain", "chain", "score", "50.00"), ("task", "Chain", "chain", "perfect_rate", "0.00"),
        ("task", "Chain", "chain", "scoring_success", "1.00"),
        ("group", "Chain", "", "score", "50.00"), ("group", "Chain", "", "perfect_rate", "0.00"),
        ("group", "Chain", "", "scoring_success", "1.00"),
        ("task", "Spot", "spot", "score", "100.00"), ("task", "Spot", "spot", "perfect_rate", "1.00"),
        ("task", "Spot", "spot", "scoring_success", "0.50"),
        ("group", "Spot", "", "score", "100.00"), ("group", "Spot", "", "perfect_rate", "1.00"),
        ("group", "Spot", "", "scoring_success", "0.50"),
        ("overall", "", "", "score", "75.00"), ("overall", "", "", "perfect_rate", "0.50"),
        ("overall", "", "", "scoring_success", "0.67"),
        ("n", "", "", "score", "2")]

    (tmp_path / "v2.yaml").write_text(V2_TASKS)
    v2 = benchmark_table(
        pl.DataFrame({"instance_id": ["x", "y"], "metric": METRICS.get("longbench_v2.choice").label,
                      "score": [1.0, 0.0]}),
        instances_of([("x", "v2", "direct", '{"difficulty": "hard", "length": "long"}'),
                      ("y", "v2", "direct", '{"difficulty": "easy", "length": "long"}')], length="all"),
        load_catalog([tmp_path / "v2.yaml"]), "m").table
    [(_, _, _, pivot)] = benchmark_pivots(v2)
    assert pivot.columns == ["level", "group", "task", "m / all"]  # no judge rates: no number column
    assert pivot.select("level", "group", "m / all").rows()[-5:] == [
        ("overall", "", "50.00"), ("n", "", "2"), ("breakdown", "difficulty=easy", "0.00"),
        ("breakdown", "difficulty=hard", "100.00"), ("breakdown", "length=long", "50.00")]


def test_a_task_scored_by_the_mean_of_its_metrics_counts_an_instance_once_it_has_all_and_shows_each(tmp_path):
    """HELMET's Cite (helmet.md §6): per dataset the mean of correctness, citation recall and citation precision;
    each number is also a ``component`` row, and an instance missing one of them is reported unscored."""
    task_file = tmp_path / "mine.yaml"
    task_file.write_text(textwrap.dedent("""\
        benchmark: mine
        headline: {overall: mean_of_groups}
        tasks:
          - name: cite_like
            category: Cite
            builder: {name: helmet, options: {kind: rag}}
            prompt: "{context} {question}"
            truncation: end_of_context
            metrics: [subem, em, f1]
            aggregation: {group: Cite, score: mean_of_metrics}
        """))
    catalog = load_catalog([task_file])
    instances = pl.DataFrame({"instance_id": ["a", "b", "c"], "benchmark": "mine", "task": "cite_like",
                              "length": "8k"})
    scores = pl.DataFrame({"instance_id": ["a", "a", "a", "b", "b", "b", "c", "c"],
                           "metric": ["subem", "em", "f1"] * 2 + ["subem", "em"],
                           "score": [1.0, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0]})
    result = benchmark_table(scores, instances, catalog, "m")
    task = cell(result.table, level="task", task="cite_like")
    assert task["metric"] == "subem+em+f1" and task["n"] == 2
    assert task["score"] == pytest.approx(100 * (0.5 + 1.0) / 2)  # a: mean(1, 0, .5); b: 1; c lacks f1
    assert result.unscored == {"mine/cite_like": 1}
    parts = {r["metric"]: (r["score"], r["n"]) for r in result.table.filter(pl.col("level") == "component").to_dicts()}
    assert parts == {"subem": (pytest.approx(100.0), 3), "em": (pytest.approx(100 * 2 / 3), 3),
                     "f1": (pytest.approx(75.0), 2)}
    assert cell(result.table, level="overall")["score"] == pytest.approx(75.0)

    from lc_pipeline.commands.report import benchmark_pivots

    [(_, _, _, pivot)] = benchmark_pivots(result.table)
    assert pivot.select("level", "task", "m / 8k").rows() == [
        ("task", "cite_like", "75.00"), ("component", "cite_like / em", "66.67"),
        ("component", "cite_like / f1", "75.00"), ("component", "cite_like / subem", "100.00"),
        ("group", "", "75.00"), ("overall", "", "75.00"), ("n", "", "2")]


def test_instances_of_two_protocols_get_rows_of_their_own_never_averaged_together():
    scores, instances = frames([("lveval", "cmrc_mixup", 1.0), ("lveval", "cmrc_mixup", 0.0),
                                ("lveval", "hotpotwikiqa_mixup", 0.5), ("lveval", "hotpotwikiqa_mixup", 0.5)],
                               metric="lveval", length="16k")
    instances = instances.with_columns(protocol=pl.Series(["ours", "official@25aebcb", "ours", "official@25aebcb"]))
    table = benchmark_table(scores, instances, CATALOG, "m").table
    overall = {r["protocol"]: r["score"] for r in table.filter(pl.col("level") == "overall").to_dicts()}
    assert overall == {"ours": pytest.approx(75.0), "official@25aebcb": pytest.approx(25.0)}  # not 50 pooled
    assert cell(table, level="task", task="cmrc_mixup", protocol="ours")["n"] == 1
    no_column = benchmark_table(scores, instances.drop("protocol"), CATALOG, "m").table
    assert set(no_column["protocol"]) == {"ours"} and cell(no_column, level="overall")["score"] == 50.0
