"""The lake's partition files: where each one is and how to read them back, without Dagster.

Layout (DuckDB and Polars read it with hive partitioning out of the box)::

    <lake>/<table>/data.parquet                                  unpartitioned
    <lake>/<table>/length=4k/data.parquet                        one dimension
    <lake>/<table>/length=4k/model=smollm2-135m/data.parquet     length x model

The IO manager (resources/parquet_io.py) writes and loads these files for the assets; the commands that only
read the lake (``lcp compare``, ``lcp minilongbench``, ``lcp plan``) use this module and import no Dagster
(issue 29). Partition values live in the path, not the file: :func:`read_partition` adds them back as columns.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.storage import FILE_NAME

# The partition dimensions (Dagster's partition names in partitions.py, and the lake's folder names).
MODEL_DIM = "model"
LENGTH_DIM = "length"
SOURCE_DIM = "source"


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


def read_model_partitions(lake_dir: str | Path, table_name: str, model: str | None = None) -> pl.DataFrame:
    """Every materialized partition of a length x model table (``model``'s only, when given) with its ``length``
    and ``model`` columns; an empty frame of the table's schema when none is (e.g. citation_scores never ran)."""
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
