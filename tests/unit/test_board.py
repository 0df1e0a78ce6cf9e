"""The leaderboard on common instances (issue 21, score/board.py): paired rows, seeded bootstrap intervals
that recompute the row's LongScore, the skipped / truncated / invalid shares, and lengths nothing was sent at."""

from __future__ import annotations

import json
import random

import numpy as np
import polars as pl
import pytest

from lc_pipeline import schemas
from lc_pipeline.score.board import (
    board_display,
    longscore_draws,
    not_scored_cells,
    not_scored_lengths,
    paired_board,
    status_frame,
    status_shares,
)
from lc_pipeline.score.longscore import leaderboard_frame, long_scores_frame
from lc_pipeline.score.per_model import missing_lengths, model_long_scores, not_scored_note

BASE, LONG = ["1k", "2k"], ["4k", "8k"]
LENGTHS = BASE + LONG
NEW_COLUMNS = ["ci_low", "ci_high", "skipped_share", "truncated_share", "invalid_share", "n_unpaired"]


def scores(model: str = "m1", seed: int = 1, tasks=("a", "b", "c"), items: int = 7, lengths=LENGTHS) -> pl.DataFrame:
    """Per-instance rows of two metrics: subem 0/1 and f1 in [0, 1], every item at every length."""
    rng = random.Random(seed)
    rows = [dict(model=model, metric=m, task=t, length=lv, item_id=f"{t}{i}", instance_id=f"{t}{i}@{lv}",
                 score=float(rng.random() < 0.6) if m == "subem" else rng.random())
            for t in tasks for i in range(items) for lv in lengths for m in ("subem", "f1")]
    return pl.DataFrame(rows)


def statuses(model: str, skipped_at: str | None = None, tasks=("a", "b", "c"), items: int = 7) -> pl.DataFrame:
    rows = [dict(model=model, task=t, length=lv, status="skipped" if lv == skipped_at else "answered",
                 truncated=False) for t in tasks for _ in range(items) for lv in LENGTHS]
    return pl.DataFrame(rows)


# ----------------------------------------------------------------------------------- one model: today's rows


def test_with_one_model_the_board_is_todays_leaderboard_of_its_long_scores_plus_interval_and_shares():
    rows = scores()
    pk = pl.DataFrame({"item_id": ["a1", "b3"], "dropped": [True, False]})
    long_scores, _, _ = model_long_scores(rows.drop("model"), pk, BASE, LONG)
    today = leaderboard_frame(long_scores.with_columns(model=pl.lit("m1")))

    board, notes, left_out = paired_board(rows, BASE, LONG, dropped={"m1": ["a1"]}, statuses=statuses("m1"))

    assert board.drop(NEW_COLUMNS).equals(today.drop(NEW_COLUMNS))
    assert notes == [] and left_out == []
    assert board["n_unpaired"].to_list() == [0, 0]
    assert board["skipped_share"].to_list() == [0.0, 0.0]
    for r in board.iter_rows(named=True):
        assert r["ci_low"] < r["long_score"] < r["ci_high"]


def test_the_board_matches_a_capture_of_the_leaderboard_before_pairing_existed():
    # Captured from leaderboard_frame(model_long_scores(...)) at commit 5332a66 on the frame scores() builds.
    board, _, _ = paired_board(scores(), BASE, LONG, dropped={"m1": ["a1"]})
    got = {r["metric"]: (r["base_ability"], r["old_metric"], r["long_score"], r["n_instances"])
           for r in board.iter_rows(named=True)}
    assert got["f1"] == pytest.approx((47.446853, 52.309349, 10.245, 80), abs=1e-6)
    assert got["subem"] == pytest.approx((67.460317, 59.126984, -12.355, 80), abs=1e-6)


# ----------------------------------------------------------------------------------- paired


def test_two_models_are_ranked_on_the_instances_both_answered():
    a = scores("a-model", seed=1)
    b = scores("b-model", seed=2).filter(~((pl.col("length") == "8k") & pl.col("item_id").is_in(["a0", "b0"])))
    board, notes, _ = paired_board(pl.concat([a, b]), BASE, LONG)

    common = b.filter(pl.col("model") == "b-model")
    for model, own in (("a-model", a), ("b-model", b)):
        for metric in ("subem", "f1"):
            paired = own.filter((pl.col("metric") == metric) & pl.col("instance_id").is_in(common["instance_id"]))
            expected = leaderboard_frame(long_scores_frame(paired.select("task", "length", "score"), BASE, LONG,
                                                           metric).with_columns(model=pl.lit(model)))
            row = board.filter((pl.col("model") == model) & (pl.col("metric") == metric)).row(0, named=True)
            assert row["long_score"] == pytest.approx(expected["long_score"][0])
            assert row["old_metric"] == pytest.approx(expected["old_metric"][0])
            assert row["n_instances"] == 3 * 7 * 4 - 2
            assert row["n_unpaired"] == (2 if model == "a-model" else 0)
    assert notes == []


