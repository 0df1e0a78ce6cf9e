"""`lcp`: the command line.

    lcp demo                      build, generate, score the demo benchmark; print the leaderboard
    lcp add-model NAME [...]      register a model (slug -> settings) and its partition
    lcp backfill --model NAME     materialize only that model's partitions, then the leaderboard
    lcp import-predictions FILE   register predictions made elsewhere as a model (backend imported)
    lcp models                    list registered models
    lcp plan [--model M]          instances, prompt tokens, truncations, time and cost of a run, before it runs
    lcp compare MODEL_A MODEL_B   paired difference of two models on their common instances, interval and p-value
    lcp query "SQL"               DuckDB over every lake table (read-only)
    lcp ui                        the Dagster UI (webserver + daemon) on this project
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

# Light on purpose (issue 29): a command that does not run the graph imports neither Dagster nor torch, so
# this module imports only click and the names its options list; each command imports what it uses, and the
# commands of lc_pipeline/commands/ are imported only when invoked (LazyCommands). tests/unit/test_cli_imports.py
from lc_pipeline.construct.truncation import POLICIES as TRUNCATION_POLICIES
from lc_pipeline.commands.options import apply_selection, selection_options
from lc_pipeline.generate.backends import GENERATORS
from lc_pipeline.settings import env, variables_help

if TYPE_CHECKING:
    from lc_pipeline.settings import Settings


def _settings(config: str | None) -> Settings:
    """The settings of an ``lcp`` command (settings.cli_settings): the name every command below uses."""
    from lc_pipeline.settings import cli_settings

    return cli_settings(config)


def _runner(s: Settings):
    import dagster as dg

    from lc_pipeline.definitions import build_pipeline
    from lc_pipeline.runner import Runner

    return Runner(build_pipeline(s), cli_run_instance(), echo=lambda m: click.echo(m, err=True))


def cli_run_instance():
    """$DAGSTER_HOME's instance for the runs ``lcp`` executes in its own process, with one change: no compute-log
    capture. Dagster's capture mirrors a step's stdout/stderr through a ``tail`` and a watcher child process, which a
    terminal's Ctrl-C reaches as well (SIGINT goes to the whole foreground process group): they died with two
    KeyboardInterrupt tracebacks and the run went on to the end. Here the steps write straight to this terminal;
    the event log (structured logs, materializations, failures) is the same one the UI reads. Runs started from the
    UI or a daemon keep dagster.yaml's compute log manager."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    home = env("DAGSTER_HOME")
    if not home:  # lcp sets it (settings); without it, Dagster's own error
        return dg.DagsterInstance.get()
    no_capture = {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(home, overrides={"compute_logs": no_capture}))


def _print_leaderboard(df) -> None:
    from lc_pipeline.commands.output import print_table
    from lc_pipeline.score.board import board_display, released_board_display

    if df.height and df["base_ability"].is_null().all():  # a benchmark run as released: no LongScore
        cols, rows = released_board_display(df)
        click.echo("\nLeaderboard (each published table's overall, 0-100, averaged over its length partitions; "
                   "ci95: bootstrap over instances; lcp report shows every task)")
        print_table(cols, rows)
        return

    cols, rows, paired = board_display(df)
    click.echo("\nLeaderboard (scores 0-100; LongScore = 100*(S_l - Base)/Base averaged over the long lengths; "
               "ci95: bootstrap over items; shares of generations skipped / truncated / invalid)")
    for line in paired:
        click.echo(line)
    print_table(cols, rows)


# The commands that live in lc_pipeline/commands/: name -> "module:attribute", imported only when that command
# runs or help lists it (click's LazyGroup pattern), so `lcp query` never imports matplotlib or the scorers.
LAZY_COMMANDS = {
    "score": "lc_pipeline.commands.score:score",
    "longscore": "lc_pipeline.commands.longscore:longscore",
    "minilongbench": "lc_pipeline.commands.minilongbench:minilongbench",
    "report": "lc_pipeline.commands.report:report",
    "compare": "lc_pipeline.commands.compare:compare",
    "tasks": "lc_pipeline.commands.tasks:tasks",
    "import-predictions": "lc_pipeline.commands.imports:import_predictions_command",
    "plan": "lc_pipeline.commands.plan:plan",
}


