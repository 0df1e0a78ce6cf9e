"""Options several `lcp` commands share, declared once here (issue 32): ``--lake``, ``--config``, ``--model``,
``--format`` and ``--tasks`` / ``--limit`` (a run of part of the config, config.RunSelection, lm-evaluation-harness's
habit). A command that reads the lake takes ``--lake``; one that reads a config or the project's models.yaml takes
``--config``. Light on purpose: click only, imported by cli.py at start-up."""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable
from pathlib import Path

import click

LAKE_HELP = ("The Parquet lake: a folder or a bucket URL (default: $LCP_LAKE, else ./data_lake). Sets LCP_LAKE for "
             "the command and the runs it starts.")
CONFIG_HELP = ("The benchmark config: a packaged name (demo, default, longbench, ...) or a YAML file (default: "
               "$LCP_CONFIG, else demo).")
MODELS_HELP = "A registered model; repeat for several (default: the config's models)."
TASKS_HELP = "Only these of the config's tasks, comma-separated (default: all)."
LIMIT_HELP = "At most N instances per task and length level, to try a config out (default: all)."
FORMAT_HELP = "How to print the result."

# ctx.meta key (shared by every context of one `lcp` invocation): the --lake given first, before or after the command.
_GIVEN_LAKE = "lcp.lake"

config_option = click.option("--config", default=None, metavar="NAME|FILE", help=CONFIG_HELP)
models_option = click.option("--model", "models", multiple=True, metavar="NAME", help=MODELS_HELP)


def model_option(help: str) -> Callable[[Callable], Callable]:
    """``--model NAME``, required and given once (a command about one model; ``help`` says which)."""
    return click.option("--model", "model", required=True, metavar="NAME", help=help)


def format_option(*choices: str, help: str = FORMAT_HELP) -> Callable[[Callable], Callable]:
    """``--format`` among ``choices`` (the first is the default), passed to the command as ``fmt``."""
    return click.option("--format", "fmt", type=click.Choice(choices), default=choices[0], show_default=True,
                        help=help)


def lake_option(command: Callable) -> Callable:
    """``--lake DIR|URL`` on ``command`` (a command, or the ``lcp`` group itself). Its function does not take it:
    the lake is set as LCP_LAKE when the command runs (so parsing a command line, as the docs test does, changes
    nothing). ``lcp --lake A cmd --lake B`` with two different lakes is a usage error."""

    @functools.wraps(command)
    def with_lake(*args, lake: str | None = None, **kwargs):
        use_lake(lake)
        return command(*args, **kwargs)

    return click.option("--lake", default=None, metavar="DIR|URL", help=LAKE_HELP)(with_lake)


def use_lake(lake: str | None) -> None:
    """Set LCP_LAKE to ``lake`` (None: leave it); refuse an empty one, or one that differs from the --lake given
    earlier on the same command line."""
    if lake is None:
        return
    if not lake.strip():
        raise click.BadParameter("empty", param_hint="--lake")
    meta = click.get_current_context().meta
    given = meta.setdefault(_GIVEN_LAKE, lake)
    if not _same_lake(given, lake):
        raise click.UsageError(f"--lake given twice with two lakes, {given!r} and {lake!r}: give one")
    os.environ["LCP_LAKE"] = lake


def _same_lake(a: str, b: str) -> bool:
    if a == b:
        return True
    return "://" not in a and "://" not in b and Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def selection_options(command: Callable) -> Callable:
    """``--tasks T,...`` and ``--limit N`` on ``command`` (its callback takes ``tasks`` and ``limit``)."""
    command = click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N", help=LIMIT_HELP)(command)
    return click.option("--tasks", default=None, metavar="T,...", help=TASKS_HELP)(command)


def apply_selection(tasks: str | None, limit: int | None) -> str:
    """Set LCP_TASKS / LCP_LIMIT for this command and the runs it starts (settings.Settings reads them); the options
    to repeat when resuming (``" --tasks ... --limit N"``, or "")."""
    if tasks is not None:
        os.environ["LCP_TASKS"] = ",".join(t.strip() for t in tasks.split(",") if t.strip())
    if limit is not None:
        os.environ["LCP_LIMIT"] = str(limit)
    return (f" --tasks {shlex.quote(tasks)}" if tasks else "") + (f" --limit {limit}" if limit else "")
