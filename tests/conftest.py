"""Shared fixtures: a tiny benchmark config and an isolated project directory for CLI runs."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

# Lengths a 2-core CPU handles in seconds; 2-hop evidence (~700 tokens) still fits in 1k.
TINY_CONFIG = {
    "name": "tiny",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 60, "seed": 3}],
    "lengths": ["1k", "2k"],
    "base_lengths": ["1k"],
    "long_lengths": ["2k"],
    "depths": [0.0, 1.0],
    "items_per_length": 2,
    "retrieval_top_k": 40,
    "hard_negatives_per_item": 20,
    "max_new_tokens": 12,
    "models": ["smollm2-135m"],
}


def pytest_configure(config) -> None:
    """On a pytest-xdist worker: OpenMP threads (torch's, in this process and in the `lcp` processes it starts) are
    the CPUs divided among the workers, unless OMP_NUM_THREADS is set. Two workers each running torch on every core
    of a 2-core machine wait on each other's descheduled threads (tests/integration/test_transformers_backend.py
    measured 15-21 s instead of 4-5 s for 32 tokens). Set before any test module imports torch."""
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(workers))))


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test ends with the environment variables and working directory it started with. In-process `lcp`
    commands set LCP_CONFIG, LCP_LAKE and DAGSTER_HOME in os.environ for the runs they start
    (settings.cli_settings); without this they carry into whichever test runs next in that process, which under
    xdist depends on how the modules were shared out."""
    env, cwd = dict(os.environ), os.getcwd()
    yield
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)
    if os.getcwd() != cwd:
        os.chdir(cwd)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def tiny_config_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("configs") / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_CONFIG))
    return path


@pytest.fixture
def project_env(tmp_path, tiny_config_file) -> dict[str, str]:
    """Environment for `lcp` subprocesses confined to tmp_path (lake, registry, Dagster home)."""
    env = dict(os.environ)
    (tmp_path / ".dagster").mkdir()
    env.update(
        LCP_CONFIG=str(tiny_config_file),
        LCP_LAKE=str(tmp_path / "data_lake"),
        LCP_MODELS=str(tmp_path / "models.yaml"),
        DAGSTER_HOME=str(tmp_path / ".dagster"),
        LCP_PROJECT_DIR=str(REPO),
    )
    return env


@pytest.fixture(scope="session")
def cli_demo_project(tmp_path_factory):
    """tests/built_lakes.py's CLI_DEMO_CONFIG project, built once by `lcp plan` (before anything is built: it builds
    the instances) then `lcp demo` (it generates and scores), as a read-only template with what both printed
    (``outputs["plan"]``, ``outputs["demo"]``). test_cli and test_plan_cli read the outputs and run their further
    commands in copies (built_lakes.copy_project); the template is checked unchanged at the end of the session.
    Under xdist one build serves every worker (built_lakes.session_template)."""
    import built_lakes

    yield from built_lakes.session_template(tmp_path_factory, "cli_demo", built_lakes.build_cli_demo)


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory):
    """TINY_CONFIG's benchmark built once (built_lakes.build_tiny_world), read-only; tests copy it
    (built_lakes.copy_world) and run in the copy. Checked unchanged at the end of the session. Under xdist one
    build serves every worker (built_lakes.session_template)."""
    import built_lakes

    yield from built_lakes.session_template(tmp_path_factory, "tiny_world", built_lakes.build_tiny_world)


def settings_for(root: Path, config: str | Path, *, lake: str | Path = "lake", **fields):
    """Settings of a project confined to the folder ``root``: ``config`` (a config file or a packaged config's
    name), the lake ``root/lake`` (``lake`` may also be a whole path), the registry ``root/models.yaml`` and the
    Dagster home ``root/.dagster``; ``fields`` set the other Settings fields (executor, tasks, limit, ...)."""
    from lc_pipeline.settings import Settings

    return Settings(project_dir=root, config=str(config), lake_dir=root / lake, models_file=root / "models.yaml",
                    dagster_home=root / ".dagster", **fields)


def free_port() -> int:
    """A loopback port free now, for a server started next (servers in this process bind port 0 instead).

    Under pytest-xdist each worker takes only ports of its own share (``(port // 2) % workers``; halved because
    Linux hands bind() even ports first), so two workers never pick the same port before either server binds it.
    """
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if (port // 2) % count == index % count:
            return port
    raise RuntimeError(f"no free loopback port in worker {worker}'s share after 1000 tries")


def released_longbench_project(root: Path, monkeypatch, records: list[dict]) -> Path:
    """A project under ``root`` running LongBench as released over ``records`` (qasper.jsonl in $LCP_DATA/longbench),
    with its own lake, registry and Dagster home, set in the environment through ``monkeypatch``; returns ``root``."""
    import json

    data = root / "data" / "longbench"
    data.mkdir(parents=True)
    (data / "qasper.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    config = {"name": "lb", "sources": [{"name": "longbench", "kind": "longbench", "paths": "$LCP_DATA/longbench"}],
              "released": {"benchmark": "longbench"}, "lengths": ["all"]}
    (root / "lb.yaml").write_text(yaml.safe_dump(config))
    for var, value in {"LCP_CONFIG": root / "lb.yaml", "LCP_DATA": root / "data", "LCP_LAKE": root / "lake",
                       "LCP_MODELS": root / "models.yaml", "DAGSTER_HOME": root / ".dagster",
                       "LCP_PROJECT_DIR": root}.items():
        monkeypatch.setenv(var, str(value))
    return root
