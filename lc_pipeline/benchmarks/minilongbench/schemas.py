"""MiniLongBench's tables (registered by the package: tasks.registry.TABLES; the contracts of schemas.py)."""

from __future__ import annotations

import polars as pl

from lc_pipeline.schemas import Str, table_schema

# The selected samples with their IRT parameters.
MINILONGBENCH_SUBSET = table_schema("minilongbench_subset", {
    "sample_id": (Str, "LongBench global sample index (as text) or our instance_id"),
    "task": (Str, "The sample's task"),
    "category": (Str, "The sample's category"),
    "cluster_group": (Str, "The K-Means group the sample was chosen in (its category)"),
    "cluster": (pl.Int64, "The sample's K-Means cluster"),
    "cluster_weight": (pl.Float64, "Summed balance weight of the sample's cluster"),
    "alpha": (pl.List(pl.Float64), "IRT discrimination (d dims)"),
    "beta": (pl.Float64, "IRT difficulty (enters the logit as d * beta)"),
})

# One model's estimated full-benchmark scores from its scores on the subset (partitioned by model).
MINILONGBENCH_ESTIMATES = table_schema("minilongbench_estimates", {
    "mode": (Str, '"predict" (IRT ability, predicted remainder) | "direct" (subset mean) | "weighted" | "blend"'),
    "scope": (Str, '"overall" | "category" | "task"'),
    "name": (Str, '"overall", a category or a task'),
    "estimate": (pl.Float64, "Estimated score in [0, 1]: mean of category means of task means"),
    "n_observed": (pl.Int64, "Subset samples this model has a score on"),
    "n_subset": (pl.Int64, "Samples in the subset"),
    "in_training": (pl.Boolean, "The model was one of the training models (an in-sample estimate)"),
})
