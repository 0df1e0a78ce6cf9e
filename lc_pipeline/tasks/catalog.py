"""The task catalog: the packaged task files plus a config's own, one ``TaskSpec`` per task.

A task file (YAML) declares one benchmark::

    benchmark: helmet
    description: ...
    defaults: {truncation: end_of_context, rubric: null}   # under every task of the file
    tasks:
      - name: json_kv
        category: Synthetic recall
        builder: {name: helmet, options: {kind: json_kv}}
        prompt: "..."
        ...

A user's file (config ``task_files:``) may add tasks, or override fields of a packaged task by naming
it (same ``benchmark`` and ``name``: only the fields given change), or start a new task from another
one with ``base: <benchmark>/<name>``. A ``prompt_file`` is read here, in its format, so every spec
the pipeline sees carries its prompt text. Errors name the file, the task and the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lc_pipeline.ids import short_id
from lc_pipeline.tasks.spec import Headline, TaskSpec
from lc_pipeline.yaml_files import read_yaml

FILE_KEYS = {"benchmark", "description", "headline", "defaults", "tasks"}
MAX_PROMPT_FILE_BYTES = 4 * 1024 * 1024  # a prompt table is kilobytes (LongBench's: 9 KB); /dev/zero is endless
ANY_TASK = "*"  # a catch-all task of a benchmark: items whose task the benchmark does not declare

DEFAULT_BENCHMARK = "qa"  # the benchmark of the items of a source kind no package claims (the QA suite's)


class TaskFileError(ValueError):
    """A task file that cannot be read: the message names the file, the task and the field."""


def benchmark_of_source_kind(kind: str) -> str:
    """The benchmark whose task files declare the tasks of source kind ``kind``'s items (a package registers it,
    tasks.registry.SOURCE_KIND_BENCHMARKS); :data:`DEFAULT_BENCHMARK` for the others."""
    from lc_pipeline.tasks.registry import SOURCE_KIND_BENCHMARKS, load_benchmark_packages

    load_benchmark_packages()
    return SOURCE_KIND_BENCHMARKS.get(kind, DEFAULT_BENCHMARK)


class TaskCatalog:
    """Every declared task, by ``benchmark/name``."""

    def __init__(self, specs: Iterable[TaskSpec], benchmarks: Mapping[str, str] | None = None,
                 headlines: Mapping[str, Headline] | None = None) -> None:
        self._specs: dict[str, TaskSpec] = {}
        for spec in specs:
            if spec.qualified_name in self._specs:
                raise TaskFileError(f"task {spec.qualified_name!r} is declared twice "
                                    f"({self._specs[spec.qualified_name].declared_in} and {spec.declared_in})")
            self._specs[spec.qualified_name] = spec
        self.benchmarks: dict[str, str] = dict(benchmarks or {})  # name -> description
        self.headlines: dict[str, Headline] = dict(headlines or {})  # name -> how its headline aggregates

    def __iter__(self):
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, qualified_name: object) -> bool:
        return qualified_name in self._specs

    def tasks(self, benchmark: str | None = None) -> list[TaskSpec]:
        return [s for s in self._specs.values() if benchmark is None or s.benchmark == benchmark]

    def get(self, name: str, where: str = "") -> TaskSpec:
        """A task by ``benchmark/name``, or by bare ``name`` when only one benchmark declares it."""
        prefix = f"{where}: " if where else ""
        if name in self._specs:
            return self._specs[name]
        matches = [s for s in self._specs.values() if s.name == name]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise ValueError(f"{prefix}task {name!r} is declared by several benchmarks "
                             f"({', '.join(s.benchmark for s in matches)}): write benchmark/{name}")
        raise ValueError(f"{prefix}unknown task {name!r}; `lcp tasks list` shows the declared tasks")

    def resolve(self, benchmark: str, task: str) -> TaskSpec:
        """The spec of an instance or item: ``benchmark/task``, else the benchmark's catch-all ``*``."""
        spec = self._specs.get(f"{benchmark}/{task}") or self._specs.get(f"{benchmark}/{ANY_TASK}")
        if spec is None:
            known = sorted(s.name for s in self.tasks(benchmark))
            raise ValueError(f"task {task!r} of benchmark {benchmark!r} is not declared in any task file"
                             + (f"; {benchmark} declares {known}" if known else f"; no task file declares {benchmark!r}"))
        return spec

    def under_protocol(self, protocol: Any) -> TaskCatalog:
        """A copy whose ``protocol.benchmark`` tasks carry the fields the protocol sets (``task_updates``)."""
        specs = [s.model_copy(update=protocol.task_updates(s.name)) if s.benchmark == protocol.benchmark else s
                 for s in self._specs.values()]
        return TaskCatalog(specs, self.benchmarks, self.headlines)

    def fingerprint(self) -> str:
        return short_id(*sorted(f"{k}:{s.content_hash()}" for k, s in self._specs.items()), length=16)


