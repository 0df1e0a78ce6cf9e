"""The Dagster definitions load, and `lcp ui` serves the whole asset graph with its lineage, each asset
in the UI group named like the assets module that defines it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import free_port
from ui_process import serving, start_ui, stop_ui

# The core of the graph; every other asset the definitions hold must be served too (see ASSET_NAMES).
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


# Printed by a subprocess with the environment `lcp ui` gets: the asset names of the definitions it loads, and those
# each module of lc_pipeline/assets builds (all but the helpers: common.py, versions.py, side_inputs.py).
ASSET_NAMES = (
    "import importlib, json, pkgutil; import lc_pipeline.assets as A; "
    "from lc_pipeline.config import load_config; from lc_pipeline.definitions import defs; "
    "from lc_pipeline.partitions import Partitions; from lc_pipeline.settings import Settings; "
    "parts = Partitions(load_config(Settings.from_env().config).lengths); "
    "print(json.dumps({'defined': [k.path[-1] for k in defs.resolve_asset_graph().get_all_asset_keys()], "
    "'by_module': {m.name: [k.path[-1] for a in importlib.import_module('lc_pipeline.assets.' + m.name).build(parts) "
    "for k in a.keys] for m in pkgutil.iter_modules(A.__path__) if m.name not in ('common', 'versions', 'side_inputs')}}))"
)


def read_asset_names(repo, env) -> subprocess.Popen:
    """ASSET_NAMES started in a subprocess (it runs while the UI starts); its answer is asset_names's."""
    return subprocess.Popen([sys.executable, "-W", "ignore", "-c", ASSET_NAMES], cwd=repo, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def asset_names(proc: subprocess.Popen) -> tuple[set[str], dict[str, set[str]]]:
    """The asset names of the definitions, and the asset names by assets module, that ``proc`` printed."""
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    names = json.loads(out)
    # A module that builds only asset checks (prompt_guard: the check on generations) has no assets, no group.
    return set(names["defined"]), {module: set(built) for module, built in names["by_module"].items() if built}


def test_definitions_validate(repo, project_env):
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    proc = subprocess.run([dagster, "definitions", "validate", "-w", "workspace.yaml"], cwd=repo, env=project_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ui_serves_asset_graph_with_lineage(repo, project_env, tmp_path):
    reading = read_asset_names(repo, project_env)
    port, log = free_port(), tmp_path / "ui.log"
    proc = start_ui(["ui", "--port", str(port)], repo, project_env, log)
    try:
        nodes = serving(port, proc, log, "{ assetNodes { assetKey { path } groupName dependencyKeys { path } } }")
    finally:
        stop_ui(proc)
    defined_assets, assets_by_module = asset_names(reading)
    graph = {n["assetKey"]["path"][-1]: {d["path"][-1] for d in n["dependencyKeys"]} for n in nodes}
    assert ASSETS <= set(graph)
    assert set(graph) == defined_assets
    for asset, deps in LINEAGE.items():
        assert graph[asset] == deps, asset
    groups: dict[str, set[str]] = {}
    for n in nodes:
        groups.setdefault(n["groupName"], set()).add(n["assetKey"]["path"][-1])
    assert groups == assets_by_module  # a UI group is one assets module, same name
