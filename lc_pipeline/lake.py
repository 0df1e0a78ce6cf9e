"""DuckDB over the Parquet lake: one view per table, queried read-only.

Each view reads its table's hive layout with ``read_parquet(..., hive_partitioning = true)``,
so ``length`` and ``model`` are columns and a filter on them skips whole files (``EXPLAIN``
shows ``File Filters`` and ``Scanning Files: 1/N``).

The views are also kept in ``<lake>/lake.duckdb`` for other tools (``duckdb -readonly
data_lake/lake.duckdb``, notebooks). That file holds views only, no data: no pipeline run
opens it, and ``lcp results query`` rewrites it only when the set of tables changed (new partitions
need nothing: the views glob the table folders). It is rewritten whole: a new file is built
beside it and renamed over it, so a view that can no longer be made (a lake copied elsewhere,
a truncated file) never stays behind pointing at old files, and anything else the file came to
hold (a table) is gone. A ``lake.duckdb`` that is a symbolic link or not a regular file is
neither opened nor written (it would write or read outside the lake): the query runs on the
same views built in memory, as it does when another process holds the file for writing.

Names and paths reach SQL only quoted: a table is a top-level folder whose name matches
``[a-z0-9_]+`` (other folders are not tables and :func:`notes` lists them), and the view name
is quoted with ``"`` doubled all the same; paths are quoted with ``'`` doubled and their glob
characters (``*``, ``?``, ``[``) escaped, so a lake under ``lk[1]/`` reads its own files.

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
configuration is locked, and only then does any SQL run: the views, too, are made on a
locked connection, so nothing a folder's name or a file's content could smuggle into them reaches
outside the lake. Each connection has a memory limit (:data:`MEMORY_LIMIT`, DuckDB's ``memory_limit``,
no spilling to disk) and :func:`query` a wall-clock limit (``timeout_s``; DuckDB's ``interrupt``). ``read_csv('/etc/passwd')``,
``read_blob('/proc/self/environ')``, ``ATTACH``, ``COPY ... TO`` or a URL outside the lake then fail
in DuckDB itself (``Permission Error: Cannot access file ...``), whatever :func:`check_read_only`
lets through; :func:`query` and :func:`frame` raise :class:`OutsideLake` for them. DuckDB's
``allowed_directories`` compares normalized paths, so ``<lake>/../x`` is refused too.

A table whose files cannot be read (a truncated Parquet file) breaks only its own view: when its
view cannot be created, a stand-in view of the same name raises ``table T cannot be read: ...``
naming the file, and every other table reads as before.
"""

from __future__ import annotations

import json
import re
import threading
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
    "temp_directory": "",  # no spilling: nothing is written, a query past the memory limit fails instead
}
# DuckDB's memory_limit for a lake connection (its default is 80% of the machine): a query past it fails with
# DuckDB's "Out of Memory Error" instead of taking the machine. `lcp query --memory-limit` sets another.
MEMORY_LIMIT = "25%"
# A table is a top-level folder with this name (schemas.TABLES all match); any other folder is not read.
TABLE_NAME = re.compile(r"[a-z0-9_]+")
SHOW_TABLES = 'lcp results query "show tables"'


class QueryRefused(ValueError):
    """A statement that could write, or read outside the lake, was given to a lake query."""


class OutsideLake(QueryRefused):
    """The query read a file, URL or extension outside the lake, which the locked connection refuses."""


class QueryTimeout(QueryRefused):
    """The query ran past its wall-clock limit and was interrupted."""


def _data_folders(lake_dir: Path) -> list[Path]:
    """Top-level folders holding at least one data file (``_`` and ``.`` folders, e.g. checkpoints, skipped)."""
    lake_dir = storage.lake_path(lake_dir)
    if not lake_dir.exists():
        return []
    return [d for d in sorted(lake_dir.iterdir(), key=lambda p: p.name)
            if d.is_dir() and not d.name.startswith(("_", ".")) and next(d.rglob(FILE_NAME), None) is not None]


def table_dirs(lake_dir: Path) -> dict[str, Path]:
    """Tables are top-level folders named ``[a-z0-9_]+`` holding at least one data file (checkpoints are
    skipped); a folder with another name is not a table (:func:`notes` says so)."""
    return {d.name: d for d in _data_folders(lake_dir) if TABLE_NAME.fullmatch(d.name)}


