"""LV-Eval's CFI / KPR ablation for one model (the paper's Tables 8-9, spec ``lveval.md`` §9.8):
its ``lveval`` keyword-recall scores joined with the variant of each scored instance, then
``keyword_recall.ablation_table``. Pure, no Dagster.
"""

from __future__ import annotations

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.score.keyword_recall import ablation_table

METRIC = "lveval"  # METRIC_SCORES.metric of the keyword-recall scores (score/metric_scores.py)


def ablation_frame(metric_scores: pl.DataFrame, instances: pl.DataFrame, metric_variant: str) -> pl.DataFrame:
    """LVEVAL_ABLATION rows from one model's ``lveval`` scores joined with their instances' variants.

    A score whose instance is not in ``instances`` is a ValueError (the scores are stale)."""
    scores = metric_scores.filter(pl.col("metric") == METRIC)
    if scores.is_empty():
        return schemas.empty("lveval_ablation")
    joined = scores.select("instance_id", "length", "task", "item_id", "score").join(
        instances.select("instance_id", "variant"), on="instance_id", how="left"
    )
    lost = joined.filter(pl.col("variant").is_null())
    if lost.height:
        raise ValueError(f"lveval_ablation: {lost.height} scores have no instance (e.g. instance_id "
                         f"{lost['instance_id'][0]!r}); rebuild metric_scores")
    table = ablation_table(joined.with_columns(model=pl.lit("m")))
    return schemas.conform(
        table.drop("model").rename({"length": "length_level"}).with_columns(metric_variant=pl.lit(metric_variant)),
        "lveval_ablation",
    )


def ablation_metadata(table: pl.DataFrame) -> dict:
    """``score_<level>_<variant>`` of each level score (``task == "all"``) and the row count."""
    level = level_scores(table)
    return {
        "rows": table.height,
        **{f"score_{lv}_{v}": float(s) for lv, v, s in level.select("length_level", "variant", "score").iter_rows()},
    }


def level_scores(table: pl.DataFrame) -> pl.DataFrame:
    """The level-score rows (``task == "all"``) of an ablation table."""
    return table.filter(pl.col("task") == "all")
