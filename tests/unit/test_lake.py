"""DuckDB over the hive-partitioned Parquet lake: views, file pruning, read-only queries, the views file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.lake import DB_NAME, QueryRefused, check_read_only, frame, query, refresh_views
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic

LENGTHS = ["1k", "2k"]
MODELS = ["smollm2-135m", "7b"]  # "7b" would become a number if hive types were guessed


@pytest.fixture
def lake(tmp_path):
    """A small lake in the pipeline's layout: metric_scores by length x model, instances by length."""
    base = tmp_path / "data_lake"
    for i, length in enumerate(LENGTHS):
        write_parquet_atomic(
            pl.DataFrame({"instance_id": [f"i{i}a", f"i{i}b"], "depth": [0.0, 1.0], "input_tokens": [1000, 1010]}),
            partition_path(base, "instances", {"length": length}),
        )
        for j, model in enumerate(MODELS):
            write_parquet_atomic(
                pl.DataFrame({"instance_id": [f"i{i}a", f"i{i}b"], "metric": ["subem", "subem"],
                              "score": [1.0 - 0.5 * i, float(j)]}),
                partition_path(base, "metric_scores", {"length": length, "model": model}),
            )
    return base


def test_every_table_is_a_view_with_hive_columns_as_text(lake):
    cols, rows = query(lake, "select model, length, avg(score) as s from metric_scores group by all order by all")
    assert cols == ["model", "length", "s"]
    assert rows == [("7b", "1k", 1.0), ("7b", "2k", 0.75), ("smollm2-135m", "1k", 0.5), ("smollm2-135m", "2k", 0.25)]
    df = frame(lake, "select * from instances order by instance_id")
    assert df["length"].to_list() == ["1k", "1k", "2k", "2k"]
    assert df.height == 4


def test_filters_on_length_and_model_prune_files(lake):
    _, rows = query(lake, "explain select avg(score) from metric_scores where length = '2k' and model = '7b'")
    plan = "\n".join(r[1] for r in rows)
    assert "File Filters" in plan
    assert "Scanning Files: 1/4" in plan, plan  # one of four partition files is read
    _, rows = query(lake, "explain select avg(score) from metric_scores where model = '7b'")
    assert "Scanning Files: 2/4" in "\n".join(r[1] for r in rows)


@pytest.mark.parametrize("sql", [
    "create table t as select 1",
    "insert into instances values ('x', 0.0, 1, '1k')",
    "drop view instances",
    "copy (select * from instances) to 'out.csv'",
    "explain analyze copy (select 1) to 'out.csv'",
    "attach 'other.duckdb'",
    "set threads = 1",
    "checkpoint",
    "select 1; drop view instances",
    "alter table metric_scores add column c int default 1 + 1",  # MULTI, like a PIVOT, but not a query
])
def test_write_statements_are_refused(lake, sql, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(QueryRefused, match="refused"):
        query(lake, sql)
    assert not (tmp_path / "out.csv").exists()
    assert query(lake, "select count(*) from instances")[1] == [(4,)]


def test_pivot_reads_even_without_an_in_list(lake):
    sql = "pivot (select model, length, score from metric_scores) on length using avg(score) order by model"
    cols, rows = query(lake, sql)
    assert cols == ["model", "1k", "2k"]
    assert rows == [("7b", 1.0, 0.75), ("smollm2-135m", 0.5, 0.25)]


def test_syntax_error_is_duckdbs_own():
    with pytest.raises(duckdb.ParserException, match="syntax error"):
        check_read_only("selec model from metric_scores")


def test_views_file_is_rewritten_only_when_tables_change(lake):
    db = refresh_views(lake)
    before = db.stat().st_mtime_ns, db.read_bytes()
    query(lake, "select count(*) from metric_scores")
    assert (db.stat().st_mtime_ns, db.read_bytes()) == before, "an unchanged lake rewrote lake.duckdb"

    write_parquet_atomic(pl.DataFrame({"model": ["7b"], "long_score": [-3.0]}), partition_path(lake, "leaderboard", {}))
    assert query(lake, "select model, long_score from leaderboard")[1] == [("7b", -3.0)]
    with duckdb.connect(str(db), read_only=True) as con:  # other tools see the new view
        names = {r[0] for r in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    assert names == {"instances", "metric_scores", "leaderboard"}


def test_nothing_holds_the_views_file_and_a_writer_elsewhere_blocks_nothing(lake):
    db = lake / DB_NAME
    query(lake, "select 1")
    with duckdb.connect(str(db)) as con:  # writable at once: the query left no connection open
        con.execute("select 1")
    # Another process (a DuckDB CLI opened without -readonly) holds the file for writing.
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys
            con = duckdb.connect({str(db)!r})
            print("holding", flush=True)
            sys.stdin.read()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        write_parquet_atomic(pl.DataFrame({"x": [1]}), partition_path(lake, "new_table", {}))
        assert query(lake, "select x from new_table")[1] == [(1,)]
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_empty_lake_says_what_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="lcp run"):
        query(tmp_path / "nothing", "select 1")


def run_cli(lake, *args):
    return CliRunner().invoke(main, ["results", "query", *args], env={"LCP_LAKE": str(lake)})


def test_cli_formats(lake):
    sql = "select model, length, avg(score) as s from metric_scores where model = '7b' group by all order by all"
    table = run_cli(lake, sql)
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0].split() == ["model", "|", "length", "|", "s"]
    assert "(2 rows)" in table.output
    csv = run_cli(lake, sql, "--format", "csv")
    assert csv.output.splitlines() == ["model,length,s", "7b,1k,1.0", "7b,2k,0.75"]
    js = run_cli(lake, sql, "--format", "json")
    assert json.loads(js.output) == [{"model": "7b", "length": "1k", "s": 1.0}, {"model": "7b", "length": "2k", "s": 0.75}]


def test_cli_bad_sql_exits_nonzero_with_duckdbs_message(lake):
    bad = run_cli(lake, "select model form metric_scores")
    assert bad.exit_code != 0
    assert "Parser Error" in bad.output and "syntax error" in bad.output
    missing = run_cli(lake, "select * from no_such_table")
    assert missing.exit_code != 0 and "no_such_table" in missing.output


def test_cli_refuses_writes(lake):
    result = run_cli(lake, "delete from metric_scores")
    assert result.exit_code != 0
    assert "refused" in result.output and "DELETE" in result.output