def notes(lake_dir: Path) -> list[str]:
    """What a query over the lake leaves out, one line each: data folders whose name is not a table name,
    and a ``lake.duckdb`` that is not used (a link, or not a regular file)."""
    out = [f"folder {d.name!r} in the lake is not read: a table's folder name matches {TABLE_NAME.pattern}"
           for d in _data_folders(lake_dir) if not TABLE_NAME.fullmatch(d.name)]
    why = _unusable_db(Path(lake_dir).resolve() / DB_NAME) if storage.is_local(lake_dir) else None
    if why:
        out.append(f"{Path(lake_dir) / DB_NAME} is not used ({why}); the views are built in memory")
    return out


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _ident(name: str) -> str:
    """``name`` as a quoted SQL identifier (``"`` doubled)."""
    return '"' + name.replace('"', '""') + '"'


def _glob_escape(path: str) -> str:
    """``path`` with DuckDB's glob characters matching only themselves (``[`` -> ``[[]``)."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def view_source(table_dir: Path) -> str:
    """The ``read_parquet`` call behind a table's view."""
    pattern = f"{_glob_escape(storage.url(table_dir))}/**/{FILE_NAME}"
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
            con.execute(f"create or replace view {_ident(name)} as select * from {source}")
        except duckdb.Error as exc:
            unreadable[name] = re.sub(r"^[A-Za-z ]*Error: ", "", _first_line(exc))
            continue
        # The comment records the source so a later refresh can tell whether the view is current.
        con.execute(f"comment on view {_ident(name)} is {_quote(source)}")
    return unreadable


def _stand_in_views(con: duckdb.DuckDBPyConnection, unreadable: dict[str, str]) -> None:
    """A temporary view for each unreadable table that has no view, raising DuckDB's reason (which
    names the file) whenever a query reads it. The filter keeps ``count(*)`` from skipping the error."""
    have = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    for name, why in unreadable.items():
        if name in have:  # a view made while its files were whole: DuckDB's own error names the file
            continue
        message = _quote(f"table {name} cannot be read: {why}")
        con.execute(f"create or replace temp view {_ident(name)} as select error({message}) as unreadable "
                    f"from range(1) where error({message}) is null")


def allowed_directories(lake_dir: Path) -> list[str]:
    """The prefixes DuckDB may read once locked: the lake's folder, as DuckDB spells its files
    (fsspec's ``memory:///b`` has three slashes where the URL has two)."""
    p = storage.lake_path(lake_dir)
    if storage.is_local(p):
        dirs = [str(Path(p).resolve()) + "/"]
    else:
        dirs = [storage.url(p).rstrip("/") + "/", p.fs.unstrip_protocol(p.path).rstrip("/") + "/"]
    # DuckDB checks a glob pattern as written: the views' escaped spelling (lk[[]1]/) is the same folder.
    return list(dict.fromkeys([*dirs, *map(_glob_escape, dirs)]))


def lock_down(con: duckdb.DuckDBPyConnection, lake_dir: Path) -> None:
    """From now on ``con`` reads the lake's folder only and its settings cannot change
    (``SET enable_external_access = true`` fails: the configuration is locked)."""
    if con.execute("select current_setting('lock_configuration')").fetchone()[0]:
        return  # another open connection of this process already locked the same lake.duckdb
    dirs = ", ".join(_quote(d) for d in allowed_directories(lake_dir))
    con.execute(f"set allowed_directories = [{dirs}]")
    con.execute("set enable_external_access = false")
    con.execute("set lock_configuration = true")


def _open(path: Path | None, lake_dir: Path, *, read_only: bool, memory_limit: str) -> duckdb.DuckDBPyConnection:
    """A connection to ``path`` (None: in memory), locked to the lake before any other SQL runs on it."""
    con = duckdb.connect(":memory:" if path is None else str(path), read_only=read_only,
                         config={**CONNECT_CONFIG, "memory_limit": memory_limit})
    try:
        storage.register_filesystem(con, lake_dir)  # an object store's fsspec filesystem; a no-op for local folders
        lock_down(con, lake_dir)
    except BaseException:
        con.close()
        raise
    return con


