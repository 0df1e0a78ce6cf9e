"""metric_scores: every generation scored with the metrics its task declares (score/metric_scores.py)."""

from __future__ import annotations

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.score.metric_scores import score_frame, score_id

# ---------------------------------------------------------------------------------------------
# score_frame -> METRIC_SCORES
# ---------------------------------------------------------------------------------------------


def _instances() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "instance_id": ["i1", "i2"],
            "item_id": ["item-a", "item-b"],
            "suite": ["qa", "qa"],
            "benchmark": ["qa", "qa"],
            "task": ["single_hop_qa", "multi_hop_qa"],
            "category": ["single-doc QA", "multi-doc QA"],
            "depth": [0.0, 0.5],
            "answers": [["Paris"], ["Barack Obama", "Obama"]],
        }
    )


def _generations() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "generation_id": ["g1", "g2"],
            "instance_id": ["i1", "i2"],
            "output": ["Answer: Paris\nbecause", "It was Barack Obama's"],
            "model": ["m", "m"],  # a partition column: ignored
        }
    )


def test_score_frame_one_row_per_generation_and_metric():
    df = score_frame(_generations(), _instances())
    assert df.schema == schemas.METRIC_SCORES
    assert df.height == 2 * 3
    got = {(r["generation_id"], r["metric"]): r["score"] for r in df.iter_rows(named=True)}
    assert got[("g1", "em")] == 1.0  # from the parsed output
    assert got[("g2", "subem")] == 1.0
    assert got[("g2", "em")] == 0.0
    # "It was Barack Obama's" -> tokens {it, was, barack, obamas}; best gold "Barack Obama": P=1/4, R=1/2.
    assert got[("g2", "f1")] == pytest.approx(1 / 3)
    row = df.filter(pl.col("generation_id") == "g2").row(0, named=True)
    assert (row["item_id"], row["task"], row["category"]) == ("item-b", "multi_hop_qa", "multi-doc QA")
    assert row["depth"] == 0.5


def test_score_ids_are_stable_and_distinct():
    df = score_frame(_generations(), _instances())
    assert df.get_column("score_id").n_unique() == df.height
    assert df.row(0, named=True)["score_id"] == score_id("g1", "subem")
    assert score_id("g1", "subem") == score_id("g1", "subem")
    assert len(score_id("g1", "subem")) == 16


def test_score_frame_names_the_generation_with_an_unknown_instance():
    gens = _generations().with_columns(pl.Series("instance_id", ["i1", "missing"]))
    with pytest.raises(ValueError, match=r"g2.*instance_id.*missing"):
        score_frame(gens, _instances())


def test_score_frame_scores_each_task_with_the_metrics_its_task_file_declares():
    # A 100-LongBench passage-count instance beside a QA one: it gets one "lb100" row (first
    # line, first integer == gold), the QA instance its three metrics.
    inst = pl.concat([
        _instances().head(1),
        pl.DataFrame({"instance_id": ["i3"], "item_id": ["lb-1"], "suite": ["longbench100"],
                      "benchmark": ["longbench100"], "task": ["passage_count"],
                      "category": ["Information Retrieval"], "depth": [0.0], "answers": [["12"]]}),
    ])
    gens = pl.DataFrame({"generation_id": ["g1", "g3"], "instance_id": ["i1", "i3"],
                         "output": ["Paris", "\nThere are 12 unique paragraphs.\n13"]})
    df = score_frame(gens, inst)
    assert sorted(df.filter(pl.col("generation_id") == "g1")["metric"]) == ["em", "f1", "subem"]
    lb = df.filter(pl.col("generation_id") == "g3")
    assert lb.select("metric", "score").rows() == [("lb100", 1.0)]
    bad = inst.with_columns(pl.Series("benchmark", ["qa", "helmet?"]))
    with pytest.raises(ValueError, match=r"i3.*task 'passage_count' of benchmark 'helmet\?' is not declared"):
        score_frame(gens, bad)


def test_score_frame_of_no_generations_is_an_empty_table():
    df = score_frame(_generations().head(0), _instances())
    assert df.height == 0 and df.schema == schemas.METRIC_SCORES
