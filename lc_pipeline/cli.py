"""`lcp`: the command line, in groups (issue 32).

    lcp run [--config C] [--model M]     build the config's benchmark, evaluate its models, print the leaderboard
    lcp judge | backfill --model M       judge generations alone | run one model's partitions, then the leaderboard
    lcp plan [--model M]                 instances, prompt tokens, truncations, time and cost of a run, before it runs
    lcp models add|list|remove|import    the model registry (import: predictions made elsewhere, as a model)
    lcp tasks list|show                  the declared tasks
    lcp results query|report|compare     read the lake: SQL, one HTML page, two models' paired difference
    lcp tools score|longscore|minilongbench   calculators on your own files (no lake, no config)
    lcp sources validate PATH...         check source files before a config uses them
    lcp ui                               the Dagster UI (webserver + daemon) on this project

Options are declared once (commands/options.py): every command that reads the lake takes --lake (so does `lcp`
itself), every one that reads a config or models.yaml takes --config. The earlier spellings (:data:`OLD_SPELLINGS`,
and `lcp models` without a subcommand) still run, hidden from the help, with one note on stderr.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import os
import shlex
import shutil
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

# Light on purpose (issue 29): a command that does not run the graph imports neither Dagster nor torch, so
# this module imports only click and the options; each command imports what it uses, and the commands of
# lc_pipeline/commands/ are imported only when invoked (LazyCommands). tests/unit/test_cli_imports.py
from lc_pipeline.commands.options import (
    apply_selection,
    config_option,
    format_option,
    lake_option,
    model_option,
    models_option,
    selection_options,
)
from lc_pipeline.settings import env, variables_help

if TYPE_CHECKING:
    from lc_pipeline.settings import Settings


def _settings(config: str | None) -> Settings:
    """The settings of an ``lcp`` command (settings.cli_settings): the name every command below uses."""
    from lc_pipeline.settings import cli_settings

    return cli_settings(config)


def _runner(s: Settings):
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
    from lc_pipeline.dagster_instance import open_instance

    return open_instance(capture_compute_logs=False)


def _print_leaderboard(df) -> None:
    from lc_pipeline.commands.output import print_table
    from lc_pipeline.score.board import board_display, released_board_display

    if df.height and df["base_ability"].is_null().all():  # a benchmark run as released: no LongScore
        cols, rows = released_board_display(df)
        click.echo("\nLeaderboard (each published table's overall, 0-100, averaged over its length partitions; "
                   "ci95: bootstrap over instances; lcp results report shows every task)")
        print_table(cols, rows)
        return

    cols, rows, paired = board_display(df)
    click.echo("\nLeaderboard (scores 0-100; LongScore = 100*(S_l - Base)/Base averaged over the long lengths; "
               "ci95: bootstrap over items; shares of generations skipped / truncated / invalid)")
    for line in paired:
        click.echo(line)
    print_table(cols, rows)

# The commands that live in lc_pipeline/commands/: name -> "module:attribute", imported only when that command
# runs or help lists it (click's LazyGroup pattern), so `lcp results query` never imports matplotlib or the scorers.
LAZY_COMMANDS = {
    "tasks": "lc_pipeline.commands.tasks:tasks",
    "plan": "lc_pipeline.commands.plan:plan",
}
MODELS_COMMANDS = {
    "add": "lc_pipeline.commands.models:add_model",
    "list": "lc_pipeline.commands.models:list_models",
    "remove": "lc_pipeline.commands.models:remove_model",
    "import": "lc_pipeline.commands.imports:import_predictions_command",
}
RESULTS_COMMANDS = {
    "query": "lc_pipeline.commands.query:query",
    "report": "lc_pipeline.commands.report:report",
    "compare": "lc_pipeline.commands.compare:compare",
}
TOOLS_COMMANDS = {
    "score": "lc_pipeline.commands.score:score",
    "longscore": "lc_pipeline.commands.longscore:longscore",
    "minilongbench": "lc_pipeline.commands.minilongbench:minilongbench",
}
# The earlier spellings -> the command's words now. They run as before for one more release, each with one note on
# stderr (stdout stays as it was); `lcp models` alone is the earlier `lcp models list` (the models group's ``bare``).
OLD_SPELLINGS = {
    "demo": "run",
    "add-model": "models add",
    "remove-model": "models remove",
    "import-predictions": "models import",
    "query": "results query",
    "report": "results report",
    "compare": "results compare",
    "score": "tools score",
    "longscore": "tools longscore",
    "minilongbench": "tools minilongbench",
}


def renamed_note(old: str, new: str) -> str:
    """The one line an earlier spelling prints on stderr."""
    return f"note: 'lcp {old}' is now 'lcp {new}'; the old name goes in the next release."


def old_spelling(command: click.Command, old: str, new: str) -> click.Command:
    """``command`` under its earlier name ``old``: the same options and output, hidden from the help, and running it
    first prints :func:`renamed_note` on stderr."""
    renamed = copy.copy(command)
    renamed.name, renamed.hidden = old, True

    def invoke(ctx: click.Context):
        click.echo(renamed_note(old, new), err=True)
        return type(command).invoke(renamed, ctx)

    renamed.invoke = invoke
    return renamed


class LazyCommands(click.Group):
    """An ``lcp`` group: the commands defined on it plus ``lazy_commands`` (name -> "module:attribute"), each imported
    on first use, and the hidden ``old_spellings`` (an earlier name -> the words of its command now). ``bare``: the
    subcommand run when the group is given options only, or nothing (its earlier spelling as one command).

    A bad file the user gave (a config, models.yaml, a task file) ends any command with its error, which
    names the file and the line, and exit status 1: never a traceback (issue 22, item 7)."""

    def __init__(self, *args, lazy_commands: dict[str, str] | None = None, old_spellings: dict[str, str] | None = None,
                 bare: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self.old_spellings = dict(old_spellings or {})
        self.bare = bare

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.old_spellings:
            command: click.Command | None = self
            for word in self.old_spellings[cmd_name].split():
                command = command.get_command(ctx, word) if isinstance(command, click.Group) else None
            if command is None:
                raise TypeError(f"old spelling {cmd_name!r}: no command {self.old_spellings[cmd_name]!r}")
            return old_spelling(command, cmd_name, self.old_spellings[cmd_name])
        if cmd_name not in self.lazy_commands or cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        module_name, attribute = self.lazy_commands[cmd_name].split(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise TypeError(f"{self.lazy_commands[cmd_name]}: expected the click command {cmd_name!r}, got {command!r}")
        self.add_command(command)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if self.bare and (not args or (args[0].startswith("-") and args[0] not in ctx.help_option_names)):
            ctx.meta[f"lcp.bare.{self.name}"] = True
            args = [self.bare, *args]
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The help's list: the commands, then the groups of commands."""
        shown = [(name, command) for name in self.list_commands(ctx)
                 if (command := self.get_command(ctx, name)) is not None and not command.hidden]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        for title, groups in (("Commands", False), ("Groups", True)):
            rows = [(name, command.get_short_help_str(limit)) for name, command in shown
                    if isinstance(command, click.Group) == groups]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        if ctx.meta.pop(f"lcp.bare.{self.name}", False):
            click.echo(renamed_note(self.name, f"{self.name} {self.bare}"), err=True)
        try:
            return super().invoke(ctx)
        except ValueError as exc:  # the three errors below are ValueErrors; imported only when one is raised
            from lc_pipeline.config import ConfigError
            from lc_pipeline.generate.registry import ModelSpecError
            from lc_pipeline.tasks.catalog import TaskFileError

            if isinstance(exc, (ConfigError, ModelSpecError, TaskFileError)):
                raise click.ClickException(str(exc)) from exc
            raise


