"""The lake on an fsspec URL: every file the pipeline writes works on a bucket as on a folder.

``memory://`` is fsspec's in-process filesystem: the same code path as ``s3://`` / ``gs://``
(UPath + fsspec), without a server. One test also runs against a real S3-compatible HTTP
server (moto) on loopback, when moto and s3fs are installed.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest
from upath import UPath

from lc_pipeline import storage
from lc_pipeline.construct.embedding import EmbeddingCache
from lc_pipeline.construct.retrieval import load_index, save_index
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.lake import query, table_dirs
from lc_pipeline.resources.parquet_io import HiveParquetIOManager, read_table
from lc_pipeline.settings import Settings


@pytest.fixture
def bucket() -> str:
    """A fresh lake URL in fsspec's memory filesystem, removed afterwards."""
    url = f"memory://lake-{uuid.uuid4().hex[:8]}/lake"
    yield url
    storage.remove_tree(url)


def test_lake_path_keeps_local_paths_local_and_makes_urls_upaths(tmp_path):
    assert storage.lake_path(tmp_path) == tmp_path and storage.is_local(tmp_path)
    assert storage.lake_path(f"file://{tmp_path}") == tmp_path
    remote = storage.lake_path("s3://bucket/lake/")
    assert isinstance(remote, UPath) and not storage.is_local(remote)
    assert storage.url(remote / "generations") == "s3://bucket/lake/generations"
    assert storage.url("data_lake") == str(Path("data_lake").resolve())


