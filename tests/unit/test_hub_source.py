"""Hub sources through Hugging Face `datasets`, exercised offline on a local dataset folder.

`datasets.load_dataset` accepts a local folder exactly as it accepts a Hub id, so the same
code path (load, convert rows, write JSONL, validate with the adapter) runs without network.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from lc_pipeline.benchmarks.longbench.sources import longbench_source
from lc_pipeline.config import SourceConfig
from lc_pipeline.sources.hub import HubError, hub_records, source_paths

SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")


@pytest.fixture
def online(monkeypatch, tmp_path):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no writes to the user's cache


@pytest.mark.skipif(not (SHARED / "longbench").exists(), reason="../shared/data/longbench is not beside the checkout")
def test_longbench_source_from_a_dataset_folder(online, tmp_path):
    # A dataset folder laid out like a Hub repo: one split file per task folder.
    repo = tmp_path / "LongBench" / "qasper"
    repo.mkdir(parents=True)
    shutil.copy(SHARED / "longbench" / "qasper.jsonl", repo / "test.jsonl")
    n = sum(1 for _ in (repo / "test.jsonl").open())

    rows = list(hub_records(str(repo), split="test"))
    assert len(rows) == n and rows[0][0] == 0
    first = json.loads((repo / "test.jsonl").open().readline())
    assert rows[0][1]["_id"] == first["_id"] and rows[0][1]["answers"] == first["answers"]

    documents, items, reports = longbench_source(SourceConfig("lb", "longbench", {"hf_dataset": str(repo)}))
    assert items.height == n and sum(len(r.rejected) for r in reports) == 0
    assert set(items["task"]) == {"qasper"} and documents.height >= n


def test_unknown_split_names_the_dataset(online, tmp_path):
    repo = tmp_path / "ds"
    repo.mkdir()
    (repo / "test.jsonl").write_text('{"a": 1}\n')
    with pytest.raises(HubError, match=r"ds.*split 'validation'"):
        hub_records(str(repo), split="validation")


def test_source_needs_paths_or_a_dataset():
    with pytest.raises(ValueError, match=r"source 'lb' \(longbench\): option 'paths' or 'hf_dataset'"):
        source_paths({}, source="lb", kind="longbench")
    options = {"paths": "/data/x.jsonl", "hf_dataset": "THUDM/LongBench", "on_error": "reject"}
    assert source_paths(options, source="lb", kind="longbench") == "/data/x.jsonl"  # local files win
    assert options == {"on_error": "reject"}  # the location options are consumed
