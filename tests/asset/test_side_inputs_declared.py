"""In the graphs of a constructed and of a released config, every table an asset depends on without loading it
(a ``deps`` edge) is a side input it declares with its reason, and every declared side input is such an edge
(issue 32). The asset tests that run the graph hold the bodies to the declarations: a read of any other table
fails (lake_files.SideInputReader)."""

from __future__ import annotations

import pytest
import yaml

from lc_pipeline.assets.side_inputs import side_input_reasons
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.settings import Settings


def _undeclared_and_unused(pipeline) -> tuple[dict, dict, dict]:
    undeclared, unused, reasons = {}, {}, {}
    for assets_def in pipeline.assets:
        for key, spec in assets_def.specs_by_key.items():
            name = key.to_user_string()
            nothing_inputs = {
                assets_def.keys_by_input_name[input_def.name].to_user_string()
                for input_def in assets_def.op.input_defs if input_def.dagster_type.is_nothing
            }
            declared = side_input_reasons(spec)
            reasons[name] = declared
            if nothing_inputs - set(declared):
                undeclared[name] = sorted(nothing_inputs - set(declared))
            if set(declared) - nothing_inputs:
                unused[name] = sorted(set(declared) - nothing_inputs)
    return undeclared, unused, reasons


def _settings(tmp_path, config: str) -> Settings:
    return Settings(project_dir=tmp_path, config=config, lake_dir=tmp_path / "lake",
                    models_file=tmp_path / "models.yaml", dagster_home=tmp_path / ".dagster")


@pytest.mark.parametrize("kind", ["constructed", "released"])
def test_every_dependency_that_is_not_loaded_is_a_declared_side_input(tmp_path, kind):
    if kind == "constructed":
        config = "demo"
    else:
        (tmp_path / "c.yaml").write_text(yaml.safe_dump({
            "name": "tiny-longbench", "sources": [{"name": "lb", "kind": "longbench", "paths": str(tmp_path)}],
            "released": {"benchmark": "longbench", "tasks": ["trec"]}, "lengths": ["all"]}))
        config = str(tmp_path / "c.yaml")
    undeclared, unused, reasons = _undeclared_and_unused(build_pipeline(_settings(tmp_path, config)))
    assert not undeclared, f"deps without a declared reason: {undeclared}"
    assert not unused, f"side inputs declared but not deps: {unused}"
    assert reasons["leaderboard"], "the leaderboard reads every model's tables from the lake"
    assert all(why.strip() for declared in reasons.values() for why in declared.values())
