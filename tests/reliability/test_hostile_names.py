"""Hostile names: model names, source names and partition keys such as ``../x``, ``a/b``, ``..``,
very long or non-ASCII ones. Every entry point refuses them (``lcp add-model``, ``lcp backfill``,
the model registry file, the benchmark config), and a partition key added behind their back
(straight into the Dagster instance, as the UI's "add partition" does) makes its runs fail
before anything is written: no file appears anywhere, inside ``data_lake/`` or outside it."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml
from click.testing import CliRunner
from conftest import settings_for
from lake_world import make_world

from lc_pipeline.cli import main
from lc_pipeline.config import ConfigError, load_config
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.generate.registry import ModelRegistry, ModelSpecError
from lc_pipeline.partitions import MODEL_DIM, SOURCE_DIM, length_model_key
from lc_pipeline.resources.lake import LakeResource
from lc_pipeline.resources.parquet_io import partition_path

HOSTILE = [
    "../x", "../../../../escape", "a/b", "..", ".", "/abs", "x" * 65, "modèle", "模型", "m\n", "a\\b", "a|b", "a,b",
    "Upper", " lead", "", "-dash",
]
# Odd but valid slugs: they must stay one directory inside the lake.
ODD_BUT_VALID = ["a..b", "x" * 64, "a.b-c_d", "0"]


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def project(tmp_path):
    """A project inside tmp_path, so that an escape from it would show up in tmp_path."""
    world = make_world(tmp_path / "project", per_length=2)
    return world


def cli(world, *args: str):
    env = {"LCP_CONFIG": str(world.root / "config.yaml"), "LCP_LAKE": str(world.lake),
           "LCP_MODELS": str(world.models_file), "DAGSTER_HOME": str(world.dagster_home),
           "LCP_PROJECT_DIR": str(world.root)}
    return CliRunner().invoke(main, list(args), env=env)


def test_lcp_refuses_hostile_model_names(project, tmp_path):
    before = files_under(tmp_path)
    for name in HOSTILE:
        # "--" and "--model=": a name starting with "-" is a name here, not an option.
        for args in (["models", "add", "--backend", "openai", "--model-id", "m", "--", name],
                     ["backfill", f"--model={name}"]):
            result = cli(project, *args)
            assert result.exit_code == 1, (name, args, result.output)
            assert "invalid model slug" in result.output, (name, result.output)
    assert files_under(tmp_path) == before  # no registry file, no lake file, no run storage
    assert not project.models_file.exists()


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_in_the_registry_file_and_the_config_are_refused(tmp_path, name):
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({name: {"backend": "openai", "model_id": "m", "max_model_len": 4096}}))
    with pytest.raises(ModelSpecError, match="invalid model slug"):
        ModelRegistry(models).names()
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"name": "c", "sources": [{"name": name}], "lengths": ["1k"],
                                      "base_lengths": ["1k"], "long_lengths": ["1k"]}))
    with pytest.raises(ConfigError, match="field 'name': invalid source name"):
        load_config(config)


@pytest.mark.parametrize("name", ODD_BUT_VALID)
def test_odd_valid_names_stay_one_directory_inside_the_lake(tmp_path, name):
    lake = tmp_path / "data_lake"
    for path in (partition_path(lake, "generations", {"length": "1k", MODEL_DIM: name}).parent,
                 LakeResource(base_dir=str(lake)).checkpoint_dir("generations", {"length": "1k", MODEL_DIM: name})):
        assert path.resolve().parent == (lake / path.relative_to(lake).parent).resolve()
        assert path.name == f"{MODEL_DIM}={name}"


@pytest.mark.parametrize("name", ["../x", "a/b", "..", ".", ".hidden", "a\\b", ""])
def test_lake_paths_refuse_values_that_could_leave_their_folder(tmp_path, name):
    # The last line of defence: every table and checkpoint path is made by these two.
    lake = tmp_path / "data_lake"
    with pytest.raises(ValueError, match="not a safe folder name"):
        partition_path(lake, "generations", {"length": "1k", MODEL_DIM: name})
    with pytest.raises(ValueError, match="not a safe folder name"):
        LakeResource(base_dir=str(lake)).checkpoint_dir("generations", {"length": name, MODEL_DIM: "m"})


def test_partition_keys_added_behind_lcps_back_write_nothing(project, tmp_path):
    settings = settings_for(project.root, project.root / "config.yaml", lake=project.lake)
    pipeline = build_pipeline(settings)
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    # "../../../../escape" as a hive segment would resolve to project/escape, outside the lake.
    keys = ["../../../../escape", "a/b", "..", "模型", "x" * 300]
    before = files_under(tmp_path)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, keys)
        instance.add_dynamic_partitions(SOURCE_DIM, keys[:1])
        runs = [(["generations"], length_model_key("1k", k)) for k in keys]
        runs += [(["metric_scores", "judge_scores"], length_model_key("1k", k)) for k in keys[:2]]
        runs += [(["source_documents", "source_items", "rejected_records"], keys[0])]
        for selection, key in runs:
            result = dg.materialize(pipeline.assets, selection=selection, partition_key=key,
                                    resources=pipeline.resources, instance=instance, run_config=quiet,
                                    raise_on_error=False)
            assert not result.success, (selection, key)
            errors = [e.step_failure_data.error for e in result.get_step_failure_events()]
            text = " ".join(e.message + (e.cause.message if e.cause else "") for e in errors)
            reasons = ("unknown model", "no data under", "is not in config", "not a safe folder name")
            assert any(why in text for why in reasons), text
    assert files_under(tmp_path) == before
