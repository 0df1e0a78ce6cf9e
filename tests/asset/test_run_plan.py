"""Issue 32: `lcp run` asks Dagster what to run. Its steps come from the Definitions' asset graph (topological
order, grouped by partitions definition), each asset declares its data version's inputs and the configs it serves
(assets/versions.py), and released and constructed configs are one graph builder whose unused assets are not
selected."""

from __future__ import annotations

import dataclasses

import dagster as dg
import pytest

from lc_pipeline.assets import versions
from lc_pipeline.definitions import all_assets, build_pipeline
from lc_pipeline.partitions import Partitions
from lc_pipeline.runner import Runner
from lc_pipeline.settings import Settings


def plan_of(config: str, tmp_path) -> list[tuple[tuple[str, ...], list[str]]]:
    settings = dataclasses.replace(Settings.from_env(), config=config, project_dir=tmp_path,
                                   lake_dir=tmp_path / "lake", dagster_home=tmp_path / ".dagster",
                                   models_file=tmp_path / "models.yaml")
    with dg.instance_for_test() as instance:
        runner = Runner(build_pipeline(settings), instance, echo=lambda m: None)
        return [(group.dims, group.assets) for group in runner.plan()]


def test_every_asset_declares_its_version_the_configs_it_serves_and_when_lcp_runs_it():
    specs = [spec for asset in all_assets(Partitions(["1k"])) for spec in getattr(asset, "specs", ())]
    assert len({s.key for s in specs}) >= 20
    for spec in specs:
        name = spec.key.to_user_string()
        assert versions.runs(spec) in versions.RUNS_VALUES, name
        assert spec.tags.get(versions.SERVES, "all") in versions.SERVES_VALUES, name
        if versions.runs(spec) == "manual":  # lcp minilongbench's tables: versioned by their own command
            continue
        assert spec.code_version, name
        assert "sources" in versions.hashes(spec), name  # every table reads the sources, directly or not
        assert set(versions.adds(spec)) <= set(versions.ADDS_VALUES), name


@pytest.mark.parametrize("config, steps", [
    ("demo", [
        (("source",), ["rejected_records", "source_documents", "source_items"]),
        ((), ["confusing_facts", "passages", "passage_index", "replacement_rules", "hard_negatives"]),
        (("length",), ["instances"]),
        (("length", "model"), ["generations", "citation_scores", "judge_scores", "metric_scores"]),
        (("model",), ["prior_knowledge", "benchmark_scores", "long_scores", "lveval_ablation"]),
        ((), ["leaderboard"]),
    ]),
    ("longbench", [  # run as released: no construction inputs, no LongScore
        (("source",), ["rejected_records", "source_documents", "source_items"]),
        (("length",), ["instances"]),
        (("length", "model"), ["generations", "citation_scores", "judge_scores", "metric_scores"]),
        (("model",), ["benchmark_scores"]),
        ((), ["leaderboard"]),
    ]),
])
def test_the_steps_are_the_asset_graphs_topological_order_grouped_by_partitions(config, steps, tmp_path):
    assert plan_of(config, tmp_path) == steps
