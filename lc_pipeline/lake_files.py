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

    out = read_model_partitions(lake_dir, "judge_scores", model)
    if out.is_empty() or not respect_drops:
        return out
    kept = []
    for (slug,), rows in out.group_by(MODEL_DIM, maintain_order=True):
        drops = read_drop_flags(lake_dir, slug)
        kept.append(without_dropped(rows, drops) if drops is not None else rows)
    return pl.concat(kept)


def read_drop_flags(lake_dir: str | Path, model: str) -> pl.DataFrame | None:
    """``item_id`` and ``dropped`` of ``model``'s prior_knowledge partition (100-LongBench's filter), None when it
    has none."""
    path = partition_path(storage.lake_path(lake_dir), "prior_knowledge", {MODEL_DIM: model})
    return storage.read_parquet(path, columns=["item_id", "dropped"]) if path.exists() else None


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


class UndeclaredSideInput(ValueError):
    """An asset read a lake table it does not declare as a side input (assets/side_inputs.py)."""


class SideInputReader:
    """The lake tables an asset reads directly, not through the IO manager, each declared with its reason.

    An asset loads its inputs through the IO manager; a few tables are read from the lake instead, each for a
    reason the asset declares (assets/side_inputs.py, passed to ``assets/versions.declared(side_inputs=...)``): an
    optional upstream (judging may not have run), every model's partitions whatever ran in this run, or two columns
    of a wide table. The declaration makes the table a ``deps`` edge in the lineage and shows the reason in the
    asset's metadata; this reader holds the asset to it: reading any other table raises
    :class:`UndeclaredSideInput` naming the asset and the table."""

    def __init__(self, lake_dir: str | Path, declared: set[str] | frozenset[str], reader: str):
        self.lake_dir = lake_dir
        self.declared = frozenset(declared)
        self.reader = reader

    def _check(self, *tables: str) -> None:
        missing = [t for t in tables if t not in self.declared]
        if missing:
            raise UndeclaredSideInput(
                f"asset {self.reader!r} reads {missing} from the lake but declares only {sorted(self.declared)} as "
                "side inputs (assets/side_inputs.py: add the table with the reason it is read there)")

    def model_partitions(self, table: str, model: str | None = None) -> pl.DataFrame:
        """:func:`read_model_partitions`."""
        self._check(table)
        return read_model_partitions(self.lake_dir, table, model)

    def judge_scores(self, model: str | None = None, *, respect_drops: bool = True) -> pl.DataFrame:
        """:func:`read_judge_scores` (with ``respect_drops``, the prior_knowledge partitions are read too)."""
        self._check("judge_scores", *(("prior_knowledge",) if respect_drops else ()))
        return read_judge_scores(self.lake_dir, model, respect_drops=respect_drops)

    def generation_statuses(self, model: str | None = None) -> pl.DataFrame:
        """:func:`read_generation_statuses` (generations, and the instances' task column)."""
        self._check("generations", "instances")
        return read_generation_statuses(self.lake_dir, model)

    def table(self, name: str) -> pl.DataFrame | None:
        """Every partition of table ``name`` (:func:`read_table`), None when it has none."""
        self._check(name)
        return read_table(storage.lake_path(self.lake_dir) / name)

    def length_partitions(self, table: str, lengths) -> pl.DataFrame | None:
        """The partitions of a length-partitioned table at ``lengths`` (those in the lake), with ``length``;
        None when none is there."""
        self._check(table)
        lake = storage.lake_path(self.lake_dir)
        frames = [read_partition(path, {LENGTH_DIM: lv}) for lv in lengths
                  for path in [partition_path(lake, table, {LENGTH_DIM: lv})] if path.exists()]
        return pl.concat(frames, how="diagonal_relaxed") if frames else None

    def dropped_items(self, models) -> dict[str, list[str]]:
        """{model: item ids its prior_knowledge partition marks dropped} (none when it has no partition)."""
        self._check("prior_knowledge")
        return {slug: drops.filter(pl.col("dropped"))["item_id"].to_list() for slug in models
                for drops in [read_drop_flags(self.lake_dir, slug)] if drops is not None}
