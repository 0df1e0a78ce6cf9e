"""`lcp query` on a hostile lake (issue 31; probe 2026-11-27, D1, D28, D29, D30, D31).

Each probe input is rebuilt on a small lake in the pipeline's layout: a table folder whose name closes the
view's quote and runs SQL (D1), a ``lake.duckdb`` that is a symbolic link (D28), a lake path with glob
characters (D29), a query that takes all memory or runs for ever (D30), and a copied lake with a truncated
file (D31). Each test asserts the clear message, that the lake's data files are byte-identical afterwards,
that no file appears outside the lake, and that a canary file outside the lake is never read into a result.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.lake import DB_NAME, create_views
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic

CANARY = "CANARY-outside-the-lake-7f3a"


def write_lake(base: Path) -> Path:
    for length in ("1k", "2k"):
        write_parquet_atomic(pl.DataFrame({"instance_id": [f"{length}-a", f"{length}-b"], "depth": [0.0, 1.0]}),
                             partition_path(base, "instances", {"length": length}))
        for model in ("m-a", "m-b"):
            write_parquet_atomic(pl.DataFrame({"instance_id": [f"{length}-a", f"{length}-b"], "score": [1.0, 0.0]}),
                                 partition_path(base, "metric_scores", {"length": length, "model": model}))
    write_parquet_atomic(pl.DataFrame({"model": ["m-a", "m-b"], "long_score": [50.0, 25.0]}),
                         partition_path(base, "leaderboard", {}))
    return base


def digests(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file under ``root`` and its sha256 (``skip``: names left out)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name not in skip}


def outside_files(root: Path, lake: Path) -> set[str]:
    """What is under ``root`` but not in ``lake``."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p != lake and lake not in p.parents}


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A lake, a working folder the commands run in (outside the lake), a canary file outside the lake,
    and an empty HOME (DuckDB must install nothing there)."""
    lake = write_lake(tmp_path / "lake")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    yield lake
    assert list(home.rglob("*")) == [], "DuckDB wrote under the home folder"


def lcp_query(lake: Path, *args: str):
    return CliRunner().invoke(main, ["results", "query", *args], env={"LCP_LAKE": str(lake)})


def sql_path(path: Path) -> str:
    """``path`` as a SQL expression without '/' (a folder name cannot hold one), as the probe wrote it."""
    return "concat(" + ", chr(47), ".join(f"'{part}'" for part in str(path).split("/")) + ")"


def plant(lake: Path, name: str) -> Path:
    """A table folder named ``name`` holding a copy of the leaderboard's data file (the probe's step)."""
    folder = lake / name
    folder.mkdir()
    shutil.copy(lake / "leaderboard" / "data.parquet", folder / "data.parquet")
    return folder


def test_d1_a_folder_name_that_closes_the_views_quote_runs_no_sql_and_writes_nothing(world, tmp_path):
    lake = world
    assert lcp_query(lake, "select 1").exit_code == 0  # lake.duckdb made once, before the snapshot
    before = digests(lake, skip=(DB_NAME,))
    outside_before = outside_files(tmp_path, lake)
    name = "x\" as select 1; copy (select 42 as a) to 'PWNED.csv'; create or replace view \"y"
    plant(lake, name)

    result = lcp_query(lake, "select model, long_score from leaderboard order by model")
    assert result.exit_code == 0, result.output
    assert "m-a" in result.stdout and "50.0" in result.stdout
    assert f"note: folder {name!r} in the lake is not read: a table's folder name matches [a-z0-9_]+" in result.stderr
    # lcp report opens the same connection first (it stops later: this leaderboard has too few columns)
    for command in (["results", "report", "--out", str(tmp_path / "report.html")], ["results", "query", "show tables"]):
        CliRunner().invoke(main, command, env={"LCP_LAKE": str(lake)})
    assert not list(tmp_path.rglob("PWNED.csv")), "the folder's name ran as SQL and wrote a file"
    assert outside_files(tmp_path, lake) - {"report.html"} == outside_before  # nothing new outside the lake
    tables = lcp_query(lake, "show tables", "--format", "csv").stdout.splitlines()
    assert tables == ["name", "instances", "leaderboard", "metric_scores"]
    assert digests(lake, skip=(DB_NAME,)) == {**before, f"{name}/data.parquet": before["leaderboard/data.parquet"]}


def test_d1_a_folder_name_cannot_copy_a_file_outside_the_lake_into_a_table(world, tmp_path):
    lake = world
    canary = Path("..") / "outside" / "canary.txt"  # from the working folder (a folder name holds 255 bytes)
    assert canary.read_text() == CANARY
    name = (f'z" as select 1; create table stolen as select content from read_text({sql_path(canary)}); '
            'create or replace view "w')
    folder = plant(lake, name)
    first = lcp_query(lake, "select 1")
    assert first.exit_code == 0, first.output
    shutil.rmtree(folder)
    stolen = lcp_query(lake, "select * from stolen")
    assert stolen.exit_code == 1 and "stolen" in stolen.output and CANARY not in stolen.output
    with duckdb.connect(str(lake / DB_NAME), read_only=True) as con:
        assert con.execute("select count(*) from duckdb_tables()").fetchone()[0] == 0
    for path in lake.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def test_d1_a_table_left_in_lake_duckdb_by_an_earlier_version_is_dropped(world, tmp_path):
    """A lake.duckdb that already holds a table (what the old code let a folder name make) is rebuilt
    with views only, so the table is not readable through the lock."""
    lake = world
    assert lcp_query(lake, "select 1").exit_code == 0
    with duckdb.connect(str(lake / DB_NAME)) as con:
        con.execute("create table stolen as select ? as content", [CANARY])
    result = lcp_query(lake, "select * from stolen")
    assert result.exit_code == 1 and CANARY not in result.output
    assert "stolen" in result.output  # DuckDB's "Table with name stolen does not exist"
    assert lcp_query(lake, "select count(*) from instances", "--format", "csv").stdout.splitlines() == [
        "count_star()", "4"]


def test_d1_view_names_are_quoted_even_when_given_directly(world, tmp_path):
    """create_views quotes an identifier with '"' doubled: a hostile name becomes a view of that name."""
    lake = world
    name = "x\" as select 1; copy (select 42 as a) to 'PWNED.csv'; create or replace view \"y"
    with duckdb.connect() as con:
        assert create_views(con, {name: lake / "leaderboard"}) == {}
        assert con.execute("select view_name from duckdb_views() where not internal").fetchall() == [(name,)]
        assert con.execute(f'select count(*) from "{name.replace(chr(34), chr(34) * 2)}"').fetchone()[0] == 2
    assert not list(tmp_path.rglob("PWNED.csv"))


def test_d28_a_symlinked_lake_duckdb_is_neither_written_nor_read_through(world, tmp_path):
    lake = world
    before = digests(lake)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (lake / DB_NAME).symlink_to(elsewhere / "x.duckdb")
    result = lcp_query(lake, "select count(*) as n from metric_scores", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["n", "8"]
    assert "lake.duckdb is not used (a symbolic link or not a regular file: it would be read or written outside " \
           "the lake); the views are built in memory" in result.stderr
    assert list(elsewhere.iterdir()) == [], "lcp query wrote through the link"
    assert (lake / DB_NAME).is_symlink() and digests(lake) == before

    # A link to an existing DuckDB file outside the lake holding views of the same names and a table: not read.
    (lake / DB_NAME).unlink()
    with duckdb.connect(str(elsewhere / "x.duckdb")) as con:
        con.execute("create table secret as select ? as content", [CANARY])
        con.execute("create view leaderboard as select content as model from secret")
    target = digests(elsewhere)
    (lake / DB_NAME).symlink_to(elsewhere / "x.duckdb")
    for sql in ("select * from secret", "select * from leaderboard"):
        result = lcp_query(lake, sql)
        assert CANARY not in result.output, sql
    assert "m-a" in lcp_query(lake, "select model from leaderboard").stdout
    assert digests(elsewhere) == target


@pytest.mark.parametrize("folder", ["lk[1]", "a*b", "q?x", "it's"])
def test_d29_a_lake_path_with_glob_characters_reads_its_own_tables(tmp_path, monkeypatch, folder):
    monkeypatch.setenv("HOME", str(tmp_path))
    lake = write_lake(tmp_path / folder / "lake")
    before = digests(lake)
    # a sibling the unescaped glob would also match ("lk1" for "lk[1]", any name for "a*b" / "q?x")
    decoy = {"lk[1]": "lk1", "a*b": "aXXb", "q?x": "qZx", "it's": "its"}[folder]
    write_parquet_atomic(pl.DataFrame({"model": ["decoy"], "long_score": [0.0]}),
                         partition_path(tmp_path / decoy / "lake", "leaderboard", {}))
    result = lcp_query(lake, "select model, count(*) as n from leaderboard group by all order by model",
                       "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["model,n", "m-a,1", "m-b,1"]
    assert lcp_query(lake, "select count(*) as n from metric_scores where length = '2k'",
                     "--format", "csv").stdout.splitlines() == ["n", "4"]
    assert digests(lake, skip=(DB_NAME,)) == before


def test_d30_a_query_past_the_memory_limit_stops_with_a_message(world):
    lake = world
    huge = "select length(string_agg(repeat('x', 100000), '')) from range(40000)"  # the probe's 4 GB string
    result = lcp_query(lake, huge, "--memory-limit", "200MB")
    assert result.exit_code == 1, result.output
    assert "the query needs more memory than a lake query may take (200MB" in result.output
    assert "--memory-limit" in result.output and "Traceback" not in result.output
    # The default is a share of the machine, not DuckDB's 80 %.
    default = lcp_query(lake, "select current_setting('memory_limit') as m", "--format", "csv").stdout.splitlines()
    total_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    value, unit = default[1].split()
    assert unit == "GiB" and float(value) <= 0.26 * total_gib, default


def test_d30_a_query_past_its_time_limit_is_interrupted(world):
    lake = world
    start = time.monotonic()
    result = lcp_query(lake, "select count(*) from range(100000) a, range(100000) b where a.range + b.range < 0",
                       "--timeout", "1")
    took = time.monotonic() - start
    assert result.exit_code == 1, result.output
    assert "the query was stopped after 1 s, its time limit (lcp results query --timeout sets another)" in result.output
    assert took < 30, took
    # a query that ends in time is not cut
    assert lcp_query(lake, "select count(*) from range(1000)", "--timeout", "30").exit_code == 0


def test_d31_a_copied_lake_with_a_truncated_file_names_its_own_file(world, tmp_path):
    lake = world
    assert lcp_query(lake, "select count(*) from metric_scores").exit_code == 0  # lake.duckdb holds lake's views
    copy = tmp_path / "lake2"
    shutil.copytree(lake, copy)
    broken = copy / "metric_scores" / "length=2k" / "model=m-b" / "data.parquet"
    broken.write_bytes(broken.read_bytes()[:40])
    shutil.rmtree(lake)  # a view still reading the old lake would now fail differently, or read nothing
    before = digests(copy, skip=(DB_NAME,))
    result = lcp_query(copy, "select * from metric_scores")
    assert result.exit_code == 1
    assert "table metric_scores cannot be read" in result.output and str(copy) in result.output, result.output
    assert f"{tmp_path}/lake/" not in result.output
    assert lcp_query(copy, "select count(*) as n from instances", "--format", "csv").stdout.splitlines() == ["n", "4"]
    with duckdb.connect(str(copy / DB_NAME), read_only=True) as con:  # no stale view of the old lake stays
        sources = [c for (c,) in con.execute("select sql from duckdb_views() where not internal").fetchall()]
    assert sources and all(f"{tmp_path}/lake/" not in s for s in sources)
    assert digests(copy, skip=(DB_NAME,)) == before
