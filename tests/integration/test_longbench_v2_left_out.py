"""LongBench v2 under `protocol: official` (fidelity review V2-4): pred.py writes no result for an empty reply
(``if output == '': continue``), so result.py neither counts nor scores it. On the packaged ``longbench-v2`` config
and the released-layout fixture records (tests/fixtures/longbench_v2, our own text), with LCP_OFFICIAL=../shared/
official: an official instance whose answer is empty gets no metric row and leaves the tables' denominator (counted
in status_counts and BenchmarkTable.left_out); under `protocol: ours` it scores 0."""

from __future__ import annotations

import json
from pathlib import Path

import built_lakes
import polars as pl
import pytest
import yaml
from shared_files import OFFICIAL, skip_unless

from lc_pipeline.config import PACKAGED_CONFIGS, load_config
from lc_pipeline.score.benchmark_scores import benchmark_table, selected_tasks
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.tasks.catalog import catalog_for

AUTHORS = OFFICIAL / "THUDM+LongBench"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "longbench_v2"
pytestmark = skip_unless(AUTHORS / "prompts", "the authors' LongBench v2 prompts")


@pytest.fixture
def env(monkeypatch, tmp_path):
    data = tmp_path / "data" / "longbench-v2"
    data.mkdir(parents=True)
    (data / "data.json").write_text((FIXTURES / "data.json").read_text())
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    return tmp_path


def config_with(tmp_path: Path, protocol: str):
    raw = yaml.safe_load((PACKAGED_CONFIGS / "longbench-v2.yaml").read_text())
    raw["protocol"] = protocol
    path = tmp_path / f"v2-{protocol}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(str(path))


def test_an_empty_reply_is_left_out_under_official_and_scores_0_under_ours(env):
    for protocol in ("official", "ours"):
        config = config_with(env, protocol)
        catalog = catalog_for(config)
        [(level, instances)] = built_lakes.build_instances(config).items()
        direct = (instances.filter(pl.col("task") == "longbench_v2").sort("instance_id")
                  .with_columns(length=pl.lit(level)))
        assert direct.height == 3
        answers = [a[0] for a in direct["answers"]]
        # the first answered right, the second empty, the third wrong ("   " is empty too, but not exactly "")
        outputs = [f"The correct answer is ({answers[0]})", "", "   "]
        ids = direct["instance_id"].to_list()[:3]
        gens = pl.DataFrame({"generation_id": [f"g{i}" for i in range(3)], "instance_id": ids, "output": outputs,
                             "status": ["answered", "empty", "empty"], "finish_reason": ["stop"] * 3,
                             "truncated": [False] * 3})
        scores = score_frame(gens, direct, catalog).with_columns(length=pl.lit(level))
        result = benchmark_table(scores, direct.filter(pl.col("instance_id").is_in(ids)), catalog, "m",
                                 generations=gens, selected=selected_tasks(config, catalog))
        [task] = result.table.filter((pl.col("level") == "task") & (pl.col("task") == "longbench_v2")
                                     ).iter_rows(named=True)
        counts = json.loads(task["status_counts"])
        if protocol == "official":
            assert set(scores["instance_id"]) == {ids[0], ids[2]}  # no row for the exactly empty reply
            assert (task["score"], task["n"]) == (pytest.approx(50.0), 2)
            assert result.left_out == {"longbench_v2/longbench_v2": 1} and result.unscored == {}
            # the left-out reply stays "empty" in the row's counts; the scored blank one found no choice
            assert (counts["answered"], counts["empty"], counts["unparsable"]) == (1, 1, 1)
        else:
            assert set(scores["instance_id"]) == set(ids)
            assert (task["score"], task["n"]) == (pytest.approx(100 / 3), 3)
            assert dict(result.left_out) == {}
            assert (counts["answered"], counts["empty"], counts["unparsable"]) == (1, 0, 2)
        assert task["protocol"] == ("ours" if protocol == "ours" else config.protocol_label())
