"""`lcp tasks list [--benchmark B] [--format table|json]` and `lcp tasks show NAME`: the declared tasks.

Every task of the packaged task files (lc_pipeline/benchmarks/*/task_files/) plus a config's own
(``task_files:``; ``--config``), with what changes its numbers: benchmark, category, builder,
metric(s), judge rubric, truncation policy, max_new_tokens, chat-template switch, answer prefix and
the prompt template (``show``; ``list --format json`` includes it too).

With ``--config``, what that config really runs: a config that runs a benchmark as released (``released:``) builds
that benchmark's tasks with its ``released.builder`` (``released.records``), whatever builder the task file
declares for the constructed suite (shown as ``declared_builder``), and under its official protocol
(``protocol``) the tasks carry the protocol's truncation, chat-template switch, answer lengths and followup
(tasks/catalog.py ``catalog_for``).
"""

from __future__ import annotations

import json

import click

from lc_pipeline.commands.options import config_option, format_option
from lc_pipeline.commands.output import print_table
from lc_pipeline.tasks.catalog import TaskFileError, load_catalog
from lc_pipeline.tasks.spec import TaskSpec

COLUMNS = ("name", "benchmark", "category", "language", "builder", "metric", "rubric", "truncation",
           "max_new_tokens", "chat_template", "answer_prefix")


def task_record(spec: TaskSpec, with_prompt: bool = True, config=None) -> dict:
    """One task as a flat record (what `list --format json` prints per task); ``config`` (a BenchmarkConfig): the
    builder and protocol that config runs the task with (module docstring)."""
    released = getattr(config, "released", None)
    runs_released = released is not None and spec.benchmark == released.benchmark
    record = {
        "name": spec.name,
        "qualified_name": spec.qualified_name,
        "benchmark": spec.benchmark,
        "category": spec.category,
        "language": spec.language,
        "builder": released.builder if runs_released else spec.builder.name,
        "builder_options": spec.builder.options,
        "metric": list(spec.metric_names),
        "rubric": spec.rubric,
        "truncation": spec.truncation,
        "max_new_tokens": spec.max_new_tokens,  # null: the config's max_new_tokens
        "chat_template": spec.chat_template,
        "answer_prefix": spec.answer_prefix,
        "stop": list(spec.stop),
        # LongBench v2's chain of thought: a second call with the first call's output (null: one call)
        "followup": spec.followup.model_dump() if spec.followup is not None else None,
        "aggregation": spec.aggregation.model_dump(),
        "description": spec.description,
        "declared_in": spec.declared_in,
    }
    if runs_released:
        record["declared_builder"] = spec.builder.name
        record["protocol"] = config.protocol_label()
    if with_prompt:
        record["prompt"] = spec.prompt
        record["prompt_source"] = spec.prompt_source or None
    return record


def _catalog(config: str | None):
    """(catalog, the loaded config or None): the config's catalog as it runs (its task files, under its protocol)."""
    if not config:
        try:
            return load_catalog(), None
        except TaskFileError as exc:
            raise click.ClickException(str(exc)) from exc
    from lc_pipeline.config import ConfigError, load_config
    from lc_pipeline.tasks.catalog import catalog_for

    try:
        loaded = load_config(config)
        return catalog_for(loaded), loaded
    except (ConfigError, TaskFileError) as exc:
        raise click.ClickException(str(exc)) from exc


@click.group("tasks", short_help="list | show: the declared tasks.")
def tasks() -> None:
    """The declared benchmark tasks (packaged task files plus a config's task_files)."""


@tasks.command("list")
@click.option("--benchmark", default=None, help="Only this benchmark's tasks (qa, longbench, helmet, ...).")
@format_option("table", "json")
@config_option
def list_tasks(benchmark: str | None, fmt: str, config: str | None) -> None:
    """Every task, with benchmark, category, builder, metrics, rubric, truncation, max_new_tokens."""
    catalog, loaded = _catalog(config)
    specs = catalog.tasks(benchmark)
    if benchmark and not specs:
        raise click.ClickException(f"no task of benchmark {benchmark!r}; benchmarks: {', '.join(sorted(catalog.benchmarks))}")
    if fmt == "json":
        click.echo(json.dumps([task_record(s, config=loaded) for s in specs], indent=2, ensure_ascii=False))
        return
    rows = []
    for s in specs:
        r = task_record(s, with_prompt=False, config=loaded)
        rows.append(tuple("," .join(v) if isinstance(v, list) else ("" if v is None else v)
                          for v in (r[c] for c in COLUMNS)))
    print_table(list(COLUMNS), rows)


@tasks.command("show")
@click.argument("name")
@config_option
def show_task(name: str, config: str | None) -> None:
    """One task (NAME or BENCHMARK/NAME): every field and its prompt template."""
    catalog, loaded = _catalog(config)
    try:
        spec = catalog.get(name)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    record = task_record(spec, config=loaded)
    prompt = record.pop("prompt")
    width = max(len(k) for k in record)
    for key, value in record.items():
        shown = json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
        click.echo(f"{key:<{width}}  {'' if shown is None else shown}")
    if str(record.get("protocol", "")).startswith("official"):
        click.echo(f"\nprompt: the authors' (protocol {record['protocol']}: built from their files for each record); "
                   "the task file's, under protocol ours:")
        click.echo(prompt if prompt is not None else "(the builder's own wording)")
        return
    click.echo("\nprompt:\n" + (prompt if prompt is not None else "(the builder's own wording)"))
