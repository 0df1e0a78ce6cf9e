"""Secrets: with a planted ``OPENAI_API_KEY``, run the openai backend (``lcp backfill``) and the
judge (the judge_scores asset) against the local server, including a 401 whose message quotes
the key back (as some gateways do) so that the error paths run too; then scan every file under
``data_lake/``, the Dagster storage (run and event storage, compute logs) and the captured
stdout/stderr: the key occurs nowhere. Parquet files are scanned decoded (their pages are
compressed, so raw bytes would hide a leak)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
from fault_server import FaultyOpenAIServer
from lake_world import make_world, served_model

SECRET = "sk-proj-PLANTED" + "Zq7x" * 10  # shaped like a real key
JUDGE_CHILD = r"""
import sys
import dagster as dg
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import length_model_key
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.settings import Settings

pipeline = build_pipeline(Settings.from_env())
judge = JudgeResource(base_url=sys.argv[1], model="judge", max_concurrency=1, max_retries=1, timeout_s=10.0,
                      cache_path=sys.argv[2])
outcomes = []
for _ in range(2):  # the server refuses the first run's key (401), answers the second's
    result = dg.materialize(pipeline.assets, selection=["judge_scores"],
                            partition_key=length_model_key("1k", "served"),
                            resources={**pipeline.resources, "judge": judge}, instance=dg.DagsterInstance.get(),
                            raise_on_error=False)
    outcomes.append("succeeded" if result.success else "failed")
    print("judge_scores", outcomes[-1], flush=True)
sys.exit(0 if outcomes == ["failed", "succeeded"] else 1)
"""


def leaks(root: Path, secret: str) -> list[str]:
    """Files under ``root`` that hold ``secret``: in their bytes or, for Parquet, in any value."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if secret.encode() in path.read_bytes() or (path.suffix == ".parquet" and secret in repr(
                pl.read_parquet(path).rows())):
            found.append(str(path.relative_to(root)))
    return found


def test_a_planted_key_is_in_no_table_no_storage_and_no_log(tmp_path):
    world = make_world(tmp_path / "project", per_length=2)
    env = world.env(OPENAI_API_KEY=SECRET)
    cache = world.lake / "_cache" / "judge.sqlite"

    def judge(log: str) -> subprocess.CompletedProcess:
        with open(world.root / "logs" / f"{log}.log", "w") as out:
            return subprocess.run([sys.executable, "-c", JUDGE_CHILD, server.url, str(cache)], env=env,
                                  stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)

    with FaultyOpenAIServer() as server:
        world.add_model(served_model("served", server.url))
        server.plan("500", "auth")  # retried, then refused with the key quoted back: the backfill fails
        failed = world.lcp("backfill", "--model", "served", env=env, log="backfill-refused")
        assert failed.returncode == 1 and "was refused (HTTP 401, not retried)" in failed.stdout
        assert "Incorrect API key provided: ***" in failed.stdout  # the message survives, the key does not
        done = world.lcp("backfill", "--model", "served", env=env, log="backfill")
        assert done.returncode == 0, done.stdout[-3000:]

        # One process runs the judge twice (refused, then answered): the refusal's error path and the judged
        # partition, both in its log.
        server.plan("auth")
        judged = judge("judge")
        assert judged.returncode == 0, (world.root / "logs" / "judge.log").read_text()[-3000:]
        printed = (world.root / "logs" / "judge.log").read_text().splitlines()
        assert [ln for ln in printed if ln.startswith("judge_scores ")] == ["judge_scores failed",
                                                                           "judge_scores succeeded"]
        # The key really was in use: every request carried it.
        assert {r.headers.get("authorization") for r in server.received} == {f"Bearer {SECRET}"}
        assert len([r for r in server.received if r.fault == "auth"]) == 2

    scanned = {d: sum(1 for p in (world.root / d).rglob("*") if p.is_file()) for d in ("data_lake", ".dagster", "logs")}
    assert scanned["data_lake"] > 10 and scanned[".dagster"] > 0 and scanned["logs"] == 3  # there was much to scan
    assert (world.lake / "judge_scores" / "length=1k" / "model=served" / "data.parquet").exists()
    assert leaks(world.root, SECRET) == []
    assert leaks(world.root, SECRET[-16:]) == []  # not even its tail (masked forms such as "sk-...Zq7x")
