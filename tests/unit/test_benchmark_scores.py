"""Each benchmark's table is aggregated as its paper reports it, from the task files' aggregation:
LongBench's category and Avg per table (English and Chinese apart, code in both), HELMET's mean of
categories, LV-Eval's mean of tasks, Loong's mean of instances, a group's weights; LV-Eval variants do
not count, and a task without metrics is reported, not dropped (score/benchmark_scores.py)."""

from __future__ import annotations

import textwrap

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.score.benchmark_scores import COLUMNS, benchmark_table
from lc_pipeline.tasks.catalog import load_catalog

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


def test_longbench_categories_and_avg_are_computed_per_table_with_code_in_both():
    scores, instances = frames([
        ("longbench", "narrativeqa", 0.5), ("longbench", "narrativeqa", 0.7),  # task 60
        ("longbench", "qasper", 0.2),                                           # task 20 -> Single-Doc QA 40
        ("longbench", "multifieldqa_zh", 0.3),                                  # zh Single-Doc QA 30
        ("longbench", "lcc", 0.9), ("longbench", "lcc", 0.5),                   # Code Completion 70, both tables
    ], metric="longbench")
    result = benchmark_table(scores, instances, CATALOG, "m")
    table = result.table
    assert table.columns == list(COLUMNS) and set(table["model"]) == {"m"}
    assert cell(table, table="en", level="task", task="narrativeqa")["score"] == pytest.approx(60.0)
    assert cell(table, table="en", level="group", category="Single-Doc QA")["score"] == pytest.approx(40.0)
    assert cell(table, table="zh", level="group", category="Single-Doc QA")["score"] == pytest.approx(30.0)
    for lang in ("en", "zh"):
        assert cell(table, table=lang, level="group", category="Code Completion")["score"] == pytest.approx(70.0)
    en, zh = cell(table, table="en", level="overall"), cell(table, table="zh", level="overall")
    assert en["score"] == pytest.approx((40 + 70) / 2) and en["n"] == 5  # the mean of categories, not of tasks (50)
    assert zh["score"] == pytest.approx((30 + 70) / 2) and zh["n"] == 3
    assert (en["metric"], en["aggregation"], en["length"]) == ("longbench", "mean_of_groups", "4k")
    assert table.filter(pl.col("table") == "zh", pl.col("level") == "task")["task"].sort().to_list() == [
        "lcc", "multifieldqa_zh"]
    assert result.judge_only == {} and result.variant_rows == 0 and result.unscored == {}


def test_helmet_average_is_the_mean_of_its_categories():
    scores, instances = frames([
        ("helmet", "rag", 0.4), ("helmet", "rag_multi", 0.8),  # RAG 60
        ("helmet", "rerank", 0.3),                             # Re-rank 30
        ("helmet", "json_kv", 1.0),                            # Synthetic recall 100
    ], metric="helmet")
    table = benchmark_table(scores, instances, CATALOG, "m").table
    assert set(table["table"]) == {"all"}
    assert cell(table, level="group", category="RAG")["score"] == pytest.approx(60.0)
    assert cell(table, level="overall")["score"] == pytest.approx((60 + 30 + 100) / 3)  # not (40+80+30+100)/4


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
    scores, instances = frames([
        ("loong", "spotlight_locating", 1.0), ("loong", "spotlight_locating", 1.0), ("loong", "comparison", 0.0),
    ], metric="subem")
    table = benchmark_table(scores, instances, CATALOG, "m").table
    assert cell(table, level="overall")["score"] == pytest.approx(200 / 3)  # micro; the mean of tasks is 50
    assert cell(table, level="task", task="spotlight_locating")["metric"] == "subem"  # its first declared metric


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


def test_a_task_without_metrics_is_reported_not_dropped(my_catalog):
    scores, instances = frames([("mine", "other", 0.5)], "subem")
    instances = pl.concat([instances, pl.DataFrame({
        "instance_id": ["j1", "j2"], "benchmark": "mine", "task": "judged", "variant": "plain", "length": "4k"})])
    result = benchmark_table(scores, instances, my_catalog, "m")
    assert result.judge_only == {"mine/judged": 2}
    assert "judged" not in result.table["task"].to_list()
    assert cell(result.table, level="group", category="h")["n"] == 1


def test_instances_of_a_task_with_no_headline_score_are_counted_as_unscored():
    scores, instances = frames([("helmet", "rag", 1.0), ("helmet", "summ", 0.0)], metric="helmet")
    result = benchmark_table(scores.head(1), instances, CATALOG, "m")
    assert result.unscored == {"helmet/summ": 1}


def test_lengths_are_rows_of_their_own_in_size_order():
    s16, i16 = frames([("helmet", "rag", 1.0)], "helmet", length="16k")
    s4, i4 = frames([("helmet", "rag", 0.0)], "helmet", length="4k")
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
