"""The guard on the session's shared projects (tests/built_lakes.py): a copy is writable and leaves the template
unchanged; a write into the template itself is named by the end-of-session check."""

from __future__ import annotations

import os
import stat

import pytest
from built_lakes import Template, copy_tree


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
