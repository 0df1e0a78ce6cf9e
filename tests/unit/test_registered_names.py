"""Every name the package registers resolves to what it says (issue 30 acceptance 6, issue 32 "a test resolves every
registered name").

The registries hold ``"module:attribute"`` strings imported on first lookup, so a wrong string (a renamed function,
a moved module) only fails when a task, a model or a source first asks for it. Each entry is resolved here:
builders, metrics and rubrics (tasks/registry.py), generation backends (generate/backends.py), source kinds and
file kinds (sources/loader.py), the benchmark packages' protocol and judging modules (found by convention under
lc_pipeline/benchmarks/), and the lazy CLI commands (cli.py). Besides, every ``lc_pipeline`` import written inside
a function (where nothing checks it until that function runs) names a module and attribute that exist.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

import click
import pytest

from lc_pipeline.generate.backends import GENERATORS, SERVED_GENERATORS
from lc_pipeline.generate.base import Generator
from lc_pipeline.score.judge import Rubric
from lc_pipeline.score.task_metrics import Metric
from lc_pipeline.sources.loader import file_kinds
from lc_pipeline.tasks.registry import BUILDERS, FILE_KINDS, METRICS, RUBRICS, SOURCE_KINDS, Registry

PACKAGE = Path(__file__).resolve().parents[2] / "lc_pipeline"
# Dagster's wiring (and runner.py, which loads it): unit tests never import it (test_pure_packages.py).
WIRING = ("lc_pipeline.assets", "lc_pipeline.resources", "lc_pipeline.definitions", "lc_pipeline.sensors",
          "lc_pipeline.runner")


def resolve(target: str) -> object:
    """``"package.module:attribute"`` -> the object; an error names the target."""
    module, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise AssertionError(f"{target}: {type(exc).__name__}: {exc}") from exc


def resolved(registry: Registry) -> dict[str, object]:
    out, failures = {}, []
    for name in registry.names():
        try:
            out[name] = registry.get(name)
        except (ImportError, AttributeError) as exc:
            failures.append(f"{registry.kind} {name!r}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
    return out


def test_every_builder_resolves_to_a_callable_taking_a_build_request():
    builders = resolved(BUILDERS)
    assert {"qa.assemble", "lveval.factrecall", "helmet", "released.records"} <= set(builders)
    for name, builder in builders.items():
        assert callable(builder), name
        assert list(inspect.signature(builder).parameters) == ["request"], f"builder {name!r}: {builder}"


def test_the_dead_word_levels_builder_is_gone():
    # Word levels are built by qa.assemble (benchmarks/qa/suite.py, length_unit: words); no function ever
    # backed "qa.word_levels", and no task file named it.
    assert "qa.word_levels" not in BUILDERS


def test_every_builder_hook_resolves():
    # What generic code looks up by a name it already has (issue 32 "layers": a benchmark package registers the
    # callable, construct/ names no benchmark): task selections by config section, batch counts by builder,
    # instance-check rules by suite, record subsets by released benchmark; item builders are builders.
    from lc_pipeline.construct.instance_checks import SuiteRules
    from lc_pipeline.tasks.registry import (
        BATCH_COUNTS,
        DOCUMENT_SPLITTERS,
        RECORD_SUBSETS,
        SUITE_RULES,
        TASK_SELECTION_ORDER,
        TASK_SELECTIONS,
        item_builders,
    )

    for registry in (TASK_SELECTIONS, BATCH_COUNTS, RECORD_SUBSETS, DOCUMENT_SPLITTERS):
        assert {name for name, hook in resolved(registry).items() if not callable(hook)} == set(), registry.kind
    assert set(TASK_SELECTIONS.names()) == set(TASK_SELECTION_ORDER) >= {"lveval", "longbench100", "helmet"}
    assert {"qa.assemble"} <= item_builders() <= set(BUILDERS.names())
    assert set(BATCH_COUNTS.names()) <= set(BUILDERS.names())
    rules = resolved(SUITE_RULES)
    assert {suite for suite, r in rules.items() if not isinstance(r, SuiteRules)} == set()
    assert {"helmet", "longbench100"} <= set(rules) and "longbench" in RECORD_SUBSETS and "loong" in DOCUMENT_SPLITTERS


def test_every_metric_resolves_to_a_metric():
    metrics = resolved(METRICS)
    assert len(metrics) > 20
    assert {name for name, metric in metrics.items() if not isinstance(metric, Metric)} == set()


def test_every_rubric_resolves_to_a_rubric_of_its_name():
    rubrics = resolved(RUBRICS)
    assert {name: r.name for name, r in rubrics.items() if not isinstance(r, Rubric) or r.name != name} == {}


def test_every_backend_resolves_to_a_generator_class():
    for registry in (GENERATORS, SERVED_GENERATORS):
        for name, cls in resolved(registry).items():
            assert inspect.isclass(cls), f"{registry.kind} {name!r}: {cls!r}"
            missing = [m for m in ("generate", "sampling_params") if not callable(getattr(cls, m, None))]
            assert not missing, f"{registry.kind} {name!r}: {cls.__name__} lacks {missing} of {Generator.__name__}"
    assert set(SERVED_GENERATORS.names()) <= set(GENERATORS.names())


def test_every_source_kind_resolves_to_its_adapter():
    adapters = resolved(SOURCE_KINDS)
    assert {kind for kind, adapter in adapters.items() if not callable(adapter)} == set()
    assert {"demo_corpus", "generic", "longbench", "lveval", "loong", "helmet_released"} <= set(adapters)


def test_every_file_kind_has_identifying_fields_and_a_validator_taking_paths():
    kinds = file_kinds()
    assert set(kinds) == set(FILE_KINDS.names()) and {"longbench", "kilt", "helmet_rag"} <= set(kinds)
    for kind, (fields, validator) in kinds.items():
        assert fields and callable(validator), kind
        assert list(inspect.signature(validator).parameters) == ["paths"], f"file kind {kind!r}: {validator}"


def benchmark_packages() -> list[str]:
    package = importlib.import_module("lc_pipeline.benchmarks")
    return sorted(i.name for i in pkgutil.iter_modules(package.__path__) if i.ispkg)


def test_every_protocol_module_of_a_benchmark_package_offers_its_official_protocol():
    from lc_pipeline.config import has_official_protocol, protocol_module

    with_protocol = [b for b in benchmark_packages() if (PACKAGE / "benchmarks" / b / "protocol.py").is_file()]
    assert {"longbench", "lveval", "loong", "helmet"} <= set(with_protocol)
    for benchmark in with_protocol:
        assert has_official_protocol(benchmark), benchmark
        module = importlib.import_module(protocol_module(benchmark))
        assert callable(getattr(module, "official_protocol", None)), f"{module.__name__}: no official_protocol()"


def test_every_judging_module_declares_registered_rubrics_and_makes_them():
    declared: dict[str, str] = {}
    for benchmark in benchmark_packages():
        name = f"lc_pipeline.benchmarks.{benchmark}.judging"
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        assert callable(getattr(module, "official_rubric", None)), f"{name}: no official_rubric()"
        for rubric in module.OFFICIAL_RUBRICS:
            assert rubric in RUBRICS, f"{name}: OFFICIAL_RUBRICS names {rubric!r}, not a registered rubric"
            assert rubric not in declared, f"rubric {rubric!r} declared by {declared[rubric]} and {name}"
            declared[rubric] = name
    assert {"loong", "helmet_longqa", "lb100_qa"} <= set(declared)


def test_every_lazy_cli_command_resolves_to_the_click_command_of_its_name():
    from lc_pipeline.cli import LAZY_COMMANDS

    for name, target in LAZY_COMMANDS.items():
        command = resolve(target)
        assert isinstance(command, click.Command) and command.name == name, f"{name}: {target} gives {command!r}"


# --------------------------------------------------------------------------- imports written inside functions


def literal_import_attribute(node: ast.Attribute) -> tuple[str, str] | None:
    """``importlib.import_module("lc_pipeline.x").name`` -> ("lc_pipeline.x", "name")."""
    call = node.value
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute | ast.Name)
            and getattr(call.func, "attr", getattr(call.func, "id", None)) == "import_module"
            and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
        return call.args[0].value, node.attr
    return None


def unresolved(tree: ast.AST) -> list[str]:
    """Each ``from lc_pipeline.x import y`` / ``import lc_pipeline.x`` / ``importlib.import_module("lc_pipeline.x").y``
    in ``tree`` whose module or name does not exist."""
    wanted: list[tuple[int, str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("lc_pipeline"):
            wanted += [(node.lineno, node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            wanted += [(node.lineno, a.name, None) for a in node.names if a.name.startswith("lc_pipeline")]
        elif (isinstance(node, ast.Attribute) and (found := literal_import_attribute(node))
              and found[0].startswith("lc_pipeline")):
            wanted.append((node.lineno, *found))
    problems = []
    for line, module, name in wanted:
        if module.startswith(WIRING):
            continue
        try:
            imported = importlib.import_module(module)
        except ImportError as exc:
            problems.append(f"line {line}: {module}: {exc}")
            continue
        if name is None or hasattr(imported, name):
            continue
        if not (hasattr(imported, "__path__") and importlib.util.find_spec(f"{module}.{name}") is not None):
            problems.append(f"line {line}: {module} has no {name!r}")
    return list(dict.fromkeys(problems))  # a nested function's imports are walked with its outer one too


def function_level_imports(path: Path) -> ast.Module:
    """The bodies of a module's functions and methods (the imports only their call runs), as one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return ast.Module(body=[stmt for f in functions for stmt in f.body], type_ignores=[])


