"""LV-Eval's variants through the pipeline: the packaged lveval-demo config (made smaller) built
from sources to instances in process, no model needed. Every plain QA instance comes with its
CFI, KPR and CFI+KPR rows; the facts sit where the rows say; no replaced term survives; no
fact gives the answer away (a model copying one scores 0); the same seed rebuilds the same files."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import dagster as dg
import polars as pl
import pytest
import yaml
from built_lakes import Template, copy_tree, instance_on_copy, shared
from conftest import settings_for

from lc_pipeline.config import PACKAGED_CONFIGS, load_config
from lc_pipeline.construct.replacement import (
    apply_rules,
    remaining_terms,
    rules_by_item,
)
from lc_pipeline.construct.variant_rows import without_insertions
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.runner import Runner
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.text import contains_answer

pytestmark = pytest.mark.slow  # materializes the upstream graph (passage embeddings)

LEVELS = ("1k", "2k")
BUILT = ["confusing_facts", "replacement_rules", "instances"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The smaller lveval-demo built once for the module, its Dagster instance in root/.dagster: read-only (tests
    copy it before they write), checked unchanged when the module ends."""
    root = tmp_path_factory.mktemp("lveval")
    raw = yaml.safe_load((PACKAGED_CONFIGS / "lveval-demo.yaml").read_text())
    # Smaller and faster: 60 entities (seed 6: both chosen items have sibling facts), 2 items x 2 depths.
    raw["sources"][0].update(n_entities=60, seed=6)
    raw.update(items_per_length=2, depths=[0.0, 1.0], retrieval_top_k=40, hard_negatives_per_item=20)
    cfg = root / "lveval.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    settings = settings_for(root, cfg, lake="data_lake")
    settings.dagster_home.mkdir()
    with dg.instance_for_test(temp_dir=str(settings.dagster_home)) as instance:
        Runner(build_pipeline(settings), instance, echo=lambda m: None).run(models=[])  # blocking checks passed
    template = Template(root)
    template.freeze()
    yield from shared(template)


@pytest.fixture(scope="module")
def lake(world):
    return world.root / "data_lake"


def table(lake, name: str, level: str | None = None) -> pl.DataFrame:
    return pl.read_parquet(lake / name / (f"length={level}" if level else "") / "data.parquet")


def test_every_plain_instance_has_its_cfi_kpr_and_cfi_kpr_rows(lake):
    assert load_config("lveval-demo").lveval.variants == ("plain", "cfi", "kpr", "cfi_kpr")
    for level in LEVELS:
        inst = table(lake, "instances", level)
        groups = inst.group_by("item_id", "depth").agg(pl.col("variant").sort())
        assert groups.height == 2 * 2  # items x depths
        assert all(v == ["cfi", "cfi_kpr", "kpr", "plain"] for v in groups["variant"].to_list())
        plain = inst.filter(pl.col("variant") == "plain")
        assert plain["insertions"].list.len().eq(0).all() and plain["replacement_rule_ids"].list.len().eq(0).all()
        assert inst["instance_id"].n_unique() == inst.height


def test_facts_sit_at_the_recorded_offsets(lake):
    facts = table(lake, "confusing_facts").filter(pl.col("accepted"))
    text = dict(facts.select("fact_id", "text").iter_rows())
    rules = rules_by_item(table(lake, "replacement_rules"))
    for level in LEVELS:
        inst = table(lake, "instances", level)
        plain = {(r["item_id"], r["depth"]): r for r in inst.filter(pl.col("variant") == "plain").iter_rows(named=True)}
        for row in inst.filter(pl.col("variant").str.starts_with("cfi")).iter_rows(named=True):
            assert len(row["insertions"]) == 2  # n_facts
            for ins in row["insertions"]:
                want = text[ins["fact_id"]]
                if row["variant"] == "cfi_kpr":  # the facts were rewritten with everything else
                    want = apply_rules({"fact": want}, rules[row["item_id"]])[0]["fact"]
                assert row["context"][ins["char_offset"]: ins["char_offset"] + ins["char_length"]] == want
            if row["variant"] == "cfi":  # taking the facts out gives the plain context back
                base = plain[(row["item_id"], row["depth"])]
                assert without_insertions(row["context"], row["insertions"], "en") == base["context"]
                assert row["input_tokens"] > base["input_tokens"]


def test_no_replaced_term_remains_after_kpr(lake):
    rules = rules_by_item(table(lake, "replacement_rules"))
    for level in LEVELS:
        inst = table(lake, "instances", level)
        for row in inst.filter(pl.col("variant").str.ends_with("kpr")).iter_rows(named=True):
            item_rules = rules[row["item_id"]]
            assert len(row["replacement_rule_ids"]) == len(item_rules) > 0
            fields = {k: row[k] for k in ("question", "answers", "answer_keywords", "context", "prompt")}
            assert remaining_terms(fields, item_rules) == []
            # the answer was renamed consistently: the new answer is in the rewritten context
            assert contains_answer(row["context"], row["answers"])


