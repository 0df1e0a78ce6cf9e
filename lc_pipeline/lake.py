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

A connection reads only the lake (issue 22, item 4). It opens with extension autoinstall and
autoload off, so no query installs an extension under ``~/.duckdb`` or reaches the network (an
``https://`` path or ``sqlite_scan`` would otherwise fetch httpfs / sqlite_scanner); once the views
exist, ``allowed_directories`` is set to the lake, ``enable_external_access`` is turned off and the
configuration is locked, and only then does the caller's SQL run. ``read_csv('/etc/passwd')``,
``read_blob('/proc/self/environ')``, ``ATTACH``, ``COPY ... TO`` or a URL outside the lake then fail
in DuckDB itself (``Permission Error: Cannot access file ...``), whatever :func:`check_read_only`
lets through; :func:`query` and :func:`frame` raise :class:`OutsideLake` for them. DuckDB's
``allowed_directories`` compares normalized paths, so ``<lake>/../x`` is refused too.

A table whose files cannot be read (a truncated Parquet file) breaks only its own view: when its
view cannot be created, a stand-in view of the same name raises ``table T cannot be read: ...``
naming the file, and every other table reads as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from lc_pipeline import storage
from lc_pipeline.storage import FILE_NAME

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


# Set when a connection opens, before any view exists: nothing the SQL names is installed or loaded
# behind its back, and no persistent secret is read from the home folder.
CONNECT_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_persistent_secrets": False,
}
SHOW_TABLES = 'lcp query "show tables"'


class QueryRefused(ValueError):
    """A statement that could write, or read outside the lake, was given to a lake query."""


class OutsideLake(QueryRefused):
    """The query read a file, URL or extension outside the lake, which the locked connection refuses."""


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


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def create_views(con: duckdb.DuckDBPyConnection, tables: dict[str, Path]) -> dict[str, str]:
    """One view per table; returns ``{table: DuckDB's reason}`` for the tables whose files cannot
    be read (a corrupt Parquet file), which get no view: the other tables are not held back."""
    unreadable: dict[str, str] = {}
    for name, d in tables.items():
        storage.register_filesystem(con, d)  # a no-op for local folders
        source = view_source(d)
        try:  # DuckDB reads every file's footer here (union_by_name): a truncated file fails now
            con.execute(f'create or replace view "{name}" as select * from {source}')
        except duckdb.Error as exc:
            unreadable[name] = re.sub(r"^[A-Za-z ]*Error: ", "", _first_line(exc))
            continue
        # The comment records the source so a later refresh can tell whether the view is current.
        con.execute(f'comment on view "{name}" is {_quote(source)}')
    return unreadable


def _stand_in_views(con: duckdb.DuckDBPyConnection, unreadable: dict[str, str]) -> None:
    """A temporary view for each unreadable table that has no view, raising DuckDB's reason (which
    names the file) whenever a query reads it. The filter keeps ``count(*)`` from skipping the error."""
    have = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    for name, why in unreadable.items():
        if name in have:  # a view made while its files were whole: DuckDB's own error names the file
            continue
        message = _quote(f"table {name} cannot be read: {why}")
        con.execute(f'create or replace temp view "{name}" as select error({message}) as unreadable '
                    f"from range(1) where error({message}) is null")


def allowed_directories(lake_dir: Path) -> list[str]:
    """The prefixes DuckDB may read once locked: the lake's folder, as DuckDB spells its files
    (fsspec's ``memory:///b`` has three slashes where the URL has two)."""
    p = storage.lake_path(lake_dir)
    if storage.is_local(p):
        return [str(Path(p).resolve()) + "/"]
    return list(dict.fromkeys([storage.url(p).rstrip("/") + "/", p.fs.unstrip_protocol(p.path).rstrip("/") + "/"]))


def lock_down(con: duckdb.DuckDBPyConnection, lake_dir: Path) -> None:
    """From now on ``con`` reads the lake's folder only and its settings cannot change
    (``SET enable_external_access = true`` fails: the configuration is locked)."""
    if con.execute("select current_setting('lock_configuration')").fetchone()[0]:
        return  # another open connection of this process already locked the same lake.duckdb
    dirs = ", ".join(_quote(d) for d in allowed_directories(lake_dir))
    con.execute(f"set allowed_directories = [{dirs}]")
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")


