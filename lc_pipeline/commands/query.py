"""`lcp results query`: read-only SQL over the lake's tables, and nothing else (issue 22, item 4).

    lcp results query "SQL" [--lake DIR] [--format table|csv|json] [--max-rows N]

The SQL runs on a connection locked to the lake (:func:`lc_pipeline.lake.connect`): a file, URL
or extension outside it, or a write, exits 1 with a message naming the lake's tables. At most
``--max-rows`` rows (default 10,000) are printed; when the query returns more, the rest is never
fetched and stderr says so, so ``select * from range(10000000)`` prints its first rows instead of
running out of memory. The query runs under a memory limit (``--memory-limit``, default
:data:`lc_pipeline.lake.MEMORY_LIMIT` of the machine's memory, no spilling to disk) and a wall-clock
limit (``--timeout``, default :data:`DEFAULT_TIMEOUT_S` seconds): past either it exits 1 saying which.
Folders of the lake that are not read as tables (a name outside ``[a-z0-9_]+``), and a ``lake.duckdb``
that is not used (a symbolic link), are named on stderr.
"""

from __future__ import annotations

from pathlib import Path

import click
import duckdb

from lc_pipeline import lake
from lc_pipeline.commands.options import format_option, lake_option
from lc_pipeline.commands.output import print_table

DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 600.0


def print_query(lake_dir: Path, sql: str, fmt: str = "table", max_rows: int = DEFAULT_MAX_ROWS, *,
                timeout_s: float | None = DEFAULT_TIMEOUT_S, memory_limit: str = lake.MEMORY_LIMIT) -> None:
    """Print ``sql``'s result over the lake; a refused, failing, too long or too large query raises
    ``click.ClickException`` with the reason (no traceback), a longer result is cut at ``max_rows`` with a
    note on stderr."""
    for note in lake.notes(lake_dir):
        click.echo(f"note: {note}", err=True)
    try:
        columns, rows = lake.query(lake_dir, sql, max_rows=max_rows, timeout_s=timeout_s, memory_limit=memory_limit)
    except (duckdb.Error, FileNotFoundError, lake.QueryRefused) as exc:
        raise click.ClickException(str(exc)) from exc
    more = len(rows) > max_rows
    print_table(columns, rows[:max_rows], fmt)
    if more:
        click.echo(f"showing the first {max_rows} of more rows; add LIMIT or --max-rows", err=True)


@click.command("query")
@click.argument("sql")
@lake_option
@format_option("table", "csv", "json")
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
    from lc_pipeline.settings import Settings

    print_query(Settings.from_env().lake_dir, sql, fmt, max_rows, timeout_s=timeout_s, memory_limit=memory_limit)