def _unusable_db(db: Path) -> str | None:
    """Why ``lake.duckdb`` may not be opened or replaced, or None: it must be absent, or a regular file that is
    no symbolic link (else it would be read or written outside the lake)."""
    if db.is_symlink() or (db.exists() and not db.is_file()):
        return "a symbolic link or not a regular file: it would be read or written outside the lake"
    if "?" in str(db):  # DuckDB puts its write-ahead log at "<path before ?>.wal?<rest>", outside the lock
        return "its path holds '?', which DuckDB's write-ahead log does not handle"
    return None


def _usable_db(db: Path) -> bool:
    return _unusable_db(db) is None


def _views(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The connection's views and their comments (each view's source, see :func:`create_views`)."""
    return dict(con.execute("select view_name, coalesce(comment, '') from duckdb_views() where not internal")
                .fetchall())


def _holds_only(con: duckdb.DuckDBPyConnection, wanted: dict[str, str]) -> bool:
    """Whether the database holds the ``wanted`` views and nothing else (no table, macro or sequence)."""
    others = con.execute("select (select count(*) from duckdb_tables() where not internal) "
                         "+ (select count(*) from duckdb_sequences() where not temporary) "
                         "+ (select count(*) from duckdb_functions() where not internal "
                         "   and function_type in ('macro', 'table_macro'))").fetchone()[0]
    return others == 0 and _views(con) == wanted


def _open_if_current(db: Path, lake_dir: Path, wanted: dict[str, str], memory_limit: str
                     ) -> duckdb.DuckDBPyConnection | None:
    """``lake.duckdb`` opened read-only (and locked) for a query when it holds the ``wanted`` views and nothing
    else (one open: what ``lcp results query`` costs beyond DuckDB's own is start-up, issue 29); None when it is
    missing or stale."""
    if not db.exists():
        return None
    con = _open(db, lake_dir, read_only=True, memory_limit=memory_limit)
    try:
        current = _holds_only(con, wanted)
    except BaseException:
        con.close()
        raise
    if current:
        return con
    con.close()
    return None


def refresh_views(lake_dir: Path) -> Path:
    """Bring ``lake.duckdb`` up to date with the lake's tables; writes only when they changed."""
    lake_dir = Path(lake_dir).resolve()
    tables = table_dirs(lake_dir)
    wanted = {name: view_source(d) for name, d in tables.items()}
    con = _open_if_current(lake_dir / DB_NAME, lake_dir, wanted, MEMORY_LIMIT) if _usable_db(lake_dir / DB_NAME) \
        else None
    if con is not None:
        con.close()
        return lake_dir / DB_NAME
    return _rebuild_views(lake_dir, tables, MEMORY_LIMIT)[0]


def _rebuild_views(lake_dir: Path, tables: dict[str, Path], memory_limit: str) -> tuple[Path, dict[str, str]]:
    """A new ``lake.duckdb`` holding one view per readable table, made on a locked connection in a file beside
    it and renamed over it (no stale view or other object survives), and the tables whose view could not be made
    (see :func:`create_views`): a table that stays unreadable makes each call try again, so a repaired file is
    picked up."""
    if not storage.is_local(lake_dir):
        raise ValueError(f"{lake_dir}: a lake on an object store has no views file; use lake.connect()")
    db = Path(lake_dir).resolve() / DB_NAME
    why = _unusable_db(db)
    if why:
        raise ValueError(f"{db} is not written: {why}")
    with storage.replacing(db) as tmp, _open(tmp, lake_dir, read_only=False, memory_limit=memory_limit) as con:
        unreadable = create_views(con, tables)  # con closes before the file is renamed
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
                f"refused: {st.type.name} statements can change data or reach outside the lake; lcp results query "
                f"runs SELECT / EXPLAIN over the lake's tables only ({SHOW_TABLES} lists them) "
                f"(statement: {st.query.strip()[:80]!r})"
            )
        if st.type == duckdb.StatementType.EXPLAIN:
            # EXPLAIN ANALYZE executes its statement, so that statement must be read-only too.
            check_read_only(_EXPLAIN.sub("", st.query, count=1))


