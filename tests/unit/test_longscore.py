"""LongScore: the 100-LongBench spec's §11 checklist (numbers from its §8 tables), the cross-task
averaging rule, the LONG_SCORES / LEADERBOARD frames."""

from __future__ import annotations

import json

import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.score.longscore import (
    leaderboard_frame,
    long_score,
    long_score_summary,
    long_scores_frame,
    rank_descending,
)

LONG = ["8k", "16k", "32k", "64k", "128k"]


def curve(base_length: str, base: float, long_lengths: list[str], scores: list[float], task: str = "t") -> pl.DataFrame:
    """One task's score curve as the ``task, length, score`` frame long_score_summary takes."""
    return pl.DataFrame(
        {"task": [task] * (1 + len(scores)), "length": [base_length, *long_lengths], "score": [base, *scores]}
    )


# ---------------------------------------------------------------------------------------------
# long_score
# ---------------------------------------------------------------------------------------------


def test_long_score_is_the_relative_change_in_percent():
    assert long_score(96.5, 95.8) == pytest.approx(-0.72539, abs=1e-5)  # Table 5, Llama3.1-70B 8k (-0.7)
    assert long_score(50.0, 75.0) == 50.0  # improvements are positive
    assert long_score(40.0, 40.0) == 0.0


def test_long_score_refuses_a_zero_base():
    with pytest.raises(ValueError, match="Base Ability is 0"):
        long_score(0.0, 10.0)


# ---------------------------------------------------------------------------------------------
# §11 checklist: RULER Table 5 (base = 4k)
# ---------------------------------------------------------------------------------------------

TABLE5 = {  # model: (S_4k, [S_8k, S_16k, S_32k, S_64k, S_128k])  (spec §8.2)
    "Llama3.1-70B": (96.5, [95.8, 95.4, 94.8, 88.4, 66.6]),
    "Yi-34B": (93.3, [92.2, 91.3, 87.5, 83.2, 77.3]),
    "Phi3-medium": (93.3, [93.2, 91.1, 86.8, 78.6, 46.1]),
    "LWM-7B": (82.3, [78.4, 73.7, 69.1, 68.1, 65.0]),
}


def test_table5_avg_longscore_and_ranks():
    summaries = {m: long_score_summary(curve("4k", b, LONG, s), ["4k"], LONG) for m, (b, s) in TABLE5.items()}
    avg_lc = [round(x.avg_long_score, 2) for x in summaries.values()]
    avg_score = [round(x.avg_score, 2) for x in summaries.values()]
    assert avg_lc == [-8.60, -7.50, -15.16, -13.90]  # LC_l rounded to 2 decimals first, as longscore_table
    assert rank_descending(avg_lc) == [2, 1, 4, 3]
    assert avg_score == [88.2, 86.3, 79.16, 70.86]
    assert rank_descending(avg_score) == [1, 2, 3, 4]
    assert rank_descending([x.base_ability for x in summaries.values()]) == [1, 2, 2, 4]  # 93.3 tie -> min rank


def test_table5_unrounded_avg_longscore():
    exact = [
        long_score_summary(curve("4k", b, LONG, s), ["4k"], LONG, round_each=False).avg_long_score
        for b, s in TABLE5.values()
    ]
    assert exact == pytest.approx([-8.601, -7.503, -15.155, -13.900], abs=5e-4)


def test_table5_per_length_cells_truncate_to_the_paper():
    # The paper prints LC_l truncated to 1 decimal: Llama -0.7, -1.1, -1.7, -8.3, -30.9.
    s = long_score_summary(curve("4k", 96.5, LONG, TABLE5["Llama3.1-70B"][1]), ["4k"], LONG)
    assert [int(v * 10) / 10 for v in s.long_scores.values()] == [-0.7, -1.1, -1.7, -8.3, -30.9]


