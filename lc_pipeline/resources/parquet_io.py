"""Hive-layout Parquet IO manager.

Layout (DuckDB and Polars read it with hive partitioning out of the box)::

    <base_dir>/<asset>/data.parquet                                  unpartitioned
    <base_dir>/<asset>/length=4k/data.parquet                        one dimension
    <base_dir>/<asset>/length=4k/model=smollm2-135m/data.parquet     length x model

``base_dir`` is a local folder or any fsspec URL (``s3://bucket/lake``, ``gs://...``), with
credentials from the environment (:mod:`lc_pipeline.storage`). Writes are atomic: locally a
hidden temp file in the same directory, then ``os.replace``; on an object store a single PUT.
So a reader or a killed run never sees half a file. Partition values live in the path, not the file;
when an input is loaded from a partitioned asset the partition columns are added back,
always, whether one partition or many is loaded, so downstream code sees one stable shape.

We write our own rather than use dagster-polars: its latest release fails on every read
with Polars 2.x and its layout is not hive style (see specs/dagster.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import dagster as dg
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.lake_files import (  # noqa: F401  (re-exported: the assets and tests read the lake through here)
    partition_path,
    partition_segments,
    read_generation_statuses,
    read_judge_scores,
    read_model_partitions,
    read_partition,
    read_table,
)
from lc_pipeline.storage import FILE_NAME

COLUMN_SCHEMA = "dagster/column_schema"  # the metadata key of the UI's Columns table


def column_schema(table: str, schema: Mapping[str, pl.DataType] | None = None) -> dg.TableSchema:
    """The Columns table of the Dagster UI for ``table``: each column of ``schema`` (default: the
    table's contract, :data:`schemas.TABLES`) with its type and its description (:data:`schemas.DESCRIPTIONS`)."""
    described = schemas.DESCRIPTIONS.get(table, {})
    schema = schemas.TABLES[table] if schema is None else schema
    return dg.TableSchema(columns=[dg.TableColumn(name, str(dtype), description=described.get(name))
                                   for name, dtype in schema.items()])


def with_column_schemas(assets: Iterable) -> list:
    """``assets`` with each table's column schema (types and descriptions) in its definition metadata,
    so the UI's Columns table shows it before anything is materialized (assets without a table, and
    asset checks, are left as they are)."""

    def describe(spec: dg.AssetSpec) -> dg.AssetSpec:
        table = spec.key.path[-1]
        if table not in schemas.TABLES or COLUMN_SCHEMA in spec.metadata:
            return spec
        return spec.merge_attributes(metadata={COLUMN_SCHEMA: column_schema(table)})

    return dg.map_asset_specs(describe, list(assets))


def partition_dims(pdef: dg.PartitionsDefinition | None, key: str) -> dict[str, str]:
    """Partition key -> {dimension: value}, e.g. "4k|m" -> {"length": "4k", "model": "m"}."""
    if pdef is None:
        return {}
    if isinstance(pdef, dg.MultiPartitionsDefinition):
        return dict(pdef.get_partition_key_from_str(key).keys_by_dimension)
    name = getattr(pdef, "name", None) or "length"
    return {name: key}


def write_parquet_atomic(df: pl.DataFrame, path: Path) -> None:
    storage.write_parquet(df, path)


class HiveParquetIOManager(dg.ConfigurableIOManager):
    """Stores polars DataFrames as hive-partitioned Parquet under ``base_dir``; an asset whose
    table is too large to hold returns a :class:`storage.StagedParquet` it wrote in row groups,
    which is published whole (moved or uploaded, never read back)."""

    base_dir: str

    @property
    def base(self) -> Path:
        return storage.lake_path(self.base_dir)

    def _asset_name(self, context: dg.InputContext | dg.OutputContext) -> str:
        return "/".join(context.asset_key.path)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame | storage.StagedParquet | None) -> None:
        if obj is None:  # assets that write their own artifacts return MaterializeResult
            return
        if isinstance(obj, pl.DataFrame):
            schema, rows = obj.schema, obj.height
        elif isinstance(obj, storage.StagedParquet):  # a table written batch by batch: published as is
            schema, rows = obj.schema, obj.rows
        else:
            raise TypeError(f"asset {self._asset_name(context)}: expected a polars DataFrame or a StagedParquet, "
                            f"got {type(obj).__name__}")
        dims = (
            partition_dims(context.asset_partitions_def, context.asset_partition_key)
            if context.has_asset_partitions
            else {}
        )
        leaked = [d for d in dims if d in schema and d != "source"]
        if leaked:
            raise ValueError(
                f"asset {self._asset_name(context)}: partition columns {leaked} belong in the path, not the data"
            )
        path = partition_path(self.base, self._asset_name(context), dims)
        if isinstance(obj, pl.DataFrame):
            write_parquet_atomic(obj, path)
        else:
            storage.publish_parquet(obj, path)
        context.add_output_metadata(
            {
                "dagster/row_count": rows,
                "path": dg.MetadataValue.path(str(path)),
                COLUMN_SCHEMA: column_schema(context.asset_key.path[-1], schema),
            }
        )

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        asset = self._asset_name(context)
        if not context.has_asset_partitions:
            path = partition_path(self.base, asset, {})
            if not path.exists():
                raise FileNotFoundError(f"asset {asset}: {path} does not exist; materialize {asset} first")
            return storage.read_parquet(path)
        pdef = context.asset_partitions_def
        allow_missing = bool((context.definition_metadata or {}).get("allow_missing_partitions", False))
        frames, missing = [], []
        for key in context.asset_partition_keys:
            dims = partition_dims(pdef, key)
            path = partition_path(self.base, asset, dims)
            if path.exists():
                frames.append(read_partition(path, dims))
            else:
                missing.append(key)
        if missing and not allow_missing:
            raise FileNotFoundError(
                f"asset {asset}: partitions {missing} have no data under {self.base / asset}; materialize them first"
            )
        if missing:
            context.log.info(f"asset {asset}: {len(missing)} partitions not materialized yet, skipped: {missing}")
        if not frames:
            raise FileNotFoundError(f"asset {asset}: none of the partitions {list(context.asset_partition_keys)} exist")
        return pl.concat(frames, how="diagonal_relaxed")