@pytest.mark.parametrize("folder", ["", "benchmarks", "construct", "generate", "score", "sources", "tasks",
                                    "commands"])
def test_every_import_inside_a_function_names_what_exists(folder):
    paths = sorted((PACKAGE / folder).rglob("*.py")) if folder else sorted(PACKAGE.glob("*.py"))
    failures = [f"{path.relative_to(PACKAGE.parent)}: {problem}"
                for path in paths for problem in unresolved(function_level_imports(path))]
    assert not failures, "\n".join(failures)


def test_each_benchmark_package_owns_the_task_files_of_its_benchmark_and_the_core_none():
    import yaml

    from lc_pipeline.tasks.catalog import packaged_files
    from lc_pipeline.tasks.registry import SOURCE_KIND_BENCHMARKS

    files = packaged_files()
    assert {f.parent.parent.name for f in files} == {"helmet", "longbench", "longbench100", "longbench_v2", "loong",
                                                     "lveval", "qa"}
    for f in files:
        assert f.parent.name == "task_files" and yaml.safe_load(f.read_text())["benchmark"] == f.parent.parent.name, f
    assert not list((PACKAGE / "tasks").rglob("*.yaml"))
    assert SOURCE_KIND_BENCHMARKS == {"longbench": "longbench", "longbench_v2": "longbench_v2", "lveval": "lveval",
                                      "loong": "loong"}


def test_every_config_section_is_a_model_the_config_reads_by_its_name():
    from lc_pipeline.config import load_config
    from lc_pipeline.tasks.registry import CONFIG_SECTIONS

    sections = resolved(CONFIG_SECTIONS)
    assert set(sections) == {"helmet", "longbench100", "lveval", "minilongbench", "prior_knowledge"}
    config = load_config("demo")
    for name, model in sections.items():
        assert callable(getattr(model, "fingerprint_data", None)) and hasattr(model, "TASK_BENCHMARK"), name
        assert isinstance(getattr(config, name), model), name  # a section left out takes its defaults