# ---------------------------------------------------------------------------------------------
# §11 checklist: Table 6 (HELMET, Gemini; base = 8k, long = 16k..128k) and Table 8
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "scores", "avg_score", "avg_lc"),
    [(59.6, [60.2, 58.1, 55.0, 50.7], 56.00, -6.04), (59.5, [60.1, 59.9, 57.0, 54.1], 57.775, -2.90)],
    ids=["gemini-1.5-flash", "gemini-1.5-pro"],
)
def test_table6_gemini(base, scores, avg_score, avg_lc):
    long = ["16k", "32k", "64k", "128k"]
    s = long_score_summary(curve("8k", base, long, scores), ["8k"], long)
    assert s.avg_score == pytest.approx(avg_score)
    assert round(s.avg_long_score, 2) == avg_lc


def test_table8_domain_tasks_llama32_1b():
    s = long_score_summary(curve("base", 24.41, LONG, [22.42, 20.55, 18.54, 17.92, 15.44]), ["base"], LONG)
    assert round(s.avg_score, 2) == 18.97
    assert round(s.avg_long_score, 2) == -22.27


def test_table7_from_the_notebooks_unrounded_averages():
    # Spec §8.5: per-length means over the 8 tasks -> every Table 7 value, per-length LCs included.
    rows = {
        "llama-3.1-8B": (44.06500, [36.64625, 35.48000, 36.29000, 38.76250, 34.68375], -17.46, 36.37,
                         [-16.84, -19.48, -17.64, -12.03, -21.29]),
        "llama-3.1-70B": (67.52375, [65.15625, 60.33000, 54.72875, 49.50125, 33.03375], -22.18, 52.55,
                          [-3.51, -10.65, -18.95, -26.69, -51.08]),
        "Qwen2.5-14B": (59.19750, [51.42625, 48.59375, 43.01125, 37.47625, 23.35250], -31.12, 40.77,
                        [-13.13, -17.91, -27.34, -36.69, -60.55]),
    }
    for base, scores, avg_lc, avg, lcs in rows.values():
        s = long_score_summary(curve("base", base, LONG, scores), ["base"], LONG)
        assert list(s.long_scores.values()) == lcs
        assert (round(s.avg_long_score, 2), round(s.avg_score, 2)) == (avg_lc, avg)


# ---------------------------------------------------------------------------------------------
# Cross-task aggregation: average raw scores per length first, then LongScore
# ---------------------------------------------------------------------------------------------


def test_tasks_are_averaged_before_longscore():
    # Task "easy" has a solid base; task "hard" has a tiny base, so its relative change explodes.
    two = pl.concat(
        [
            curve("base", 80.0, ["8k", "16k"], [60.0, 40.0], task="easy"),  # LC -25, -50 -> avg -37.5
            curve("base", 2.0, ["8k", "16k"], [4.0, 3.0], task="hard"),  # LC +100, +50 -> avg +75
        ]
    )
    s = long_score_summary(two, ["base"], ["8k", "16k"])
    # Averaged curve: base 41, 8k 32, 16k 21.5 -> LC -21.95, -47.56 -> avg -34.755.
    assert s.scores == {"base": 41.0, "8k": 32.0, "16k": 21.5}
    assert s.base_ability == 41.0
    assert list(s.long_scores.values()) == [-21.95, -47.56]
    assert s.avg_long_score == pytest.approx(-34.755)
    assert s.avg_score == pytest.approx(26.75)
    # The mean of per-task LongScores would claim an improvement: (-37.5 + 75) / 2 = +18.75.
    per_task = [
        long_score_summary(two.filter(pl.col("task") == t), ["base"], ["8k", "16k"]).avg_long_score
        for t in ("easy", "hard")
    ]
    assert sum(per_task) / 2 == pytest.approx(18.75)


def test_base_ability_is_the_mean_over_the_base_lengths():
    df = pl.DataFrame({"task": ["t"] * 4, "length": ["2k", "4k", "6k", "8k"], "score": [30.0, 40.0, 50.0, 20.0]})
    s = long_score_summary(df, ["2k", "4k", "6k"], ["8k"])
    assert s.base_ability == 40.0 and s.long_scores == {"8k": -50.0}


