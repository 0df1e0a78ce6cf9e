"""The guard on the session's shared projects (tests/built_lakes.py): a copy is writable and leaves the template
unchanged; a write into the template itself is named by the end-of-session check; under xdist one build serves
every worker."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest
from built_lakes import Template, copy_tree, shared_between_processes


def small_project(root):
    (root / "data_lake" / "t" / "length=1k").mkdir(parents=True)
    (root / "data_lake" / "t" / "length=1k" / "data.parquet").write_bytes(b"PAR1 rows PAR1")
    (root / ".dagster").mkdir()
    (root / ".dagster" / "runs.db").write_bytes(b"runs")
    return Template(root)


def test_a_copy_is_writable_and_the_template_stays_as_built(tmp_path):
    template = small_project(tmp_path / "template")
    template.freeze()
    try:
        file = template.root / "data_lake" / "t" / "length=1k" / "data.parquet"
        assert not stat.S_IMODE(file.stat().st_mode) & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        copy = copy_tree(template.root, tmp_path / "copy")
        (copy / "data_lake" / "t" / "length=1k" / "data.parquet").write_bytes(b"changed")
        (copy / "data_lake" / "new").mkdir()
        template.check()  # the copy's writes left the template alone
    finally:
        template.release()


def test_a_write_into_the_template_fails_the_check_naming_the_file(tmp_path):
    template = small_project(tmp_path / "template")
    template.freeze()
    try:
        file = template.root / ".dagster" / "runs.db"
        if os.geteuid() != 0:  # the read-only mode already stops anyone but root
            with pytest.raises(PermissionError):
                file.write_bytes(b"written by a test")
            file.chmod(0o644)
        file.write_bytes(b"written by a test")
        with pytest.raises(AssertionError, match=r"was modified by a test .*'\.dagster/runs\.db'"):
            template.check()
    finally:
        template.release()


def test_a_template_shared_by_two_processes_is_built_once_and_writable_only_after_the_last_one(tmp_path):
    """built_lakes.shared_between_processes, as two xdist workers use it: the second holder reuses the first's build
    (and what it printed); the first to finish leaves it read-only for the other; the last makes it writable."""
    builds = []

    def build(root):
        builds.append(root)
        template = small_project(root)
        template.outputs["demo"] = subprocess.CompletedProcess(["lcp", "demo"], 0, "board\n", "")
        template.freeze()
        return template

    root = tmp_path / "run" / "tiny_world"
    root.parent.mkdir()
    first, second = shared_between_processes(root, build), shared_between_processes(root, build)
    a, b = next(first), next(second)
    assert builds == [root] and a.root == b.root == root and b.digest == a.digest
    assert b.outputs["demo"].stdout == "board\n" and b.outputs["demo"].args == ["lcp", "demo"]
    runs_db = root / ".dagster" / "runs.db"
    with pytest.raises(StopIteration):
        next(first)
    assert not stat.S_IMODE(runs_db.stat().st_mode) & stat.S_IWUSR  # the other holder still has it
    with pytest.raises(StopIteration):
        next(second)
    assert stat.S_IMODE(runs_db.stat().st_mode) & stat.S_IWUSR
    third = shared_between_processes(root, build)  # a worker that asks for it after both ended
    assert next(third).digest == a.digest and builds == [root]
    assert not stat.S_IMODE(runs_db.stat().st_mode) & stat.S_IWUSR
    with pytest.raises(StopIteration):
        next(third)


def test_a_failed_shared_build_is_removed_and_built_again_by_the_next_process(tmp_path):
    def broken(root):
        (root / "half-written").write_text("x")
        raise RuntimeError("lcp demo failed")

    root = tmp_path / "tiny_world"
    with pytest.raises(RuntimeError, match="lcp demo failed"):
        next(shared_between_processes(root, broken))

    def build(root):
        template = small_project(root)
        template.freeze()
        return template

    holder = shared_between_processes(root, build)
    template = next(holder)
    assert template.root == root and sorted(p.name for p in root.iterdir()) == [".dagster", "data_lake"]
    with pytest.raises(StopIteration):
        next(holder)
