"""Projects built once per test session and shared by the modules that need the same one (their fixtures are in
tests/conftest.py).

A shared project is a template: tests read what its build printed and copy the project (``copy_project``)
before they run anything in it. To make a test that writes into the template fail loudly, ``Template`` makes its
files read-only (which stops any user but root) and records a digest of every file's path, mode and bytes;
``Template.check`` compares it at the end of the session and names what changed.

Under pytest-xdist (``make test`` runs two workers) a session template is built once for the whole run, not once
per worker: ``session_template`` builds it in the run's folder shared by the workers (the parent of each worker's
basetemp), under a file lock; a worker that comes later waits for the lock and reuses it. Each worker checks it
unchanged at its end; the last one out makes it writable again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from conftest import REPO, TINY_CONFIG
from filelock import FileLock

# `lcp demo` as a user runs it, and `lcp plan` before it (tests/integration/test_cli.py, test_plan_cli.py): every
# kind of step, not long prompts. Two short levels (single-hop evidence, ~350 tokens, fits 512), one depth, two
# items, a few new tokens: four generations per model.
CLI_DEMO_CONFIG = {**TINY_CONFIG, "name": "cli-demo",
                   "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 40, "seed": 3}],
                   "lengths": ["512", "1k"], "base_lengths": ["512"], "long_lengths": ["1k"], "depths": [0.5],
                   "max_new_tokens": 8}
CONFIG_FILE = "config.yaml"


def lcp(env: dict[str, str], *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "lc_pipeline.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"lcp {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def project_env(root: Path) -> dict[str, str]:
    """Environment for `lcp` subprocesses confined to the project ``root`` (config, lake, registry, Dagster home)."""
    return {**os.environ, "LCP_CONFIG": str(root / CONFIG_FILE), "LCP_LAKE": str(root / "data_lake"),
            "LCP_MODELS": str(root / "models.yaml"), "DAGSTER_HOME": str(root / ".dagster"),
            "LCP_PROJECT_DIR": str(REPO)}


def tree_digest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of (mode, bytes) of every file and folder under ``root``."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        h = hashlib.sha256(f"{stat.S_IMODE(st.st_mode):o}".encode())
        if path.is_symlink():
            h.update(os.readlink(path).encode())
        elif path.is_file():
            h.update(path.read_bytes())
        out[str(path.relative_to(root))] = h.hexdigest()
    return out


def _chmod_tree(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        mode = mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        path.chmod(mode)


@dataclass
class Template:
    """A project built once; read-only from here on, compared with its digest at the end of the session."""

    root: Path
    outputs: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)  # what its build printed
    digest: dict[str, str] = field(default_factory=dict)

    def freeze(self) -> None:
        _chmod_tree(self.root, writable=False)
        self.digest = tree_digest(self.root)

    def check(self) -> None:
        now = tree_digest(self.root)
        changed = sorted(k for k in now.keys() | self.digest.keys() if now.get(k) != self.digest.get(k))
        assert not changed, (f"the shared project {self.root} was modified by a test (copy it with "
                             f"built_lakes.copy_project first); changed, added or removed: {changed[:20]}")

    def release(self) -> None:
        _chmod_tree(self.root, writable=True)  # pytest's tmp_path cleanup can remove it


def shared(template: Template):
    """For a fixture: ``yield from shared(template)`` hands the template out, then at teardown checks that no test
    changed it and makes it writable again (for pytest's tmp_path cleanup)."""
    yield template
    try:
        template.check()
    finally:
        template.release()


def session_template(tmp_path_factory, name: str, build: Callable[[Path], Template]) -> Iterator[Template]:
    """For a session fixture: ``yield from session_template(tmp_path_factory, name, build)`` hands out the template
    ``build(root)`` makes (frozen) and checks it at teardown (``shared``). Without xdist it is built under the
    session's basetemp. Under xdist it is built once for all workers, in the run's folder (the parent of every
    worker's basetemp, a new one per run): ``shared_between_processes``."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        root = tmp_path_factory.mktemp(name)
        yield from shared(build(root))
    else:
        yield from shared_between_processes(tmp_path_factory.getbasetemp().parent / name, build)


def shared_between_processes(root: Path, build: Callable[[Path], Template]) -> Iterator[Template]:
    """The template at ``root`` for several processes, as ``shared`` is for one. Under a file lock
    (``<root>.lock``), the first process builds it (``build(root)``, which freezes it) and records its digest, what
    its build printed and how many processes hold it (``<root>.json``); a later one reuses it (made read-only again
    should every earlier holder have released it, then checked unchanged). At teardown each holder checks it
    unchanged; the last one makes it writable again. A build that failed leaves no record: the next process
    removes what it left and builds again."""
    lock, record_file = FileLock(f"{root}.lock"), Path(f"{root}.json")
    with lock:
        if record_file.exists():
            record = json.loads(record_file.read_text())
            outputs = {k: subprocess.CompletedProcess(**v) for k, v in record["outputs"].items()}
            template = Template(root, outputs=outputs, digest=record["digest"])
            _chmod_tree(root, writable=False)
            template.check()
            record["holders"] += 1
        else:
            if root.exists():
                _chmod_tree(root, writable=True)
                shutil.rmtree(root)
            root.mkdir(parents=True)
            template = build(root)
            outputs = {k: {"args": p.args, "returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
                       for k, p in template.outputs.items()}
            record = {"digest": template.digest, "outputs": outputs, "holders": 1}
        record_file.write_text(json.dumps(record))
    try:
        yield template
    finally:
        with lock:
            record = json.loads(record_file.read_text())
            record["holders"] -= 1
            record_file.write_text(json.dumps(record))
            try:
                template.check()
            finally:
                if record["holders"] == 0:
                    template.release()


def copy_tree(src: Path, dest: Path) -> Path:
    """A writable copy of the folder ``src`` (a template's, read-only) at ``dest``."""
    shutil.copytree(src, dest, symlinks=True)
    _chmod_tree(dest, writable=True)
    return dest


def copy_project(template: Template, dest: Path) -> tuple[Path, dict[str, str]]:
    """A writable copy of ``template`` at ``dest`` and the environment of `lcp` runs in it."""
    return copy_tree(template.root, dest), project_env(dest)


def build_cli_demo(root: Path) -> Template:
    """CLI_DEMO_CONFIG's project at ``root``, built by `lcp plan` on the empty project (it builds the instances),
    then `lcp demo` (it generates and scores); what both printed is in ``outputs["plan"]`` and ``outputs["demo"]``."""
    import yaml

    root.mkdir(parents=True, exist_ok=True)
    (root / ".dagster").mkdir()
    (root / CONFIG_FILE).write_text(yaml.safe_dump(CLI_DEMO_CONFIG))
    env = project_env(root)
    template = Template(root)
    template.outputs["plan"] = lcp(env, "plan", "--model", "smollm2-135m", "--format", "json", "--requests")
    template.outputs["demo"] = lcp(env, "demo")
    template.freeze()
    return template


def build_tiny_world(root: Path) -> Template:
    """conftest.TINY_CONFIG's benchmark built in process (sources, passages, the MiniLM index, hard negatives,
    instances) into ``root/data_lake``, its Dagster instance in ``root/.dagster``: a template for the in-process
    tests whose config shares TINY_CONFIG's sources and retrieval settings. In a copy (``copy_world``) the runner
    reuses every partition whose fingerprint the test's config leaves unchanged (the sources, passages, index and
    hard negatives when only lengths, depths, items, tasks or models differ) and builds the rest."""
    import dagster as dg
    import yaml

    from lc_pipeline.definitions import build_pipeline
    from lc_pipeline.runner import Runner
    from lc_pipeline.settings import Settings

    root.mkdir(parents=True, exist_ok=True)
    (root / CONFIG_FILE).write_text(yaml.safe_dump(TINY_CONFIG))
    (root / ".dagster").mkdir()
    settings = Settings(project_dir=root, config=str(root / CONFIG_FILE), lake_dir=root / "data_lake",
                        models_file=root / "models.yaml", dagster_home=root / ".dagster")
    with dg.instance_for_test(temp_dir=str(root / ".dagster")) as instance:
        Runner(build_pipeline(settings), instance, echo=lambda m: None).run(models=[])
    template = Template(root)
    template.freeze()
    return template


def copy_world(template: Template, lake_dir: Path, dagster_home: Path) -> Path:
    """A writable copy of ``template``'s lake (``root/data_lake``) at ``lake_dir`` and of its Dagster instance
    (``root/.dagster``) at ``dagster_home`` (open it with ``dg.instance_for_test(temp_dir=str(dagster_home))``);
    returns ``dagster_home``."""
    copy_tree(template.root / "data_lake", lake_dir)
    return copy_tree(template.root / ".dagster", dagster_home)


@contextmanager
def instance_on_copy(template: Template, settings):
    """Copy ``template`` into ``settings``' lake and Dagster home (copy_world) and open that Dagster instance."""
    import dagster as dg

    copy_world(template, Path(settings.lake_dir), Path(settings.dagster_home))
    with dg.instance_for_test(temp_dir=str(settings.dagster_home)) as instance:
        yield instance


def build_instances(config, levels=None) -> dict:
    """level -> the config's instances at that level (``levels``: the config's by default), built in process as
    the instances asset builds them (sources loaded, no passages / hard negatives / variants, no Dagster)."""
    import polars as pl

    from lc_pipeline import schemas
    from lc_pipeline.construct.builders import LevelInputs, level_batches
    from lc_pipeline.construct.tokens import TokenCounter
    from lc_pipeline.sources.loader import load_source
    from lc_pipeline.tasks.catalog import catalog_for

    loaded = [load_source(s) for s in config.sources]
    items = pl.concat([x.items for x in loaded], how="diagonal_relaxed")
    documents = pl.concat([x.documents for x in loaded], how="diagonal_relaxed")
    unused = [schemas.empty(t) for t in ("passages", "hard_negatives", "confusing_facts", "replacement_rules")]
    return {level: pl.concat(list(level_batches(LevelInputs(items, documents, *unused, level, config,
                                                            TokenCounter.load(config.tokenizer), catalog_for(config)))))
            for level in (levels or config.lengths)}