def test_a_length_one_model_skipped_entirely_is_null_for_every_model_and_named():
    a = scores("a-model", seed=1)
    b = scores("b-model", seed=2).filter(pl.col("length") != "8k")  # every 8k prompt skipped
    board, notes, left_out = paired_board(pl.concat([a, b]), BASE, LONG,
                                          not_scored={"b-model": {(t, "8k") for t in "abc"}})
    assert left_out == []
    assert len(notes) == 2 and all("a@8k, b@8k, c@8k" in n for n in notes)
    for r in board.iter_rows(named=True):
        assert json.loads(r["scores_by_length"])["8k"] is None
        assert r["n_instances"] == 3 * 7 * 3
    only_4k = a.filter((pl.col("metric") == "f1") & (pl.col("length") != "8k"))
    expected = long_scores_frame(only_4k.select("task", "length", "score"), BASE, LONG, "f1",
                                 not_scored=[(t, "8k") for t in "abc"])
    avg = expected.filter((pl.col("task") == "overall") & (pl.col("length_level") == "avg")).row(0, named=True)
    row = board.filter((pl.col("model") == "a-model") & (pl.col("metric") == "f1")).row(0, named=True)
    assert row["long_score"] == pytest.approx(avg["long_score"])  # LC at 4k only
    assert row["n_unpaired"] == 21


def test_a_model_missing_a_cell_its_generations_do_not_explain_is_left_out_with_the_reason():
    a = scores("a-model")
    b = scores("b-model", seed=2).filter(~((pl.col("task") == "c") & (pl.col("length") == "4k")))
    board, _, left_out = paired_board(pl.concat([a, b]), BASE, LONG)
    assert set(board["model"]) == {"a-model"}
    assert any(r.startswith("b-model/f1: no scores at c@4k") and "not run" in r for r in left_out)


def test_a_prior_knowledge_drop_leaves_the_item_out_of_that_models_scores_only():
    a, b = scores("a-model", seed=1), scores("b-model", seed=2)
    board, _, _ = paired_board(pl.concat([a, b]), BASE, LONG, dropped={"a-model": ["a1"]})
    n = {r["model"]: r["n_instances"] for r in board.filter(pl.col("metric") == "f1").iter_rows(named=True)}
    assert n == {"a-model": 3 * 7 * 4 - 4, "b-model": 3 * 7 * 4}


# ----------------------------------------------------------------------------------- intervals


def test_the_bootstrap_recomputes_the_rows_formula_so_the_data_itself_gives_the_row():
    rows = scores().filter(pl.col("metric") == "f1")
    board, _, _ = paired_board(rows, BASE, LONG)
    matrices = []
    for t in "abc":
        part = rows.filter(pl.col("task") == t)
        items = sorted(part["item_id"].unique())
        sums = np.array([[part.filter((pl.col("item_id") == i) & (pl.col("length") == lv))["score"].sum()
                          for lv in LENGTHS] for i in items])
        matrices.append((np.ones((1, len(items))), sums, np.ones_like(sums)))
    lc, old = longscore_draws(matrices, len(BASE))
    assert lc[0] == pytest.approx(board["long_score"][0]) and old[0] == pytest.approx(board["old_metric"][0])


def test_intervals_are_seeded_reproducible_and_shared_by_models_with_the_same_scores():
    rows = scores("a-model")
    twin = rows.with_columns(model=pl.lit("b-model"))
    first, _, _ = paired_board(pl.concat([rows, twin]), BASE, LONG)
    again, _, _ = paired_board(pl.concat([rows, twin]), BASE, LONG)
    assert first.equals(again)
    f1 = first.filter(pl.col("metric") == "f1")
    assert f1["ci_low"].n_unique() == 1 and f1["ci_high"].n_unique() == 1  # the same resamples: paired


def test_a_row_without_longscore_gets_the_interval_of_its_old_metric():
    zero_base = scores().with_columns(
        score=pl.when(pl.col("length").is_in(BASE)).then(0.0).otherwise(pl.col("score")))
    board, _, _ = paired_board(zero_base.filter(pl.col("metric") == "f1"), BASE, LONG)
    r = board.row(0, named=True)
    assert r["long_score"] is None and r["ci_low"] < r["old_metric"] < r["ci_high"]


