"""`lcp query` reads the lake and nothing else (issue 22, item 4).

Each probe of the issue is rebuilt on a tiny lake written in the pipeline's layout: a file
outside the lake, the process environment, an extension, a URL, a write, a setting change, a
10-million-row result and a truncated Parquet file. HOME points at an empty folder for every
test and must still be empty afterwards: DuckDB installed nothing under ``~/.duckdb``.
"""

from __future__ import annotations

import hashlib
import http.server
import threading
import uuid

import duckdb
import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline import storage
from lc_pipeline.cli import main
from lc_pipeline.lake import OutsideLake, connect, query
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic

CONFINED = "lcp results query reads only the lake's tables (instances, metric_scores;"


def write_lake(base):
    for length in ("1k", "2k"):
        write_parquet_atomic(pl.DataFrame({"instance_id": [f"{length}-a", f"{length}-b"], "depth": [0.0, 1.0]}),
                             partition_path(base, "instances", {"length": length}))
        for model in ("m-a", "m-b"):
            write_parquet_atomic(pl.DataFrame({"instance_id": [f"{length}-a", f"{length}-b"], "score": [1.0, 0.0]}),
                                 partition_path(base, "metric_scores", {"length": length, "model": model}))
    return base


def lake_files(base) -> dict[str, str]:
    """Every Parquet file of the lake and its digest: what a query must never change."""
    return {str(p.relative_to(base)): hashlib.sha256(p.read_bytes()).hexdigest() for p in base.rglob("*.parquet")}


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """An empty HOME: nothing may appear in it (no ~/.duckdb/extensions, no stored secrets)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    yield home
    assert list(home.rglob("*")) == [], "DuckDB wrote under the home folder"


@pytest.fixture
def lake(tmp_path):
    return write_lake(tmp_path / "data_lake")


def lcp_query(lake, *args):
    return CliRunner().invoke(main, ["results", "query", *args], env={"LCP_LAKE": str(lake)})


def assert_refused(result, *, naming: str):
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert "the lake's tables" in result.output and 'lcp results query "show tables"' in result.output, result.output
    assert naming in result.output, result.output


def test_reading_etc_passwd_exits_nonzero_saying_queries_read_only_the_lake(lake):
    before = lake_files(lake)
    result = lcp_query(lake, "select * from read_csv('/etc/passwd')")
    assert_refused(result, naming='Cannot access file "/etc/passwd"')
    assert CONFINED in result.output
    assert "root:" not in result.output
    assert lake_files(lake) == before


def test_the_process_environment_is_not_readable(lake, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-lockdown-probe-secret")
    result = lcp_query(lake, "select * from read_blob('/proc/self/environ')")
    assert_refused(result, naming="/proc/self/environ")
    assert "sk-lockdown-probe-secret" not in result.output


@pytest.mark.parametrize("sql, naming", [
    ("select * from read_text('/etc/hostname')", "/etc/hostname"),
    ("select * from glob('/etc/*')", "/etc/*"),
    ("select * from read_csv('{lake}/../outside.csv')", "outside.csv"),  # out of the lake through ..
    ("select * from read_csv('{lake}-copy/leak.csv')", "leak.csv"),  # a sibling folder sharing the prefix
    ("select * from sqlite_scan('{lake}/../x.db', 't')", "sqlite_scanner extension"),
])
def test_files_and_extensions_outside_the_lake_are_refused(lake, sql, naming):
    (lake.parent / "outside.csv").write_text("secret\nsk-outside\n")
    (lake.parent / "data_lake-copy").mkdir()
    (lake.parent / "data_lake-copy" / "leak.csv").write_text("secret\nsk-sibling\n")
    result = lcp_query(lake, sql.format(lake=lake))
    assert_refused(result, naming=naming)
    assert "sk-" not in result.output


REQUESTS: list[str] = []  # every request the loopback server below received


class CountingHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        REQUESTS.append(self.path)
        self.send_error(404)

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


def test_a_url_is_refused_before_any_request_leaves(lake):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x.parquet"
        result = lcp_query(lake, f"select * from read_parquet('{url}')")
        https = lcp_query(lake, "select * from read_parquet('https://example.com/x.parquet')")
    finally:
        server.shutdown()
        server.server_close()
    assert_refused(result, naming=url)
    assert_refused(https, naming="https://example.com/x.parquet")
    assert REQUESTS == []


@pytest.mark.parametrize("sql, kind", [
    ("attach '{lake}/../other.duckdb' as o", "ATTACH"),
    ("set enable_external_access = true", "SET"),
    ("copy (select * from instances) to '{lake}/../out.csv'", "COPY"),
    ("install sqlite", "LOAD"),  # DuckDB parses INSTALL as a LOAD statement
    ("load sqlite", "LOAD"),
])
def test_writes_settings_and_extensions_are_refused_and_write_nothing(lake, sql, kind):
    before = lake_files(lake)
    result = lcp_query(lake, sql.format(lake=lake))
    assert_refused(result, naming=f"refused: {kind} statements")
    assert sorted(p.name for p in lake.parent.iterdir()) == ["data_lake", "home"]
    assert lake_files(lake) == before


def test_the_connection_itself_is_locked_whatever_the_statement_check_lets_through(lake):
    """The lock is DuckDB's, not only lcp's statement filter: on the connection itself a setting
    cannot change back and a COPY cannot write."""
    with connect(lake) as con:
        with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
            con.execute("set enable_external_access = true")
        with pytest.raises(duckdb.PermissionException):
            con.execute(f"copy (select 1) to '{lake.parent}/out.csv'")
        assert con.execute("select count(*) from metric_scores").fetchone() == (8,)
    with pytest.raises(OutsideLake, match="no other file, URL or extension"):
        query(lake, "select * from read_csv('/etc/passwd')")
    assert not (lake.parent / "out.csv").exists()


def test_queries_over_the_lake_keep_working(lake):
    assert query(lake, "show tables")[1] == [("instances",), ("metric_scores",)]
    assert query(lake, "select model, length, sum(score) from metric_scores group by all order by all")[1] == [
        ("m-a", "1k", 1.0), ("m-a", "2k", 1.0), ("m-b", "1k", 1.0), ("m-b", "2k", 1.0)]
    plan = "\n".join(r[1] for r in query(lake, "explain select * from metric_scores where model = 'm-a'")[1])
    assert "Scanning Files: 2/4" in plan
    # A lake file named directly is inside the lake, so it reads.
    assert query(lake, f"select count(*) from read_parquet('{lake}/instances/**/*.parquet')")[1] == [(4,)]


def test_a_bucket_lake_reads_its_prefix_and_nothing_else_in_the_bucket():
    url = f"memory://lock-{uuid.uuid4().hex[:8]}/lake"
    try:
        storage.write_parquet(pl.DataFrame({"score": [0.5]}), f"{url}/metric_scores/length=1k/model=m/data.parquet")
        storage.write_bytes_atomic(f"{url.rsplit('/', 1)[0]}/secrets/key.csv", b"key\nsk-bucket\n")
        assert query(url, "select model, score from metric_scores") == (["model", "score"], [("m", 0.5)])
        with pytest.raises(OutsideLake, match="secrets/key.csv"):
            query(url, f"select * from read_csv('{url.rsplit('/', 1)[0]}/secrets/key.csv')")
    finally:
        storage.remove_tree(url.rsplit("/", 1)[0])


def test_ten_million_rows_print_the_first_ten_thousand_and_say_so(lake):
    result = CliRunner().invoke(main, ["results", "query", "select * from range(10000000)"],
                                env={"LCP_LAKE": str(lake)})
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip().endswith("(10000 rows)")
    assert result.stderr.strip() == "showing the first 10000 of more rows; add LIMIT or --max-rows"


def test_max_rows_cuts_csv_and_a_result_that_fits_has_no_note(lake):
    cut = lcp_query(lake, "select instance_id from instances order by all", "--format", "csv", "--max-rows", "3")
    assert cut.exit_code == 0, cut.output
    assert cut.stdout.splitlines() == ["instance_id", "1k-a", "1k-b", "2k-a"]
    assert "showing the first 3 of more rows" in cut.stderr
    fits = lcp_query(lake, "select instance_id from instances", "--format", "json", "--max-rows", "4")
    assert fits.exit_code == 0 and fits.stderr == ""


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_corrupt_file_breaks_only_its_table_and_the_error_names_it(lake):
    broken = partition_path(lake, "metric_scores", {"length": "2k", "model": "m-b"})
    truncate(broken)
    before = lake_files(lake)
    assert query(lake, "select count(*) from instances")[1] == [(4,)]
    assert query(lake, "show tables")[1] == [("instances",), ("metric_scores",)]
    result = lcp_query(lake, "select count(*) from metric_scores")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "table metric_scores cannot be read" in result.output and str(broken) in result.output, result.output
    assert lake_files(lake) == before  # the broken file is reported, not removed or rewritten

    write_parquet_atomic(pl.DataFrame({"instance_id": ["2k-a"], "score": [0.25]}), broken)  # repaired
    assert query(lake, "select sum(score) from metric_scores where model = 'm-b' and length = '2k'")[1] == [(0.25,)]


def test_a_file_corrupted_after_the_views_were_made_names_the_file_too(lake):
    assert query(lake, "select count(*) from metric_scores")[1] == [(8,)]  # lake.duckdb holds both views
    broken = partition_path(lake, "metric_scores", {"length": "1k", "model": "m-a"})
    truncate(broken)
    assert query(lake, "select count(*) from instances")[1] == [(4,)]
    result = lcp_query(lake, "select * from metric_scores")
    assert result.exit_code == 1 and str(broken) in result.output, result.output