def test_summary_names_the_task_and_the_missing_lengths():
    df = pl.concat([curve("4k", 90.0, LONG, [80.0] * 5, task="qa"), curve("4k", 90.0, LONG[:3], [80.0] * 3, task="kv")])
    with pytest.raises(ValueError, match=r"'kv'.*\['64k', '128k'\]"):
        long_score_summary(df, ["4k"], LONG)


# ---------------------------------------------------------------------------------------------
# long_scores_frame -> LONG_SCORES
# ---------------------------------------------------------------------------------------------


def per_instance_rows(task: str, per_length: dict[str, list[float]]) -> pl.DataFrame:
    rows = [(task, lv, x) for lv, xs in per_length.items() for x in xs]
    return pl.DataFrame(rows, schema={"task": pl.String, "length": pl.String, "score": pl.Float64}, orient="row")


def test_long_scores_frame_per_task_and_overall():
    per_instance = pl.concat(
        [
            per_instance_rows("qa", {"2k": [1, 1], "4k": [1, 0], "8k": [1, 0], "16k": [0, 0], "256k": [1]}),
            per_instance_rows("kv", {"2k": [1, 1], "4k": [1, 1], "8k": [1, 1, 1, 0], "16k": [1, 0]}),
        ]
    )
    df = long_scores_frame(per_instance, ["2k", "4k"], ["8k", "16k"], metric="subem")
    assert df.schema == schemas.LONG_SCORES
    assert df.select("task", "length_level").rows() == [
        ("kv", "8k"), ("kv", "16k"), ("kv", "avg"),
        ("qa", "8k"), ("qa", "16k"), ("qa", "avg"),
        ("overall", "8k"), ("overall", "16k"), ("overall", "avg"),
    ]  # fmt: skip
    got = {(r["task"], r["length_level"]): r for r in df.iter_rows(named=True)}
    # qa: base (100 + 50)/2 = 75; 8k 50 -> LC -33.33; 16k 0 -> -100.
    assert got[("qa", "avg")]["base_ability"] == 75.0
    assert got[("qa", "8k")]["long_score"] == -33.33
    assert got[("qa", "avg")]["score"] == 25.0
    assert got[("qa", "avg")]["long_score"] == pytest.approx((-33.33 - 100) / 2)
    # overall: per-length means of the task scores (kv 100/100/75/50, qa 100/50/50/0), then LongScore.
    assert got[("overall", "avg")]["base_ability"] == 87.5
    assert got[("overall", "8k")]["score"] == 62.5
    assert got[("overall", "8k")]["long_score"] == round(100 * (62.5 - 87.5) / 87.5, 2)
    # Counts: 256k is outside the averages and not counted.
    assert got[("qa", "8k")]["n_instances"] == 2
    assert got[("overall", "8k")]["n_instances"] == 6
    assert got[("overall", "avg")]["n_instances"] == 4 + 4 + 6 + 4  # base + long lengths, both tasks
    assert set(df.get_column("metric")) == {"subem"}
    assert df.row(0, named=True)["base_lengths"] == ["2k", "4k"]


def test_long_scores_frame_names_the_task_missing_a_length():
    per_instance = pl.concat(
        [
            per_instance_rows("qa", {"4k": [1], "8k": [1], "16k": [1]}),
            per_instance_rows("kv", {"8k": [1], "16k": [0]}),  # no base run
        ]
    )
    with pytest.raises(ValueError, match=r"'kv'.*\['4k'\]"):
        long_scores_frame(per_instance, ["4k"], ["8k", "16k"], metric="subem")


def test_long_scores_frame_zero_base_raises_or_writes_null():
    per_instance = per_instance_rows("qa", {"4k": [0, 0], "8k": [1, 0]})
    with pytest.raises(ValueError, match="Base Ability is 0"):
        long_scores_frame(per_instance, ["4k"], ["8k"], metric="em")
    df = long_scores_frame(per_instance, ["4k"], ["8k"], metric="em", on_zero_base="null")
    assert df.get_column("long_score").null_count() == df.height
    assert df.filter(pl.col("length_level") == "8k").get_column("score").to_list() == [50.0, 50.0]  # qa, overall


