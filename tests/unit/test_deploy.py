"""The deployment guide's files (deploy/, docs/deployment.md) are complete and valid.

Each executor profile passes ``dagster definitions validate`` with the executor config file the
guide ships; each instance profile (dagster.yaml) passes Dagster's instance schema and its
run launcher / storage classes' own config schemas. The Postgres profile is also used for real
by tests/integration/test_cluster.py.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from lc_pipeline.definitions import build_executor, generation_step_gpus, load_executor_config
from lc_pipeline.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
GUIDE = REPO / "docs" / "deployment.md"
DAGSTER = Path(sys.executable).with_name("dagster")

# profile folder -> LCP_EXECUTOR, and the package the executor needs
PROFILES = {"local": ("multiprocess", "dagster"), "postgres": ("multiprocess", "dagster"),
            "k8s": ("k8s", "dagster_k8s"), "celery": ("celery", "dagster_celery")}


def needs(module: str):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} is not installed (pip install '.[k8s,celery,cluster]')")


def settings_for(tmp_path: Path, executor: str, config: Path | None, models: Path | None = None) -> Settings:
    return Settings(project_dir=tmp_path, config="demo", lake_dir=tmp_path / "lake",
                    models_file=models or tmp_path / "models.yaml", dagster_home=tmp_path / "home",
                    executor=executor, executor_config=config)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_dagster_definitions_validate_passes_for_each_executor_profile(profile, tmp_path):
    executor, module = PROFILES[profile]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install '.[k8s,celery]')")
    (tmp_path / "home").mkdir()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "LCP_PROJECT_DIR": str(tmp_path),
           "LCP_LAKE": str(tmp_path / "lake"), "LCP_EXECUTOR": executor,
           "LCP_EXECUTOR_CONFIG": str(DEPLOY / profile / "executor.yaml")}
    out = subprocess.run([str(DAGSTER), "definitions", "validate", "-w", str(DEPLOY / "workspace.yaml")],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "All code locations passed validation" in out.stdout + out.stderr


@needs("dagster_k8s")
def test_a_typo_in_an_executor_config_fails_when_definitions_load(tmp_path):
    bad = tmp_path / "executor.yaml"
    bad.write_text("execution:\n  config:\n    max_concurent: 4\n")
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"executor\.yaml: invalid config for the k8s executor"):
        build_executor(settings_for(tmp_path, "k8s", bad))
    with pytest.raises(ValueError, match="LCP_EXECUTOR='spark'"):
        build_executor(settings_for(tmp_path, "spark", None))


@needs("dagster_k8s")
def test_the_generation_pod_must_hold_the_largest_tensor_parallel_model(tmp_path):
    config = DEPLOY / "k8s" / "executor.yaml"
    assert generation_step_gpus(load_executor_config(config)) == 1
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"llama-3.1-70b": {
        "backend": "vllm", "model_id": "meta-llama/Llama-3.1-70B-Instruct", "max_model_len": 131072,
        "dtype": "bfloat16", "tensor_parallel_size": 4}}))
    with pytest.raises(ValueError, match=r"'llama-3.1-70b' has tensor_parallel_size 4.*nvidia.com/gpu"):
        build_executor(settings_for(tmp_path, "k8s", config, models))

    four = tmp_path / "executor-4gpu.yaml"
    raw = yaml.safe_load(config.read_text())
    raw["execution"]["config"]["per_step_k8s_config"]["generations"]["container_config"]["resources"]["limits"][
        "nvidia.com/gpu"] = 4
    four.write_text(yaml.safe_dump(raw))
    assert build_executor(settings_for(tmp_path, "k8s", four, models)).name == "k8s_lcp"


@needs("dagster_k8s")
def test_k8s_step_overrides_are_valid_kubernetes_objects():
    # Dagster passes these dicts through; the Kubernetes client models reject unknown fields here
    # instead of in the API server, hours into a backfill.
    import kubernetes
    from dagster_k8s.models import k8s_model_from_dict

    config = load_executor_config(DEPLOY / "k8s" / "executor.yaml")
    steps = {"*": config["step_k8s_config"], **config["per_step_k8s_config"]}
    for step, k8s in steps.items():
        container = k8s_model_from_dict(kubernetes.client.V1Container, {"name": step, **k8s["container_config"]})
        assert container.resources.requests["cpu"], step
        if "pod_spec_config" in k8s:
            k8s_model_from_dict(kubernetes.client.V1PodSpec, {"containers": [{"name": step}], **k8s["pod_spec_config"]})
    assert steps["generations"]["container_config"]["resources"]["limits"]["nvidia.com/gpu"] >= 1


def _instance_profiles() -> list[Path]:
    return sorted(DEPLOY.glob("*/dagster.yaml"))


@pytest.mark.parametrize("path", _instance_profiles(), ids=lambda p: p.parent.name)
def test_instance_profiles_pass_dagster_instance_schemas(path, monkeypatch):
    from dagster._config import validate_config
    from dagster._core.instance.config import dagster_instance_config

    monkeypatch.setenv("DAGSTER_HOME", str(path.parent))
    config, _ = dagster_instance_config(str(path.parent))
    storage = config["storage"]
    if "postgres" in storage:
        pytest.importorskip("dagster_postgres")
        from dagster_postgres import DagsterPostgresStorage

        checked = validate_config(DagsterPostgresStorage.config_type(), storage["postgres"])
        assert checked.success, checked.errors
        # The password is read from the environment, never written in the file.
        assert storage["postgres"]["postgres_db"]["password"] == {"env": "DAGSTER_PG_PASSWORD"}
    launcher = config.get("run_launcher")
    if launcher:
        pytest.importorskip(launcher["module"])
        cls = getattr(importlib.import_module(launcher["module"]), launcher["class"])
        checked = validate_config(cls.config_type(), launcher["config"])
        assert checked.success, checked.errors


def test_the_guide_names_every_deploy_file_and_every_file_it_names_exists():
    text = GUIDE.read_text()
    shipped = sorted(str(p.relative_to(REPO)) for p in DEPLOY.rglob("*") if p.is_file())
    assert shipped, "deploy/ is empty"
    for rel in shipped:
        assert rel in text, f"docs/deployment.md does not mention {rel}"
    for rel in set(re.findall(r"\b(deploy/[\w./-]+\.ya?ml)\b", text)):
        assert (REPO / rel).is_file(), f"docs/deployment.md names {rel}, which does not exist"


def test_readme_points_to_the_guide():
    assert "docs/deployment.md" in (REPO / "README.md").read_text()


def test_the_local_profile_is_the_repository_default_instance():
    # `lcp` copies the root dagster.yaml into .dagster/; deploy/local states the same settings.
    root = yaml.safe_load((REPO / "dagster.yaml").read_text())
    local = yaml.safe_load((DEPLOY / "local" / "dagster.yaml").read_text())
    assert local["storage"] == {"sqlite": {"base_dir": {"env": "DAGSTER_HOME"}}}
    assert {k: v for k, v in local.items() if k != "storage"} == root
