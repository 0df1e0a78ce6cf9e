"""What a level of ``instances`` reports about itself: counts per suite and variant, the length
unit and target, prompt-token range, the largest relative length error and a token-length
histogram (markdown). Computed from a small per-row summary kept while the level is written batch
by batch (:data:`SUMMARY_COLUMNS`, no context or prompt). Pure code, no Dagster: the asset adds
the preview table and wraps the markdown (``assets/instances.py``).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from lc_pipeline.construct.variant_rows import variant_metadata

# Per-row columns kept for the metadata once a batch is written: small (no context or prompt).
SUMMARY_COLUMNS = ("instance_id", "suite", "task", "variant", "insertions", "depth", "question", "input_tokens",
                   "target_tokens", "length_unit", "target_units", "context_units")
# The columns of the metadata's preview table.
PREVIEW_COLUMNS = ("instance_id", "suite", "task", "depth", "input_tokens", "question")


def level_metadata(summary: pl.DataFrame, meta: dict, level: str, config) -> dict:
    """The level's metadata (plain values) from the rows' ``summary`` (:data:`SUMMARY_COLUMNS`
    plus ``fact_tokens``, the tokens of each row's inserted facts) and the builders' counts ``meta``.

    Lengths are relative errors against the target in the row's own unit (tokens, or words /
    characters)."""
    rel = ((summary["context_units"] - summary["target_units"]).abs() / summary["target_units"]).filter(
        summary["length_unit"] != "tokens").append(
        ((summary["input_tokens"] - summary["target_tokens"]).abs() / summary["target_tokens"]).filter(
            summary["length_unit"] == "tokens")).max()
    return {
        "instances": summary.height,
        **{f"instances_{suite}": n for suite, n in summary.group_by("suite").len().sort("suite").iter_rows()},
        **meta,
        **variant_metadata(summary, summary["fact_tokens"]),
        "length_unit": config.length_unit,
        **({"target_tokens": config.target_tokens(level)} if config.length_unit == "tokens" else
           {"target_words": int(summary["target_units"].max())}),
        "tokenizer": config.tokenizer,
        # A benchmark run as released has no target length (and a level may hold no record): counts only.
        **({"input_tokens_min": int(summary["input_tokens"].min()),
            "input_tokens_max": int(summary["input_tokens"].max())} if summary.height else {}),
        **({"max_relative_length_error": float(rel)} if rel is not None else {}),
    }


def length_histogram_markdown(summary: pl.DataFrame, bins: int = 10) -> str:
    """Prompt tokens per instance as a markdown table: a row per bin (its range, count and a bar),
    the bins holding a target token length marked."""
    if summary.is_empty():
        return "no instances"
    tokens = summary["input_tokens"].to_numpy()
    lo, hi = int(tokens.min()), int(tokens.max())
    counts, edges = np.histogram(tokens, bins=min(bins, hi - lo + 1), range=(lo, hi + 1))
    starts = np.ceil(edges).astype(np.int64)  # integer bins: [starts[i], starts[i + 1] - 1]
    targets = sorted(int(t) for t in summary["target_tokens"].drop_nulls().unique())
    target = ", ".join(f"{t:,}" for t in targets) or (
        "none: records as released" if "suite" in summary.columns and (summary["suite"] == "released").all()
        else "in words")
    lines = [f"prompt tokens per instance ({len(tokens)} instances; target {target})", "",
             "| prompt tokens | instances | |", "|---|---:|---|"]
    for i, n in enumerate(counts):
        first, last = int(starts[i]), int(starts[i + 1]) - 1
        span = f"{first:,}" if first == last else f"{first:,} – {last:,}"
        mark = " ◀ target" if any(first <= t <= last for t in targets) else ""
        lines.append(f"| {span}{mark} | {n} | {'█' * round(20 * n / counts.max())} |")
    return "\n".join(lines)