@click.group(cls=LazyCommands, lazy_commands=LAZY_COMMANDS, old_spellings=OLD_SPELLINGS,
             epilog="Environment variables (docs/environment.md):\n\n\b\n" + variables_help())
@lake_option
def main() -> None:
    """Build long-context benchmarks and evaluate models on them (Dagster assets over a Parquet lake).

    --lake here is the lake of whatever command follows; each command that reads the lake takes it too."""


@main.group(cls=LazyCommands, lazy_commands=MODELS_COMMANDS, bare="list",
            short_help="add | list | remove | import: the model registry.")
def models() -> None:
    """The registered models (models.yaml): add, list, remove, and import predictions made elsewhere as a model."""


@main.group(cls=LazyCommands, lazy_commands=RESULTS_COMMANDS, short_help="query | report | compare: read the lake.")
def results() -> None:
    """Read the lake: query (read-only SQL), report (one HTML page), compare (two models, paired)."""


@main.group(cls=LazyCommands, lazy_commands=TOOLS_COMMANDS,
            short_help="score | longscore | minilongbench: calculators on files.")
def tools() -> None:
    """Calculators on your own files, with no lake and no config: score, longscore, minilongbench fit|estimate."""


LENGTHS_HELP = "Only these length levels (default: all)."


@main.command("run")
@lake_option
@config_option
@models_option
@selection_options
def run_command(config: str | None, models: tuple[str, ...], tasks: str | None, limit: int | None) -> None:
    """Build the config's benchmark and evaluate its models: every step not already done (finished partitions are
    reused), then print the leaderboard. With --tasks / --limit, only that part of the config (its instances are
    another config's: use its own --lake). `make demo` runs it on the embedded default (its earlier name: demo)."""
    _run_graph("run", config, models, tasks, limit)


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


