"""Options several commands share, declared once (issue 32): ``--tasks`` / ``--limit`` (a run of part of the config,
config.RunSelection, lm-evaluation-harness's habit). Light on purpose: click only, imported by cli.py at start-up."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable

import click

TASKS_HELP = "Only these of the config's tasks, comma-separated (default: all)."
LIMIT_HELP = "At most N instances per task and length level, to try a config out (default: all)."


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
