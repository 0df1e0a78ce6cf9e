"""The instances asset builds a level in batches and writes each as a row group of one staged file.

Real upstream tables (the demo corpus, its passages, LV-Eval facts and rules from the knowledge
base) without the embedding model: hard negatives are left empty, so contexts fill from
same-domain documents. The level built 2 items at a time must be the table built in one batch,
with the same checks passing, and nothing may be left in the scratch space.
"""

from __future__ import annotations

import tempfile

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import settings_for

from lc_pipeline import schemas, storage
from lc_pipeline.benchmarks.qa import suite as qa_suite
from lc_pipeline.config import PACKAGED_CONFIGS
from lc_pipeline.construct.assembly import build_instances, fitting_items, select_items
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.fingerprints import instances_fingerprint
from lc_pipeline.lake import built_by
from lc_pipeline.partitions import SOURCE_DIM
from lc_pipeline.resources import LakeResource
from lc_pipeline.resources.parquet_io import HiveParquetIOManager, partition_path

LEVEL = "2k"
UPSTREAM = ["source_documents", "source_items", "rejected_records", "passages", "confusing_facts", "replacement_rules"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("batches")
    raw = yaml.safe_load((PACKAGED_CONFIGS / "lveval-demo.yaml").read_text())
    raw["sources"][0].update(n_entities=120, seed=6)
    raw.update(items_per_length=5, depths=[0.0, 1.0])
    raw["lveval"]["factrecall_positions"] = 2
    (root / "c.yaml").write_text(yaml.safe_dump(raw))
    settings = settings_for(root, root / "c.yaml")
    pipeline = build_pipeline(settings)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(SOURCE_DIM, ["demo"])
        assert dg.materialize(pipeline.assets, selection=UPSTREAM[:3], partition_key="demo",
                              resources=pipeline.resources, instance=instance).success
        assert dg.materialize(pipeline.assets, selection=UPSTREAM[3:], resources=pipeline.resources,
                              instance=instance).success
    storage.write_parquet(schemas.empty("hard_negatives"), partition_path(settings.lake_dir, "hard_negatives", {}))
    return pipeline


def build_level(pipeline, lake, items_per_batch: int, monkeypatch, scratch, edit_items=None):
    """Materialize instances at LEVEL into ``lake`` (source_items changed by ``edit_items``); returns
    (table, row groups, materialization metadata, {check: (passed, metadata)})."""
    monkeypatch.setattr(qa_suite, "ITEMS_PER_BATCH", items_per_batch)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the asset stages its file
    resources = {**pipeline.resources, "io_manager": HiveParquetIOManager(base_dir=str(lake)),
                 "lake": LakeResource(base_dir=str(lake))}
    for upstream in ("source_documents", "source_items", "passages", "hard_negatives", "confusing_facts",
                     "replacement_rules"):
        src = pipeline.settings.lake_dir / upstream
        for f in src.rglob("data.parquet"):
            dest = lake / upstream / f.relative_to(src)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read_bytes())
            if upstream == "source_items" and edit_items is not None:
                storage.write_parquet(edit_items(pl.read_parquet(dest)), dest)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(SOURCE_DIM, ["demo"])
        result = dg.materialize(pipeline.assets, selection=["instances"], partition_key=LEVEL, resources=resources,
                                instance=instance, raise_on_error=False)
    path = partition_path(lake, "instances", {"length": LEVEL})
    checks = {c.check_name: (c.passed, {k: v.value for k, v in c.metadata.items()})
              for c in result.get_asset_check_evaluations()}
    return (pl.read_parquet(path), pq.ParquetFile(path).metadata.num_row_groups,
            result.asset_materializations_for_node("instances")[0].metadata, checks)


