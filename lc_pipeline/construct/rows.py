"""The one constructor of INSTANCES rows (``lc_pipeline.schemas.INSTANCES``), for every builder.

Each builder (the QA assembler and every benchmark package's builders) measures its own context
and prompt; what a row is, which columns it has and which of them have a natural default, is
written once, here:

* ``variant`` "plain", ``insertions`` [] and ``replacement_rule_ids`` []: a builder's rows are
  plain; the CFI / KPR variants (construct/variants.py) are derived from them later;
* ``length_unit`` "tokens", and then ``target_units`` = ``target_tokens`` and ``context_units`` =
  ``context_tokens`` (what :func:`with_length_units` fills for token levels). A row
  of a word level (``length_unit`` "words" / "characters") names its
  ``target_units`` and ``context_units`` itself.

Every other column must be given (``None`` where the value is null, e.g. ``target_tokens`` of
a word level), and no other key is accepted: a misspelt column is a ValueError naming it, never
a silently null column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.config import BenchmarkConfig, level_size
from lc_pipeline.construct.word_levels import count_units
from lc_pipeline.schemas import INSTANCES, conform

COLUMNS: tuple[str, ...] = tuple(INSTANCES.names())

# Columns a builder may leave out, with the value they then take.
DEFAULTS: Mapping[str, Any] = {"variant": "plain", "insertions": (), "replacement_rule_ids": (),
                               "length_unit": "tokens",
                               # Filled from the task catalog and the items by construct/builders.py, which
                               # runs every builder: a builder itself need not know them.
                               "benchmark": "", "all_classes": (),
                               # Run as released: the record's id and fields (the released builder sets
                               # them; other builders' rows take their item's, filled by builders.py).
                               "record_id": "", "record_fields": "{}",
                               # The released builder sets the official protocol's label; every other row is ours.
                               "protocol": "ours"}
# Token levels measure their size in tokens: these two default to the token columns.
_TOKEN_UNITS = {"target_units": "target_tokens", "context_units": "context_tokens"}


def instance_row(**columns: Any) -> dict[str, Any]:
    """One INSTANCES row (a dict in the table's column order) from its columns, by keyword.

    Fills the defaults listed in the module docstring; raises ValueError naming the column for
    a key that is not an INSTANCES column, or a column that is missing and has no default
    (``target_units`` / ``context_units`` have one only when ``length_unit`` is "tokens").
    """
    unknown = [c for c in columns if c not in INSTANCES]
    if unknown:
        raise ValueError(f"instance_row: {', '.join(map(repr, unknown))} "
                         f"{'is not an INSTANCES column' if len(unknown) == 1 else 'are not INSTANCES columns'} "
                         f"(item {columns.get('item_id')!r})")
    row = dict(columns)
    for name, value in DEFAULTS.items():
        if name not in row:
            row[name] = list(value) if isinstance(value, tuple) else value
    if row["length_unit"] == "tokens":
        for name, source in _TOKEN_UNITS.items():
            if name not in row and source in row:
                row[name] = row[source]
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ValueError(f"instance_row: item {columns.get('item_id')!r}: missing column"
                         f"{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
    return {c: row[c] for c in COLUMNS}


def instances_frame(rows: Iterable[Mapping[str, Any]]) -> pl.DataFrame:
    """INSTANCES rows (from :func:`instance_row`) as a frame conforming to the table (``schemas.conform``);
    no rows: an empty frame of the table's schema."""
    return conform(pl.DataFrame(list(rows), schema=INSTANCES), "instances")


# --------------------------------------------------------------------------- finishing every builder's rows
# (construct/builders.level_batches runs these on each frame of every builder)


def with_empty_variant_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows built without CFI / KPR variants (every suite's builder) have null insertions / rule ids: []."""
    return frame.with_columns(
        pl.col("insertions").fill_null(pl.lit([], dtype=schemas.INSERTIONS)),
        pl.col("replacement_rule_ids").fill_null(pl.lit([], dtype=pl.List(pl.String))),
    )


def with_length_units(frame: pl.DataFrame, level: str, config: BenchmarkConfig) -> pl.DataFrame:
    """Fill ``length_unit`` / ``target_units`` / ``context_units`` for every builder's rows.

    Token rows: the unit is tokens, the target and size those already measured. Rows a builder measured in words
    (``length_unit`` not "tokens" in a config of ``length_unit: words``): words or
    characters by language, ``target_tokens`` null. ``context_units`` measures the context as stored (CFI facts
    included).
    """
    words = config.length_unit == "words"
    is_word_row = (pl.col("length_unit") != "tokens") if words else pl.lit(False)
    word_target = level_size(level, "words") if words else None
    units = [count_units(ctx, lang if lang in ("en", "zh") else "en")
             if (words and unit not in (None, "tokens")) else None
             for ctx, lang, unit in frame.select("context", "language", "length_unit").iter_rows()]
    return frame.with_columns(
        length_unit=pl.when(is_word_row).then(
            pl.when(pl.col("language") == "zh").then(pl.lit("characters")).otherwise(pl.lit("words"))
        ).otherwise(pl.lit("tokens")),
        target_units=pl.when(is_word_row).then(pl.lit(word_target, pl.Int64)).otherwise(pl.col("target_tokens")),
        context_units=pl.when(is_word_row).then(pl.Series(units, dtype=pl.Int64)).otherwise(pl.col("context_tokens")),
        target_tokens=pl.when(is_word_row).then(pl.lit(None, pl.Int64)).otherwise(pl.col("target_tokens")),
    )
