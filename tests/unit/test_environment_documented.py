"""Every environment variable the package reads is named in docs/environment.md (issue 32: 17 variables were read
in 12 files and four were documented)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lc_pipeline"
# Names that are environment variables when they appear as a string constant in the package.
VARIABLE = re.compile(r"(LCP|OPENAI|HF|DAGSTER|CUDA|TRANSFORMERS)_[A-Z0-9_]+")
NOT_VARIABLES = {"HF_PREFIX"}  # a Python constant's own name, never read from the environment


def variables_in_package() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.fullmatch(node.value):
                found.setdefault(node.value, set()).add(str(path.relative_to(REPO)))
    return {k: v for k, v in found.items() if k not in NOT_VARIABLES}


def test_every_variable_the_package_reads_is_documented():
    documented = set(re.findall(r"`((?:LCP|OPENAI|HF|DAGSTER|CUDA|TRANSFORMERS)_[A-Z0-9_]+)`",
                                (REPO / "docs" / "environment.md").read_text(encoding="utf-8")))
    found = variables_in_package()
    assert {"LCP_LAKE", "LCP_DATA", "LCP_OFFICIAL", "OPENAI_API_KEY"} <= set(found)  # the scan sees them
    missing = {name: sorted(files) for name, files in found.items() if name not in documented}
    assert missing == {}, f"read by the package, not in docs/environment.md: {missing}"


def test_the_readme_points_to_the_table():
    assert "docs/environment.md" in (REPO / "README.md").read_text(encoding="utf-8")


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines reading a variable from the environment: ``os.environ.get(...)``, ``os.getenv(...)``,
    ``os.environ[...]`` read (writes, ``setdefault`` and a whole-environment copy are not reads of a setting)."""
    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) \
            and node.value.id == "os"

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                (node.func.attr == "get" and is_environ(node.func.value))
                or (node.func.attr == "getenv" and isinstance(node.func.value, ast.Name) and node.func.value.id == "os")):
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and is_environ(node.value) and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
    return lines


def test_only_settings_reads_the_environment():
    reads = {str(path.relative_to(REPO)): lines for path in PACKAGE.rglob("*.py")
             if path.name != "settings.py" or path.parent != PACKAGE
             for lines in [_environment_reads(ast.parse(path.read_text(encoding="utf-8")))] if lines}
    assert reads == {}, f"read os.environ outside lc_pipeline/settings.py (use settings.env): {reads}"


def test_the_settings_table_names_every_variable_read_and_lcp_help_lists_them():
    from click.testing import CliRunner

    from lc_pipeline.cli import main
    from lc_pipeline.settings import VARIABLES

    read = set(variables_in_package()) - {"LCP_TEST_WORKERS", "TRANSFORMERS_OFFLINE"}  # Makefile's, gpu.py's
    assert read - set(VARIABLES) == set(), "read by the package, not in settings.VARIABLES"
    documented = set(re.findall(r"`((?:LCP|OPENAI|HF|DAGSTER|CUDA|TRANSFORMERS)_[A-Z0-9_]+)`",
                                (REPO / "docs" / "environment.md").read_text(encoding="utf-8")))
    assert set(VARIABLES) - documented == set(), "in settings.VARIABLES, not in docs/environment.md"
    shown = CliRunner().invoke(main, ["--help"]).output
    assert [name for name in VARIABLES if f"\n  {name} " not in shown] == []
