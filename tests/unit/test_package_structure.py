"""The package's shape, as DESIGN.md, the tasks-as-data issue and issues 30 and 32 state it, checked on the source:

- no import cycle among lc_pipeline's modules, counting every import that can run: module-level imports, imports
  inside functions and methods, and ``importlib.import_module("lc_pipeline....")`` calls with a literal name.
  Imports under ``if TYPE_CHECKING:`` are left out (they never run). A dynamic import whose name is built from a
  variable (config.py's ``protocol_module`` convention, tasks/registry.py finding the benchmark packages, the PEP
  562 ``__getattr__`` of a package's ``__init__``) is not an edge: it is a lookup by convention or by a name
  table, by which a lower layer finds what registers itself above it without naming it. Likewise the
  ``"module:attribute"`` strings of the registries (tasks/registry.py, cli.py's lazy commands) are names, not
  imports; test_registered_names.py resolves each of them;
- layers (issues 30 and 32): the core and the generic pieces never import a benchmark package, and their code
  names no benchmark (identifiers, imports, and names used as keys; prose in messages and docs may cite one);
- no module imports another module's private name (``from x import _y``);
- asset modules stay wiring-sized.

(test_pure_packages.py: the pure packages never import Dagster, and unit tests never import assets.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lc_pipeline"
ASSET_MODULE_MAX_LINES = 160  # "about 150": definitions with their metadata, nothing else


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(REPO).with_suffix("").parts)
    return name.removesuffix(".__init__")


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def all_imports(path: Path) -> list[ast.stmt]:
    return [n for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Import | ast.ImportFrom)]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _literal_import_module(node: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("literal")`` (or ``import_module("literal")``), else None."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name != "import_module" or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


class _ImportsThatRun(ast.NodeVisitor):
    """Every import a module can execute, wherever it sits (``if TYPE_CHECKING:`` bodies excluded), as
    (module, names) pairs: ``from a.b import c`` gives ("a.b", ["c"]), ``import a.b`` ("a.b", [])."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[str, list[str]]] = []

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(alias.name, []) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:  # relative: resolved against this module's package
            parent = self.package.rsplit(".", node.level - 1)[0] if node.level > 1 else self.package
            base = f"{parent}.{base}" if base else parent
        self.found.append((base, [alias.name for alias in node.names]))

    def visit_Call(self, node: ast.Call) -> None:
        literal = _literal_import_module(node)
        if literal is not None:
            self.found.append((literal, []))
        self.generic_visit(node)


def import_graph() -> dict[str, set[str]]:
    """module -> the lc_pipeline modules it can import (every import that runs, see the module docstring)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        visitor = _ImportsThatRun(name, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        deps = set()
        for target, names in visitor.found:
            if not target.startswith("lc_pipeline"):
                continue
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in mods]
            deps |= set(subs) if subs and len(subs) == len(names) else {target, *subs}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted, largest first."""
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for dep in graph[todo.pop()] - seen:
                seen.add(dep)
                todo.append(dep)
        return seen

    reachable = {name: reach(name) for name in graph}
    components = {frozenset({name} | {m for m in reachable[name] if name in reachable[m]}) for name in graph}
    return sorted((sorted(c) for c in components if len(c) > 1), key=lambda c: (-len(c), c))


def _one_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, to show in a failure."""
    start, inside = component[0], set(component)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for dep in sorted(graph[path[-1]] & inside):
            if dep == start:
                return path + [start]
            if dep not in seen:
                seen.add(dep)
                paths.append(path + [dep])
    return component


def test_the_import_graph_sees_imports_inside_functions_and_literal_import_module_calls():
    graph = import_graph()
    # inside a function: the release command's reader (commands/ imports lazily to keep `lcp` start-up fast)
    assert graph["lc_pipeline.cli"] & {m for m in graph if m.startswith("lc_pipeline.commands.")}
    # a literal importlib.import_module("lc_pipeline....") call (none is left in the package: the registries name
    # their targets as strings), seen by the same visitor
    visitor = _ImportsThatRun("lc_pipeline.x", is_package=False)
    visitor.visit(ast.parse('def f():\n    return importlib.import_module("lc_pipeline.score.metrics")\n'))
    assert visitor.found == [("lc_pipeline.score.metrics", [])]
    # a name built from a variable is a lookup by convention, not an edge (config.py finds a protocol module)
    assert not {m for m in graph["lc_pipeline.config"] if m.endswith(".protocol")}


def test_no_import_cycles_among_the_packages_modules():
    graph = import_graph()
    cycles = import_cycles(graph)
    assert not cycles, "import cycles (imports inside functions counted):\n" + "\n".join(
        f"{len(c)} modules: {c}\n  e.g. {' -> '.join(_one_cycle(graph, c))}" for c in cycles)


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


# Issue 30 / 32 layers: the core and the generic pieces below the benchmark packages never import them (a package
# registers its names with tasks/registry.py, which finds it by looking, not by name).
BELOW_THE_BENCHMARKS = ("schemas", "storage", "lake", "lake_files", "settings", "config", "tasks", "text", "ids",
                        "json_files", "yaml_files", "official", "sources", "construct", "generate", "score", "gpus",
                        "partitions", "plots", "progress", "interrupts")


def test_the_core_and_the_generic_pieces_never_import_a_benchmark_package():
    graph = import_graph()
    below = {m for m in graph if m.count(".") and m.split(".")[1] in BELOW_THE_BENCHMARKS}
    upward = sorted(f"{m} -> {d}" for m in below for d in graph[m] if d.startswith("lc_pipeline.benchmarks."))
    assert upward == [], "\n".join(upward)


BENCHMARK_NAME = re.compile(r"longbench|lveval|lv_eval|loong|helmet|lb100|minilongbench", re.IGNORECASE)
KEY_LIKE = re.compile(r"[A-Za-z0-9_.:/-]+")  # a string used as a name or key, not prose
# What still names a benchmark below the packages, each with its reason; the list only shrinks.
STILL_NAMED = {
    # the prompt-file format a task file names (``format: longbench``: LongBench's dataset2prompt.json layout)
    "lc_pipeline.tasks.spec": {"longbench"},
    "lc_pipeline.tasks.catalog": {"longbench"},
}


def benchmark_names_in_code(path: Path) -> set[str]:
    """Identifiers, imported names and key-like strings of ``path`` that name a benchmark (docstrings, comments
    and prose strings are left out)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and KEY_LIKE.fullmatch(node.value):
            names = [node.value]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.alias):
            names = [node.name]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        found |= {n for n in names if BENCHMARK_NAME.search(n)}
    return found


def test_the_core_and_the_generic_pieces_name_no_benchmark_in_their_code():
    named = {}
    for name, path in modules().items():
        if name.count(".") and name.split(".")[1] in BELOW_THE_BENCHMARKS:
            extra = benchmark_names_in_code(path) - STILL_NAMED.get(name, set())
            if extra:
                named[name] = sorted(extra)
    assert named == {}, f"benchmark names in code below the benchmark packages (move it into the package): {named}"