def connect(lake_dir: Path, *, memory_limit: str = MEMORY_LIMIT) -> duckdb.DuckDBPyConnection:
    """A connection with one view per lake table that reads nothing but the lake (see the module
    docstring): ``lake.duckdb`` opened read-only, or the same views in memory when another process
    holds that file for writing or it is not a regular file in the lake. ``memory_limit``: DuckDB's (e.g.
    ``"2GB"``, ``"25%"``). Close it when done."""
    lake_dir = storage.lake_path(lake_dir)
    tables = table_dirs(lake_dir)
    if not tables:
        raise FileNotFoundError(f"the lake {lake_dir} has no tables yet: run `lcp run` (or materialize assets) first")
    con = None
    unreadable: dict[str, str] = {}
    if storage.is_local(lake_dir) and _usable_db(Path(lake_dir).resolve() / DB_NAME):
        db = Path(lake_dir).resolve() / DB_NAME
        try:
            wanted = {name: view_source(d) for name, d in tables.items()}
            con = _open_if_current(db, lake_dir, wanted, memory_limit)
            if con is None:
                db, unreadable = _rebuild_views(lake_dir, tables, memory_limit)
                con = _open(db, lake_dir, read_only=True, memory_limit=memory_limit)
        except (duckdb.IOException, duckdb.ConnectionException, OSError):
            # "Could not set lock on file" (another process is writing it), this process holds it open with
            # other settings, or the lake's folder is not writable: the views are built in memory below
            con = None
    if con is None:
        con = _open(None, lake_dir, read_only=False, memory_limit=memory_limit)
        try:
            unreadable = create_views(con, tables)
        except BaseException:
            con.close()
            raise
    try:
        _stand_in_views(con, unreadable)
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
    return OutsideLake(f"lcp results query reads only the lake's tables ({', '.join(names)}; {SHOW_TABLES} lists "
                       f"them), no other file, URL or extension: {text}")


@contextmanager
def _reading(lake_dir: Path, sql: str, memory_limit: str = MEMORY_LIMIT) -> Iterator[duckdb.DuckDBPyConnection]:
    """A locked connection for read-only ``sql`` (refused otherwise); DuckDB refusing a read outside the lake
    inside the block becomes :class:`OutsideLake`, running out of its memory limit :class:`QueryRefused`."""
    check_read_only(sql)
    with connect(lake_dir, memory_limit=memory_limit) as con:
        try:
            yield con
        except duckdb.OutOfMemoryException as exc:
            limit = con.execute("select current_setting('memory_limit')").fetchone()[0]
            raise QueryRefused(f"the query needs more memory than a lake query may take ({memory_limit} = {limit}; "
                               f"lcp results query --memory-limit sets another): {_first_line(exc)}") from exc
        except duckdb.Error as exc:
            outside = _outside_lake(con, exc)
            if outside is None:
                raise
            raise outside from exc


@contextmanager
def _deadline(con: duckdb.DuckDBPyConnection, timeout_s: float | None) -> Iterator[None]:
    """Interrupt ``con``'s statement after ``timeout_s`` seconds of wall-clock time (None or 0: no limit); the
    interrupted statement raises :class:`QueryTimeout`."""
    if not timeout_s:
        yield
        return
    fired = threading.Event()

    def stop() -> None:
        fired.set()
        con.interrupt()

    timer = threading.Timer(timeout_s, stop)
    timer.daemon = True
    timer.start()
    try:
        yield
    except duckdb.InterruptException as exc:
        if not fired.is_set():
            raise
        raise QueryTimeout(f"the query was stopped after {timeout_s:g} s, its time limit (lcp results query --timeout "
                           "sets another)") from exc
    finally:
        timer.cancel()


def query(lake_dir: Path, sql: str, max_rows: int | None = None, *, timeout_s: float | None = None,
          memory_limit: str = MEMORY_LIMIT) -> tuple[list[str], list[tuple]]:
    """Run read-only ``sql`` over the lake's views; returns (column names, rows).

    With ``max_rows`` at most ``max_rows + 1`` rows are fetched (DuckDB streams the rest away
    unread), so a caller can tell that there were more without holding them all. ``timeout_s``: the
    statement (fetching included) is interrupted after that many seconds (:class:`QueryTimeout`);
    ``memory_limit``: DuckDB's for the connection (past it, :class:`QueryRefused`)."""
    with _reading(lake_dir, sql, memory_limit) as con, _deadline(con, timeout_s):
        cur = con.execute(sql)
        columns = [d[0] for d in cur.description] if cur.description else []
        return columns, (cur.fetchall() if max_rows is None else cur.fetchmany(max_rows + 1))


