"""Every column of every table is described once (lc_pipeline/schemas.py), and the Dagster UI's Columns
table shows the descriptions: on each asset's definition (before anything is materialized) and on
each materialization the IO manager records."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest
from conftest import settings_for

from lc_pipeline import schemas
from lc_pipeline.resources.parquet_io import COLUMN_SCHEMA, HiveParquetIOManager, column_schema


def described(table_schema: dg.TableSchema) -> dict[str, tuple[str, str | None]]:
    return {c.name: (c.type, c.description) for c in table_schema.columns}


@pytest.mark.parametrize("table", list(schemas.TABLES))
def test_every_column_of_every_table_has_a_description(table):
    descriptions = schemas.DESCRIPTIONS[table]
    assert list(descriptions) == list(schemas.TABLES[table])  # the same columns, in the same order
    assert all(isinstance(d, str) and d.strip() for d in descriptions.values()), descriptions


def test_descriptions_are_kept_for_tables_only():
    assert set(schemas.DESCRIPTIONS) == set(schemas.TABLES)


def test_the_asset_definitions_carry_each_tables_described_columns(tmp_path, tiny_config_file):
    from lc_pipeline.definitions import build_pipeline

    settings = settings_for(tmp_path, tiny_config_file)
    graph = build_pipeline(settings).defs.resolve_asset_graph()
    keys = {key.path[-1]: key for key in graph.get_all_asset_keys() if key.path[-1] in schemas.TABLES}
    assert {"source_items", "instances", "generations", "metric_scores", "leaderboard"} <= set(keys)
    for table, key in keys.items():
        columns = described(graph.get(key).metadata[COLUMN_SCHEMA])
        assert columns == {name: (str(dtype), schemas.DESCRIPTIONS[table][name])
                           for name, dtype in schemas.TABLES[table].items()}, table


def test_a_materialization_records_the_written_columns_with_their_descriptions(tmp_path):
    @dg.asset(name="leaderboard")
    def board() -> pl.DataFrame:
        return schemas.empty("leaderboard")

    result = dg.materialize([board], resources={"io_manager": HiveParquetIOManager(base_dir=str(tmp_path))})
    [materialization] = result.asset_materializations_for_node("leaderboard")
    columns = described(materialization.metadata[COLUMN_SCHEMA].schema)
    assert columns["long_score"] == ("Float64", "Mean LongScore over the long lengths")
    assert columns == described(column_schema("leaderboard"))
