"""Plots: frames in, PNG bytes out; the numbers behind them come from the frames."""

from __future__ import annotations

import base64
import io

import polars as pl
import pytest
from matplotlib.image import imread

from lc_pipeline import plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def image_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_MAGIC)
    img = imread(io.BytesIO(png), format="png")
    return img.shape[1], img.shape[0]


@pytest.fixture
def metric_scores() -> pl.DataFrame:
    rows = []
    for model, drop in (("smollm2-135m", 0.25), ("other", 0.0)):
        for i, length in enumerate(["1k", "2k", "16k"]):
            for depth in (0.0, 0.5, 1.0):
                for metric in ("subem", "f1"):
                    rows.append({"model": model, "length": length, "depth": depth, "metric": metric,
                                 "score": max(0.0, 1.0 - drop * i - (0.2 if depth == 0.5 else 0.0))})
    rows.append({"model": "other", "length": "1k", "depth": None, "metric": "subem", "score": 1.0})  # lb100 row
    return pl.DataFrame(rows)


def test_length_order_is_by_tokens_with_base_first():
    assert plots.length_order(["16k", "2k", "base", "1k", "2k", "512"]) == ["base", "512", "1k", "2k", "16k"]


def test_mean_scores_are_percent_per_model_metric_length(metric_scores):
    means = plots.mean_scores(metric_scores).filter(pl.col("metric") == "subem").sort("model", "length")
    row = means.filter((pl.col("model") == "smollm2-135m") & (pl.col("length") == "2k")).row(0, named=True)
    assert row["score"] == pytest.approx(100 * ((0.75 + 0.55 + 0.75) / 3))
    assert row["n"] == 3


def test_score_vs_length_has_a_panel_per_metric(metric_scores):
    board = pl.DataFrame({"model": ["smollm2-135m", "other"], "metric": ["subem", "subem"], "long_score": [-40.0, None]})
    one = plots.score_vs_length(plots.mean_scores(metric_scores.filter(pl.col("metric") == "subem")), board)
    two = plots.score_vs_length(plots.mean_scores(metric_scores), board, title="demo")
    (w1, h1), (w2, h2) = image_size(one), image_size(two)
    assert w2 > 1.6 * w1 and abs(h2 - h1) < 40  # side-by-side panels


def test_leaderboard_points_put_base_ability_before_the_long_lengths():
    long_scores = pl.DataFrame({
        "model": ["m"] * 3, "metric": ["subem"] * 3, "task": ["overall"] * 3,
        "length_level": ["2k", "4k", "avg"], "score": [50.0, 25.0, 37.5], "base_ability": [80.0] * 3,
    })
    pts = plots.leaderboard_points(long_scores)
    assert dict(pts.select("length", "score").iter_rows()) == {"base": 80.0, "2k": 50.0, "4k": 25.0}
    assert image_size(plots.score_vs_length(pts))[0] > 100


def test_depth_length_heatmap_one_panel_per_model(metric_scores):
    both = plots.depth_length_heatmap(metric_scores, title="needle")
    single = plots.depth_length_heatmap(metric_scores.filter(pl.col("model") == "other"))
    assert image_size(both)[0] > image_size(single)[0]
    with pytest.raises(ValueError, match="depth"):
        plots.depth_length_heatmap(metric_scores.drop("depth"))


def test_token_length_histogram_per_bucket():
    instances = pl.DataFrame({
        "length": ["1k"] * 4 + ["2k"] * 4,
        "input_tokens": [1000, 1020, 1030, 1010, 2040, 2050, 2030, 2060],
        "target_tokens": [1024] * 4 + [2048] * 4,
    })
    two = plots.token_length_histogram(instances)
    one = plots.token_length_histogram(instances.filter(pl.col("length") == "1k"))
    assert image_size(two)[0] > image_size(one)[0]


def test_judge_parse_rate_reads_either_status_column():
    statuses = pl.DataFrame({"model": ["a"] * 4, "length": ["1k", "1k", "2k", "2k"],
                             "parse_status": ["ok", "unparseable", "OK", "ok"]})
    flags = statuses.select(plots.parsed_flags(statuses))["parse_status"].to_list()
    assert flags == [True, False, True, True]
    assert image_size(plots.judge_parse_rate(statuses))[0] > 100
    booleans = pl.DataFrame({"model": ["a", "b"], "length": ["1k", "1k"], "parsed": [True, False]})
    assert plots.judge_parse_rate(booleans).startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="parse_status"):
        plots.judge_parse_rate(statuses.drop("parse_status"))


def test_markdown_image_embeds_the_png():
    png = plots.token_length_histogram(pl.DataFrame({"length": ["1k"], "input_tokens": [1000], "target_tokens": [1024]}))
    md = plots.markdown_image(png, "lengths")
    assert md.startswith("![lengths](data:image/png;base64,")
    assert base64.b64decode(md.split(",", 1)[1].rstrip(")")) == png


def test_empty_frames_give_a_message_image_not_an_error():
    empty = pl.DataFrame(schema={"model": pl.String, "metric": pl.String, "length": pl.String, "score": pl.Float64})
    assert plots.score_vs_length(empty).startswith(PNG_MAGIC)
