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

FILE_NAME = "data.parquet"
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


def partition_segments(dims: dict[str, str]) -> list[str]:
    """``name=value`` folder names, sorted by dimension (as Dagster orders multi-partition keys).

    A value that could leave its folder (a separator, ``.``/``..``, a leading dot) is refused
    here, the one place every lake path is made: the registry and the config check names too,
    but a partition key can also come straight from the Dagster instance (the UI, GraphQL).
    """
    for name, value in dims.items():
        value = str(value)
        if not value or "/" in value or "\\" in value or "\x00" in value or value.startswith("."):
            raise ValueError(f"partition {name}={value!r}: not a safe folder name (no '/', '\\', NUL or leading '.')")
    return [f"{name}={dims[name]}" for name in sorted(dims)]


def partition_path(base: Path, asset: str, dims: dict[str, str]) -> Path:
    return base.joinpath(asset, *partition_segments(dims), FILE_NAME)


def write_parquet_atomic(df: pl.DataFrame, path: Path) -> None:
    storage.write_parquet(df, path)


def read_partition(path: Path, dims: dict[str, str]) -> pl.DataFrame:
    df = storage.read_parquet(path)
    # Add the partition columns the path carries (unless the data already has them, e.g. `source`).
    extra = [pl.lit(v, dtype=pl.String).alias(k) for k, v in sorted(dims.items()) if k not in df.columns]
    return df.with_columns(extra) if extra else df


def read_table(table_dir: Path) -> pl.DataFrame | None:
    """Every partition file of a table with its hive columns (``length=4k`` -> ``length``), or
    None when the table has no file yet."""
    root = storage.lake_path(table_dir)
    frames = []
    for path in sorted(root.rglob(FILE_NAME), key=str):
        dims = dict(part.split("=", 1) for part in path.relative_to(root).parts[:-1] if "=" in part)
        frames.append(read_partition(path, dims))
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


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


def read_model_partitions(lake_dir: str | Path, table_name: str, model: str | None = None) -> pl.DataFrame:
    """Every materialized partition of a length x model table (``model``'s only, when given) with its ``length``
    and ``model`` columns; an empty frame of the table's schema when none is (e.g. citation_scores never ran)."""
    from lc_pipeline.partitions import LENGTH_DIM, MODEL_DIM

    frames = []
    table = storage.lake_path(lake_dir) / table_name
    for path in sorted(table.glob(f"{LENGTH_DIM}=*/{MODEL_DIM}={model or '*'}/{FILE_NAME}"), key=str):
        dims = dict(part.split("=", 1) for part in (path.parent.parent.name, path.parent.name))
        frames.append(read_partition(path, dims))
    if not frames:
        return pl.DataFrame(schema={**schemas.TABLES[table_name], LENGTH_DIM: pl.String, MODEL_DIM: pl.String})
    return pl.concat(frames, how="diagonal_relaxed")


def read_judge_scores(lake_dir: str | Path, model: str | None = None, *, respect_drops: bool = True) -> pl.DataFrame:
    """Every materialized judge_scores partition (of ``model`` only, when given) with its ``length`` and
    ``model`` columns (empty when the judge never ran: judging is optional, the leaderboard must not need it).

    Drops (100-LongBench's prior-knowledge filter, spec 100longbench.md §5.4; score/per_model.py): with
    ``respect_drops``, the rows of the items a model's ``prior_knowledge`` partition marks ``dropped`` are
    left out, as long_scores leaves out their metric rows: every score made from these rows (the
    leaderboard's ``judge:<rubric>`` rows, the headline) is made without them. The judge_scores table
    itself keeps them (what the judge said about each generation stays auditable)."""
    from lc_pipeline.partitions import MODEL_DIM
    from lc_pipeline.score.per_model import without_dropped

    lake = storage.lake_path(lake_dir)
    out = read_model_partitions(lake_dir, "judge_scores", model)
    if out.is_empty() or not respect_drops:
        return out
    kept = []
    for (slug,), rows in out.group_by(MODEL_DIM, maintain_order=True):
        pk = partition_path(lake, "prior_knowledge", {MODEL_DIM: slug})
        kept.append(without_dropped(rows, storage.read_parquet(pk, columns=["item_id", "dropped"]))
                    if pk.exists() else rows)
    return pl.concat(kept)


def read_generation_statuses(lake_dir, model: str | None = None) -> pl.DataFrame:
    """``score.board.status_frame`` of the generations in the lake (``model``'s only, when given): each
    generation's model, task (its instance's, read from the instances partitions' two columns), length,
    status and truncated. Stores written before ``status`` existed get it derived (with_stored_defaults)."""
    from lc_pipeline.generate.partition import with_stored_defaults
    from lc_pipeline.score.board import status_frame

    generations = read_model_partitions(lake_dir, "generations", model)
    if generations.is_empty():
        return pl.DataFrame(schema={"model": pl.String, "task": pl.String, "length": pl.String,
                                    "status": pl.String, "truncated": pl.Boolean})
    root = storage.lake_path(lake_dir) / "instances"
    tasks = [storage.read_parquet(path, columns=["instance_id", "task"])
             for path in sorted(root.glob(f"*/{FILE_NAME}"), key=str)]
    instance_tasks = (pl.concat(tasks) if tasks
                      else pl.DataFrame(schema={"instance_id": pl.String, "task": pl.String}))
    return status_frame(with_stored_defaults(generations), instance_tasks)
