"""`lcp judge` (issue 32): the judge steps on their own. Loong's headline is the LLM judge; a run without a judge
leaves its cells unjudged and says so, then `lcp judge` with a judge configured (llama-cpp-python's OpenAI-compatible
server on 127.0.0.1 serving SmolLM2, through LCP_JUDGE_MODEL / OPENAI_BASE_URL) writes judge_scores for the model's
partitions and refreshes its benchmark tables; a second `lcp judge` asks the server nothing new (the reply cache).
The evaluated model's answers are imported (`lcp import-predictions`), so no generation is spent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml
from click.testing import CliRunner
from servers import llama_server, needs_llama_server, smollm2_gguf
from shared_files import SHARED_DATA, skip_unless

from lc_pipeline.cli import main
from lc_pipeline.config import PACKAGED_CONFIGS
from lc_pipeline.resources.parquet_io import read_table

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [*needs_llama_server, pytest.mark.slow, skip_unless(SHARED_DATA / "loong" / "loong.jsonl",
                                                                   "the shared Loong items")]


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def test_lcp_judge_fills_the_judged_cells_a_run_without_a_judge_left_and_a_rerun_asks_nothing(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "loong"  # $LCP_DATA/loong as released, with invented documents for a few items
    folder.mkdir(parents=True)
    (folder / "loong.jsonl").symlink_to(SHARED_DATA / "loong" / "loong.jsonl")
    shutil.copytree(ROOT / "tests" / "fixtures" / "loong_docs", folder / "doc")
    config = yaml.safe_load((PACKAGED_CONFIGS / "loong.yaml").read_text())
    config["released"].update(bounds={"set1": [0, 520]}, tasks=["spotlight_locating"])
    config.update(lengths=["set1"], max_new_tokens=16)
    (tmp_path / "loong.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for var, value in {"LCP_CONFIG": tmp_path / "loong.yaml", "LCP_DATA": tmp_path / "data",
                       "LCP_LAKE": tmp_path / "lake", "LCP_MODELS": tmp_path / "models.yaml",
                       "DAGSTER_HOME": tmp_path / ".dagster", "LCP_PROJECT_DIR": tmp_path}.items():
        monkeypatch.setenv(var, str(value))
    monkeypatch.delenv("LCP_JUDGE_MODEL", raising=False)
    lcp("plan")  # builds the instances
    lake = tmp_path / "lake"
    ids = read_table(lake / "instances")["record_id"].to_list()
    assert ids
    preds = tmp_path / "answers.jsonl"
    preds.write_text("".join(json.dumps({"_id": i, "prediction": "The paper is the second one."}) + "\n" for i in ids))
    lcp("models", "import", str(preds), "--model", "answers")

    out = lcp("run", "--model", "answers")
    assert "scored by the LLM judge, none configured" in out
    assert not (lake / "judge_scores").exists()

    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=4096) as url:
        monkeypatch.setenv("LCP_JUDGE_MODEL", "smollm2")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        out = lcp("judge", "--model", "answers")
        assert "judge_scores [set1|answers]" in out and "answers: judge_scores" in out
        verdicts = read_table(lake / "judge_scores")
        assert verdicts.height == len(ids) and set(verdicts["model"]) == {"answers"}
        cells = read_table(lake / "benchmark_scores").filter(pl.col("task") == "spotlight_locating")
        assert cells.height and cells["n"].max() == len(ids)

        again = lcp("judge", "--model", "answers")
        assert read_table(lake / "judge_scores").select("instance_id", "value").equals(
            verdicts.select("instance_id", "value"))
        assert "answers: judge_scores" in again


def test_lcp_judge_before_any_generation_names_the_command_to_run_first(tmp_path, monkeypatch):
    for var, value in {"LCP_LAKE": tmp_path / "lake", "LCP_MODELS": tmp_path / "models.yaml",
                       "DAGSTER_HOME": tmp_path / ".dagster", "LCP_PROJECT_DIR": tmp_path}.items():
        monkeypatch.setenv(var, str(value))
    result = CliRunner().invoke(main, ["judge", "--config", "demo", "--model", "smollm2-135m", "--length", "1k"])
    assert result.exit_code == 1
    assert "model 'smollm2-135m' has no generations at lengths ['1k']: run `lcp run --model smollm2-135m`" in \
        result.output
