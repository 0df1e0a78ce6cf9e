"""`lcp results report`: one self-contained HTML page (leaderboard, plots, tables) read from the lake with DuckDB.

Everything is inline: styles in the page, plots as base64 PNGs, no scripts and no links
to fetch, so the file opens offline and can be mailed or archived as it is.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path

import click
import polars as pl

from lc_pipeline import plots, storage
from lc_pipeline.commands.options import lake_option
from lc_pipeline.lake import connect, table_dirs

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f2f2f2; } td.text { text-align: left; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
.note { color: #666; font-size: 0.9em; }
"""


def _cell(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.2f}"
    return html.escape(str(v))


def html_table(df: pl.DataFrame, numeric: frozenset[str] = frozenset()) -> str:
    """``df`` as an HTML table; text columns are left-aligned except those named in ``numeric``
    (numbers already formatted as text)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    text_cols = {i for i, (c, t) in enumerate(df.schema.items()) if not t.is_numeric() and c not in numeric}
    body = "".join(
        "<tr>" + "".join(f'<td{" class=text" if i in text_cols else ""}>{_cell(v)}</td>' for i, v in enumerate(r))
        + "</tr>"
        for r in df.iter_rows()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img(png: bytes, alt: str) -> str:
    # The same data URI the asset metadata uses, inside an <img> tag.
    uri = plots.markdown_image(png, alt).split("(", 1)[1][:-1]
    return f'<img alt="{html.escape(alt)}" src="{uri}">'


def _missing(table: str) -> str:
    return f'<p class="note">No <code>{table}</code> table in the lake yet.</p>'


BENCHMARK_LABELS = ("level", "group", "task")  # the label columns of a benchmark pivot, before one per (model, length)
RATES = ("perfect_rate", "scoring_success")  # benchmark_scores metrics that are judge rates, not scores
NUMBER = "number"  # the label column naming a judge rate, in a table that has some
ALL_LENGTHS = "[all]"  # benchmark_scores.ALL_LENGTHS: the rows over every length (Loong's Table 3), shown last
OURS = "ours"  # benchmark_scores.OURS: the protocol a column leaves unsaid


def _lengths(lengths: list[str]) -> list[str]:
    """Lengths by token count, the rows over every length last."""
    return [*plots.length_order([lv for lv in lengths if lv != ALL_LENGTHS]), *([ALL_LENGTHS] * (ALL_LENGTHS in lengths))]


def _null_text(missing) -> str | None:
    """The text of a null score: what it lacks, when the row names it (benchmark_scores.missing_groups)."""
    return f"n/a (missing: {', '.join(missing)})" if missing is not None and len(missing) else None


def _score_text(score: float | None, low: float | None, high: float | None) -> str | None:
    if score is None:
        return None
    return f"{score:.2f}" if low is None or high is None else f"{score:.2f} [{low:.1f}, {high:.1f}]"


def benchmark_pivots(scores: pl.DataFrame, intervals: bool = False) -> list[tuple[str, str, str, pl.DataFrame]]:
    """Each benchmark's published table as the report shows it: ``(benchmark, table, aggregation, pivot)``.

    ``scores``: benchmark_scores rows with their ``model`` (schemas.BENCHMARK_SCORES; score/benchmark_scores.py,
    spec released_benchmarks.md). The pivot has one row per task (and, for a task scored by the mean of its
    metrics, one ``task / metric`` row per metric right after it: HELMET's Cite), its group's row after the group's tasks
    (groups by name, tasks by name within), the overall row, an ``n`` row (the overall row's scored
    instances), then the breakdown rows (the overall per record-field value, e.g. LongBench v2's
    ``difficulty=easy`` in the group column); one column per (model, length), models by name and lengths by
    token count. A table with judge-scored cells has a ``number`` column: "score" for the score rows,
    "perfect_rate" / "scoring_success" for the judge's rates below each score (Loong's three numbers). Cells
    are text: 2 decimals (scores 0-100, rates 0-1 as Loong prints its Perfect Rate), "n/a" where a model has no
    row for that task at that length (or its score is null: every instance skipped), ``"n/a (missing: LongQA,
    Summ)"`` where a null group or overall row names what it lacks (``missing_groups``). With ``intervals``, a
    score that has a bootstrap interval reads ``"41.20 [35.1, 47.3]"`` (ci_low, ci_high to 1 decimal). Length
    ``[all]`` (Loong's Table 3 and overall over every item) is the last column of its model; a protocol other than
    "ours" is named in the column (``m / official@abc / 16k``), so two protocols never share a cell.
    """
    component = pl.col("level") == "component"  # one metric of a task scored by the mean of its metrics
    if "missing_groups" not in scores.columns:
        scores = scores.with_columns(missing_groups=pl.lit(None, pl.List(pl.String)))
    if "protocol" not in scores.columns:
        scores = scores.with_columns(protocol=pl.lit(OURS))
    if intervals and {"ci_low", "ci_high"} <= set(scores.columns):
        text = pl.struct("score", "ci_low", "ci_high", "missing_groups").map_elements(
            lambda r: _score_text(r["score"], r["ci_low"], r["ci_high"]) or _null_text(r["missing_groups"]),
            return_dtype=pl.String)
    else:
        text = pl.struct("score", "missing_groups").map_elements(
            lambda r: _null_text(r["missing_groups"]) if r["score"] is None else f"{r['score']:.2f}",
            return_dtype=pl.String)
    protocol = pl.col("protocol").fill_null(OURS)
    rows = scores.with_columns(
        group=pl.col("category").fill_null(""),
        task=pl.when(component).then(pl.col("task") + " / " + pl.col("metric")).otherwise(pl.col("task").fill_null("")),
        column=pl.when(protocol == OURS).then(pl.col("model")).otherwise(pl.col("model") + " / " + protocol)
        + " / " + pl.col("length"),
        cell=text,
        number=pl.when(pl.col("metric").is_in(RATES)).then(pl.col("metric")).otherwise(pl.lit("score")),
    )
    n_rows = rows.filter(pl.col("level") == "overall", pl.col("number") == "score").with_columns(
        level=pl.lit("n"), cell=pl.col("n").cast(pl.String))
    rows = pl.concat([rows, n_rows], how="vertical_relaxed").with_columns(
        # overall, n and the breakdown last; within a group its tasks, then the group's own row
        rank=pl.col("level").replace_strict({"task": 0, "component": 0, "group": 1, "overall": 2, "n": 3,
                                             "breakdown": 4},
                                            return_dtype=pl.Int8),
        number_rank=pl.col("number").replace_strict({"score": 0, RATES[0]: 1, RATES[1]: 2}, return_dtype=pl.Int8),
    ).with_columns(tail=pl.col("rank") >= 2)
    out = []
    for (benchmark, table), part in rows.sort("benchmark", "table").group_by(["benchmark", "table"],
                                                                             maintain_order=True):
        models = sorted(part.select(pl.col("column").str.replace(r" / [^/]*$", "")).to_series().unique().to_list())
        columns = [f"{m} / {length}" for m in models for length in _lengths(
            part.filter(pl.col("column").str.starts_with(f"{m} / "))["length"].unique().to_list())
            if f"{m} / {length}" in set(part["column"].to_list())]
        labels = [*BENCHMARK_LABELS, *([NUMBER] if part["number"].is_in(RATES).any() else [])]
        pivot = (part.pivot(on="column", index=[*BENCHMARK_LABELS, NUMBER, "tail", "rank", "number_rank"],
                            values="cell")
                 .sort("tail", pl.when(pl.col("tail")).then(pl.col("rank")).otherwise(0), "group",
                       "rank", "task", "number_rank")
                 .select(*labels, *columns)
                 .with_columns(pl.col(columns).fill_null("n/a")))
        aggregation = "+".join(sorted(part["aggregation"].drop_nulls().unique().to_list()))
        out.append((benchmark, table, aggregation, pivot))
    return out


SHARE_COLUMNS = ("ci_low", "ci_high", "skipped_share", "truncated_share", "status_counts")  # newer columns
STATUS_KEYS = ("answered", "empty", "cut", "unparsable", "skipped", "invalid")  # benchmark_scores.STATUS_KEYS


def generation_statuses(scores: pl.DataFrame) -> dict[tuple[str, str], pl.DataFrame]:
    """Per (benchmark, table): one row per model and length of the overall score row's instances: the scored
    count ``n``, the share skipped and truncated, and the count of each generation status (benchmark_scores'
    ``status_counts``); tables whose rows carry no status counts (a lake written before them) are left out."""
    if "status_counts" not in scores.columns:
        return {}
    overall = scores.filter((pl.col("level") == "overall") & ~pl.col("metric").is_in(RATES)
                            & pl.col("status_counts").is_not_null())
    out = {}
    for (benchmark, table), part in overall.sort("benchmark", "table").group_by(["benchmark", "table"],
                                                                                maintain_order=True):
        rows = []
        for r in part.iter_rows(named=True):
            counts = json.loads(r["status_counts"])
            rows.append((r["model"], r["length"], r["n"], f"{100 * r['skipped_share']:.1f}%",
                         f"{100 * r['truncated_share']:.1f}%", *(int(counts.get(k, 0)) for k in STATUS_KEYS)))
        frame = pl.DataFrame(rows, schema=["model", "length", "n", "skipped %", "truncated %", *STATUS_KEYS],
                             orient="row")
        order = {lv: i for i, lv in enumerate(plots.length_order(frame["length"].to_list()))}
        out[(benchmark, table)] = frame.sort("model", pl.col("length").replace_strict(order, return_dtype=pl.Int32))
    return out


def _benchmarks_section(scores: pl.DataFrame) -> list[str]:
    note = ('<p class="note">Each benchmark\'s published table (scores 0-100): a row per task, per group and '
            "the overall as the benchmark aggregates it, with its 95% bootstrap interval in brackets (instances "
            "resampled within each task cell, seeded; none for a single instance); <code>n</code> = instances "
            "scored in the overall; breakdown rows: the overall on the records of one field value; judge rates "
            "(perfect_rate, scoring_success) are shares in 0-1. Below each table: what happened to the overall's "
            "generations (skipped: not sent, the prompt did not fit the window; truncated: cut to fit; unparsable: "
            "no answer the metric could read; invalid: thinking ran out; skipped and invalid ones are not "
            "scored).</p>")
    parts = [note]
    statuses = generation_statuses(scores)
    for benchmark, table, aggregation, pivot in benchmark_pivots(scores, intervals=True):
        title = benchmark if table == "all" else f"{benchmark} ({table})"
        parts.append(f"<h3>{html.escape(title)}</h3>")
        parts.append(f'<p class="note">Overall: {html.escape(aggregation.replace("_", " "))}.</p>')
        labels = sum(c in (*BENCHMARK_LABELS, NUMBER) for c in pivot.columns)
        parts.append(html_table(pivot, numeric=frozenset(pivot.columns[labels:])))
        if (benchmark, table) in statuses:
            parts.append(html_table(statuses[(benchmark, table)], numeric=frozenset({"skipped %", "truncated %"})))
    return parts


def build_report(lake_dir: Path) -> str:
    """The report's HTML for the lake at ``lake_dir`` (raises FileNotFoundError when it has no tables)."""
    tables = table_dirs(lake_dir)
    with connect(lake_dir) as con:  # one read-only connection for every section
        parts = _sections(tables, lambda sql: con.sql(sql).pl())
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        "<title>lc_pipeline report</title>"
        f"<style>{STYLE}</style></head><body>"
        "<h1>Long-context benchmark report</h1>"
        f'<p class="note">Lake <code>{html.escape(storage.url(lake_dir))}</code>, written {when}.</p>'
        + "\n".join(parts)
        + "</body></html>\n"
    )


