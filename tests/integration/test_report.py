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

from lc_pipeline import schemas
from lc_pipeline.cli import main
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic
from lc_pipeline.score.longscore import leaderboard_frame, long_scores_frame

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
BASE, LONG = ["1k"], ["2k", "4k"]
TARGET = {"1k": 1024, "2k": 2048, "4k": 4096}
# model -> how much its score drops per length step (a long-context model and a weak one)
MODELS = {"strong-model": 0.05, "weak-model": 0.3}
# benchmark_scores of "toybench" (mean of groups): (model, length) -> task -> (group, score, n). The weak
# model has no nq row at 4k. Tasks are listed out of order: the report orders them.
TOY = {
    ("strong-model", "2k"): {"nq": ("qa", 70.0, 10), "hotpotqa": ("qa", 61.237, 10), "niah": ("synthetic", 95.5, 20)},
    ("strong-model", "4k"): {"nq": ("qa", 65.0, 10), "hotpotqa": ("qa", 58.0, 10), "niah": ("synthetic", 90.0, 20)},
    ("weak-model", "2k"): {"nq": ("qa", 40.0, 10), "hotpotqa": ("qa", 30.0, 10), "niah": ("synthetic", 50.0, 20)},
    ("weak-model", "4k"): {"hotpotqa": ("qa", 10.0, 10), "niah": ("synthetic", 20.0, 20)},
}


def write(lake: Path, table: str, dims: dict[str, str], df: pl.DataFrame) -> None:
    write_parquet_atomic(df, partition_path(lake, table, dims))


def toy_group(model: str, length: str, group: str) -> tuple[float, int]:
    members = [(score, n) for g, score, n in TOY[(model, length)].values() if g == group]
    return sum(s for s, _ in members) / len(members), sum(n for _, n in members)


def toy_overall(model: str, length: str) -> tuple[float, int]:
    groups = [toy_group(model, length, g) for g in ("qa", "synthetic")]
    return sum(s for s, _ in groups) / 2, sum(n for _, n in groups)


def toy_benchmark_scores(model: str) -> pl.DataFrame:
    """One model's benchmark_scores partition: task, group and overall rows of toybench at each length."""
    rows = []
    for (m, length), tasks in TOY.items():
        if m != model:
            continue
        common = {"benchmark": "toybench", "table": "all", "length": length, "metric": "f1",
                  "aggregation": "mean_of_groups"}
        for task, (group, score, n) in tasks.items():
            rows.append({**common, "level": "task", "task": task, "category": group, "score": score, "n": n})
        for group in ("synthetic", "qa"):
            score, n = toy_group(model, length, group)
            rows.append({**common, "level": "group", "task": None, "category": group, "score": score, "n": n})
        score, n = toy_overall(model, length)
        rows.append({**common, "level": "overall", "task": None, "category": None, "score": score, "n": n})
    return schemas.conform(pl.DataFrame(rows, schema=schemas.BENCHMARK_SCORES), "benchmark_scores")


def section_rows(page: str, heading: str) -> list[list[str]]:
    """The cells of every table row (header included) in the page's section ``heading``."""
    section = page.split(f"<h2>{heading}</h2>", 1)[1].split("<h2>", 1)[0]
    return [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row) for row in re.findall(r"<tr>(.*?)</tr>", section)]


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
        write(lake, "benchmark_scores", {"model": model}, toy_benchmark_scores(model))
        boards.append(ls.with_columns(model=pl.lit(model)))
    write(lake, "leaderboard", {}, leaderboard_frame(pl.concat(boards)))
    return lake


@pytest.fixture(scope="module")
def report_file(lake) -> Path:
    out = lake.parent / "out" / "report.html"
    result = CliRunner().invoke(main, ["results", "report", "--out", str(out)], env={"LCP_LAKE": str(lake)})
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
                    "Benchmarks", "Truncation", "Judge parse rate", "Tables"):
        assert f"<h2>{heading}</h2>" in page
    # Truncation: one truncated generation per model at 4k.
    assert page.count("<td class=text>middle</td><td>1</td>") == 2