def _read_yaml(path: Path) -> dict:
    # UTF-8 only, no duplicate keys, aliases bounded; a folder or bad YAML is a TaskFileError naming file and line.
    raw = read_yaml(path, "task file", TaskFileError)
    if not isinstance(raw, dict):
        raise TaskFileError(f"{path}: expected a mapping with 'benchmark' and 'tasks'")
    unknown = sorted(set(raw) - FILE_KEYS)
    if unknown:
        raise TaskFileError(f"{path}: unknown keys {unknown}; a task file has {sorted(FILE_KEYS)}")
    if not isinstance(raw.get("benchmark"), str) or not raw["benchmark"]:
        raise TaskFileError(f"{path}: field 'benchmark': expected the benchmark's name")
    if not isinstance(raw.get("tasks"), list):
        raise TaskFileError(f"{path}: field 'tasks': expected a list of tasks")
    if not isinstance(raw.get("defaults") or {}, dict):
        raise TaskFileError(f"{path}: field 'defaults': expected a mapping")
    return raw


def read_prompt_file(ref: Mapping[str, Any], task: str, base_dir: Path, where: str) -> tuple[str, str]:
    """(template, source) of a ``prompt_file`` entry, read in its format (see ``spec.PromptFile``).

    The file is confined: its real path (links followed) must be inside the folder of the task file that names
    it (``base_dir``) or inside ``$LCP_OFFICIAL`` (the authors' checkouts), it must be a regular file (not a FIFO,
    a device or ``/proc``'s), UTF-8, and at most :data:`MAX_PROMPT_FILE_BYTES`; else :class:`TaskFileError`
    naming the task file, the task, the field and the rule. Nothing outside those folders is opened."""
    from lc_pipeline.settings import Settings
    from lc_pipeline.tasks.spec import PromptFile

    try:
        pf = PromptFile.model_validate(ref)
    except ValidationError as exc:
        raise TaskFileError(f"{where}: field 'prompt_file': {_problems(exc)}") from None
    path = Path(pf.path).expanduser()
    path = path if path.is_absolute() else base_dir / path
    real = Path(os.path.realpath(path))
    roots = [Path(os.path.realpath(base_dir))]
    official = Settings.from_env().official_dir
    if official is not None:
        roots.append(Path(os.path.realpath(official)))
    if not any(real.is_relative_to(root) for root in roots):
        raise TaskFileError(f"{where}: field 'prompt_file': {path} is outside the task file's folder "
                            f"{base_dir}{' and $LCP_OFFICIAL' if official is not None else ''}: a prompt file is read "
                            "only from inside the folder of the task file that names it, or from $LCP_OFFICIAL (the "
                            "authors' checkouts)")
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise TaskFileError(f"{where}: field 'prompt_file': cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TaskFileError(f"{where}: field 'prompt_file': {path} is not a regular file (a FIFO, device or "
                                "folder); a prompt file is a text or JSON file")
        data = fh.read(MAX_PROMPT_FILE_BYTES + 1)
    if len(data) > MAX_PROMPT_FILE_BYTES:
        raise TaskFileError(f"{where}: field 'prompt_file': {path} is larger than {MAX_PROMPT_FILE_BYTES:,} bytes, "
                            "the most a prompt file may hold")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskFileError(f"{where}: field 'prompt_file': {path} is not UTF-8 text (byte {exc.start})") from None
    if pf.format == "text":
        return text, str(path)
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{where}: prompt_file {path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    key = pf.key or task
    if not isinstance(table, dict) or not isinstance(table.get(key), str):
        keys = sorted(table) if isinstance(table, dict) else []
        raise TaskFileError(f"{where}: prompt_file {path}: no string entry {key!r}"
                            + (f"; it has {keys[:30]}" if keys else ""))
    template = table[key]
    if pf.format == "longbench":
        # LongBench's templates name the question {input}; ours {question}. Nothing else is touched.
        template = template.replace("{input}", "{question}")
    return template, f"{path}#{key}"


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"field {'.'.join(map(str, e['loc'])) or '(task)'!r}: {e['msg']}" for e in exc.errors())


def _entries(path: Path) -> tuple[str, str, Headline | None, list[tuple[str, dict, dict]]]:
    """(benchmark, description, headline, [(where, defaults, raw task)]) of one file, prompt files read."""
    raw = _read_yaml(path)
    headline = None
    if raw.get("headline") is not None:
        try:
            headline = Headline.model_validate(raw["headline"])
        except ValidationError as exc:
            raise TaskFileError(f"{path}: field 'headline': {_problems(exc)}") from None
    benchmark, defaults = raw["benchmark"], dict(raw.get("defaults") or {})
    out = []
    for i, task in enumerate(raw["tasks"]):
        if not isinstance(task, dict) or not isinstance(task.get("name"), str):
            raise TaskFileError(f"{path}: tasks[{i}]: expected a mapping with a 'name'")
        where = f"{path}: task {benchmark}/{task['name']}"
        if "benchmark" in task and task["benchmark"] != benchmark:
            raise TaskFileError(f"{where}: field 'benchmark': {task['benchmark']!r} differs from the file's "
                                f"{benchmark!r}; one file declares one benchmark")
        entry = {**task, "benchmark": benchmark}
        if "prompt_file" in entry:
            entry["prompt"], entry["prompt_source"] = read_prompt_file(entry.pop("prompt_file"), entry["name"],
                                                                      path.parent, where)
        out.append((where, defaults, entry))
    return benchmark, str(raw.get("description", "")), headline, out


def _validate(where: str, fields: dict) -> TaskSpec:
    try:
        spec = TaskSpec.model_validate(fields)
    except ValidationError as exc:
        raise TaskFileError(f"{where}: {_problems(exc)}") from None
    _check_names(where, spec)
    return spec


def _check_names(where: str, spec: TaskSpec) -> None:
    """What the spec names, checked when the catalog loads, not after generation (issue 31 D13, D17): its builder, its
    metrics and its rubric are registered (tasks/registry.py; names only, nothing is imported), and the prompt of a
    builder that fills it as a named-field template has plain fields only (text.template_parts)."""
    from lc_pipeline.tasks.registry import BUILDERS, METRICS, NAMED_FIELD_BUILDERS, RUBRICS
    from lc_pipeline.text import TemplateError, template_parts

    if spec.builder.name not in BUILDERS:
        raise TaskFileError(f"{where}: field 'builder.name': unknown builder {spec.builder.name!r}; known: "
                            f"{', '.join(BUILDERS.names())}")
    unknown = [m for m in spec.metric_names if m not in METRICS]
    if unknown:
        raise TaskFileError(f"{where}: field 'metrics': unknown metric{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(map(repr, unknown))}; known: {', '.join(METRICS.names())}")
    if spec.rubric not in (None, "none") and spec.rubric not in RUBRICS:  # "none": score/judge.py NOT_JUDGED
        raise TaskFileError(f"{where}: field 'rubric': unknown rubric {spec.rubric!r}; known: "
                            f"{', '.join(RUBRICS.names())}")
    if spec.prompt is not None and spec.builder.name in NAMED_FIELD_BUILDERS:
        try:
            template_parts(spec.prompt)
        except TemplateError as exc:
            source = f" (read from {spec.prompt_source})" if spec.prompt_source else ""
            raise TaskFileError(f"{where}: field 'prompt'{source}: {exc}") from None


def packaged_files() -> list[Path]:
    """The benchmark packages' task files (tasks.registry.TASK_FILE_FOLDERS), in the order of their file names (a
    file name is unique across the packages)."""
    from lc_pipeline.tasks.registry import TASK_FILE_FOLDERS, load_benchmark_packages

    load_benchmark_packages()
    files = sorted((p for folder in TASK_FILE_FOLDERS for p in folder.glob("*.yaml")), key=lambda p: p.name)
    repeated = sorted({p.name for p in files if [q.name for q in files].count(p.name) > 1})
    if repeated:
        raise TaskFileError(f"task files named alike in two benchmark packages: {repeated}")
    return files


@lru_cache(maxsize=16)
def _load(files: tuple[str, ...], packaged: tuple[str, ...], _contents: tuple[str, ...]) -> TaskCatalog:
    """Cached by the files' contents (``_contents``), so an edited file is read again."""
    specs: dict[str, TaskSpec] = {}
    raw_of: dict[str, dict] = {}  # merged raw fields, what an override or a `base:` starts from
    descriptions: dict[str, str] = {}
    packaged_hash: dict[str, str] = {}
    headlines: dict[str, Headline] = {}
    for file in [*packaged, *files]:
        path = Path(file)
        is_user = file in files
        benchmark, description, headline, entries = _entries(path)
        if headline is not None:
            headlines[benchmark] = headline
        else:
            headlines.setdefault(benchmark, Headline())
        if description or benchmark not in descriptions:
            descriptions[benchmark] = description or descriptions.get(benchmark, "")
        for where, defaults, entry in entries:
            key = f"{benchmark}/{entry['name']}"
            base_name = entry.pop("base", None)
            if key in raw_of and base_name is None:
                if not is_user:
                    raise TaskFileError(f"{where}: declared twice in the packaged task files")
                fields = {**raw_of[key], **entry}  # an override: only the fields given change
            elif base_name is not None:
                base_key = base_name if "/" in base_name else f"{benchmark}/{base_name}"
                if base_key not in raw_of:
                    raise TaskFileError(f"{where}: field 'base': no task {base_name!r} is declared before it")
                fields = {**raw_of[base_key], **entry}
            else:
                fields = {**defaults, **entry}
            fields["declared_in"] = str(path)
            spec = _validate(where, fields)
            if is_user:
                spec = spec.model_copy(update={"instance_salt": spec.content_hash()})
                if key in packaged_hash and packaged_hash[key] == spec.content_hash():
                    spec = spec.model_copy(update={"instance_salt": ""})  # an override that changes nothing
            else:
                packaged_hash[key] = spec.content_hash()
            specs[key] = spec
            raw_of[key] = fields
    return TaskCatalog(specs.values(), descriptions, headlines)


def load_catalog(task_files: Sequence[str | Path] = ()) -> TaskCatalog:
    """The packaged tasks plus ``task_files`` (a config's ``task_files``, absolute paths), in that order."""
    files = tuple(str(Path(f).resolve()) for f in task_files)
    for f in files:
        if not Path(f).is_file():
            raise TaskFileError(f"task file {f} does not exist")
    packaged = tuple(str(p) for p in packaged_files())
    contents = tuple(hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in (*packaged, *files))
    return _load(files, packaged, contents)


def catalog_for(config: Any) -> TaskCatalog:
    """The catalog of a BenchmarkConfig (its ``task_files``, when the config has them); under the config's official
    protocol (config.OfficialProtocol), its benchmark's tasks take the protocol's truncation, chat-template switch
    and answer lengths."""
    catalog = load_catalog(tuple(getattr(config, "task_files", ()) or ()))
    official = getattr(config, "official_protocol", None)
    protocol = official() if callable(official) else None
    return catalog if protocol is None else catalog.under_protocol(protocol)
