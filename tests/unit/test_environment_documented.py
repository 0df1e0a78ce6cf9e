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
