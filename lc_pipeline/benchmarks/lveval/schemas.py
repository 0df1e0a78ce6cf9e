"""LV-Eval's table (registered by the package: tasks.registry.TABLES; the contracts of schemas.py)."""

from __future__ import annotations

import polars as pl

from lc_pipeline.schemas import Str, table_schema

# LV-Eval's CFI/KPR ablation of one model (partitioned by model): keyword-recall scores of the
# same items per length level and variant (ablation.py).
LVEVAL_ABLATION = table_schema("lveval_ablation", {
    "length_level": (Str, "Length level"),
    "variant": (Str, '"plain" | "cfi" | "kpr" | "cfi_kpr"'),
    "task": (Str, 'A task, or "all": the level score (unweighted mean over the tasks)'),
    "score": (pl.Float64, "Keyword-recall score, 0-100, 2 decimals per task"),
    "n_instances": (pl.Int64, "Instances scored"),
    "metric_variant": (Str, '"code" (released scorer) | "paper"'),
})