# ----------------------------------------------------------------------------------- statuses and shares


def test_shares_count_the_models_generations_at_the_rows_lengths():
    st = pl.DataFrame({"model": ["m"] * 4, "task": ["a"] * 4, "length": ["1k", "2k", "4k", "8k"],
                       "status": ["answered", "invalid", "answered", "skipped"],
                       "truncated": [False, False, True, False]})
    assert status_shares(st, "m", ["a"], LENGTHS) == {"skipped_share": 0.25, "truncated_share": 0.25,
                                                      "invalid_share": 0.25}
    assert status_shares(st, "other", ["a"], LENGTHS)["skipped_share"] is None  # unknown, never 0
    assert status_shares(None, "m", ["a"], LENGTHS)["invalid_share"] is None


def test_not_scored_cells_are_those_whose_every_generation_was_skipped_or_invalid():
    gens = pl.DataFrame({"model": ["m"] * 4, "length": ["8k", "8k", "4k", "4k"], "instance_id": ["x", "y", "x4", "y4"],
                         "status": ["skipped", "invalid", "skipped", "answered"], "truncated": [False] * 4})
    tasks = pl.DataFrame({"instance_id": ["x", "y", "x4", "y4"], "task": ["a", "b", "a", "a"]})
    st = status_frame(gens, tasks)
    assert not_scored_cells(st) == {"m": {("a", "8k"), ("b", "8k")}}
    assert not_scored_lengths(st) == {"m": {"8k"}}
    with pytest.raises(ValueError, match="instance_id 'z'"):
        status_frame(gens.with_columns(instance_id=pl.lit("z")), tasks)


def test_a_length_all_skipped_is_not_scored_but_a_length_never_run_is_still_missing():
    rows = scores().drop("model").filter(pl.col("length") != "8k")
    assert missing_lengths(rows, BASE, LONG) == ["8k"]
    assert missing_lengths(rows, BASE, LONG, not_scored={"8k"}) == []
    cells = [(t, "8k") for t in "abc"]
    out, _, _ = model_long_scores(rows, pl.DataFrame({"item_id": [], "dropped": []},
                                                     schema={"item_id": pl.String, "dropped": pl.Boolean}),
                                  BASE, LONG, cells)
    at_8k = out.filter(pl.col("length_level") == "8k")
    assert at_8k["score"].is_null().all() and at_8k["long_score"].is_null().all() and (at_8k["n_instances"] == 0).all()
    assert "not scored (every generation skipped or invalid) at 8k" in not_scored_note(cells, BASE, LONG)
    with pytest.raises(ValueError, match="task 'a' has no score at length"):
        long_scores_frame(rows.filter(pl.col("metric") == "f1"), BASE, LONG, "f1", not_scored=cells[1:])


def test_a_task_skipped_at_one_length_makes_the_cross_task_score_there_null_not_the_others_mean():
    rows = scores().drop("model").filter(pl.col("metric") == "f1")
    rows = rows.filter(~((pl.col("task") == "c") & (pl.col("length") == "8k")))
    out = long_scores_frame(rows, BASE, LONG, "f1", not_scored=[("c", "8k")])
    overall = {r["length_level"]: r for r in out.filter(pl.col("task") == "overall").iter_rows(named=True)}
    assert overall["8k"]["score"] is None and overall["4k"]["score"] is not None
    assert overall["avg"]["score"] == pytest.approx(overall["4k"]["score"])
    assert out.filter((pl.col("task") == "a") & (pl.col("length_level") == "8k"))["score"][0] is not None


# ----------------------------------------------------------------------------------- the CLI


def test_lcp_prints_the_interval_the_shares_and_the_common_count(capsys):
    from lc_pipeline.cli import _print_leaderboard

    a = scores("a-model", seed=1)
    b = scores("b-model", seed=2).filter(pl.col("length") != "8k")
    board, _, _ = paired_board(pl.concat([a, b]), BASE, LONG, not_scored={"b-model": {(t, "8k") for t in "abc"}},
                               statuses=pl.concat([statuses("a-model"), statuses("b-model", skipped_at="8k")]))
    assert board.columns == schemas.LEADERBOARD.names()
    _, rows, lines = board_display(board)
    assert "subem: 2 models paired on 63 common instances" in lines
    assert {r[1]: r[-1] for r in rows} == {"a-model": "0%/0%/0%", "b-model": "25%/0%/0%"}
    _print_leaderboard(board)
    printed = capsys.readouterr().out
    assert "paired on 63 common instances" in printed and "ci95" in printed and "25%/0%/0%" in printed