def frame(lake_dir: Path, sql: str, *, timeout_s: float | None = None, memory_limit: str = MEMORY_LIMIT):
    """Run read-only ``sql`` and return a polars DataFrame (limits as for :func:`query`)."""
    with _reading(lake_dir, sql, memory_limit) as con, _deadline(con, timeout_s):
        return con.sql(sql).pl()


# ------------------------------------------------------------------------------ which config built the instances

BUILT_BY_FILE = "_built_by.json"  # beside an instances partition's data file: {"config": name, "fingerprint": fp}


class LakeOfAnotherConfig(ValueError):
    """The lake holds another config's instances, with models scored on them, at a level this config would use."""


def built_by_path(lake_dir, level: str) -> Path:
    from lc_pipeline.lake_files import partition_path

    return partition_path(storage.lake_path(lake_dir), "instances", {"length": level}).parent / BUILT_BY_FILE


def record_built_by(lake_dir, level: str, config_name: str, fingerprint: str) -> None:
    """Record which config (name and instances fingerprint) builds the instances of ``level`` (issue 31, D5)."""
    body = json.dumps({"config": config_name, "fingerprint": fingerprint}, sort_keys=True).encode()
    storage.write_bytes_atomic(built_by_path(lake_dir, level), body)


def built_by(lake_dir, level: str) -> dict | None:
    """``{"config", "fingerprint"}`` of the config that built ``level``'s instances in this lake; None when the
    partition is not there, or was built before this was recorded (or the record is unreadable)."""
    from lc_pipeline.lake_files import partition_path

    if not partition_path(storage.lake_path(lake_dir), "instances", {"length": level}).exists():
        return None
    path = built_by_path(lake_dir, level)
    try:
        record = json.loads(storage.read_bytes(path)) if path.exists() else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("config"), str) else None


def scored_models(lake_dir, level: str) -> list[str]:
    """Models with a generations or metric_scores partition at ``level`` (their answers and scores are of the
    instances at that level)."""
    lake = storage.lake_path(lake_dir)
    out: set[str] = set()
    for table in ("generations", "metric_scores"):
        folder = lake / table / f"length={level}"
        if folder.is_dir():
            out |= {d.name.removeprefix("model=") for d in folder.iterdir()
                    if d.name.startswith("model=") and (d / FILE_NAME).exists()}
    return sorted(out)


def foreign_levels(lake_dir, config) -> dict[str, str]:
    """{level: the other config's name} for the config's levels whose instances in the lake another config (by
    name) built."""
    out = {}
    for level in config.lengths:
        record = built_by(lake_dir, level)
        if record is not None and record["config"] != config.name:
            out[level] = record["config"]
    return out


def check_lake_config(lake_dir, config) -> None:
    """Refuse a config whose levels hold another config's instances with models scored on them (issue 31, D5):
    building its own would orphan those scores, using them would score this config on another benchmark. The
    message names the config that built them and how to proceed. Another config's instances that no model was
    run on are simply rebuilt (nothing is lost)."""
    clashes = {}
    for level, other in foreign_levels(lake_dir, config).items():
        models = scored_models(lake_dir, level)
        if models:
            clashes[level] = (other, models)
    if not clashes:
        return
    others = sorted({other for other, _ in clashes.values()})
    models = sorted({m for _, ms in clashes.values() for m in ms})
    raise LakeOfAnotherConfig(
        f"lake {storage.url(lake_dir)}: the instances at level(s) {sorted(clashes)} were built by config "
        f"{', '.join(map(repr, others))} and model(s) {models} are scored on them; config {config.name!r} uses the "
        f"same level label(s), so it would replace them (orphaning those scores) or be scored on another config's "
        f"instances. Give each config its own lake (`lcp --lake <another folder> ...` or LCP_LAKE=<another folder> "
        f"for config {config.name!r}), or "
        f"empty this one first (`make clean-lake`, or remove {storage.url(lake_dir)})")
