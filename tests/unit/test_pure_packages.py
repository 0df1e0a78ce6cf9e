"""Logic lives in the pure packages (sources/ construct/ generate/ score/), which never import Dagster
nor the Dagster wiring; the asset modules are wiring only, and unit tests test the logic, not them."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lc_pipeline"
PURE = ("sources", "construct", "generate", "score", "tasks")
WIRING = ("dagster", "lc_pipeline.assets", "lc_pipeline.resources", "lc_pipeline.definitions")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth of its code (function-level imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def wiring_imports(path: Path) -> list[str]:
    return sorted(m for m in imported_modules(path) if any(m == w or m.startswith(w + ".") for w in WIRING))


def test_pure_packages_import_neither_dagster_nor_the_wiring():
    files = [f for package in PURE for f in sorted((PACKAGE / package).rglob("*.py"))]
    assert len(files) > 40
    offending = {str(f.relative_to(PACKAGE)): wiring_imports(f) for f in files if wiring_imports(f)}
    assert offending == {}


def test_unit_tests_do_not_import_the_asset_modules():
    tests = sorted(Path(__file__).parent.glob("test_*.py"))
    offending = {f.name: sorted(m for m in imported_modules(f) if m.startswith("lc_pipeline.assets"))
                 for f in tests}
    assert {name: mods for name, mods in offending.items() if mods} == {}