def _views(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The connection's views and their comments (each view's source, see :func:`create_views`)."""
    return dict(con.execute("select view_name, coalesce(comment, '') from duckdb_views() where not internal")
                .fetchall())


def _current_views(db: Path) -> dict[str, str] | None:
    if not db.exists():
        return None
    with duckdb.connect(str(db), read_only=True) as con:
        return _views(con)


def _open_if_current(db: Path, wanted: dict[str, str]) -> duckdb.DuckDBPyConnection | None:
    """``lake.duckdb`` opened read-only for a query when its views are ``wanted`` (one open: what
    ``lcp query`` costs beyond DuckDB's own is start-up, issue 29); None when it is missing or stale."""
    if not db.exists():
        return None
    con = duckdb.connect(str(db), read_only=True, config=CONNECT_CONFIG)
    try:
        current = _views(con) == wanted
    except BaseException:
        con.close()
        raise
    if current:
        return con
    con.close()
    return None


def refresh_views(lake_dir: Path) -> Path:
    """Bring ``lake.duckdb`` up to date with the lake's tables; writes only when they changed."""
    return _refresh_views(lake_dir)[0]


def _refresh_views(lake_dir: Path) -> tuple[Path, dict[str, str]]:
    """``lake.duckdb`` and the tables whose view could not be made (see :func:`create_views`); a
    table that stays unreadable makes each call try again, so a repaired file is picked up."""
    if not storage.is_local(lake_dir):
        raise ValueError(f"{lake_dir}: a lake on an object store has no views file; use lake.connect()")
    lake_dir = Path(lake_dir).resolve()
    db = lake_dir / DB_NAME
    tables = table_dirs(lake_dir)
    wanted = {name: view_source(d) for name, d in tables.items()}
    if _current_views(db) == wanted:
        return db, {}
    lake_dir.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(db), config=CONNECT_CONFIG) as con:
        existing = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
        unreadable = create_views(con, tables)
        for stale in existing - set(tables):
            con.execute(f'drop view if exists "{stale}"')
    return db, unreadable


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
                f"refused: {st.type.name} statements can change data or reach outside the lake; lcp query "
                f"runs SELECT / EXPLAIN over the lake's tables only ({SHOW_TABLES} lists them) "
                f"(statement: {st.query.strip()[:80]!r})"
            )
        if st.type == duckdb.StatementType.EXPLAIN:
            # EXPLAIN ANALYZE executes its statement, so that statement must be read-only too.
            check_read_only(_EXPLAIN.sub("", st.query, count=1))


def connect(lake_dir: Path) -> duckdb.DuckDBPyConnection:
    """A connection with one view per lake table that reads nothing but the lake (see the module
    docstring): ``lake.duckdb`` opened read-only, or the same views in memory when another process
    holds that file for writing. Close it when done."""
    lake_dir = storage.lake_path(lake_dir)
    tables = table_dirs(lake_dir)
    if not tables:
        raise FileNotFoundError(f"the lake {lake_dir} has no tables yet: run `lcp demo` (or materialize assets) first")
    con = None
    unreadable: dict[str, str] = {}
    if storage.is_local(lake_dir):
        try:
            wanted = {name: view_source(d) for name, d in tables.items()}
            con = _open_if_current(Path(lake_dir).resolve() / DB_NAME, wanted)
            if con is None:
                db, unreadable = _refresh_views(lake_dir)
                con = duckdb.connect(str(db), read_only=True, config=CONNECT_CONFIG)
        except (duckdb.IOException, duckdb.ConnectionException):
            # "Could not set lock on file" (another process is writing it), or this process holds it open with
            # other settings: the views are built in memory below
            pass
    if con is None:
        con = duckdb.connect(config=CONNECT_CONFIG)
        unreadable = create_views(con, tables)
    try:
        _stand_in_views(con, unreadable)
        lock_down(con, lake_dir)
    except BaseException:
        con.close()
        raise
    return con


def _outside_lake(con: duckdb.DuckDBPyConnection, exc: duckdb.Error) -> OutsideLake | None:
    """The error to raise instead of DuckDB's when ``exc`` is the lock refusing a read outside the
    lake, or a function that lives in an extension (which the connection will not install)."""
    text = _first_line(exc)
    extension = isinstance(exc, duckdb.CatalogException) and re.search(r"exists in the \w+ extension", text)
    if not (isinstance(exc, duckdb.PermissionException) or extension):
        return None
    names = [r[0] for r in con.execute("select view_name from duckdb_views() where not internal "
                                       "order by view_name").fetchall()]
    return OutsideLake(f"lcp query reads only the lake's tables ({', '.join(names)}; {SHOW_TABLES} lists them), "
                       f"no other file, URL or extension: {text}")


@contextmanager
def _reading(lake_dir: Path, sql: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """A locked connection for read-only ``sql`` (refused otherwise); DuckDB refusing a read outside the lake
    inside the block becomes :class:`OutsideLake`."""
    check_read_only(sql)
    with connect(lake_dir) as con:
        try:
            yield con
        except duckdb.Error as exc:
            outside = _outside_lake(con, exc)
            if outside is None:
                raise
            raise outside from exc


def query(lake_dir: Path, sql: str, max_rows: int | None = None) -> tuple[list[str], list[tuple]]:
    """Run read-only ``sql`` over the lake's views; returns (column names, rows).

    With ``max_rows`` at most ``max_rows + 1`` rows are fetched (DuckDB streams the rest away
    unread), so a caller can tell that there were more without holding them all."""
    with _reading(lake_dir, sql) as con:
        cur = con.execute(sql)
        columns = [d[0] for d in cur.description] if cur.description else []
        return columns, (cur.fetchall() if max_rows is None else cur.fetchmany(max_rows + 1))


def frame(lake_dir: Path, sql: str):
    """Run read-only ``sql`` and return a polars DataFrame."""
    with _reading(lake_dir, sql) as con:
        return con.sql(sql).pl()
