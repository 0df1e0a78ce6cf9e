"""The LV-Eval pieces of the pipeline that need no corpus: the ``lveval`` config section, the
``lveval`` metric rows of score_frame (which instances get them, code vs paper variant), and the
ablation table built from one model's scores."""

from __future__ import annotations

import polars as pl
import pytest
import yaml

from lc_pipeline import schemas
from lc_pipeline.benchmarks.lveval.ablation import ablation_frame
from lc_pipeline.config import ConfigError, load_config
from lc_pipeline.score.metric_scores import score_frame

BASE = {"name": "t", "sources": [{"name": "demo"}], "lengths": ["1k"], "base_lengths": ["1k"], "long_lengths": ["1k"]}


def write(tmp_path, **lveval) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**BASE, "lveval": lveval}))
    return str(path)


def test_the_lveval_section(tmp_path):
    demo = load_config("lveval-demo").lveval
    assert demo.variants == ("plain", "cfi", "kpr", "cfi_kpr") and demo.wants_cfi and demo.wants_kpr
    assert demo.fact_generator == "knowledge_base" and demo.metric_variant == "code"
    assert load_config("demo").lveval.variants == ("plain",)  # off unless asked for

    (tmp_path / "rules.csv").write_text("item_id,old,new\nq1,Rilos,Bravik\n")
    cfg = load_config(write(tmp_path, variants=["plain", "kpr"], rules_file="rules.csv", auto_rules=False))
    assert cfg.lveval.rules_file == str(tmp_path / "rules.csv")  # relative to the config file
    before = cfg.fingerprint("lveval")
    (tmp_path / "rules.csv").write_text("item_id,old,new\nq1,Rilos,Dravik\n")
    assert load_config(cfg_path := write(tmp_path, variants=["plain", "kpr"], rules_file="rules.csv",
                                         auto_rules=False)).fingerprint("lveval") != before  # edited rules re-run
    assert load_config(cfg_path).lveval.rules_file_sha256


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"variants": ["cfi"]}, "including 'plain'"),
        ({"variants": ["plain", "cfi+kpr"]}, "expected distinct values"),
        ({"variants": ["plain", "kpr"], "auto_rules": False}, "KPR variants need rules"),
        ({"rules_file": "missing.csv"}, "does not exist"),
        ({"metric_variant": "released"}, "metric_variant"),
        ({"n_facts": 0}, ">= 1"),
        ({"rules_file_sha256": "x"}, "rules_file_sha256"),
    ],
)
def test_a_bad_lveval_section_is_refused(tmp_path, section, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, **section))


def _instances() -> pl.DataFrame:
    row = {"suite": "qa", "benchmark": "qa", "category": "single-doc QA", "depth": 0.0, "language": "en",
           "task": "single_hop_qa"}
    return pl.DataFrame([
        {**row, "instance_id": "a-plain", "item_id": "a", "variant": "plain", "answers": ["Lytoford Abbey"],
         "answer_keywords": ["Lytoford Abbey Kessary"]},
        {**row, "instance_id": "a-kpr", "item_id": "a", "variant": "kpr", "answers": ["Morvane Abbey"],
         "answer_keywords": ["Morvane Abbey Kessary"]},
        {**row, "instance_id": "b-plain", "item_id": "b", "variant": "plain", "answers": ["Paris"],
         "answer_keywords": []},
        {**row, "instance_id": "c-plain", "item_id": "c", "variant": "plain", "answers": ["Ostik"],
         "answer_keywords": [], "benchmark": "lveval", "task": "factrecall_en"},
    ])


def test_lveval_metric_rows_for_items_with_variants_and_lveval_datasets():
    gens = pl.DataFrame({"generation_id": ["g1", "g2", "g3", "g4"],
                         "instance_id": ["a-plain", "a-kpr", "b-plain", "c-plain"],
                         "output": ["Lytoford", "Morvane", "Paris", "It was Ostik"]})
    code = score_frame(gens, _instances()).filter(pl.col("metric") == "lveval")
    # item a (has a KPR row): both of its rows; item b (plain only): none; factrecall_en: plain F1.
    assert code["instance_id"].to_list() == ["a-plain", "a-kpr", "c-plain"]
    got = dict(code.select("instance_id", "score").iter_rows())
    # Keyword recall 1/3 (Lytoford of lytoford/abbey/kessary) passes the code's 0.2 gate; F1 with
    # "Lytoford Abbey" is 2/3. The paper's gate is 0.4: the same answer scores 0 there.
    assert got["a-plain"] == pytest.approx(2 / 3) and got["a-kpr"] == pytest.approx(2 / 3)
    assert got["c-plain"] == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))  # F1 of {it, was, ostik} vs {ostik}
    paper = score_frame(gens, _instances(), metric_variant="paper").filter(pl.col("metric") == "lveval")
    assert dict(paper.select("instance_id", "score").iter_rows())["a-plain"] == 0.0


def test_ablation_per_level_and_variant_on_the_same_items():
    instances = pl.DataFrame({"instance_id": ["p1", "k1", "p2", "k2", "p3"],
                              "variant": ["plain", "kpr", "plain", "kpr", "plain"]})
    scores = pl.DataFrame({
        "instance_id": ["p1", "k1", "p2", "k2", "p3"],
        "item_id": ["i1", "i1", "i2", "i2", "i3"],  # i3 has no KPR row: left out of the comparison
        "task": ["single_hop_qa"] * 4 + ["multi_hop_qa"],
        "metric": ["lveval"] * 5,
        "score": [1.0, 0.5, 0.5, 0.0, 1.0],
        "length": ["1k"] * 5,
    })
    out = ablation_frame(pl.concat([scores, scores.with_columns(metric=pl.lit("f1"))]), instances, "code")
    assert out.schema == schemas.TABLES["lveval_ablation"]
    level = {r["variant"]: r["score"] for r in out.filter(pl.col("task") == "all").iter_rows(named=True)}
    assert level == {"plain": 75.0, "kpr": 25.0}
    assert set(out["metric_variant"]) == {"code"} and out["n_instances"].max() == 2
    assert ablation_frame(scores.filter(pl.col("metric") == "f1"), instances, "code").is_empty()
