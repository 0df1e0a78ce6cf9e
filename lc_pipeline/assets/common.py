"""Small helpers shared by the asset modules (metadata, fingerprints)."""

from __future__ import annotations

import dagster as dg
import polars as pl

FINGERPRINT_KEY = "lcp/fingerprint"


def preview(df: pl.DataFrame, n: int = 5, width: int = 80) -> dg.MetadataValue:
    """A markdown preview with long strings cut, so the UI stays readable."""
    shown = df.head(n).with_columns(
        [pl.col(c).cast(pl.String).str.slice(0, width) for c, t in df.schema.items() if t in (pl.String, pl.Categorical)]
    )
    header = "| " + " | ".join(shown.columns) + " |"
    sep = "| " + " | ".join("---" for _ in shown.columns) + " |"
    rows = ["| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in r) + " |" for r in shown.iter_rows()]
    return dg.MetadataValue.md("\n".join([header, sep, *rows]))
