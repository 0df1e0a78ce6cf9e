"""`lcp longscore` on the 100-LongBench paper's own figures (spec §8): RULER Tables 1 and 5
(base = 4k), Table 7 (8 models, base label ``base``) rebuilt from per-task rows, Table 6 Gemini
(base = 8k) and the CSV / option handling."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from lc_pipeline.commands.longscore import longscore, report

LONG = ["8k", "16k", "32k", "64k", "128k"]

# Table 5 (RULER; Table 1 is its summary): model -> (S_4k, [S_8k ... S_128k]).
TABLE5 = {
    "Llama3.1-70B": (96.5, [95.8, 95.4, 94.8, 88.4, 66.6]),
    "Yi-34B": (93.3, [92.2, 91.3, 87.5, 83.2, 77.3]),
    "Phi3-medium": (93.3, [93.2, 91.1, 86.8, 78.6, 46.1]),
    "LWM-7B": (82.3, [78.4, 73.7, 69.1, 68.1, 65.0]),
}

# Table 7 via §8.5: model -> (base, [S_8k ... S_128k], paper avg LC, paper avg score, paper LC per length).
TABLE7 = {
    "llama-3.1-8B": (44.06500, [36.64625, 35.48000, 36.29000, 38.76250, 34.68375], -17.46, 36.37,
                     [-16.84, -19.48, -17.64, -12.03, -21.29]),
    "llama-3.1-70B": (67.52375, [65.15625, 60.33000, 54.72875, 49.50125, 33.03375], -22.18, 52.55,
                      [-3.51, -10.65, -18.95, -26.69, -51.08]),
    "llama-3.2-1B": (28.75250, [25.94250, 21.67625, 20.21125, 18.70250, 15.70625], -28.88, 20.45,
                     [-9.77, -24.61, -29.71, -34.95, -45.37]),
    "llama-3.2-3B": (51.23375, [41.92250, 39.65375, 35.54250, 31.31750, 25.60500], -32.06, 34.81,
                     [-18.17, -22.60, -30.63, -38.87, -50.02]),
    "phi-3-mini-128k": (48.29250, [42.41125, 43.84125, 37.96375, 34.58375, 25.07750], -23.85, 36.78,
                        [-12.18, -9.22, -21.39, -28.39, -48.07]),
    "phi-3-medium-128k": (57.43750, [50.87250, 47.33875, 47.54125, 42.51500, 28.12750], -24.65, 43.28,
                          [-11.43, -17.58, -17.23, -25.98, -51.03]),
    "Qwen2.5-7B": (57.42625, [50.43375, 46.71500, 45.95750, 36.93875, 18.95625], -30.69, 39.80,
                   [-12.18, -18.65, -19.97, -35.68, -66.99]),
    "Qwen2.5-14B": (59.19750, [51.42625, 48.59375, 43.01125, 37.47625, 23.35250], -31.12, 40.77,
                    [-13.13, -17.91, -27.34, -36.69, -60.55]),
}
# Table 7's ranks (the paper prints Llama3.2-3B's base rank as 8; it is 5, spec §8.5).
TABLE7_RANK_LC = {"llama-3.1-8B": 1, "llama-3.1-70B": 2, "phi-3-mini-128k": 3, "phi-3-medium-128k": 4,
                  "llama-3.2-1B": 5, "Qwen2.5-7B": 6, "Qwen2.5-14B": 7, "llama-3.2-3B": 8}
TABLE7_RANK_OLD = {"llama-3.1-70B": 1, "phi-3-medium-128k": 2, "Qwen2.5-14B": 3, "Qwen2.5-7B": 4,
                   "phi-3-mini-128k": 5, "llama-3.1-8B": 6, "llama-3.2-3B": 7, "llama-3.2-1B": 8}
TABLE7_RANK_BASE = {"llama-3.1-70B": 1, "Qwen2.5-14B": 2, "phi-3-medium-128k": 3, "Qwen2.5-7B": 4,
                    "llama-3.2-3B": 5, "phi-3-mini-128k": 6, "llama-3.1-8B": 7, "llama-3.2-1B": 8}

# Eight tasks whose per-length scores spread around the paper's task average but keep its mean:
# the offsets at every length sum to 0. At the base, task t7 sits at 1 point (a nearly empty
# base) and t0-t6 balance it, so averaging per-task LongScores would be far off (spec §6.2) while
# averaging the scores first must still give the paper's numbers.
OFFSETS = [12.0, -9.0, 6.5, -4.0, 3.0, -7.5, 9.0, -10.0]


def write_csv(path, rows: list[tuple[str, str, str, float]]) -> str:
    pl.DataFrame(rows, schema=["task", "model", "length", "score"], orient="row").write_csv(path)
    return str(path)


def table5_rows() -> list[tuple]:
    rows = []
    for model, (base, scores) in TABLE5.items():
        rows.append(("ruler", model, "4k", base))
        rows += [("ruler", model, lv, s) for lv, s in zip(LONG, scores)]
    return rows


def table7_task_rows() -> list[tuple]:
    assert abs(sum(OFFSETS)) < 1e-12
    rows = []
    for model, (base, scores, *_rest) in TABLE7.items():
        base_offsets = [(base - 1.0) / 7] * 7 + [1.0 - base]  # t0-t6 share the balance: every score stays <= 100
        for i, off in enumerate(OFFSETS):
            rows.append((f"t{i}", model, "base", base + base_offsets[i]))
            rows += [(f"t{i}", model, lv, s + off) for lv, s in zip(LONG, scores)]
    return rows


def run(args: list[str]):
    result = CliRunner().invoke(longscore, args)
    return result


def by_model(out: dict) -> dict[str, dict]:
    return {r["model"]: r for r in out["models"]}


def test_ruler_table5_and_table1_from_the_csv(tmp_path):
    csv = write_csv(tmp_path / "ruler.csv", table5_rows())
    res = run(["--scores", csv, "--base-lengths", "4k", "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["base_lengths"] == ["4k"] and out["long_lengths"] == LONG
    rows = by_model(out)
    # Table 5: avg LC (LC_l rounded to 2 decimals first) and its ranks; Table 1's "Proposed Metric".
    assert {m: round(r["avg_long_score"], 2) for m, r in rows.items()} == {
        "Llama3.1-70B": -8.60, "Yi-34B": -7.50, "Phi3-medium": -15.16, "LWM-7B": -13.90}
    assert {m: r["rank_long_score"] for m, r in rows.items()} == {
        "Llama3.1-70B": 2, "Yi-34B": 1, "Phi3-medium": 4, "LWM-7B": 3}
    # Table 1 "Old Metric" 88.2 / 86.3 / 79.1 / 70.8 (truncated) and its ranks 1-4.
    assert {m: int(r["avg_score"] * 10) / 10 for m, r in rows.items()} == {
        "Llama3.1-70B": 88.2, "Yi-34B": 86.3, "Phi3-medium": 79.1, "LWM-7B": 70.8}
    assert [rows[m]["rank_old_metric"] for m in TABLE5] == [1, 2, 3, 4]
    # Table 1 "Base Ability" 96.5(1) 93.3(2) 93.3(3) 82.3(4): a tie, which the paper breaks by order.
    assert [rows[m]["rank_base_ability"] for m in TABLE5] == [1, 2, 2, 4]
    # Table 5 per-length LC cells, truncated to 1 decimal as printed.
    assert [int(v * 10) / 10 for v in rows["Yi-34B"]["long_scores"].values()] == [-1.1, -2.1, -6.2, -10.8, -17.1]
    assert [int(v * 10) / 10 for v in rows["LWM-7B"]["long_scores"].values()] == [-4.7, -10.4, -16.0, -17.2, -21.0]
    # Sorted by LongScore rank.
    assert [r["model"] for r in out["models"]] == ["Yi-34B", "Llama3.1-70B", "LWM-7B", "Phi3-medium"]


def test_table7_from_per_task_rows_averages_scores_before_longscore(tmp_path):
    csv = write_csv(tmp_path / "t7.csv", table7_task_rows())
    res = run(["--scores", csv, "--format", "json"])  # defaults: base label "base", long 8k..128k
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["base_lengths"] == ["base"]
    rows = by_model(out)
    for model, (base, _scores, avg_lc, avg, lcs) in TABLE7.items():
        r = rows[model]
        assert r["tasks"] == [f"t{i}" for i in range(8)]
        assert r["base_ability"] == pytest.approx(base)
        assert list(r["long_scores"].values()) == lcs, model
        assert (round(r["avg_long_score"], 2), round(r["avg_score"], 2)) == (avg_lc, avg), model
    assert {m: r["rank_long_score"] for m, r in rows.items()} == TABLE7_RANK_LC
    assert {m: r["rank_old_metric"] for m, r in rows.items()} == TABLE7_RANK_OLD
    assert {m: r["rank_base_ability"] for m, r in rows.items()} == TABLE7_RANK_BASE


def test_table7_per_task_longscores_would_disagree():
    # The same rows through the wrong order (per-task LongScore, then the mean) miss Table 7.
    df = pl.DataFrame(table7_task_rows(), schema=["task", "model", "length", "score"], orient="row")
    llama = df.filter(pl.col("model") == "llama-3.1-8B")
    per_task = [report(llama.filter(pl.col("task") == t))["models"][0]["avg_long_score"] for t in sorted(set(llama["task"]))]
    assert abs(sum(per_task) / len(per_task) - (-17.46)) > 5


def test_table6_gemini_base_8k(tmp_path):
    long = ["16k", "32k", "64k", "128k"]
    rows = [("helmet", "flash", "8k", 59.6), *[("helmet", "flash", lv, s) for lv, s in zip(long, [60.2, 58.1, 55.0, 50.7])],
            ("helmet", "pro", "8k", 59.5), *[("helmet", "pro", lv, s) for lv, s in zip(long, [60.1, 59.9, 57.0, 54.1])]]
    res = run(["--scores", write_csv(tmp_path / "h.csv", rows), "--base-lengths", "8k", "--long-lengths", ",".join(long),
               "--format", "json"])
    assert res.exit_code == 0, res.output
    rows_ = by_model(json.loads(res.output))
    assert round(rows_["flash"]["avg_long_score"], 2) == -6.04 and rows_["flash"]["avg_score"] == pytest.approx(56.0)
    assert round(rows_["pro"]["avg_long_score"], 2) == -2.90 and rows_["pro"]["avg_score"] == pytest.approx(57.775)
    assert rows_["pro"]["rank_long_score"] == 1 and rows_["pro"]["rank_old_metric"] == 1


def test_table_format_and_ignored_lengths(tmp_path):
    rows = table5_rows() + [("ruler", "Yi-34B", "256k", 1.0)]  # 256k: outside the averages
    res = run(["--scores", write_csv(tmp_path / "r.csv", rows), "--base-lengths", "4k"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].split(" | ")[0].strip() == "model" and "LC 128k" in lines[0] and "rank LC" in lines[0]
    assert lines[2].startswith("Yi-34B") and "-7.50" in lines[2]
    assert "256k" not in lines[0]


def test_paper_default_base_lengths_2k_4k_6k(tmp_path):
    rows = [("qa", "m", lv, s) for lv, s in [("2k", 60.0), ("4k", 50.0), ("6k", 40.0), *zip(LONG, [45, 40, 35, 30, 25])]]
    res = run(["--scores", write_csv(tmp_path / "b.csv", rows), "--format", "json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)["models"][0]
    assert r["base_ability"] == 50.0 and r["avg_score"] == 35.0 and r["avg_long_score"] == pytest.approx(-30.0)


@pytest.mark.parametrize(
    ("rows", "args", "message"),
    [
        ([("t", "m", "base", 50.0), ("t", "m", "8k", 40.0)], [], "do not occur"),  # 16k..128k absent
        ([("t", "m", "base", 50.0), ("t", "m", "8k", 40.0), ("t2", "m", "base", 1.0)], ["--long-lengths", "8k"],
         "task 't2' has no score at length"),
        ([("t", "m", "base", 50.0), ("t", "m", "8k", 40.0), ("t", "m", "8k", 41.0)], ["--long-lengths", "8k"],
         "more than one score"),
        ([("t", "m", "base", 50.0), ("t", "m", "8k", 40.0)], ["--base-lengths", "8k", "--long-lengths", "8k"],
         "both base and long"),
    ],
    ids=["absent-length", "missing-task-length", "duplicate", "overlap"],
)
def test_errors_are_clear(tmp_path, rows, args, message):
    res = run(["--scores", write_csv(tmp_path / "e.csv", rows), *args])
    assert res.exit_code != 0
    assert message in res.output


def test_bad_csv_columns_and_scores(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("task,model,len,score\nt,m,base,1\n")
    res = run(["--scores", str(p)])
    assert res.exit_code != 0 and "missing column(s) ['length']" in res.output
    p.write_text("task,model,length,score\nt,m,base,abc\n")
    res = run(["--scores", str(p)])
    assert res.exit_code != 0 and "numeric" in res.output


def test_zero_base_gives_no_longscore(tmp_path):
    rows = [("t", "zero", "base", 0.0), ("t", "zero", "8k", 0.0), ("t", "ok", "base", 10.0), ("t", "ok", "8k", 5.0)]
    res = run(["--scores", write_csv(tmp_path / "z.csv", rows), "--long-lengths", "8k", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows_ = by_model(json.loads(res.output))
    assert rows_["zero"]["avg_long_score"] is None and rows_["zero"]["rank_long_score"] is None
    assert rows_["ok"]["avg_long_score"] == -50.0 and rows_["ok"]["rank_long_score"] == 1


def test_registered_in_lcp():
    import click

    from lc_pipeline.cli import main

    ctx = click.Context(main)
    tools = main.get_command(ctx, "tools")
    assert "longscore" in tools.list_commands(ctx)
    assert tools.get_command(ctx, "longscore").name == "longscore"  # lazy: imported on first use