def test_report_shows_each_benchmark_table_with_a_column_per_model_and_length(report_file):
    page = report_file.read_text()
    assert "<h3>toybench</h3>" in page and "Overall: mean of groups." in page
    columns = [(m, length) for m in MODELS for length in LONG]

    def scores(cell) -> list[str]:
        return [cell(m, length) for m, length in columns]

    def task(name):
        return scores(lambda m, length: f"{TOY[(m, length)][name][1]:.2f}" if name in TOY[(m, length)] else "n/a")

    assert section_rows(page, "Benchmarks") == [
        ["level", "group", "task", *(f"{m} / {length}" for m, length in columns)],
        ["task", "qa", "hotpotqa", *task("hotpotqa")],
        ["task", "qa", "nq", *task("nq")],
        ["group", "qa", "", *scores(lambda m, length: f"{toy_group(m, length, 'qa')[0]:.2f}")],
        ["task", "synthetic", "niah", *task("niah")],
        ["group", "synthetic", "", *scores(lambda m, length: f"{toy_group(m, length, 'synthetic')[0]:.2f}")],
        ["overall", "", "", *scores(lambda m, length: f"{toy_overall(m, length)[0]:.2f}")],
        ["n", "", "", *scores(lambda m, length: str(toy_overall(m, length)[1]))],
    ]
    # Spelled out: the strong model's hotpotqa at 2k to two decimals; the weak model has no nq at 4k.
    assert section_rows(page, "Benchmarks")[1][3] == "61.24"
    assert section_rows(page, "Benchmarks")[2][6] == "n/a"
    assert section_rows(page, "Benchmarks")[7] == ["n", "", "", "40", "40", "40", "30"]


def test_a_lake_without_benchmark_scores_still_renders_with_a_note(lake, tmp_path):
    bare = tmp_path / "data_lake"
    shutil.copytree(lake / "leaderboard", bare / "leaderboard")
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["results", "report", "--out", str(out)], env={"LCP_LAKE": str(bare)})
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "<h2>Benchmarks</h2>" in page
    assert "No model has <code>benchmark_scores</code> yet." in page
    assert section_rows(page, "Benchmarks") == []


def test_report_without_a_lake_exits_nonzero(tmp_path):
    result = CliRunner().invoke(main, ["results", "report", "--out", str(tmp_path / "r.html")],
                                env={"LCP_LAKE": str(tmp_path / "none")})
    assert result.exit_code != 0 and "lcp run" in result.output
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


@pytest.fixture(scope="module")
def released_lake(tmp_path_factory) -> Path:
    """A lake of a benchmark run as released: one length ("all"), no evidence depths, leaderboard rows of the
    published table (old metric and rank, no Base Ability or LongScore)."""
    lake = tmp_path_factory.mktemp("report_released") / "data_lake"
    ids = [f"rec-{i}" for i in range(6)]
    write(lake, "instances", {"length": "all"}, pl.DataFrame({
        "instance_id": ids, "depth": [None] * 6, "input_tokens": [900 + i for i in range(6)],
        "target_tokens": [None] * 6, "variant": ["plain"] * 6}, schema_overrides={"depth": pl.Float64,
                                                                                    "target_tokens": pl.Int64}))
    board = []
    for rank, (model, score) in enumerate((("strong-model", 0.8), ("weak-model", 0.3)), start=1):
        write(lake, "metric_scores", {"length": "all", "model": model}, pl.DataFrame({
            "instance_id": ids, "task": ["hotpotqa"] * 3 + ["trec"] * 3, "metric": ["f1"] * 6,
            "depth": [None] * 6, "score": [score] * 6}, schema_overrides={"depth": pl.Float64}))
        board.append({"metric": "longbench/en", "model": model, "old_metric": 100 * score, "rank_old_metric": rank,
                      "n_instances": 6, "ci_low": 100 * score - 5, "ci_high": 100 * score + 5, "skipped_share": 0.0,
                      "truncated_share": 0.0, "invalid_share": 0.0, "n_unpaired": 0, "protocol": "official@abc1234"})
    frame = pl.DataFrame(board)
    frame = frame.with_columns(pl.lit(None, dtype).alias(c) for c, dtype in schemas.TABLES["leaderboard"].items()
                               if c not in frame.columns)
    write(lake, "leaderboard", {}, schemas.conform(frame, "leaderboard"))
    return lake


def test_a_released_lake_shows_no_pooled_plot_no_empty_depth_panel_and_no_empty_columns(released_lake):
    out = released_lake.parent / "report.html"
    result = CliRunner().invoke(main, ["results", "report", "--out", str(out)], env={"LCP_LAKE": str(released_lake)})
    assert result.exit_code == 0, result.output
    page = out.read_text()
    header = section_rows(page, "Leaderboard")[0]
    assert header[:3] == ["metric", "model", "old_metric"] and "long_score" not in header
    assert "base_ability" not in header and "rank_long_score" not in header
    assert "Not applicable to this lake (empty on every row): base_ability, long_score, rank_long_score" in page
    lengths = page.split("<h2>Score vs context length</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<img" not in lengths and "One context length in this lake" in lengths
    depths = page.split("<h2>Evidence depth x context length</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<img" not in depths and "No instance has an evidence depth" in depths
