"""A table written batch by batch: row groups of one staged Parquet file, published whole at its lake path.

The ``instances`` asset writes a level this way (a 256k level is GBs in memory as one frame);
the IO manager publishes the staged file to a local folder or a bucket (``memory://`` here,
the same fsspec path as ``s3://``) without reading it back.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from lc_pipeline import storage
from lc_pipeline.resources.parquet_io import HiveParquetIOManager, read_table

SCHEMA = pl.Schema({"instance_id": pl.String, "context": pl.String, "evidence_depths": pl.List(pl.Float64)})


def batch(start: int, n: int) -> pl.DataFrame:
    # Contexts (~6k characters) that repeat a shared filler, like a level's instances do.
    filler = "The harbour of Lytoford trades in copper bells and salt. " * 100
    return pl.DataFrame({"instance_id": [f"i{k:03d}" for k in range(start, start + n)],
                         "context": [f"{filler}Document {k}." for k in range(start, start + n)],
                         "evidence_depths": [[k / 100] for k in range(start, start + n)]}, schema=SCHEMA)


@pytest.fixture
def bucket() -> str:
    url = f"memory://staged-{uuid.uuid4().hex[:8]}/lake"
    yield url
    storage.remove_tree(url)


def test_each_write_is_one_row_group_and_the_file_reads_back_whole(tmp_path):
    with storage.ParquetStager(tmp_path, schema=SCHEMA) as stage:
        for start in (0, 50, 100):
            stage.write(batch(start, 50 if start < 100 else 7))
        staged = stage.finish()
    assert staged.rows == 107 and staged.schema == SCHEMA
    assert pq.ParquetFile(staged.path).metadata.num_row_groups == 3
    target = tmp_path / "lake" / "instances" / "length=4k" / "data.parquet"
    storage.publish_parquet(staged, target)
    assert storage.read_parquet(target).equals(pl.concat([batch(0, 50), batch(50, 50), batch(100, 7)]))
    assert not staged.path.exists() and os.listdir(target.parent) == ["data.parquet"]


def test_zstd_level_keeps_files_as_small_as_polars_writes_them(tmp_path):
    frame = pl.concat([batch(0, 50), batch(50, 50)])
    with storage.ParquetStager(tmp_path) as stage:
        stage.write(frame.head(50))
        stage.write(frame.tail(50))
        staged = stage.finish()
    storage.write_parquet(frame, tmp_path / "whole.parquet")
    assert staged.path.stat().st_size <= 1.2 * (tmp_path / "whole.parquet").stat().st_size


def test_a_frame_with_other_columns_is_refused_by_name(tmp_path):
    with storage.ParquetStager(tmp_path, schema=SCHEMA) as stage:
        stage.write(batch(0, 2))
        with pytest.raises(ValueError, match=r"'evidence_depths': 'List\(Float64\) in the file, String in the frame'"):
            stage.write(batch(2, 2).with_columns(pl.col("evidence_depths").cast(pl.List(pl.String)).list.join(",")))


def test_nothing_written_gives_an_empty_table_with_the_schema(tmp_path):
    with storage.ParquetStager(tmp_path, schema=SCHEMA) as stage:
        staged = stage.finish()
    back = pl.read_parquet(staged.path)
    assert back.height == 0 and back.schema == SCHEMA


def test_a_failed_build_leaves_the_published_file_and_no_staged_file(tmp_path):
    target = tmp_path / "lake" / "instances" / "length=4k" / "data.parquet"
    storage.write_parquet(batch(0, 3), target)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with pytest.raises(RuntimeError, match="tokenizer died"), storage.ParquetStager(scratch, schema=SCHEMA) as stage:
        stage.write(batch(0, 50))
        raise RuntimeError("tokenizer died")
    assert list(scratch.iterdir()) == []
    assert storage.read_parquet(target).equals(batch(0, 3))  # the last good level is still there


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm (a second filesystem) on this machine")
def test_publishing_across_filesystems_copies_then_renames(tmp_path):
    shm = Path("/dev/shm")
    if shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("/dev/shm is on the same filesystem as the test's temp dir")
    scratch = shm / f"lcp-test-{uuid.uuid4().hex[:8]}"
    scratch.mkdir()
    try:
        with storage.ParquetStager(scratch, schema=SCHEMA) as stage:
            stage.write(batch(0, 5))
            staged = stage.finish()
        target = tmp_path / "lake" / "data.parquet"
        storage.publish_parquet(staged, target)
        assert storage.read_parquet(target).equals(batch(0, 5)) and os.listdir(target.parent) == ["data.parquet"]
    finally:
        for f in scratch.iterdir():
            f.unlink()
        scratch.rmdir()


@pytest.mark.parametrize("where", ["folder", "bucket"])
def test_io_manager_publishes_a_staged_table_for_downstream_assets(tmp_path, bucket, where):
    base = str(tmp_path / "lake") if where == "folder" else bucket
    lengths = dg.StaticPartitionsDefinition(["4k", "8k"])

    @dg.asset(partitions_def=lengths)
    def instances(context):
        scratch = tmp_path / f"scratch-{context.partition_key}"
        scratch.mkdir()
        with storage.ParquetStager(scratch, schema=SCHEMA) as stage:
            for start in range(0, 120, 50):
                stage.write(batch(start, min(50, 120 - start)))
            return stage.finish()

    @dg.asset(ins={"instances": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
    def per_level(instances: pl.DataFrame) -> pl.DataFrame:
        return instances.group_by("length").len().sort("length")

    io = HiveParquetIOManager(base_dir=base)
    with dg.instance_for_test() as instance:
        for key in ("4k", "8k"):
            result = dg.materialize([instances], partition_key=key, resources={"io_manager": io}, instance=instance)
            meta = result.asset_materializations_for_node("instances")[0].metadata
            assert meta["dagster/row_count"].value == 120
            assert [c.name for c in meta["dagster/column_schema"].schema.columns] == list(SCHEMA)
        downstream = dg.materialize([instances, per_level], selection=[per_level], resources={"io_manager": io},
                                    instance=instance)
    assert downstream.output_for_node("per_level").rows() == [("4k", 120), ("8k", 120)]
    table = read_table(storage.lake_path(base) / "instances")
    assert table.drop("length").head(120).equals(pl.concat([batch(0, 50), batch(50, 50), batch(100, 20)]))
    files = sorted(p.name for p in (storage.lake_path(base) / "instances").rglob("*") if p.is_file())
    assert files == ["data.parquet", "data.parquet"]  # no temp files beside them
