"""Issue 31: stage fingerprints cover the sources' input data (fingerprints.config_input_sha256), and a lake records
which config built its instances (lake.built_by / check_lake_config)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline import fingerprints
from lc_pipeline.config import BenchmarkConfig, SourceConfig
from lc_pipeline.assets import versions
from lc_pipeline.definitions import declared_specs
from lc_pipeline.fingerprints import config_input_sha256, source_input_files
from lc_pipeline.lake import LakeOfAnotherConfig, built_by, check_lake_config, record_built_by


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fingerprints, "_memo", {})
    monkeypatch.setattr(fingerprints, "_loaded", [])


def released(folder: Path, name: str = "lb") -> BenchmarkConfig:
    return BenchmarkConfig(name=name, sources=[SourceConfig("longbench", "longbench", {"paths": str(folder)})],
                           released={"benchmark": "longbench"}, lengths=["all"])


def data_folder(root: Path, lines: list[str]) -> Path:
    root.mkdir(parents=True)
    (root / "qasper.jsonl").write_text("".join(line + "\n" for line in lines))
    (root / "hotpotqa.jsonl").write_text('{"_id": "h"}\n')
    return root


def test_the_fingerprint_follows_the_files_content_not_their_folder(tmp_path):
    a = data_folder(tmp_path / "a", ['{"_id": "1"}', '{"_id": "2"}'])
    b = data_folder(tmp_path / "b", ['{"_id": "1"}', '{"_id": "2"}'])
    specs = {name: spec for name, spec in declared_specs().items() if spec.code_version is not None
             and versions.runs(spec) != "manual"}  # lcp minilongbench's tables hash what they read themselves
    assert {"source_items", "instances", "generations", "benchmark_scores", "leaderboard"} <= set(specs)
    fp = {name: versions.fingerprint(spec, released(a), "m" if "model" in versions.adds(spec) else None)
          for name, spec in specs.items()}
    # Another folder holding the same bytes: nothing to rebuild.
    assert config_input_sha256(released(a)) == config_input_sha256(released(b))
    (b / "qasper.jsonl").write_text('{"_id": "1"}\n')  # a record removed
    changed = {name: versions.fingerprint(spec, released(b), "m" if "model" in versions.adds(spec) else None)
               for name, spec in specs.items()}
    assert all(changed[s] != fp[s] for s in specs)  # every asset reads the sources, directly or not
    (b / "qasper.jsonl").write_text('{"_id": "1"}\n{"_id": "2"}\n')
    assert config_input_sha256(released(b)) == config_input_sha256(released(a))  # the same bytes again
    (b / "extra.jsonl").write_text('{"_id": "3"}\n')  # a file added
    assert config_input_sha256(released(b)) != config_input_sha256(released(a))
    (b / "extra.jsonl").unlink()
    (b / ".DS_Store").write_text("finder")  # hidden entries are not data
    assert config_input_sha256(released(b)) == config_input_sha256(released(a))


def test_the_recorded_sha256_is_the_files_content_and_is_cached_by_stat(tmp_path):
    a = data_folder(tmp_path / "a", ['{"_id": "1"}'])
    files = source_input_files(released(a).sources[0])
    assert [(opt, name) for opt, name, _ in files] == [("paths", "hotpotqa.jsonl"), ("paths", "qasper.jsonl")]
    qasper = a / "qasper.jsonl"
    assert fingerprints.file_sha256(qasper.resolve()) == hashlib.sha256(qasper.read_bytes()).hexdigest()
    cache = json.loads((tmp_path / "cache" / fingerprints.INPUT_CACHE_FILE).read_text())
    assert cache[str(qasper.resolve())][3] == hashlib.sha256(qasper.read_bytes()).hexdigest()
    # A new process reads the cache: a file whose size, mtime and inode are unchanged is not read again.
    fingerprints._memo.clear()
    fingerprints._loaded.clear()
    st = qasper.stat()
    qasper.write_text('{"_id": "9"}\n')  # the same size
    os.utime(qasper, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert fingerprints.file_sha256(qasper.resolve()) == cache[str(qasper.resolve())][3]
    qasper.write_text('{"_id": "9"}\n')  # a new mtime: read again
    assert fingerprints.file_sha256(qasper.resolve()) == hashlib.sha256(b'{"_id": "9"}\n').hexdigest()


def test_a_config_without_input_files_keeps_its_fingerprints():
    config = BenchmarkConfig(name="demo", sources=[SourceConfig("demo", "demo_corpus", {"n_entities": 40})],
                             lengths=["1k", "2k"], base_lengths=["1k"], long_lengths=["2k"])
    assert config_input_sha256(config) == ""
    specs = declared_specs()
    for stage in ("source_items", "instances"):
        spec = specs[stage]
        parts = [stage, spec.code_version, config.fingerprint(*versions.hashes(spec)), ""]
        assert versions.fingerprint(spec, config) == hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def scored_lake(lake: Path, config: str, models: list[str]) -> None:
    part = lake / "instances" / "length=all"
    part.mkdir(parents=True)
    pl.DataFrame({"instance_id": ["i"]}).write_parquet(part / "data.parquet")
    record_built_by(lake, "all", config, "fp-a")
    for model in models:
        folder = lake / "metric_scores" / "length=all" / f"model={model}"
        folder.mkdir(parents=True)
        pl.DataFrame({"instance_id": ["i"]}).write_parquet(folder / "data.parquet")


def test_a_lake_scored_under_another_config_is_refused_naming_it(tmp_path):
    lake = tmp_path / "lake"
    scored_lake(lake, "longbench", ["ref"])
    assert built_by(lake, "all") == {"config": "longbench", "fingerprint": "fp-a"}
    check_lake_config(lake, released(tmp_path, "longbench"))  # its own config
    with pytest.raises(LakeOfAnotherConfig) as refused:
        check_lake_config(lake, released(tmp_path, "longbench-v2"))
    message = str(refused.value)
    assert "built by config 'longbench'" in message and "['ref']" in message and "config 'longbench-v2'" in message
    assert "LCP_LAKE" in message and "make clean-lake" in message


def test_another_configs_instances_that_no_model_ran_on_are_not_refused(tmp_path):
    lake = tmp_path / "lake"
    scored_lake(lake, "longbench", [])
    check_lake_config(lake, released(tmp_path, "longbench-v2"))
    (lake / "instances" / "length=all" / "data.parquet").unlink()  # a record without its partition: nothing there
    assert built_by(lake, "all") is None


def test_the_paired_board_holds_the_current_instances_only_and_counts_the_others_unpaired():
    """A record removed from the data since the models ran: its instances leave every row (score/board.py
    ``current``), counted in n_unpaired; the rows equal the board of the remaining instances alone."""
    import random

    from lc_pipeline.score.board import paired_board

    def scores(model: str, seed: int) -> pl.DataFrame:
        rng = random.Random(seed)
        return pl.DataFrame([dict(model=model, metric="f1", task=t, length=lv, item_id=f"{t}{i}",
                                  instance_id=f"{t}{i}@{lv}", score=rng.random())
                             for t in ("a", "b") for i in range(5) for lv in ("1k", "4k")])

    rows = pl.concat([scores("m1", 1), scores("m2", 2)])
    removed = {"a0@1k", "a0@4k"}
    current = sorted(set(rows["instance_id"]) - removed)
    board, _, _ = paired_board(rows, ["1k"], ["4k"], current=current, draws=50)
    alone, _, _ = paired_board(rows.filter(~pl.col("instance_id").is_in(list(removed))), ["1k"], ["4k"], draws=50)
    assert sorted(board.select("model", "n_instances", "n_unpaired").rows()) == [("m1", 18, 2), ("m2", 18, 2)]
    assert board.drop("n_unpaired").sort("model").equals(alone.drop("n_unpaired").sort("model"))
