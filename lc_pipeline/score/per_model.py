"""A model's scores across lengths: 100-LongBench's prior-knowledge filter (which QA items are asked
without context, spec ``100longbench.md`` §5.4) and its long_scores table (LongScore and the old
metric per metric, from the metric scores of the items the filter keeps; score/longscore.py).
Pure, no Dagster (assets/scoring.py wires them).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from lc_pipeline.construct.longbench100 import NO_CONTEXT_PROMPT
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.score.longscore import long_scores_frame


def no_context_questions(instances: pl.DataFrame, prior_knowledge) -> pl.DataFrame:
    """One row per QA item of the filtered tasks (``item_id, task, question, answers, prompt``, by
    item id) with its no-context prompt; none when ``prior_knowledge.enabled`` is false."""
    pk = prior_knowledge
    return (
        instances.filter(pl.col("task").is_in(list(pk.tasks)) if pk.enabled else pl.lit(False))
        .select("item_id", "task", "question", "answers")
        .unique("item_id", keep="first")
        .sort("item_id")
        .with_columns(prompt=pl.col("question").map_elements(
            lambda q: NO_CONTEXT_PROMPT.format(input=q), return_dtype=pl.String))
    )


def no_context_requests(questions: pl.DataFrame, max_new_tokens: int) -> list[GenerationRequest]:
    """The generation requests of :func:`no_context_questions`' rows, keyed by item id."""
    return [GenerationRequest(key=i, prompt=p, max_new_tokens=max_new_tokens)
            for i, p in questions.select("item_id", "prompt").iter_rows()]


def missing_lengths(metric_scores: pl.DataFrame, base_lengths: Sequence[str], long_lengths: Sequence[str]
                    ) -> list[str]:
    """The base and long lengths without metric scores (LongScore needs them all)."""
    present = set(metric_scores["length"].unique())
    return [lv for lv in (*base_lengths, *long_lengths) if lv not in present]


def model_long_scores(metric_scores: pl.DataFrame, prior_knowledge: pl.DataFrame, base_lengths: Sequence[str],
                      long_lengths: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """(LONG_SCORES rows of every metric, the metric scores kept, the item ids the prior-knowledge
    filter dropped)."""
    dropped = prior_knowledge.filter(pl.col("dropped"))["item_id"]
    kept = metric_scores.filter(~pl.col("item_id").is_in(dropped.implode()))
    frames = [
        long_scores_frame(
            kept.filter(pl.col("metric") == m).select("task", "length", "score"),
            list(base_lengths),
            list(long_lengths),
            metric=m,
            # A model scoring 0 at the base lengths has no defined LongScore (the paper needs a
            # non-trivial base ability): record null rather than fail the whole model.
            on_zero_base="null",
        )
        for m in sorted(kept["metric"].unique())
    ]
    return pl.concat(frames), kept, dropped


def overall_scores(long_scores: pl.DataFrame) -> pl.DataFrame:
    """The rows of the overall LongScore and old metric (``task == "overall"``, ``length_level == "avg"``)."""
    return long_scores.filter((pl.col("task") == "overall") & (pl.col("length_level") == "avg"))
