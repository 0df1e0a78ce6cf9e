"""The package's shape, as DESIGN.md and the tasks-as-data issue state it, checked on the source:

- no import cycle among lc_pipeline's modules (module-level imports);
- no module imports another module's private name (``from x import _y``);
- asset modules stay wiring-sized.

(test_pure_packages.py: the pure packages never import Dagster, and unit tests never import assets.)
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lc_pipeline"
ASSET_MODULE_MAX_LINES = 160  # "about 150": definitions with their metadata, nothing else


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(REPO).with_suffix("").parts)
    return name.removesuffix(".__init__")


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def top_level_imports(path: Path) -> list[ast.stmt]:
    """Import statements executed when the module is imported (TYPE_CHECKING blocks and functions excluded)."""
    return [n for n in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(n, ast.Import | ast.ImportFrom)]


def all_imports(path: Path) -> list[ast.stmt]:
    return [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Import | ast.ImportFrom)]


def test_no_import_cycles_among_the_packages_modules():
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = set()
        for node in top_level_imports(path):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lc_pipeline"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    deps.add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("lc_pipeline")}
        graph[name] = {d for d in deps if d in mods and d != name}

    cycles, state = [], {}  # depth-first search: 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, f"import cycles: {cycles[:5]}"


def test_no_module_imports_a_private_name_of_another():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in all_imports(path):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lc_pipeline"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private:
                    offenders.append(f"{path.relative_to(REPO)}: {node.module} {private}")
    assert not offenders, "\n".join(offenders)


def test_asset_modules_are_wiring_sized():
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / "assets").glob("*.py")}
    assert {n: s for n, s in sizes.items() if s > ASSET_MODULE_MAX_LINES} == {}, sizes


def test_every_test_module_has_a_name_of_its_own():
    # The test folders are not packages: pytest imports each module by its file name, and refuses to collect a
    # second module of the same name in another folder (the whole run then stops at collection).
    names: dict[str, list[str]] = {}
    for path in sorted((Path(__file__).resolve().parents[1]).rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.parent.name))
    assert {n: folders for n, folders in names.items() if len(folders) > 1} == {}
