"""DuckDB over the Parquet lake: one view per table, queried read-only.

The views live in ``<lake>/lake.duckdb`` so any DuckDB client can open the same file
(``duckdb data_lake/lake.duckdb -readonly``). They are re-created before each query because
new tables or partitions may have appeared; the write lock is held only for that moment.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from lc_pipeline.resources.parquet_io import FILE_NAME

DB_NAME = "lake.duckdb"


def table_dirs(lake_dir: Path) -> dict[str, Path]:
    """Tables are top-level folders holding at least one data file (checkpoints are skipped)."""
    if not lake_dir.exists():
        return {}
    return {
        d.name: d
        for d in sorted(lake_dir.iterdir())
        if d.is_dir() and not d.name.startswith(("_", ".")) and next(d.rglob(FILE_NAME), None) is not None
    }


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def refresh_views(lake_dir: Path) -> Path:
    lake_dir = Path(lake_dir).resolve()
    lake_dir.mkdir(parents=True, exist_ok=True)
    db = lake_dir / DB_NAME
    with duckdb.connect(str(db)) as con:
        existing = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
        tables = table_dirs(lake_dir)
        for name, d in tables.items():
            pattern = str(d / "**" / FILE_NAME)
            con.execute(
                f'create or replace view "{name}" as select * from '
                f"read_parquet({_quote(pattern)}, hive_partitioning = true, union_by_name = true)"
            )
        for stale in existing - set(tables):
            con.execute(f'drop view if exists "{stale}"')
    return db


def query(lake_dir: Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run ``sql`` against a read-only connection; returns (column names, rows)."""
    db = refresh_views(Path(lake_dir))
    if not table_dirs(Path(lake_dir)):
        raise FileNotFoundError(f"the lake {lake_dir} has no tables yet: run `lcp demo` (or materialize assets) first")
    with duckdb.connect(str(db), read_only=True) as con:
        cur = con.execute(sql)
        columns = [d[0] for d in cur.description] if cur.description else []
        return columns, cur.fetchall()
