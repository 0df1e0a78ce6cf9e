"""The generation store: finished rows survive a crash, are found again on restart, and stay as a cache."""

from __future__ import annotations

import subprocess
import sys
import time

import polars as pl
import pytest

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


# ----------------------------------------------------------------------------- the writer and its journal


def test_every_added_row_is_readable_at_once_from_the_journal(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    cp.append(rows(["a"]))
    with cp.writer(schemas.TABLES["generations"]) as writer:
        writer.add(rows(["b"]).to_dicts())
        writer.add(rows(["c"], output="é\n\"quoted\"").to_dicts())
        # Another process (a resumed run, `lcp plan`) sees the rows before any Parquet part holds them.
        again = GenerationCheckpoint(tmp_path / "cp")
        assert len(again.parts()) == 1 and len(again.journals()) == 1
        assert again.load().sort("cache_key").equals(pl.concat([rows(["a"]), rows(["b"]), rows(["c"], output="é\n\"quoted\"")]))
    # Closed: folded into a part, the journal gone, the same rows.
    assert len(cp.parts()) == 2 and cp.journals() == []
    assert cp.load().sort("cache_key").equals(pl.concat([rows(["a"]), rows(["b"]), rows(["c"], output="é\n\"quoted\"")]))


def test_an_interrupt_right_after_the_journal_write_loses_no_row(tmp_path, monkeypatch):
    """Seen in test_interrupts on a loaded machine: SIGINT landed inside ``add`` just after the journal line was
    written (Dagster raises the interrupt wherever the main thread is); the row was in the journal but not among the
    rows to fold, and closing the writer folded the others and removed the journal with it."""
    from lc_pipeline.generate import checkpoint

    cp = GenerationCheckpoint(tmp_path / "cp")
    written = checkpoint._Journal.write

    def write_then_interrupted(journal, lines):
        written(journal, lines)
        if any(line["cache_key"] == "b" for line in lines):
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint._Journal, "write", write_then_interrupted)
    with pytest.raises(KeyboardInterrupt), cp.writer(schemas.TABLES["generations"]) as writer:
        writer.add(rows(["a"]).to_dicts())
        writer.add(rows(["b"]).to_dicts())
    assert cp.load()["cache_key"].sort().to_list() == ["a", "b"] and cp.journals() == []


def test_the_writer_folds_by_count_in_the_background(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    with cp.writer(schemas.TABLES["generations"], fold_rows=3) as writer:
        for k in "abcd":
            writer.add(rows([k]).to_dicts())
        deadline = time.monotonic() + 10
        while not cp.parts() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cp.parts(), "three rows were not folded into a part"
        assert cp.load().height == 4  # the fourth is in the new journal
    assert cp.load()["cache_key"].sort().to_list() == ["a", "b", "c", "d"] and cp.journals() == []


def test_a_journal_line_cut_by_a_kill_is_left_out_and_the_rest_kept(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    writer = cp.writer(schemas.TABLES["generations"])
    writer.add(rows(["a", "b"]).to_dicts())
    [journal] = cp.journals()
    with open(journal, "a") as fh:  # what a kill in the middle of a write leaves: a line without its newline
        fh.write('{"generation_id": "g-c", "instance_id": "i-c", "outp')
    assert cp.load()["cache_key"].to_list() == ["a", "b"]
    writer.close()


def test_a_garbled_journal_line_is_an_error_naming_file_and_line(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    with cp.writer(schemas.TABLES["generations"]) as writer:
        writer.add(rows(["a"]).to_dicts())
        [journal] = cp.journals()
        with open(journal, "a") as fh:
            fh.write("not json\n")
        with pytest.raises(ValueError, match=rf"{journal.name}, line 3: not a stored row"):
            cp.load()
        journal.write_text(journal.read_text().replace("not json\n", ""))


DEAD_WRITER = """
import os, sys
import polars as pl
from lc_pipeline import schemas
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
writer = GenerationCheckpoint(sys.argv[1]).writer(schemas.TABLES["generations"])
writer.add(pl.read_parquet(sys.argv[2]).to_dicts())
os._exit(0)  # gone without closing: its journal is left, unlocked by the kernel
"""


def test_compact_leaves_a_live_writers_journal_and_folds_a_dead_ones(tmp_path):
    cp = GenerationCheckpoint(tmp_path / "cp")
    rows(["a"]).write_parquet(tmp_path / "a.parquet")
    subprocess.run([sys.executable, "-c", DEAD_WRITER, str(tmp_path / "cp"), str(tmp_path / "a.parquet")], check=True)
    [dead_journal] = cp.journals()
    with cp.writer(schemas.TABLES["generations"]) as live:
        live.add(rows(["b"]).to_dicts())
        cp.compact()
        assert not dead_journal.exists() and len(cp.parts()) == 1
        assert len(cp.journals()) == 1  # the live writer's, left alone
        assert cp.load()["cache_key"].sort().to_list() == ["a", "b"]
    assert cp.load()["cache_key"].sort().to_list() == ["a", "b"] and cp.journals() == []


def test_a_writer_on_an_object_store_puts_parts(tmp_path):
    import uuid

    from lc_pipeline import storage

    url = f"memory://store-{uuid.uuid4().hex[:8]}/cp"
    try:
        cp = GenerationCheckpoint(url)
        with cp.writer(schemas.TABLES["generations"]) as writer:
            writer.add(rows(["a", "b"]).to_dicts())
            assert cp.journals() == []  # no appending on an object store
        assert len(cp.parts()) == 1 and cp.load()["cache_key"].to_list() == ["a", "b"]
    finally:
        storage.remove_tree(url)
