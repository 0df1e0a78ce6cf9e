"""Plots of the benchmark's tables: polars frames in, PNG bytes out.

Used for asset metadata (a base64 PNG inside markdown, which the Dagster UI renders) and by
``lcp report``. Figures are built with matplotlib's object API (``Figure`` on the Agg canvas),
never pyplot, so nothing global is touched and no display is needed. matplotlib is imported
on first use: loading the Dagster definitions does not pay for it.
"""

from __future__ import annotations

import base64
import io
import math

import polars as pl
from lc_pipeline.config import length_order

DPI = 80
BASE_LABEL = "base"  # x position of Base Ability on score-vs-length plots


def _new_figure(**kwargs):
    from matplotlib.figure import Figure

    return Figure(layout="constrained", **kwargs)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _require(df: pl.DataFrame, cols: list[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: frame lacks columns {missing} (has {df.columns})")


def _message(text: str) -> bytes:
    fig = _new_figure(figsize=(5, 1.2))
    fig.text(0.5, 0.5, text, ha="center", va="center")
    return _png(fig)


def markdown_image(png: bytes, alt: str) -> str:
    """Markdown that shows the PNG inline (no file, no server)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


# -- score vs length ---------------------------------------------------------------------------

def mean_scores(metric_scores: pl.DataFrame) -> pl.DataFrame:
    """Per-instance scores in [0, 1] -> mean score (0-100) per model, metric and length."""
    _require(metric_scores, ["model", "metric", "length", "score"], "metric_scores")
    return metric_scores.group_by("model", "metric", "length").agg(
        (pl.col("score").mean() * 100).alias("score"), pl.len().alias("n")
    )


def leaderboard_points(long_scores: pl.DataFrame) -> pl.DataFrame:
    """long_scores (task "overall") -> Base Ability at x = "base", then S_l at each long length."""
    _require(long_scores, ["model", "metric", "task", "length_level", "score", "base_ability"], "long_scores")
    overall = long_scores.filter(pl.col("task") == "overall")
    per_length = overall.filter(pl.col("length_level") != "avg").select(
        "model", "metric", pl.col("length_level").alias("length"), "score"
    )
    base = overall.group_by("model", "metric").agg(pl.col("base_ability").first().alias("score")).select(
        "model", "metric", pl.lit(BASE_LABEL).alias("length"), "score"
    )
    return pl.concat([base, per_length])


def score_vs_length(points: pl.DataFrame, long_scores: pl.DataFrame | None = None, title: str = "") -> bytes:
    """One panel per metric, one line per model: mean score (0-100) at each length level.

    ``points``: model, metric, length, score (see :func:`mean_scores`, :func:`leaderboard_points`).
    ``long_scores``: model, metric, long_score (the leaderboard); shown in the legend.
    """
    _require(points, ["model", "metric", "length", "score"], "score_vs_length points")
    if points.is_empty():
        return _message("no scores yet")
    ls = {}
    if long_scores is not None:
        _require(long_scores, ["model", "metric", "long_score"], "score_vs_length long_scores")
        ls = {(m, k): v for m, k, v in long_scores.select("model", "metric", "long_score").iter_rows()}
    metrics = sorted(points["metric"].unique())
    lengths = length_order(points["length"].to_list())
    fig = _new_figure(figsize=(3.6 * len(metrics) + 0.6, 3.4))
    axes = fig.subplots(1, len(metrics), squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        sub = points.filter(pl.col("metric") == metric)
        for model in sorted(sub["model"].unique()):
            by_len = dict(sub.filter(pl.col("model") == model).select("length", "score").iter_rows())
            xs = [i for i, lv in enumerate(lengths) if lv in by_len]
            label = model
            if (model, metric) in ls:
                v = ls[(model, metric)]
                label += f" (LongScore {'undefined' if v is None or math.isnan(v) else f'{v:+.1f}'})"
            ax.plot(xs, [by_len[lengths[i]] for i in xs], marker="o", label=label)
        ax.set_xticks(range(len(lengths)), lengths)
        ax.set_ylim(-2, 102)
        ax.set_title(metric)
        ax.set_xlabel("context length (tokens)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    axes[0].set_ylabel("mean score (0-100)")
    if title:
        fig.suptitle(title)
    return _png(fig)


# -- depth x length --------------------------------------------------------------------------

def depth_length_heatmap(metric_scores: pl.DataFrame, metric: str | None = None, title: str = "") -> bytes:
    """Mean score (0-100) per evidence depth (rows) and length (columns), one panel per model.

    Rows without a depth (tasks with no placed evidence, e.g. 100-LongBench) are not part of
    this view; their count is printed under the plot.
    """
    _require(metric_scores, ["model", "metric", "length", "depth", "score"], "metric_scores")
    metric = metric or ("subem" if "subem" in set(metric_scores["metric"]) else None)
    df = metric_scores.filter(pl.col("metric") == metric) if metric else metric_scores
    no_depth = df.filter(pl.col("depth").is_null()).height
    df = df.filter(pl.col("depth").is_not_null())
    if df.is_empty():
        return _message("no scores with an evidence depth")
    cells = df.group_by("model", "depth", "length").agg((pl.col("score").mean() * 100).alias("score"))
    models = sorted(cells["model"].unique())
    depths = sorted(cells["depth"].unique())
    lengths = length_order(cells["length"].to_list())
    fig = _new_figure(figsize=(1.0 + 0.9 * len(lengths) * len(models) + 1.0 * len(models), 0.5 * len(depths) + 1.8))
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    image = None
    for ax, model in zip(axes, models):
        value = {(d, lv): s for d, lv, s in cells.filter(pl.col("model") == model).select("depth", "length", "score")
                 .iter_rows()}
        grid = [[value.get((d, lv), math.nan) for lv in lengths] for d in depths]
        image = ax.imshow(grid, vmin=0, vmax=100, cmap="RdYlGn", aspect="auto")
        for r, row in enumerate(grid):
            for c, v in enumerate(row):
                if not math.isnan(v):
                    ax.text(c, r, f"{v:.0f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(lengths)), lengths)
        ax.set_yticks(range(len(depths)), [f"{d:.0%}" for d in depths])
        ax.set_xlabel("context length")
        ax.set_title(model, fontsize=9)
    axes[0].set_ylabel("evidence depth")
    fig.colorbar(image, ax=list(axes), label=f"mean {metric or 'score'} (0-100)")
    if title:
        fig.suptitle(title)
    if no_depth:
        fig.text(0.01, 0.01, f"{no_depth} rows without an evidence depth not shown", fontsize=7)
    return _png(fig)


# -- token lengths ---------------------------------------------------------------------------

def token_length_histogram(instances: pl.DataFrame, title: str = "") -> bytes:
    """Histogram of instance prompt lengths (``input_tokens``), one panel per length level, target marked."""
    _require(instances, ["length", "input_tokens", "target_tokens"], "instances")
    if instances.is_empty():
        return _message("no instances")
    lengths = length_order(instances["length"].to_list())
    fig = _new_figure(figsize=(min(3.0 * len(lengths), 12) + 0.6, 2.8))
    axes = fig.subplots(1, len(lengths), squeeze=False)[0]
    for ax, lv in zip(axes, lengths):
        sub = instances.filter(pl.col("length") == lv)
        ax.hist(sub["input_tokens"].to_list(), bins=min(20, max(5, sub.height)), color="tab:blue", alpha=0.8)
        for target in sorted(sub["target_tokens"].drop_nulls().unique()):  # word levels have no token target
            ax.axvline(target, color="tab:red", linestyle="--", linewidth=1)
        ax.set_title(f"{lv} (n={sub.height})", fontsize=9)
        ax.set_xlabel("prompt tokens")
    axes[0].set_ylabel("instances")
    fig.suptitle(title or "instance prompt lengths (red: target)")
    return _png(fig)


# -- judge -----------------------------------------------------------------------------------

PARSED_STATUSES = ("ok", "parsed", "success")


def parsed_flags(judge_scores: pl.DataFrame) -> pl.Expr:
    """Whether each judgment parsed: a boolean ``parsed`` column, or ``parse_status`` in PARSED_STATUSES."""
    if "parsed" in judge_scores.columns:
        return pl.col("parsed").cast(pl.Boolean)
    if "parse_status" in judge_scores.columns:
        return pl.col("parse_status").str.to_lowercase().is_in(list(PARSED_STATUSES))
    raise ValueError(f"judge_scores: needs a 'parse_status' or 'parsed' column (has {judge_scores.columns})")


def judge_parse_rate(judge_scores: pl.DataFrame, title: str = "") -> bytes:
    """Share of judge responses that parsed, per model (bars) and length (groups)."""
    _require(judge_scores, ["model", "length"], "judge_scores")
    if judge_scores.is_empty():
        return _message("no judgments")
    rates = judge_scores.group_by("model", "length").agg(
        (parsed_flags(judge_scores).mean() * 100).alias("rate"), pl.len().alias("n")
    )
    models = sorted(rates["model"].unique())
    lengths = length_order(rates["length"].to_list())
    width = 0.8 / len(models)
    fig = _new_figure(figsize=(1.5 + 0.9 * len(lengths) * max(1, len(models) / 2), 3.0))
    ax = fig.subplots()
    for i, model in enumerate(models):
        by_len = {lv: (r, n) for lv, r, n in rates.filter(pl.col("model") == model).select("length", "rate", "n")
                  .iter_rows()}
        xs = [j + i * width for j, lv in enumerate(lengths) if lv in by_len]
        ax.bar(xs, [by_len[lv][0] for lv in lengths if lv in by_len], width=width, label=model)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(lengths))], lengths)
    ax.set_ylim(0, 105)
    ax.set_ylabel("judgments parsed (%)")
    ax.set_xlabel("context length")
    ax.legend(fontsize=7)
    ax.set_title(title or "judge parse rate")
    return _png(fig)
