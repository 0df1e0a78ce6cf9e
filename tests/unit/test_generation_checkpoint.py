"""The generation store: finished rows survive a crash, are found again on restart, and stay as a cache."""

from __future__ import annotations

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.generate.checkpoint import GenerationCheckpoint


def rows(keys: list[str], output: str = "x") -> pl.DataFrame:
    n = len(keys)
    return schemas.conform(
        pl.DataFrame({
            "generation_id": [f"g-{k}" for k in keys], "instance_id": [f"i-{k}" for k in keys], "output": [output] * n,
            "prompt_tokens": [10] * n, "original_prompt_tokens": [10] * n, "truncated": [False] * n,
            "truncation_policy": ["middle"] * n, "completion_tokens": [1] * n, "finish_reason": ["stop"] * n,
            "latency_s": [0.1] * n, "backend": ["transformers"] * n, "model_id": ["m"] * n,
            "sampling_params": ["{}"] * n, "sampling_params_hash": ["h"] * n, "cache_key": keys,
            "target_tokens": [1000] * n, "status": ["answered"] * n, "thinking": [""] * n,
            "prompt_ids_hash": [""] * n, "chat_template_source": ["model"] * n, "bos_tokens": [0] * n,
        }),
        "generations",
    )


def test_parts_accumulate_and_reload(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    assert cp.load() is None
    cp.append(rows(["a", "b"]))
    cp.append(rows(["c"]))
    # A new process (a restarted run) sees every flushed row, and no temp files are left.
    again = GenerationCheckpoint(tmp_path / "cp").load()
    assert again["cache_key"].to_list() == ["a", "b", "c"]
    names = sorted(p.name for p in (tmp_path / "cp").iterdir())
    assert len(names) == 2 and all(n.startswith("part-") and n.endswith(".parquet") for n in names)


def test_a_regenerated_row_replaces_the_old_one(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    cp.append(rows(["a"]))
    cp.append(rows(["a"], output="y"))
    assert cp.load()["output"].to_list() == ["y"]


def test_a_leftover_temp_file_from_a_killed_writer_is_ignored(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    cp.append(rows(["a"]))
    (tmp_path / "cp" / ".part-999.parquet.tmp").write_bytes(b"PAR1 half written")
    assert cp.load()["cache_key"].to_list() == ["a"]


def test_compact_folds_parts_into_one_without_losing_rows(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    for k in "abc":
        cp.append(rows([k]))
    cp.append(rows(["a"], output="newer"))
    cp.compact()
    assert len(cp.parts()) == 1
    out = cp.load().sort("cache_key")
    assert out["cache_key"].to_list() == ["a", "b", "c"] and out["output"].to_list() == ["newer", "x", "x"]


def test_clear_removes_everything(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    cp.append(rows(["a"]))
    cp.clear()
    assert cp.load() is None and not (tmp_path / "cp").exists()
