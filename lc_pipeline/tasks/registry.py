"""Things registered by name and imported on first use: builders, metrics, judge rubrics, source kinds, file kinds.

A task file names what it uses (``builder: <name>``, ``metrics: [<name>]``, ``rubric: <name>``) and a config's
source names its ``kind``; a registry turns the name into the object. Entries are ``"module:attribute"`` strings,
imported only when looked up, so loading the task files never imports torch, rouge or a model library, and no
registry module imports the modules it names (no import cycles).

The generic entries are listed here. Each benchmark is a package under ``lc_pipeline/benchmarks/`` whose
``__init__.py`` has ``register(registries)`` listing its names once (lm-evaluation-harness's "tasks register by
name", without decorators scattered through the code base); packages installed by others join through the
``lc_pipeline.benchmarks`` entry-point group with the same function. The packages are found on the first lookup
(:func:`load_benchmark_packages`): this module names none of them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def resolve(target: str) -> Any:
    """The object a ``"package.module:attribute"`` target names, its module imported."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


class Registry(Generic[T]):
    """Name -> object, resolved lazily from a ``"package.module:attribute"`` target."""

    def __init__(self, kind: str, entries: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._targets: dict[str, str] = {}
        self._loaded: dict[str, T] = {}
        for name, target in (entries or {}).items():
            self.register(name, target)

    def register(self, name: str, target: str | Any) -> None:
        """Add ``name``: a ``"module:attribute"`` string (imported on first :meth:`get`) or the object itself."""
        if name in self._targets or name in self._loaded:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        if isinstance(target, str):
            if ":" not in target:
                raise ValueError(f"{self.kind} {name!r}: target {target!r} must look like 'package.module:attribute'")
            self._targets[name] = target
        else:
            self._loaded[name] = target

    def get(self, name: str, where: str = "") -> T:
        """The object registered as ``name``; an unknown name is a ValueError listing the known ones."""
        load_benchmark_packages()
        if name in self._loaded:
            return self._loaded[name]
        target = self._targets.get(name)
        if target is None:
            prefix = f"{where}: " if where else ""
            raise ValueError(f"{prefix}unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        obj = resolve(target)
        self._loaded[name] = obj
        return obj

    def target(self, name: str) -> str | None:
        """The ``"module:attribute"`` ``name`` was registered with (None for an object registered as itself)."""
        load_benchmark_packages()
        return self._targets.get(name)

    def __contains__(self, name: object) -> bool:
        load_benchmark_packages()
        return name in self._targets or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        load_benchmark_packages()
        return sorted({*self._targets, *self._loaded})


@dataclass(frozen=True)
class FileKind:
    """A released file format `lcp sources validate` recognizes: the fields whose presence in a record identifies it
    (when several kinds match, the one with the most fields wins) and the validator of a group of such files
    (``"module:function"``, ``validate(paths) -> list[ValidationReport]``: the source's own loader in reject mode)."""

    fields: frozenset[str]
    validator: str


# Instance builders: callables ``build(request: BuildRequest) -> Iterator[pl.DataFrame]``.
BUILDERS: Registry = Registry("builder", {
    "released.records": "lc_pipeline.construct.released:released_records",  # a published benchmark as released
})

# The builders that fill a task's prompt as a named-field template (text.fill_template: ``{context}``, ``{{`` a literal
# brace): the catalog refuses, when it loads, a prompt of theirs with any other field (issue 31 D13). The others put
# ``{context}`` and ``{question}`` in literally and leave every other brace as written (construct/prompts.py QAPrompt).
# A package adds its builders' names (:meth:`Registries.named_field_builder`).
NAMED_FIELD_BUILDERS: set[str] = set()

# Builders whose tasks are chosen by the sources' items, not listed by a config (construct/builders.build_plan): each
# runs every task of its builder on the items; a row's benchmark is its item's source's. A package adds its builder's
# name (:meth:`Registries.item_builder`).
ITEM_BUILDERS: set[str] = set()


def item_builders() -> frozenset[str]:
    """:data:`ITEM_BUILDERS`, the benchmark packages' included."""
    load_benchmark_packages()
    return frozenset(ITEM_BUILDERS)


# Frames a builder yields per level when more than one (construct/builders.planned_batches, a progress bar's total):
# ``count(inputs: LevelInputs) -> int``, by builder name. A builder not listed yields one frame.
BATCH_COUNTS: Registry = Registry("batch count")

# The tasks a config asks of a benchmark outside its ``tasks:`` list (its own config section: which tasks, whether
# a construction is switched on), by benchmark: ``select(config, catalog) -> list[TaskSpec]``. The levels build
# them in the order of :data:`TASK_SELECTION_ORDER` (then by name), before the config's own ``tasks``.
TASK_SELECTIONS: Registry = Registry("task selection")
TASK_SELECTION_ORDER: dict[str, int] = {}

# How config ``released.subset`` picks records of a released benchmark (construct/released.py), by the released
# benchmark: ``subset_item_ids(items, subset) -> set[str]`` (a compressed benchmark's samples of its records).
RECORD_SUBSETS: Registry = Registry("record subset")

# A released benchmark's own document blocks in its contexts (construct/truncation.split_documents, which the policy
# drop_documents cuts by), by benchmark: ``split(context) -> list[str]``, the blocks joined by a blank line giving the
# context back (one block when the context has none of its headers).
DOCUMENT_SPLITTERS: Registry = Registry("document splitter")

# What a builder tells the instance checks about its rows (construct/instance_checks.py ``SuiteRules``), by the
# rows' ``INSTANCES.suite``: another length rule, tasks of a fixed size, rows holding no whole documents, checks of
# its own. A suite not listed is checked by the generic rules only.
SUITE_RULES: Registry = Registry("suite rules")

# Metrics (score/task_metrics.py; a benchmark's own in its package's metrics.py): ``Metric`` objects, each writing one
# ``metric_scores.metric`` label.
METRICS: Registry = Registry("metric", {
    "subem": "lc_pipeline.score.task_metrics:SUBEM",
    "em": "lc_pipeline.score.task_metrics:EM",
    "f1": "lc_pipeline.score.task_metrics:F1",
})

# The metrics every instance of an item that has construction variants (CFI / KPR rows, construct/variants.py) is
# scored with, beside its task's own, so that the item's plain and variant rows compare on one metric
# (score/metric_scores.py). A package names its metric (:meth:`Registries.variant_metric`).
VARIANT_METRICS: list[str] = []


def variant_metrics() -> tuple[str, ...]:
    """:data:`VARIANT_METRICS`, the benchmark packages' included."""
    load_benchmark_packages()
    return tuple(VARIANT_METRICS)


# LLM-judge rubrics (score/judge.py ``Rubric`` objects): every rubric belongs to the benchmark that defines it.
RUBRICS: Registry = Registry("rubric")

# The authors' versions of rubrics (``protocol: official``, score/judge.official_rubric), by rubric name: a callable
# ``official_rubric(name, *, settings) -> Rubric`` reading the authors' prompts from their files. A rubric without
# one has no official protocol.
OFFICIAL_RUBRICS: Registry = Registry("official rubric")

# Source adapters by ``kind`` (sources/loader.py): ``adapter(source: SourceConfig) -> (documents, items, reports)``.
SOURCE_KINDS: Registry = Registry("source kind", {
    "demo_corpus": "lc_pipeline.sources.demo_corpus:demo_corpus_source",
    "generic": "lc_pipeline.sources.generic:generic_source",
    "kilt": "lc_pipeline.sources.kilt:kilt_source",
    "msmarco": "lc_pipeline.sources.msmarco:msmarco_source",
    "multihop": "lc_pipeline.sources.multihop:multihop_source",
    "demo_long_documents": "lc_pipeline.sources.demo_long_documents:demo_long_documents_source",
    "icl": "lc_pipeline.sources.icl:icl_source",
    "demo_labels": "lc_pipeline.sources.demo_labels:demo_labels_source",
    "alce": "lc_pipeline.sources.alce:alce_source",
})

# Kinds whose items bring their own contexts (retrieved passages, BM25 candidates, whole books and case files,
# labelled texts for in-context learning): their documents are not chunked into the retrieval corpus and their items
# get no hard negatives, so they neither cost embedding time nor leak into other tasks' distractors.
OWN_CONTEXT_SOURCE_KINDS: set[str] = {"alce", "msmarco", "demo_long_documents", "icl", "demo_labels"}

# Released file formats `lcp sources validate` recognizes (:class:`FileKind`).
FILE_KINDS: Registry = Registry("file kind")
for _kind, _fields, _validator in (
    # kind "kilt": its QA files (KILT or simple shape) and its passages file
    ("kilt", {"id", "input", "output"}, "lc_pipeline.sources.kilt:validate_kilt_files"),
    ("kilt_qa", {"id", "question", "answers", "positive_ids"}, "lc_pipeline.sources.kilt:validate_kilt_files"),
    ("kilt_qa_gold_ids", {"id", "question", "answers", "gold_ids"}, "lc_pipeline.sources.kilt:validate_kilt_files"),
    ("kilt_passages", {"id", "title", "text"}, "lc_pipeline.sources.kilt:validate_kilt_files"),
    # kind "multihop": the validator detects the format itself
    ("hotpotqa", {"question", "answer", "supporting_facts", "context"},
     "lc_pipeline.sources.multihop:validate_multihop_files"),
    ("2wikimqa", {"question", "answer", "supporting_facts", "context", "evidences"},
     "lc_pipeline.sources.multihop:validate_multihop_files"),
    ("musique", {"question", "answer", "paragraphs"}, "lc_pipeline.sources.multihop:validate_multihop_files"),
):
    FILE_KINDS.register(_kind, FileKind(frozenset(_fields), _validator))


# The benchmark packages' sections of the config (``helmet:``, ...): name -> ``"module:Model"``, a
# config.ConfigSection (or a model with its ``TASK_BENCHMARK`` and ``fingerprint_data``), read as ``config.<name>``.
CONFIG_SECTIONS: Registry = Registry("config section")

# The benchmark packages' own tables (schemas.TABLES includes them): name -> ``"module:SCHEMA"`` (a polars Schema
# made with schemas.table_schema, which records its column descriptions).
TABLES: Registry = Registry("table")

# The packaged task files (YAML, tasks/catalog.py): each benchmark package's own folder of them.
TASK_FILE_FOLDERS: list[Path] = []

# The benchmark whose task files declare the tasks of a source kind's items (catalog.benchmark_of_source_kind); the
# items of every other kind belong to the constructed QA suite's tasks.
SOURCE_KIND_BENCHMARKS: dict[str, str] = {}


class Registries:
    """What a benchmark package's ``register(registries)`` receives: each registry, and the flags that go with a name."""

    builders = BUILDERS
    metrics = METRICS
    rubrics = RUBRICS
    official_rubrics = OFFICIAL_RUBRICS
    source_kinds = SOURCE_KINDS
    file_kinds = FILE_KINDS
    config_sections = CONFIG_SECTIONS
    tables = TABLES
    batch_counts = BATCH_COUNTS
    suite_rules = SUITE_RULES
    record_subsets = RECORD_SUBSETS
    document_splitters = DOCUMENT_SPLITTERS

    @staticmethod
    def variant_metric(name: str) -> None:
        """Metric ``name`` scores every instance of an item with construction variants (:data:`VARIANT_METRICS`)."""
        if name in VARIANT_METRICS:
            raise ValueError(f"variant metric {name!r} is registered twice")
        VARIANT_METRICS.append(name)

    @staticmethod
    def item_builder(name: str) -> None:
        """Builder ``name`` builds every task of its own on the sources' items (:data:`ITEM_BUILDERS`)."""
        ITEM_BUILDERS.add(name)

    @staticmethod
    def task_selection(benchmark: str, target: str, order: int) -> None:
        """The tasks a config asks of ``benchmark`` by its own section (:data:`TASK_SELECTIONS`), built at ``order``."""
        TASK_SELECTIONS.register(benchmark, target)
        TASK_SELECTION_ORDER[benchmark] = order

    @staticmethod
    def named_field_builder(name: str) -> None:
        """Builder ``name`` fills its task's prompt as a named-field template (:data:`NAMED_FIELD_BUILDERS`)."""
        NAMED_FIELD_BUILDERS.add(name)

    @staticmethod
    def own_context_source_kind(kind: str) -> None:
        """Source kind ``kind`` brings its items' own contexts (:data:`OWN_CONTEXT_SOURCE_KINDS`)."""
        OWN_CONTEXT_SOURCE_KINDS.add(kind)

    @staticmethod
    def file_kind(kind: str, fields: set[str] | frozenset[str], validator: str) -> None:
        FILE_KINDS.register(kind, FileKind(frozenset(fields), validator))

    @staticmethod
    def task_files(folder: Path) -> None:
        """The package's task files: every ``*.yaml`` in ``folder`` (:data:`TASK_FILE_FOLDERS`)."""
        if not folder.is_dir():
            raise ValueError(f"task file folder {folder} does not exist")
        TASK_FILE_FOLDERS.append(folder)

    @staticmethod
    def source_kind_benchmark(kind: str, benchmark: str) -> None:
        """The items of source kind ``kind`` are tasks of ``benchmark`` (:data:`SOURCE_KIND_BENCHMARKS`)."""
        if kind in SOURCE_KIND_BENCHMARKS:
            raise ValueError(f"source kind {kind!r} is given a benchmark twice")
        SOURCE_KIND_BENCHMARKS[kind] = benchmark


PACKAGES = "lc_pipeline.benchmarks"  # the namespace of the built-in benchmark packages
ENTRY_POINT_GROUP = "lc_pipeline.benchmarks"  # where packages installed by others declare ``register``
_loaded_packages: list[str] = []
_state = {"loaded": False, "loading": False}


def benchmark_packages() -> list[str]:
    """The built-in benchmark packages' names (``lc_pipeline/benchmarks/<name>/``), sorted."""
    namespace = importlib.import_module(PACKAGES)
    return sorted(info.name for info in pkgutil.iter_modules(namespace.__path__) if info.ispkg)


def load_benchmark_packages() -> list[str]:
    """Call every benchmark package's ``register(Registries)`` once per process; the modules registered, in order.

    The built-in packages come first (sorted), then the entry points of group ``lc_pipeline.benchmarks``; a name
    registered twice is an error naming it. Registration only records names and ``"module:attribute"`` strings,
    so this imports each package's ``__init__`` and nothing heavy."""
    if _state["loaded"] or _state["loading"]:
        return list(_loaded_packages)
    _state["loading"] = True
    try:
        registers: list[tuple[str, Callable[[type[Registries]], None]]] = []
        for name in benchmark_packages():
            module = importlib.import_module(f"{PACKAGES}.{name}")
            register = getattr(module, "register", None)
            if register is not None:
                registers.append((module.__name__, register))
        for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if entry.value.partition(":")[0].startswith(f"{PACKAGES}."):
                continue  # a built-in package declared as an entry point too: registered above
            registers.append((entry.value, entry.load()))
        for where, register in registers:
            try:
                register(Registries)
            except ValueError as exc:
                raise ValueError(f"benchmark package {where}: {exc}") from exc
            _loaded_packages.append(where)
        _state["loaded"] = True
    finally:
        _state["loading"] = False
    return list(_loaded_packages)
