"""DuckDB over the Parquet lake: one view per table, queried read-only.

Each view reads its table's hive layout with ``read_parquet(..., hive_partitioning = true)``,
so ``length`` and ``model`` are columns and a filter on them skips whole files (``EXPLAIN``
shows ``File Filters`` and ``Scanning Files: 1/N``).

The views are also kept in ``<lake>/lake.duckdb`` for other tools (``duckdb -readonly
data_lake/lake.duckdb``, notebooks). That file holds views only, no data: no pipeline run
opens it, and ``lcp query`` opens it for writing only when the set of tables changed (new
partitions need nothing: the views glob the table folders). If another process holds it
for writing, the query runs on the same views built in memory instead of waiting.

A lake on an object store (``LCP_LAKE=s3://bucket/lake``) is read the same way, through the
fsspec filesystem the pipeline writes with (registered on the connection; credentials from the
environment, see :mod:`lc_pipeline.storage`). We do not use DuckDB's httpfs extension: DuckDB
downloads it from its own extension site at first use, which a machine that reaches only
package registries cannot do, and there is no pip wheel of it for this DuckDB version. Such a
lake has no ``lake.duckdb`` (a database file cannot live in a bucket): the views are built in
memory for each connection.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from lc_pipeline import storage
from lc_pipeline.resources.parquet_io import FILE_NAME

DB_NAME = "lake.duckdb"
# hive_types_autocast off: partition values stay text ("1k", "2k", a model slug such as "7b").
READ_OPTIONS = "hive_partitioning = true, hive_types_autocast = false, union_by_name = true"
# Only statements that cannot change anything. COPY ... TO, EXPORT, ATTACH, SET, CALL (checkpoint) are
# refused as well as DDL/DML: a read-only database file would still let COPY write files.
READ_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
_EXPLAIN = re.compile(r"^\s*explain\s+(analy[sz]e\s+)?", re.IGNORECASE)
# DuckDB parses a PIVOT without an IN list as MULTI (it first reads the distinct values into a
# temporary enum type). ALTER, multi-table DELETE/TRUNCATE and PRAGMA expansions are MULTI too,
# so a MULTI statement passes only when it starts as a query does and mentions PIVOT.
_PIVOT = re.compile(r"^[\s(]*(pivot\b|(select|with|from)\b.*\bpivot\b)", re.IGNORECASE | re.DOTALL)


class QueryRefused(ValueError):
    """A statement that could write was given to a read-only query."""


def table_dirs(lake_dir: Path) -> dict[str, Path]:
    """Tables are top-level folders holding at least one data file (checkpoints are skipped)."""
    lake_dir = storage.lake_path(lake_dir)
    if not lake_dir.exists():
        return {}
    return {
        d.name: d
        for d in sorted(lake_dir.iterdir(), key=lambda p: p.name)
        if d.is_dir() and not d.name.startswith(("_", ".")) and next(d.rglob(FILE_NAME), None) is not None
    }


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def view_source(table_dir: Path) -> str:
    """The ``read_parquet`` call behind a table's view."""
    pattern = f"{storage.url(table_dir)}/**/{FILE_NAME}"
    return f"read_parquet({_quote(pattern)}, {READ_OPTIONS})"


def create_views(con: duckdb.DuckDBPyConnection, tables: dict[str, Path]) -> None:
    for name, d in tables.items():
        storage.register_filesystem(con, d)  # a no-op for local folders
        source = view_source(d)
        con.execute(f'create or replace view "{name}" as select * from {source}')
        # The comment records the source so a later refresh can tell whether the view is current.
        con.execute(f'comment on view "{name}" is {_quote(source)}')


def _current_views(db: Path) -> dict[str, str] | None:
    if not db.exists():
        return None
    with duckdb.connect(str(db), read_only=True) as con:
        return dict(con.execute("select view_name, coalesce(comment, '') from duckdb_views() where not internal")
                    .fetchall())


def refresh_views(lake_dir: Path) -> Path:
    """Bring ``lake.duckdb`` up to date with the lake's tables; writes only when they changed."""
    if not storage.is_local(lake_dir):
        raise ValueError(f"{lake_dir}: a lake on an object store has no views file; use lake.connect()")
    lake_dir = Path(lake_dir).resolve()
    db = lake_dir / DB_NAME
    tables = table_dirs(lake_dir)
    wanted = {name: view_source(d) for name, d in tables.items()}
    if _current_views(db) == wanted:
        return db
    lake_dir.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(db)) as con:
        existing = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
        create_views(con, tables)
        for stale in existing - set(tables):
            con.execute(f'drop view if exists "{stale}"')
    return db


def check_read_only(sql: str) -> None:
    """Raise QueryRefused unless every statement in ``sql`` only reads (a syntax error raises DuckDB's own)."""
    statements = duckdb.extract_statements(sql)
    if not statements:
        raise QueryRefused("no SQL statement given")
    for st in statements:
        if st.type == duckdb.StatementType.MULTI and _PIVOT.match(st.query):
            continue
        if st.type not in READ_STATEMENTS:
            raise QueryRefused(
                f"refused: {st.type.name} statements can change data; lcp query runs SELECT / EXPLAIN only "
                f"(statement: {st.query.strip()[:80]!r})"
            )
        if st.type == duckdb.StatementType.EXPLAIN:
            # EXPLAIN ANALYZE executes its statement, so that statement must be read-only too.
            check_read_only(_EXPLAIN.sub("", st.query, count=1))


def connect(lake_dir: Path) -> duckdb.DuckDBPyConnection:
    """A connection with one view per lake table: ``lake.duckdb`` opened read-only, or the same
    views in memory when another process holds that file for writing. Close it when done."""
    lake_dir = storage.lake_path(lake_dir)
    tables = table_dirs(lake_dir)
    if not tables:
        raise FileNotFoundError(f"the lake {lake_dir} has no tables yet: run `lcp demo` (or materialize assets) first")
    if not storage.is_local(lake_dir):
        con = duckdb.connect()
        create_views(con, tables)
        return con
    try:
        return duckdb.connect(str(refresh_views(lake_dir)), read_only=True)
    except duckdb.IOException:  # "Could not set lock on file": someone else is writing to it
        con = duckdb.connect()
        create_views(con, tables)
        return con


def query(lake_dir: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run read-only ``sql`` over the lake's views; returns (column names, rows)."""
    check_read_only(sql)
    with connect(lake_dir) as con:
        cur = con.execute(sql)
        columns = [d[0] for d in cur.description] if cur.description else []
        return columns, cur.fetchall()


def frame(lake_dir: Path, sql: str):
    """Run read-only ``sql`` and return a polars DataFrame."""
    check_read_only(sql)
    with connect(lake_dir) as con:
        return con.sql(sql).pl()