class LazyCommands(click.Group):
    """The ``lcp`` group: the commands defined here plus :data:`LAZY_COMMANDS`, each imported on first use.

    A bad file the user gave (a config, models.yaml, a task file) ends any command with its error, which
    names the file and the line, and exit status 1: never a traceback (issue 22, item 7)."""

    def __init__(self, *args, lazy_commands: dict[str, str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy_commands or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        module_name, attribute = self.lazy_commands[cmd_name].split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise TypeError(f"{self.lazy_commands[cmd_name]}: expected the click command {cmd_name!r}, got {command!r}")
        self.add_command(command)
        return command

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ValueError as exc:  # the three errors below are ValueErrors; imported only when one is raised
            from lc_pipeline.config import ConfigError
            from lc_pipeline.generate.registry import ModelSpecError
            from lc_pipeline.tasks.catalog import TaskFileError

            if isinstance(exc, (ConfigError, ModelSpecError, TaskFileError)):
                raise click.ClickException(str(exc)) from exc
            raise


@click.group(cls=LazyCommands, lazy_commands=LAZY_COMMANDS,
             epilog="Environment variables (docs/environment.md):\n\n\b\n" + variables_help())
@click.option("--lake", default=None, metavar="DIR|URL",
              help="The Parquet lake every command uses: a folder or a bucket URL (default: $LCP_LAKE, else "
                   "./data_lake). Sets LCP_LAKE for the command and the runs it starts.")
def main(lake: str | None) -> None:
    """Build long-context benchmarks and evaluate models on them (Dagster assets over a Parquet lake)."""
    if lake is not None:
        if not lake.strip():
            raise click.BadParameter("empty", param_hint="--lake")
        os.environ["LCP_LAKE"] = lake


_CONFIG_HELP = "Benchmark config: packaged name (demo, default, longbench, ...) or YAML path."
_MODELS_HELP = "Models to evaluate (default: the config's models)."


@main.command("run")
@click.option("--config", default=None, help=_CONFIG_HELP)
@click.option("--model", "models", multiple=True, help=_MODELS_HELP)
@selection_options
def run_command(config: str | None, models: tuple[str, ...], tasks: str | None, limit: int | None) -> None:
    """Build the config's benchmark and evaluate its models: every step not already done (finished partitions are
    reused), then print the leaderboard. With --tasks / --limit, only that part of the config (its instances are
    another config's: use its own --lake)."""
    _run_graph("run", config, models, tasks, limit)


@main.command()
@click.option("--config", default=None, help=_CONFIG_HELP)
@click.option("--model", "models", multiple=True, help=_MODELS_HELP)
@selection_options
def demo(config: str | None, models: tuple[str, ...], tasks: str | None, limit: int | None) -> None:
    """The same as `lcp run` (its earlier name; `make demo` runs it on the embedded default)."""
    _run_graph("demo", config, models, tasks, limit)


def _run_graph(verb: str, config: str | None, models: tuple[str, ...], tasks: str | None = None,
               limit: int | None = None) -> None:
    selected = apply_selection(tasks, limit)
    s = _settings(config)
    resume = f"lcp {verb}" + (f" --config {shlex.quote(config)}" if config else "") + \
        "".join(f" --model {shlex.quote(m)}" for m in models) + selected
    with _graph_run(resume) as state:
        runner = state["runner"] = _runner(s)
        runner.preflight()  # what would fail only after generation fails here (D17)
        board = runner.run(list(models) or None)
    _print_leaderboard(board)
    click.echo(f"\n{len(runner.ran)} steps ran, {len(runner.reused)} reused. Lake: {s.lake_dir}", err=True)


@contextlib.contextmanager
def _graph_run(resume: str):
    """The graph run in this process by demo / backfill: a failed step ends in one ``Error:`` line naming the step,
    its partition and the cause (runner.StepFailed; the trace is in the Dagster log); Ctrl-C or SIGTERM in one line
    saying what was saved and ``resume``, exit 130 / 143 (runner.interrupt_exit). Yields a dict the block puts its
    runner in."""
    import dagster as dg

    from lc_pipeline.runner import Interrupted, interrupt_exit, watching_signals

    state: dict = {"runner": None}
    with watching_signals():
        try:
            yield state
        except (KeyboardInterrupt, Interrupted, dg.DagsterExecutionInterruptedError) as exc:
            interrupt_exit(exc, state["runner"], resume, lambda m: click.echo(m, err=True))
        except click.ClickException:
            raise
        except (KeyError, ValueError, RuntimeError, OSError) as exc:  # OSError: e.g. a model file that is not there
            raise click.ClickException(str(exc).strip("'\"") if isinstance(exc, KeyError) else str(exc)) from None


class JsonObject(click.ParamType):
    """A JSON object given on the command line (``--extra-body '{"repeat_penalty": 1.0}'``), parsed to a dict."""

    name = "json object"

    def convert(self, value, param, ctx):
        if isinstance(value, dict):
            return value
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            self.fail(f"{value!r} is not JSON: {exc}", param, ctx)
        if not isinstance(parsed, dict):
            self.fail(f"{value!r} is a JSON {type(parsed).__name__}, not an object {{...}}", param, ctx)
        return parsed


JSON_OBJECT = JsonObject()


@main.command("add-model")
@click.argument("name")
@click.option("--like", default="smollm2-135m", show_default=True, help="Start from this model's settings.")
@click.option("--backend", default=None, type=click.Choice(GENERATORS.names()),
              help="transformers (CPU/GPU), llamacpp (in-process GGUF), openai (any OpenAI-compatible server), "
                   "vllm (vLLM's engine: CUDA GPUs, or a CPU after make install-vllm).")
@click.option("--model-id", default=None, help="HF id, local path, or package:<pip package>.")
@click.option("--gguf-file", default=None,
              help="GGUF file inside model-id (transformers loads it, vllm gets it converted to a Hugging Face "
                   "folder); 'none': no GGUF, clearing the --like model's (e.g. a --model-id folder of safetensors).")
@click.option("--max-model-len", type=int, default=None, help="Context window in model tokens.")
@click.option("--batch-size", type=int, default=None)
@click.option("--system-prompt", default=None)
@click.option("--no-chat-template", is_flag=True, help="Feed the raw prompt (base models).")
@click.option("--api", type=click.Choice(["chat", "completions"]), default=None,
              help="openai: chat (the server applies the template) or completions (we send token ids).")
@click.option("--api-model", default=None, help="openai: the model name the server knows.")
@click.option("--base-url", default=None, help="openai: the server (default: $OPENAI_BASE_URL).")
@click.option("--api-key-env", default=None, help="openai: the environment variable holding the key.")
@click.option("--max-concurrency", type=int, default=None,
              help="openai: requests in flight at once (default 8); a one-slot server such as llama-cpp-python's "
                   "wants 1, or queued requests run into the timeout.")
@click.option("--request-timeout-s", type=click.FloatRange(min=0, min_open=True), default=None,
              help="openai: seconds to wait for one reply (default 600); prefill of a long prompt on a CPU server "
                   "can take longer: raise it there.")
@click.option("--max-retries", type=click.IntRange(min=0), default=None,
              help="openai: retries of a failed request (a connection error, HTTP 408/409/429/5xx, a reply that is "
                   "not a completion), with exponential backoff (default 4).")
@click.option("--retry-timeouts/--no-retry-timeouts", default=None,
              help="openai: whether a request that timed out is sent again (default: no, since the server may still "
                   "be computing it and a one-slot server would compute it twice).")
@click.option("--send-token-ids/--send-text", default=None,
              help="openai with --api completions: send our token ids (the default: exact; vLLM takes them) or the "
                   "rendered prompt text (for servers that take text only, such as llama-cpp-python's).")
@click.option("--extra-body", type=JSON_OBJECT, default=None, metavar="JSON",
              help="openai: server-specific request fields, a JSON object (default none), e.g. "
                   "'{\"repeat_penalty\": 1.0}' for greedy decoding on llama-cpp-python's server (its default "
                   "repeat penalty 1.1 changes temperature-0 outputs).")
@click.option("--tokenizer", default=None, help="Tokenizer to count with: a path / HF id, or tiktoken:<encoding>.")
@click.option("--tensor-parallel-size", type=int, default=None, help="vllm: GPUs per model.")
@click.option("--truncation", type=click.Choice(TRUNCATION_POLICIES), default=None,
              help="Truncation policy of every task for this model (skip: a prompt that does not fit is not sent, "
                   "its row says skipped); default: each task's. A run's truncation_overrides still win.")
@click.option("--chat-template-file", default=None,
              type=click.Path(exists=True, dir_okay=False, readable=True, resolve_path=True),
              help="A Jinja chat template file used instead of the model's own (stored as an absolute path; its "
                   "content enters the model's fingerprint). openai: only with --api completions.")
@click.option("--config", default=None)
@click.option("--overwrite", is_flag=True, help="Replace an existing registration with different settings.")
def add_model(name, like, backend, model_id, gguf_file, max_model_len, batch_size, system_prompt, no_chat_template,
              api, api_model, base_url, api_key_env, max_concurrency, request_timeout_s, max_retries, retry_timeouts,
              send_token_ids, extra_body, tokenizer, tensor_parallel_size, truncation, chat_template_file, config,
              overwrite) -> None:
    """Register model NAME (a slug: [a-z0-9._-]) and add its dynamic partition."""
    import dagster as dg

    from lc_pipeline.generate.registry import ModelRegistry, validate_model_slug
    from lc_pipeline.partitions import MODEL_DIM

    s = _settings(config)
    try:
        validate_model_slug(name)
        registry = ModelRegistry(s.models_file)
        base = registry.get(like)
        changes = {k: v for k, v in {
            "slug": name, "backend": backend, "model_id": model_id, "gguf_file": gguf_file,
            "max_model_len": max_model_len, "batch_size": batch_size, "system_prompt": system_prompt,
            "api": api, "api_model": api_model, "base_url": base_url, "api_key_env": api_key_env,
            "max_concurrency": max_concurrency, "request_timeout_s": request_timeout_s, "max_retries": max_retries,
            "retry_timeouts": retry_timeouts, "send_token_ids": send_token_ids, "extra_body": extra_body,
            "tokenizer": tokenizer, "tensor_parallel_size": tensor_parallel_size,
            "truncation": truncation, "chat_template_file": chat_template_file,
        }.items() if v is not None}
        if no_chat_template:
            changes["chat_template"] = False
        if gguf_file is not None and gguf_file.lower() == "none":
            changes["gguf_file"] = None
        spec = dataclasses.replace(base, **changes)
        if spec.gguf_file is not None:
            from lc_pipeline.generate.registry import resolve_model_path

            try:  # a local model_id (a folder, an installed package) must hold the GGUF, or every run fails
                resolve_model_path(spec)
            except ModuleNotFoundError:
                pass  # a package not installed on this machine: checked where the model runs
        registry.add(spec, overwrite=overwrite)
    except FileNotFoundError as exc:
        raise click.ClickException(f"{exc}; name the GGUF with --gguf-file, or pass --gguf-file none for a "
                                   "model-id without one") from exc
    except (ValueError, KeyError) as exc:
        raise click.ClickException(str(exc)) from exc
    instance = dg.DagsterInstance.get()
    if not instance.has_dynamic_partition(MODEL_DIM, name):
        instance.add_dynamic_partitions(MODEL_DIM, [name])
    click.echo(f"registered {name} in {s.models_file} and added partition model={name}")
    with_config = f" --config {shlex.quote(config)}" if config else ""
    click.echo(f"next: lcp backfill --model {name}{with_config}   (or backfill its partitions in the UI)")


@main.command()
@click.option("--model", "models", multiple=True, help="Models whose generations to judge (default: the config's).")
@click.option("--length", "lengths", multiple=True, help="Only these length levels (default: all).")
@click.option("--config", default=None, help=_CONFIG_HELP)
def judge(models: tuple[str, ...], lengths: tuple[str, ...], config: str | None) -> None:
    """Judge generations: the LLM judge on the tasks its task files score so (LCP_JUDGE_MODEL, OPENAI_BASE_URL) and
    the NLI judge on citation tasks, then refresh the benchmark tables and the leaderboard. Replies are cached: a
    rerun asks nothing twice. `lcp run` does the same after generating; this runs it alone (e.g. after setting a
    judge)."""
    s = _settings(config)
    resume = "lcp judge" + (f" --config {shlex.quote(config)}" if config else "") + \
        "".join(f" --model {shlex.quote(m)}" for m in models) + "".join(f" --length {lv}" for lv in lengths)
    with _graph_run(resume) as state:
        runner = state["runner"] = _runner(s)
        unknown = [lv for lv in lengths if lv not in runner.config.lengths]
        if unknown:
            raise click.ClickException(f"--length {unknown}: not a length level of config {s.config!r} "
                                       f"(its levels: {list(runner.config.lengths)})")
        judged = {slug: runner.judge(slug, list(lengths) or None) for slug in models or runner.config.models}
        board = runner.leaderboard() if any(judged.values()) else None
    for slug, steps in judged.items():
        click.echo(f"{slug}: {', '.join(steps) if steps else 'nothing to judge (see above)'}", err=True)
    if board is not None:
        _print_leaderboard(board)


@main.command()
@click.option("--model", "model", required=True, help="The model whose partitions to materialize.")
@click.option("--length", "lengths", multiple=True, help="Only these length levels (default: all).")
@click.option("--url", default=lambda: env("LCP_DAGSTER_URL"),
              help="A running `lcp ui` (e.g. http://127.0.0.1:3000, or $LCP_DAGSTER_URL): launch a Dagster asset "
                   "backfill there (shown in the UI, executed by its daemon) instead of running in this process.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="With --url: wait for the backfill to end.")
@click.option("--config", default=None)
@selection_options
def backfill(model: str, lengths: tuple[str, ...], url: str | None, wait: bool, config: str | None,
             tasks: str | None, limit: int | None) -> None:
    """Generate and score only MODEL's partitions (nothing upstream re-runs), then refresh the leaderboard."""
    from lc_pipeline.generate.registry import validate_model_slug

    try:  # before anything is opened or written: the name becomes a partition key and a path
        validate_model_slug(model)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if url and (tasks or limit):
        raise click.ClickException("--tasks / --limit narrow a run in this process; a UI's backfill (--url) runs "
                                   "the whole config")
    selected = apply_selection(tasks, limit)
    s = _settings(config)
    if lengths:  # an unknown level would otherwise surface as Dagster's partition-key error
        from lc_pipeline.config import load_config

        try:
            levels = list(load_config(s.config).lengths)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
        unknown = [lv for lv in lengths if lv not in levels]
        if unknown:
            raise click.ClickException(f"--length {unknown}: not a length level of config {s.config!r} "
                                       f"(its levels: {levels})")
    if url:
        _backfill_via_graphql(s, model, list(lengths), url, wait)
        return
    resume = f"lcp backfill --model {shlex.quote(model)}" + "".join(f" --length {shlex.quote(lv)}" for lv in lengths) + \
        (f" --config {shlex.quote(config)}" if config else "") + selected
    with _graph_run(resume) as state:
        runner = state["runner"] = _runner(s)
        runner.tags = {"lcp/backfill": model}
        runner.preflight()  # what would fail only after generation fails here (D17)
        _check_model_files(runner.pipeline.resources["models"].spec(model))
        board = runner.run([model], list(lengths) or None, upstream_if_missing=True)  # nothing upstream re-runs
    if board is None:  # its LongScore waits for the other lengths: the leaderboard has nothing new
        click.echo(f"{model}: scored {list(lengths)}; its LongScore and leaderboard row follow once every length "
                   "is scored", err=True)
        return
    _print_leaderboard(board)


def _check_model_files(spec) -> None:
    """A model whose files are not where its settings say fails here, before the benchmark is built for it: the
    weights (or the tokenizer an openai model counts with) of a local model_id / GGUF, or its model package."""
    from lc_pipeline.generate.backends import capabilities
    from lc_pipeline.generate.registry import resolve_model_path

    if not capabilities(spec.backend).calls_a_model:  # e.g. imported: reads a predictions file, checked by the import
        return
    try:
        resolve_model_path(spec)
    except ImportError as exc:  # model_id package:<module> not installed
        raise click.ClickException(str(exc)) from exc


def _backfill_via_graphql(s: Settings, model: str, lengths: list[str], url: str, wait: bool) -> None:
    import dagster as dg

    from lc_pipeline.config import load_config
    from lc_pipeline.generate.registry import ModelRegistry, validate_model_slug
    from lc_pipeline.lake import check_lake_config
    from lc_pipeline.partitions import MODEL_DIM
    from lc_pipeline.runner import BackfillError, launch_backfill, launch_model_backfill, wait_for_backfill

    try:
        validate_model_slug(model)
        ModelRegistry(s.models_file).get(model)
        cfg = load_config(s.config)
        levels = lengths or list(cfg.lengths)
        check_lake_config(s.lake_url, cfg)  # another config's scored instances under these level labels (D5)
        instance = dg.DagsterInstance.get()
        if not instance.has_dynamic_partition(MODEL_DIM, model):
            instance.add_dynamic_partitions(MODEL_DIM, [model])
        backfill_id = launch_model_backfill(url, model, levels)
        click.echo(f"backfill {backfill_id} launched: {len(levels)} partitions of {model}; "
                   f"{url.rstrip('/')}/runs/b/{backfill_id}", err=True)
        if wait:
            done = wait_for_backfill(url, backfill_id, echo=lambda m: click.echo(m, err=True))
            if done["status"] not in ("COMPLETED", "COMPLETED_SUCCESS"):
                raise click.ClickException(f"backfill {backfill_id} ended {done['status']}")
            per_model = launch_backfill(url, ("prior_knowledge", "long_scores", "lveval_ablation"), [model], f"long_scores {model}",
                                        {"lcp/backfill": model})
            wait_for_backfill(url, per_model, echo=lambda m: click.echo(m, err=True))
    except (KeyError, ValueError, BackfillError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
@click.option("--config", default=None)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True,
              help="json: every setting of each model and its fingerprint (api_key_env is the name of the variable "
                   "that holds the key, never the key).")
def models(config: str | None, fmt: str) -> None:
    """List registered models and their settings.

    The table shows an openai model's server settings too: api, concurrency, timeout, retries, whether timeouts are
    retried, extra request fields. Credentials in a base_url (user:key@, query values) are shown as ***."""
    from lc_pipeline.commands.output import print_table
    from lc_pipeline.generate.backends import capabilities
    from lc_pipeline.generate.registry import ModelRegistry, redact_url

    s = _settings(config)
    reg = ModelRegistry(s.models_file)
    specs = [reg.get(n) for n in reg.names()]
    if fmt == "json":  # base_url without its credentials (user:key@, query values), as in the table
        click.echo(json.dumps([{**m.shown(), "fingerprint": m.fingerprint()} for m in specs], indent=1))
        return

    def served(m) -> tuple:
        if not capabilities(m.backend).reads("api"):  # no server settings
            return ("",) * 6
        return (m.api, m.max_concurrency, f"{m.request_timeout_s:g}", m.max_retries, m.retry_timeouts,
                json.dumps(m.extra_body) if m.extra_body else "")

    rows = [(m.slug, m.backend, m.model_id, m.max_model_len, redact_url(m.base_url) or "", *served(m), m.fingerprint())
            for m in specs]
    print_table(["model", "backend", "model_id", "max_model_len", "base_url", "api", "concurrency", "timeout_s",
                 "retries", "retry_timeouts", "extra_body", "fingerprint"], rows)


@main.command("remove-model")
@click.argument("name")
@click.option("--config", default=None)
def remove_model(name: str, config: str | None) -> None:
    """Remove a model you registered (`lcp add-model`) from models.yaml.

    Only its entry goes; the file's other entries and comments stay as they are. Its generations and scores stay in
    the lake (the folders named model=NAME), and registering the same settings again reuses them."""
    from lc_pipeline.generate.registry import ModelRegistry, UnknownModelError

    s = _settings(config)
    try:
        spec = ModelRegistry(s.models_file).remove(name)
    except UnknownModelError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Removed model {name!r} ({spec.backend}) from {s.models_file}; its results in the lake are kept "
               f"(model={name} folders).")


@main.group()
def sources() -> None:
    """Inspect source files before using them in a benchmark config."""


@sources.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--kind", default=None, help="Adapter to use (default: detected from the records' fields).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option("--reasons", default=5, show_default=True, help="How many rejection reasons to show per file.")
def sources_validate(paths: tuple[Path, ...], kind: str | None, fmt: str, reasons: int) -> None:
    """Check every record of each file as a run would load it (nothing is written); folders as a run lists them
    (skipped entries shown), the loader's notes printed; exit 1 if any record is rejected or a file is unreadable."""
    from lc_pipeline.commands.sources import validate_sources

    sys.exit(validate_sources(paths, kind, fmt, reasons))


@main.command()
@click.argument("sql")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table")
@click.option("--max-rows", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Print at most this many rows; a longer result says so on stderr and is not fetched.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=600.0, show_default=True,
              help="Stop the query after this many seconds (0: no limit).")
@click.option("--memory-limit", default="25%", show_default=True,
              help="DuckDB's memory limit for the query, e.g. 2GB or 50% (of the machine's memory); past it the "
                   "query stops (nothing is spilled to disk).")
def query(sql: str, fmt: str, max_rows: int, timeout_s: float, memory_limit: str) -> None:
    """Run read-only SQL (SELECT / EXPLAIN) over every lake table (each a DuckDB view, hive columns length/model
    included) and nothing else: writes, files, URLs and extensions outside the lake are refused (exit 1),
    bad SQL exits 1 with DuckDB's message, a query past --timeout or --memory-limit exits 1 saying which."""
    from lc_pipeline.commands.query import print_query
    from lc_pipeline.settings import Settings

    print_query(Settings.from_env().lake_dir, sql, fmt, max_rows, timeout_s=timeout_s, memory_limit=memory_limit)


@main.command()
@click.option("--port", default=3000, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--config", default=None)
def ui(port: int, host: str, config: str | None) -> None:
    """Start the Dagster UI and daemon (`dagster dev`) on this project."""
    s = _settings(config)
    _add_imported_model_partitions(s)
    workspace = s.project_dir / "workspace.yaml"
    target = ["-w", str(workspace)] if workspace.exists() else ["-m", "lc_pipeline.definitions"]
    args = ["dagster", "dev", *target, "-h", host, "-p", str(port)]
    click.echo(f"DAGSTER_HOME={s.dagster_home}\n$ {' '.join(args)}", err=True)
    exe = shutil.which("dagster") or str(Path(sys.executable).with_name("dagster"))
    os.execvp(exe, args)


def _add_imported_model_partitions(s: Settings) -> None:
    """The partitions of imported models whose ``lcp import-predictions`` ran before the instance's storage
    existed (commands/imports.py, instance_storage_exists): added before the UI lists them."""
    from lc_pipeline.commands.imports import imported_model_slugs
    from lc_pipeline.generate.registry import ModelSpecError

    try:
        slugs = imported_model_slugs(s.models_file)
    except ModelSpecError as exc:  # the UI still starts (and shows the definitions' own error)
        click.echo(f"! imported models' partitions not added: {exc}", err=True)
        return
    if not slugs:
        return
    import dagster as dg

    from lc_pipeline.partitions import MODEL_DIM

    instance = dg.DagsterInstance.get()
    new = [slug for slug in slugs if not instance.has_dynamic_partition(MODEL_DIM, slug)]
    if new:
        instance.add_dynamic_partitions(MODEL_DIM, new)


if __name__ == "__main__":
    main()
