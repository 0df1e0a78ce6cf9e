"""Generation checkpoints: finished rows survive a crash and are found again on restart."""

from __future__ import annotations

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.generate.checkpoint import GenerationCheckpoint


def rows(ids: list[str]) -> pl.DataFrame:
    n = len(ids)
    return schemas.conform(
        pl.DataFrame({
            "generation_id": ids, "instance_id": [f"i-{g}" for g in ids], "output": ["x"] * n,
            "prompt_tokens": [10] * n, "original_prompt_tokens": [10] * n, "truncated": [False] * n,
            "completion_tokens": [1] * n, "finish_reason": ["stop"] * n, "latency_s": [0.1] * n,
            "backend": ["transformers"] * n, "model_id": ["m"] * n, "sampling_params": ["{}"] * n,
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
    assert again["generation_id"].to_list() == ["a", "b", "c"]
    assert sorted(p.name for p in (tmp_path / "cp").iterdir()) == ["part-000000.parquet", "part-000001.parquet"]


def test_a_regenerated_row_replaces_the_old_one(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    cp.append(rows(["a"]))
    cp.append(rows(["a"]).with_columns(output=pl.lit("y")))
    assert cp.load()["output"].to_list() == ["y"]


def test_clear_removes_everything(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    cp.append(rows(["a"]))
    cp.clear()
    assert cp.load() is None and not (tmp_path / "cp").exists()