def test_a_bucket_lake_from_the_environment_keeps_sqlite_caches_on_local_disk(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_LAKE", "s3://team-bucket/lc/lake")
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    s = Settings.from_env(tmp_path)
    assert s.lake_url == "s3://team-bucket/lc/lake" and not s.lake_is_local
    assert s.judge_cache_path == tmp_path / "cache" / "judge.sqlite"

    monkeypatch.setenv("LCP_LAKE", "lake")
    local = Settings.from_env(tmp_path)
    assert local.lake_dir == tmp_path / "lake"
    assert local.judge_cache_path == tmp_path / "lake" / "_cache" / "judge.sqlite"


def test_atomic_writes_leave_no_temp_file_locally_and_one_object_remotely(tmp_path, bucket):
    df = pl.DataFrame({"instance_id": ["a", "b"], "score": [0.5, 1.0]})
    for base in (storage.lake_path(tmp_path), storage.lake_path(bucket)):
        target = base / "metric_scores" / "length=4k" / "data.parquet"
        storage.write_parquet(df, target)
        storage.write_parquet(df.with_columns(pl.col("score") * 0), target)  # a rewrite replaces it whole
        assert storage.read_parquet(target)["score"].to_list() == [0.0, 0.0]
        assert [p.name for p in target.parent.iterdir()] == ["data.parquet"]


def test_io_manager_round_trips_partitions_on_a_bucket(bucket):
    lengths = dg.StaticPartitionsDefinition(["4k", "8k"])

    @dg.asset(partitions_def=lengths)
    def instances(context) -> pl.DataFrame:
        return pl.DataFrame({"instance_id": [f"{context.partition_key}-{i}" for i in range(3)]})

    @dg.asset(ins={"instances": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
    def summary(instances: pl.DataFrame) -> pl.DataFrame:
        return instances.group_by("length").len().sort("length")

    io = HiveParquetIOManager(base_dir=bucket)
    with dg.instance_for_test() as instance:
        for key in ("4k", "8k"):
            assert dg.materialize([instances], partition_key=key, resources={"io_manager": io}, instance=instance).success
        result = dg.materialize([instances, summary], selection=[summary], resources={"io_manager": io},
                                instance=instance)
    assert result.success
    assert result.output_for_node("summary").rows() == [("4k", 3), ("8k", 3)]
    written = sorted(str(p) for p in storage.lake_path(bucket).rglob("data.parquet"))
    assert written == [f"{bucket}/instances/length=4k/data.parquet", f"{bucket}/instances/length=8k/data.parquet",
                       f"{bucket}/summary/data.parquet"]
    assert read_table(storage.lake_path(bucket) / "instances").height == 6


def test_duckdb_queries_a_bucket_through_fsspec_with_partition_pruning(bucket):
    base = storage.lake_path(bucket)
    for length in ("4k", "8k"):
        for model in ("m-a", "m-b"):
            storage.write_parquet(pl.DataFrame({"score": [0.25, 0.75]}),
                                  base / "metric_scores" / f"length={length}" / f"model={model}" / "data.parquet")
    storage.write_parquet(pl.DataFrame({"cache_key": ["x"]}), base / "_checkpoints" / "generations" / "part.parquet")

    assert list(table_dirs(bucket)) == ["metric_scores"]  # checkpoints are not a table
    cols, rows = query(bucket, "select model, length, avg(score) from metric_scores group by all order by all")
    assert cols == ["model", "length", "avg(score)"]
    assert rows == [("m-a", "4k", 0.5), ("m-a", "8k", 0.5), ("m-b", "4k", 0.5), ("m-b", "8k", 0.5)]
    _, plan = query(bucket, "explain analyze select count(*) from metric_scores where model = 'm-a'")
    assert "Scanning Files: 2/4" in plan[0][1]


def test_generation_store_resumes_from_parts_on_a_bucket(bucket):
    store = GenerationCheckpoint(f"{bucket}/_checkpoints/generations/length=4k/model=m")
    store.append(pl.DataFrame({"cache_key": ["k1", "k2"], "output": ["a", "b"]}))
    store.append(pl.DataFrame({"cache_key": ["k2"], "output": ["b2"]}))  # a regenerated row wins
    again = GenerationCheckpoint(f"{bucket}/_checkpoints/generations/length=4k/model=m")
    assert again.load().sort("cache_key").rows() == [("k1", "a"), ("k2", "b2")]
    again.compact()
    assert len(again.parts()) == 1 and again.load().height == 2
    again.clear()
    assert again.load() is None


def test_embedding_cache_and_faiss_index_live_in_a_bucket(bucket):
    cache = EmbeddingCache(f"{bucket}/_cache/embeddings", "some-model")
    vectors = np.eye(3, 4, dtype=np.float32)
    cache.put(["k0", "k1", "k2"], vectors)
    reread = EmbeddingCache(f"{bucket}/_cache/embeddings", "some-model")
    assert len(reread) == 3 and np.array_equal(reread.get(["k1"])["k1"], vectors[1])

    faiss = pytest.importorskip("faiss")
    index = faiss.IndexFlatIP(4)
    index.add(vectors)
    path = storage.lake_path(bucket) / "passage_index" / "index.faiss"
    save_index(index, path)
    loaded = load_index(path)
    assert loaded.ntotal == 3
    _, ids = loaded.search(vectors[2:3], 1)
    assert ids[0][0] == 2


@pytest.mark.skipif(importlib.util.find_spec("moto") is None or importlib.util.find_spec("s3fs") is None,
                    reason="moto[server] and s3fs (the cluster extra) are not installed")
def test_a_real_s3_server_on_loopback(monkeypatch):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        # Credentials and endpoint only from the environment, as on a cluster.
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()  # an earlier instance may hold another endpoint
        storage.lake_path("s3://unit-lake").fs.mkdir("unit-lake")
        target = storage.lake_path("s3://unit-lake/lake") / "generations" / "length=4k" / "model=m" / "data.parquet"
        storage.write_parquet(pl.DataFrame({"output": ["yes"]}), target)
        assert storage.read_parquet(target)["output"].to_list() == ["yes"]
        assert query("s3://unit-lake/lake", "select output, length, model from generations") == (
            ["output", "length", "model"], [("yes", "4k", "m")])
        # Another machine writes a table: this process, which has listed the lake, sees it at once.
        import io

        import boto3

        buf = io.BytesIO()
        pl.DataFrame({"score": [1.0]}).write_parquet(buf)
        boto3.client("s3").put_object(Bucket="unit-lake", Key="lake/metric_scores/length=4k/model=m/data.parquet",
                                      Body=buf.getvalue())
        assert list(table_dirs("s3://unit-lake/lake")) == ["generations", "metric_scores"]
    finally:
        server.stop()
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