def test_a_level_built_in_batches_is_the_level_built_at_once(project, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    batched, groups, meta, checks = build_level(project, tmp_path / "batched", 2, monkeypatch, scratch)
    whole, whole_groups, whole_meta, whole_checks = build_level(project, tmp_path / "whole", 100, monkeypatch, scratch)

    # 5 QA items in batches of 2 (each batch with its CFI / KPR rows), then the factrecall rows.
    assert (groups, whole_groups) == (4, 2)
    assert batched.equals(whole) and batched.schema == schemas.INSTANCES
    assert set(batched["variant"]) == {"plain", "cfi", "kpr", "cfi_kpr"}
    assert set(batched["task"]) > {"factrecall_en"}
    assert all(passed for passed, _ in checks.values()) and checks == whole_checks and len(checks) == 6
    assert meta["dagster/row_count"].value == meta["instances"].value == batched.height
    same = ["instances", "instances_qa", "input_tokens_min", "input_tokens_max", "max_relative_length_error",
            "instances_variant_cfi", "cfi_fact_tokens_max", "items_eligible", "instances_with_cross_domain_fillers"]
    assert {k: meta[k].value for k in same} == {k: whole_meta[k].value for k in same}
    assert list(scratch.iterdir()) == []  # the staged file was published, the scratch dir removed
    # The asset itself records which config built the level (a run from the UI does as lcp does; issue 31 D5).
    expected = {"config": project.config.name, "fingerprint": instances_fingerprint(project.config)}
    assert built_by(tmp_path / "batched", LEVEL) == built_by(tmp_path / "whole", LEVEL) == expected

    # The plain QA rows are build_instances' rows for the same inputs.
    config, lake = project.config, project.settings.lake_dir
    documents = pl.read_parquet(lake / "source_documents" / "source=demo" / "data.parquet")
    items = pl.read_parquet(lake / "source_items" / "source=demo" / "data.parquet")
    counter = TokenCounter.load()
    eligible, _ = fitting_items(items, documents, counter, 1024)
    plain = build_instances(eligible, documents, pl.read_parquet(lake / "passages" / "data.parquet"),
                            schemas.empty("hard_negatives"), level=LEVEL, config=config, counter=counter)
    qa_plain = batched.filter((pl.col("variant") == "plain") & (pl.col("task") != "factrecall_en"))
    assert qa_plain.select("instance_id", "prompt", "input_tokens", "evidence_depths").equals(
        plain.select("instance_id", "prompt", "input_tokens", "evidence_depths"))


def test_check_violations_add_up_across_batches(project, tmp_path, monkeypatch):
    # Two items whose answer keyword is in no document: their rows fail the keyword check
    # whichever batch they are built in, and the check reports the same rows either way.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    lake = project.settings.lake_dir
    items = pl.read_parquet(lake / "source_items" / "source=demo" / "data.parquet")
    documents = pl.read_parquet(lake / "source_documents" / "source=demo" / "data.parquet")
    eligible, _ = fitting_items(items, documents, TokenCounter.load(), 1024)
    picked = select_items(eligible, project.config.items_per_length, project.config.seed)["item_id"].to_list()
    broken = [picked[0], picked[-1]]  # the first and the last batch of 2

    def unfindable_keywords(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(pl.when(pl.col("item_id").is_in(broken)).then(pl.lit(["Zqxjvwk"]))
                                  .otherwise(pl.col("answer_keywords")).alias("answer_keywords"))

    _, _, _, batched = build_level(project, tmp_path / "batched", 2, monkeypatch, scratch, unfindable_keywords)
    _, _, _, whole = build_level(project, tmp_path / "whole", 100, monkeypatch, scratch, unfindable_keywords)
    passed, meta = batched["answer_keywords_in_evidence"]
    assert not passed and (passed, meta) == whole["answer_keywords_in_evidence"]
    table = pl.read_parquet(partition_path(tmp_path / "batched", "instances", {"length": LEVEL}))
    failing = table.filter(pl.col("item_id").is_in(broken))
    assert meta["violations"] == failing.height >= 4  # 2 items x 2 depths, with their LV-Eval variants
    assert set(meta["examples"]) <= set(failing["instance_id"])
    assert all(batched[c][0] for c in batched if c != "answer_keywords_in_evidence")
