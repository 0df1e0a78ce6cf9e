"""`lcp report`: one self-contained HTML page from the lake that opens offline and shows the plots.

The lake is generated in the pipeline's layout with the pipeline's own LongScore and leaderboard
code (no model run: that is what the asset tests cover); the report only reads it.
"""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.cli import main
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic
from lc_pipeline.score.longscore import leaderboard_frame, long_scores_frame

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BASE, LONG = ["1k"], ["2k", "4k"]
TARGET = {"1k": 1024, "2k": 2048, "4k": 4096}
# model -> how much its score drops per length step (a long-context model and a weak one)
MODELS = {"strong-model": 0.05, "weak-model": 0.3}


def write(lake: Path, table: str, dims: dict[str, str], df: pl.DataFrame) -> None:
    write_parquet_atomic(df, partition_path(lake, table, dims))


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    lake = tmp_path_factory.mktemp("report") / "data_lake"
    depths = [0.0, 0.5, 1.0]
    per_model_scores = {}
    for li, length in enumerate(BASE + LONG):
        ids = [f"{length}-{i}-{d}" for i in range(4) for d in depths]
        write(lake, "instances", {"length": length}, pl.DataFrame({
            "instance_id": ids,
            "depth": [d for _ in range(4) for d in depths],
            "input_tokens": [TARGET[length] - 3 * i for i in range(len(ids))],
            "target_tokens": [TARGET[length]] * len(ids),
            "variant": ["plain"] * len(ids),
        }))
        for model, drop in MODELS.items():
            scores = [max(0.0, 1.0 - drop * li - (0.25 if d == 0.5 else 0.0)) for _ in range(4) for d in depths]
            frame = pl.DataFrame({
                "instance_id": ids * 2, "task": ["multihop_qa"] * (2 * len(ids)),
                "metric": ["subem"] * len(ids) + ["f1"] * len(ids),
                "depth": [d for _ in range(4) for d in depths] * 2, "score": scores * 2,
            })
            write(lake, "metric_scores", {"length": length, "model": model}, frame)
            per_model_scores.setdefault(model, []).append(frame.with_columns(length=pl.lit(length)))
            write(lake, "generations", {"length": length, "model": model}, pl.DataFrame({
                "instance_id": ids, "truncated": [i == 0 and length == "4k" for i in range(len(ids))],
                "truncation_policy": ["middle"] * len(ids),
            }))
            write(lake, "judge_scores", {"length": length, "model": model}, pl.DataFrame({
                "instance_id": ids, "parse_status": ["ok"] * (len(ids) - 1) + ["unparseable"],
            }))
    boards = []
    for model, frames in per_model_scores.items():
        scores = pl.concat(frames)
        ls = pl.concat([long_scores_frame(scores, BASE, LONG, metric=m) for m in ("f1", "subem")])
        write(lake, "long_scores", {"model": model}, ls)
        boards.append(ls.with_columns(model=pl.lit(model)))
    write(lake, "leaderboard", {}, leaderboard_frame(pl.concat(boards)))
    return lake


@pytest.fixture(scope="module")
def report_file(lake) -> Path:
    out = lake.parent / "out" / "report.html"
    result = CliRunner().invoke(main, ["report", "--out", str(out)], env={"LCP_LAKE": str(lake)})
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output
    return out


def test_report_is_one_self_contained_page(report_file):
    page = report_file.read_text()
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "a resource outside the page"
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', page)
    assert [alt for alt, _ in images] == ["score vs length", "depth x length", "token length histogram",
                                          "judge parse rate"]
    assert all(base64.b64decode(data).startswith(b"\x89PNG") for _, data in images)


def test_report_shows_the_leaderboard_and_tables(report_file, lake):
    page = report_file.read_text()
    board = pl.read_parquet(partition_path(lake, "leaderboard", {}))
    strong = board.filter((pl.col("model") == "strong-model") & (pl.col("metric") == "subem")).row(0, named=True)
    assert strong["rank_long_score"] == 1
    # The leaderboard row as the page shows it, LongScore to two decimals.
    assert re.search(rf"<td>{strong['rank_old_metric']}</td><td>1</td>", page)
    assert f"<td>{strong['long_score']:.2f}</td>" in page
    for heading in ("Leaderboard", "Score vs context length", "Evidence depth x context length", "Instance lengths",
                    "Truncation", "Judge parse rate", "Tables"):
        assert f"<h2>{heading}</h2>" in page
    # Truncation: one truncated generation per model at 4k.
    assert page.count("<td class=text>middle</td><td>1</td>") == 2


def test_report_without_a_lake_exits_nonzero(tmp_path):
    result = CliRunner().invoke(main, ["report", "--out", str(tmp_path / "r.html")],
                                env={"LCP_LAKE": str(tmp_path / "none")})
    assert result.exit_code != 0 and "lcp demo" in result.output
    assert not (tmp_path / "r.html").exists()


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (Debian: apt-get install chromium)")
def test_report_opens_offline_in_chromium_with_every_plot_drawn(report_file):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    requests = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            context = browser.new_context(offline=True)
            page = context.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.goto(report_file.as_uri())
            drawn = page.evaluate("() => [...document.images].map(i => [i.alt, i.complete && i.naturalWidth > 0])")
            assert page.locator("h1").inner_text() == "Long-context benchmark report"
        finally:
            browser.close()
    assert [alt for alt, ok in drawn if ok] == ["score vs length", "depth x length", "token length histogram",
                                                "judge parse rate"]
    assert requests == [report_file.as_uri()], "the page fetched something besides itself"