def test_long_scores_frame_uses_only_the_requested_metric():
    per_instance = pl.concat(
        [
            per_instance_rows("qa", {"4k": [1], "8k": [1]}).with_columns(metric=pl.lit("em")),
            per_instance_rows("qa", {"4k": [1], "8k": [0]}).with_columns(metric=pl.lit("f1")),
        ]
    )
    df = long_scores_frame(per_instance, ["4k"], ["8k"], metric="f1")
    assert df.get_column("n_instances").to_list() == [1, 2, 1, 2]
    assert df.filter(pl.col("length_level") == "8k").get_column("long_score").to_list() == [-100.0, -100.0]


# ---------------------------------------------------------------------------------------------
# rank_descending and leaderboard_frame
# ---------------------------------------------------------------------------------------------


def test_rank_descending_ties_take_the_min_rank():
    assert rank_descending([3.0, 5.0, 5.0, 1.0]) == [3, 1, 1, 4]
    assert rank_descending([]) == []
    assert rank_descending([2.0, None, float("nan"), 7.0]) == [2, None, None, 1]


def _table5_long_scores() -> pl.DataFrame:
    frames = []
    for model, (base, scores) in TABLE5.items():
        rows = pl.DataFrame(
            {
                "task": ["ruler"] * 6,
                "length": ["4k", *LONG],
                # per-instance scores in [0, 1]: one instance per length carrying S_l / 100
                "score": [x / 100 for x in (base, *scores)],
            }
        )
        frames.append(long_scores_frame(rows, ["4k"], LONG, metric="subem").with_columns(model=pl.lit(model)))
    return pl.concat(frames)


def test_leaderboard_reorders_table5_by_longscore():
    lb = leaderboard_frame(_table5_long_scores())
    assert lb.schema == schemas.LEADERBOARD
    assert lb.get_column("model").to_list() == ["Yi-34B", "Llama3.1-70B", "LWM-7B", "Phi3-medium"]
    assert lb.get_column("rank_long_score").to_list() == [1, 2, 3, 4]
    ranks = dict(zip(lb.get_column("model"), lb.get_column("rank_old_metric")))
    assert ranks == {"Llama3.1-70B": 1, "Yi-34B": 2, "Phi3-medium": 3, "LWM-7B": 4}
    yi = lb.row(0, named=True)
    assert yi["base_ability"] == pytest.approx(93.3)
    assert yi["old_metric"] == pytest.approx(86.3)
    assert round(yi["long_score"], 2) == -7.50
    by_length = json.loads(yi["scores_by_length"])
    assert list(by_length) == LONG
    assert by_length["128k"] == pytest.approx(77.3)
    assert yi["n_instances"] == 6


def test_leaderboard_ranks_within_each_metric():
    both = pl.concat([_table5_long_scores(), _table5_long_scores().with_columns(metric=pl.lit("em"))])
    lb = leaderboard_frame(both)
    assert lb.height == 8
    assert lb.get_column("metric").to_list() == ["em"] * 4 + ["subem"] * 4
    assert lb.get_column("rank_long_score").to_list() == [1, 2, 3, 4] * 2


def test_long_scores_frame_accepts_integer_scores_and_rejects_out_of_range():
    ints = pl.DataFrame({"task": ["qa"] * 3, "length": ["4k", "4k", "8k"], "score": [1, 0, 1]})
    df = long_scores_frame(ints, ["4k"], ["8k"], metric="em")
    assert df.filter(pl.col("length_level") == "8k").get_column("long_score").to_list() == [100.0, 100.0]
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        long_scores_frame(ints.with_columns(score=pl.lit(50)), ["4k"], ["8k"], metric="em")
