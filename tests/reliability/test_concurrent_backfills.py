"""Two backfills of different partitions at the same time: ``lcp backfill`` of two models, started
together in one project (one lake, one SQLite Dagster storage, one registry file), with two gpu
pool slots so their generation steps really overlap (the server holds the first answers until
both are asking). Both complete, every run succeeds, every Parquet file is valid and every
partition has exactly its rows, each prompt asked once per model."""

from __future__ import annotations

import time
from collections import Counter

import dagster as dg
import duckdb
import polars as pl
from fault_server import FaultyOpenAIServer
from lake_world import LENGTHS, make_world, served_model

from lc_pipeline.runner import GPU_POOL

MODELS = ("served-a", "served-b")
PER_LENGTH = 4


def test_two_backfills_at_once_both_complete_with_exact_rows(tmp_path, monkeypatch):
    world = make_world(tmp_path / "project", per_length=PER_LENGTH)
    # Two slots: on a CPU the pool has one, which would run the generation steps one after the other.
    env = world.env(LCP_GPU_POOL_SLOTS="2")
    # An instance whose storage exists (as after any earlier lcp run); the gpu pool's row is not
    # there yet: both lcp processes create it at once, and the one that loses re-reads it.
    monkeypatch.setenv("DAGSTER_HOME", str(world.dagster_home))
    with dg.DagsterInstance.get() as instance:
        assert instance.event_log_storage.get_concurrency_info(GPU_POOL).slot_count in (None, 0)
    with FaultyOpenAIServer(hold_s=60) as server:
        for slug in MODELS:  # a long timeout: the server holds the first answers until both ask
            world.add_model(served_model(slug, server.url, api_model=f"api-{slug}", request_timeout_s=120.0))
        procs = {slug: world.lcp("backfill", "--model", slug, env=env, log=f"backfill-{slug}", wait=False)
                 for slug in MODELS}
        deadline = time.monotonic() + 120
        while {r.body.get("model") for r in server.requests()} != {f"api-{m}" for m in MODELS}:
            assert all(p.poll() is None for p in procs.values()), "a backfill ended before both were generating"
            assert time.monotonic() < deadline, "the two backfills never generated at the same time"
            time.sleep(0.05)
        server.release()  # both models have requests in flight: let them all through
        codes = {slug: p.wait(timeout=300) for slug, p in procs.items()}
        asked = Counter((r.body["model"], r.prompt) for r in server.requests())
    logs = {slug: (world.root / "logs" / f"backfill-{slug}.log").read_text() for slug in MODELS}
    assert codes == dict.fromkeys(MODELS, 0), {s: logs[s][-2000:] for s in MODELS}

    # Every file readable; every (length, model) partition exactly its rows, no duplicates.
    for path in world.lake.rglob("*.parquet"):
        duckdb.sql(f"select count(*) from read_parquet('{path}')").fetchall()
    lake = f"{world.lake}"
    generations = duckdb.sql(f"""
        select model, length, count(*) n, count(distinct instance_id) i, count(distinct generation_id) g
        from read_parquet('{lake}/generations/*/*/data.parquet', hive_partitioning = true)
        group by all order by all""").fetchall()
    assert generations == [(m, lv, PER_LENGTH, PER_LENGTH, PER_LENGTH) for m in MODELS for lv in LENGTHS]
    scores = pl.read_parquet(f"{lake}/metric_scores/*/*/data.parquet", hive_partitioning=True)
    n_metrics = scores["metric"].n_unique()
    assert scores.group_by("model", "length").len().sort("model", "length").rows() == [
        (m, lv, PER_LENGTH * n_metrics) for m in MODELS for lv in LENGTHS]
    assert scores.unique(["model", "length", "instance_id", "metric"]).height == scores.height
    for slug in MODELS:
        assert (world.lake / "long_scores" / f"model={slug}" / "data.parquet").exists()
    board = pl.read_parquet(world.lake / "leaderboard" / "data.parquet")
    assert set(board["model"]) == set(MODELS)  # whichever board was written last saw both models

    # Each prompt asked once per model: no partition was generated twice.
    assert set(asked.values()) == {1} and len(asked) == len(MODELS) * len(LENGTHS) * PER_LENGTH

    # The shared SQLite storage recorded every run of both backfills as a success.
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        assert Counter(r.tags.get("lcp/backfill") for r in runs) == dict.fromkeys(MODELS, len(LENGTHS) + 2)
        assert {r.status for r in runs} == {dg.DagsterRunStatus.SUCCESS}
