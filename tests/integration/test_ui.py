"""The Dagster definitions load, and `lcp ui` serves the whole asset graph with its lineage, each asset
in the UI group named like the assets module that defines it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import free_port
from ui_process import serving, start_ui, stop_ui

# The core of the graph; every other asset the definitions hold must be served too (see defined_assets).
ASSETS = {"source_documents", "source_items", "rejected_records", "passages", "passage_index", "hard_negatives", "instances",
          "generations", "metric_scores", "prior_knowledge", "long_scores", "leaderboard",
          "confusing_facts", "replacement_rules", "lveval_ablation"}
LINEAGE = {
    "passages": {"source_documents"},
    "passage_index": {"passages", "source_items"},  # its search breadth is tuned on the questions
    "hard_negatives": {"source_items", "passages", "passage_index"},
    "confusing_facts": {"source_items", "source_documents"},
    "replacement_rules": {"source_items", "source_documents", "confusing_facts"},
    "instances": {"source_items", "source_documents", "passages", "hard_negatives", "confusing_facts",
                  "replacement_rules"},
    "lveval_ablation": {"metric_scores", "instances"},
    "generations": {"instances"},
    "metric_scores": {"generations", "instances"},
    "prior_knowledge": {"instances"},
    # side inputs (assets/side_inputs.py): the headline reads the judge's verdicts, the not-scored report the statuses
    "long_scores": {"metric_scores", "prior_knowledge", "judge_scores", "generations", "instances"},
    # every model's tables, read from the lake: judge scores sit next to metric scores
    "leaderboard": {"long_scores", "judge_scores", "metric_scores", "prior_knowledge", "generations", "instances"},
}


def defined_assets(repo, env) -> set[str]:
    """Asset names of the definitions `lcp ui` loads, read in a subprocess with the same environment."""
    code = ("from lc_pipeline.definitions import defs; "
            "print(' '.join(k.path[-1] for k in defs.resolve_asset_graph().get_all_asset_keys()))")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    return set(out.stdout.split())


def assets_by_module(repo, env) -> dict[str, set[str]]:
    """Asset names each module of lc_pipeline/assets builds (all but the helpers: common.py, versions.py), read in a
    subprocess."""
    code = ("import importlib, json, pkgutil; import lc_pipeline.assets as A; "
            "from lc_pipeline.config import load_config; from lc_pipeline.partitions import Partitions; "
            "from lc_pipeline.settings import Settings; "
            "parts = Partitions(load_config(Settings.from_env().config).lengths); "
            "print(json.dumps({m.name: [k.path[-1] for a in importlib.import_module('lc_pipeline.assets.' + m.name)"
            ".build(parts) for k in a.keys] for m in pkgutil.iter_modules(A.__path__) if m.name not in ('common', 'versions', 'side_inputs')}))")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    # A module that builds only asset checks (prompt_guard: the check on generations) has no assets, no group.
    return {module: set(names) for module, names in json.loads(out.stdout).items() if names}


def test_definitions_validate(repo, project_env):
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    proc = subprocess.run([dagster, "definitions", "validate", "-w", "workspace.yaml"], cwd=repo, env=project_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ui_serves_asset_graph_with_lineage(repo, project_env, tmp_path):
    port, log = free_port(), tmp_path / "ui.log"
    proc = start_ui(port, repo, project_env, log)
    try:
        nodes = serving(port, proc, log, "{ assetNodes { assetKey { path } groupName dependencyKeys { path } } }")
        graph = {n["assetKey"]["path"][-1]: {d["path"][-1] for d in n["dependencyKeys"]} for n in nodes}
        assert ASSETS <= set(graph)
        assert set(graph) == defined_assets(repo, project_env)
        for asset, deps in LINEAGE.items():
            assert graph[asset] == deps, asset
        groups: dict[str, set[str]] = {}
        for n in nodes:
            groups.setdefault(n["groupName"], set()).add(n["assetKey"]["path"][-1])
        assert groups == assets_by_module(repo, project_env)  # a UI group is one assets module, same name
    finally:
        stop_ui(proc)