def test_facts_never_contain_the_answer_and_copying_one_scores_zero(lake):
    facts = table(lake, "confusing_facts")
    assert facts.filter(~pl.col("accepted"))["reason"].str.len_chars().gt(0).all()  # rejections say why
    inst = pl.concat([table(lake, "instances", lv) for lv in LEVELS])
    text = dict(facts.filter(pl.col("accepted")).select("fact_id", "text").iter_rows())
    cfi = inst.filter(pl.col("variant") == "cfi")
    for row in cfi.iter_rows(named=True):
        assert not any(contains_answer(text[i["fact_id"]], row["answers"]) for i in row["insertions"])
    # Score a model that copies the first confusing fact, and one that answers right.
    copying = cfi.select("instance_id", output=pl.col("insertions").list.first().struct.field("fact_id")
                         .replace_strict(text)).with_columns(generation_id=pl.col("instance_id") + "-copy")
    right = inst.select("instance_id", output=pl.col("answers").list.first(),
                        generation_id=pl.col("instance_id") + "-right")
    scores = score_frame(pl.concat([copying, right], how="diagonal"), inst).filter(pl.col("metric") == "lveval")
    assert scores.height == copying.height + right.height  # every variant, the plain rows too
    assert scores.filter(pl.col("generation_id").str.ends_with("-copy"))["score"].eq(0).all()
    assert scores.filter(pl.col("generation_id").str.ends_with("-right"))["score"].eq(1).all()


REBUILD = textwrap.dedent("""
    import sys
    import dagster as dg
    from lc_pipeline.definitions import build_pipeline
    from lc_pipeline.runner import Runner
    from lc_pipeline.settings import Settings
    from pathlib import Path

    root = Path(sys.argv[1])
    settings = Settings(project_dir=root, config=sys.argv[2], lake_dir=root / "data_lake",
                        models_file=root / "models.yaml", dagster_home=root / ".dagster")
    with dg.instance_for_test() as instance:
        runner = Runner(build_pipeline(settings), instance, echo=lambda m: None)
        runner.register_sources()
        runner.step("lveval", ["confusing_facts", "replacement_rules"])
        for level in sys.argv[3:]:
            runner.step(level, ["instances"], level, {"length": level})
""")


def test_same_seed_rebuilds_byte_identical_files(lake, tmp_path):
    # Another process (another hash seed) rebuilds facts, rules and instances from the same upstream tables.
    copy = copy_tree(lake, tmp_path / "data_lake")
    files = [p.relative_to(lake) for name in BUILT for p in sorted((lake / name).rglob("data.parquet"))]
    for f in files:
        (copy / f).unlink()
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", REBUILD, str(tmp_path), str(lake.parent / "lveval.yaml"), *LEVELS],
                   check=True, env=env, timeout=600, capture_output=True)
    assert len(files) == 2 + len(LEVELS)
    for f in files:
        assert (copy / f).read_bytes() == (lake / f).read_bytes(), f


def test_word_levels_and_factrecall_through_the_pipeline(tmp_path, world):
    """LV-Eval's own unit (``length_unit: words``, k = 1,000 words) with factrecall's needle at 3
    positions, variants included: the blocking checks (length in words, evidence, no replaced term
    left, facts at their offsets) pass and the rows say what unit they were built in. Built from a copy of the
    module's world (the same sources and retrieval settings: its sources, passages, index and hard negatives are
    reused)."""
    raw = yaml.safe_load((PACKAGED_CONFIGS / "lveval-demo.yaml").read_text())
    raw["sources"][0].update(n_entities=60, seed=6)
    raw.update(items_per_length=2, retrieval_top_k=40, hard_negatives_per_item=20, length_unit="words",
               lengths=["1k"], base_lengths=["1k"], long_lengths=["1k"])
    raw["lveval"].update(factrecall_positions=3)
    (tmp_path / "words.yaml").write_text(yaml.safe_dump(raw))
    settings = settings_for(tmp_path, tmp_path / "words.yaml", lake="data_lake")
    with instance_on_copy(world, settings) as instance:
        Runner(build_pipeline(settings), instance, echo=lambda m: None).run(models=[])  # blocking checks passed
        checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [dg.AssetCheckKey(dg.AssetKey("instances"), "within_length_tolerance")])
    inst = table(settings.lake_dir, "instances", "1k")
    plain = inst.filter(pl.col("variant") == "plain")
    assert set(plain["length_unit"]) == {"words"} and plain["target_tokens"].null_count() == plain.height
    assert set(plain["target_units"]) == {1000}
    recall = plain.filter(pl.col("task") == "factrecall_en")
    assert recall["depth"].sort().to_list() == [0.0, 0.5, 1.0]
    assert plain.filter(pl.col("task") != "factrecall_en").height == 2  # one context per QA pair and level
    assert set(inst["variant"]) == {"plain", "cfi", "kpr", "cfi_kpr"}
    assert all(c.status.value == "SUCCEEDED" for c in checks.values())