def _sections(tables: dict[str, Path], q) -> list[str]:
    parts = []

    parts.append("<h2>Leaderboard</h2>")
    board = None
    if "leaderboard" in tables:
        board = q("select * from leaderboard order by metric, rank_long_score nulls last, model")
        parts.append('<p class="note">Scores 0-100. LongScore = 100 (S<sub>l</sub> - Base) / Base, averaged over the '
                     "long lengths; old metric = mean raw score over the long lengths; ci_low / ci_high: its 95% bootstrap "
                     "interval (of the old metric on a published table's row); shares: of the model's generations "
                     "skipped (did not fit the window), truncated and invalid; n_unpaired: instances left out "
                     "because another model of the board lacks them.</p>")
        # The interval beside the score it belongs to (long_score; old_metric on a published table's row), the
        # shares after the counts; columns a lake written before them lacks are left out.
        extra = [c for c in ("ci_low", "ci_high") if c in board.columns]
        shares = [c for c in ("skipped_share", "truncated_share", "invalid_share", "n_unpaired") if c in board.columns]
        named = [c for c in ("protocol", "missing_groups") if c in board.columns]  # a published table's row
        shown = board.select("metric", "model", "base_ability", "old_metric", "long_score", *extra,
                             "rank_old_metric", "rank_long_score", "n_instances", *shares, *named)
        # A released benchmark's rows have no Base Ability / LongScore (one length): columns empty on every row
        # are left out and named, instead of a column of n/a.
        empty = [c for c in shown.columns if c not in ("metric", "model") and shown[c].null_count() == shown.height]
        if empty and shown.height:
            parts.append(f'<p class="note">Not applicable to this lake (empty on every row): {", ".join(empty)}.</p>')
        parts.append(html_table(shown.drop(empty) if shown.height else shown))
    else:
        parts.append(_missing("leaderboard"))

    parts.append("<h2>Score vs context length</h2>")
    if "metric_scores" in tables:
        points = q("select model, metric, length, avg(score) * 100 as score, count(*) as n "
                   "from metric_scores group by all")
        if points["length"].n_unique() > 1:
            parts.append(_img(plots.score_vs_length(points, board), "score vs length"))
        else:  # a released benchmark run at one length: a pooled mean over its tasks is none of its tables
            parts.append('<p class="note">One context length in this lake: the scores are in the benchmark tables '
                         "below (a mean pooled over every task would be none of them).</p>")
        parts.append("<h2>Evidence depth x context length</h2>")
        cells = q("select model, metric, length, depth, avg(score) as score "
                  "from metric_scores where depth is not null group by all")
        if cells.height:
            parts.append(_img(plots.depth_length_heatmap(cells), "depth x length"))
        else:
            parts.append('<p class="note">No instance has an evidence depth (records run as released are not '
                         "placed at depths).</p>")
    else:
        parts.append(_missing("metric_scores"))

    parts.append("<h2>Instance lengths</h2>")
    if "instances" in tables:
        parts.append(_img(plots.token_length_histogram(q("select length, input_tokens, target_tokens from instances")),
                          "token length histogram"))
        parts.append(html_table(q(
            "select length, count(*) as instances, min(input_tokens) as min_tokens, max(input_tokens) as max_tokens, "
            "any_value(target_tokens) as target_tokens from instances group by length "
            "order by any_value(target_tokens)"
        )))
    else:
        parts.append(_missing("instances"))

    parts.append("<h2>Benchmarks</h2>")
    if "benchmark_scores" in tables:
        scores = q("select * from benchmark_scores")
        parts += _benchmarks_section(scores.select(
            "model", "benchmark", "table", "level", "task", "category", "length", "metric", "score", "n",
            "aggregation", *[c for c in (*SHARE_COLUMNS, "protocol", "missing_groups") if c in scores.columns]))
    else:
        parts.append('<p class="note">No model has <code>benchmark_scores</code> yet.</p>')

    if "generations" in tables:
        parts.append("<h2>Truncation</h2>")
        parts.append(html_table(q(
            "select g.model, g.length, g.truncation_policy, count(*) filter (where g.truncated) as truncated, "
            "count(*) as generations from generations g group by all order by all"
        )))

    if "judge_scores" in tables:
        parts.append("<h2>Judge parse rate</h2>")
        parts.append(_img(plots.judge_parse_rate(q("select * from judge_scores")), "judge parse rate"))

    counts = [(name, int(q(f'select count(*) as n from "{name}"')["n"][0])) for name in tables]
    parts.append("<h2>Tables</h2>")
    parts.append(html_table(pl.DataFrame(counts, schema=["table", "rows"], orient="row")))
    return parts


def write_atomic(text: str, path: Path) -> None:
    with storage.replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@click.command("report")
@lake_option
@click.option("--out", default="report.html", show_default=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The HTML file to write.")
def report(out: Path) -> None:
    """Write one self-contained HTML page (leaderboard, score vs length, depth x length, token lengths,
    benchmark tables, truncation, judge parse rate) from the lake; it opens offline."""
    import duckdb

    from lc_pipeline.settings import Settings

    s = Settings.from_env()
    try:
        page = build_report(s.lake_dir)
    except (duckdb.Error, FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    write_atomic(page, out)
    click.echo(f"wrote {out} ({len(page.encode()) // 1024} KiB)")