@main.command()
@lake_option
@config_option
@models_option
@click.option("--length", "lengths", multiple=True, help=LENGTHS_HELP)
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
@lake_option
@config_option
@model_option("The model whose partitions to materialize.")
@click.option("--length", "lengths", multiple=True, help=LENGTHS_HELP)
@click.option("--url", default=lambda: env("LCP_DAGSTER_URL"),
              help="A running `lcp ui` (e.g. http://127.0.0.1:3000, or $LCP_DAGSTER_URL): launch a Dagster asset "
                   "backfill there (shown in the UI, executed by its daemon) instead of running in this process.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="With --url: wait for the backfill to end.")
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
    from lc_pipeline.config import load_config
    from lc_pipeline.dagster_instance import add_missing_partitions, open_instance
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
        with open_instance() as instance:
            add_missing_partitions(instance, MODEL_DIM, [model])
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



@main.group(short_help="validate: check source files before a config uses them.")
def sources() -> None:
    """Inspect source files before using them in a benchmark config."""


@sources.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--kind", default=None, help="Adapter to use (default: detected from the records' fields).")
@format_option("table", "json")
@click.option("--reasons", default=5, show_default=True, help="How many rejection reasons to show per file.")
def sources_validate(paths: tuple[Path, ...], kind: str | None, fmt: str, reasons: int) -> None:
    """Check every record of each file as a run would load it (nothing is written); folders as a run lists them
    (skipped entries shown), the loader's notes printed; exit 1 if any record is rejected or a file is unreadable."""
    from lc_pipeline.commands.sources import validate_sources

    sys.exit(validate_sources(paths, kind, fmt, reasons))


@main.command()
@lake_option
@config_option
@click.option("--port", default=3000, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
def ui(port: int, host: str, config: str | None) -> None:
    """Start the Dagster UI and daemon (`dagster dev`) on this project."""
    s = _settings(config)
    _prepare_ui_instance(s)
    workspace = s.project_dir / "workspace.yaml"
    target = ["-w", str(workspace)] if workspace.exists() else ["-m", "lc_pipeline.definitions"]
    args = ["dagster", "dev", *target, "-h", host, "-p", str(port)]
    click.echo(f"DAGSTER_HOME={s.dagster_home}\n$ {' '.join(args)}", err=True)
    exe = shutil.which("dagster") or str(Path(sys.executable).with_name("dagster"))
    # A script's background job (`lcp ui &`) starts with SIGINT ignored, the ignore survives exec, and Dagster gives
    # SIGTERM SIGINT's disposition: `kill` would not stop the UI. Back to the default, SIGTERM stops it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvp(exe, args)


def _prepare_ui_instance(s: Settings) -> None:
    """What ``lcp ui`` does to the instance before ``dagster dev`` opens it: creates its storage where there is none
    yet, holding lcp's instance lock (dagster_instance: another ``lcp`` command started at the same time on a new
    DAGSTER_HOME would otherwise race ``dagster dev`` to create it), and adds the partitions of imported models
    whose ``lcp models import`` ran before the storage existed (commands/imports.py, instance_storage_exists)."""
    from lc_pipeline.commands.imports import imported_model_slugs, instance_storage_exists
    from lc_pipeline.generate.registry import ModelSpecError

    try:
        slugs = imported_model_slugs(s.models_file)
    except ModelSpecError as exc:  # the UI still starts (and shows the definitions' own error)
        click.echo(f"! imported models' partitions not added: {exc}", err=True)
        slugs = []
    if not slugs and instance_storage_exists(s.dagster_home):
        return
    from lc_pipeline.dagster_instance import add_missing_partitions, open_instance
    from lc_pipeline.partitions import MODEL_DIM

    with open_instance() as instance:
        add_missing_partitions(instance, MODEL_DIM, slugs)


if __name__ == "__main__":
    main()
