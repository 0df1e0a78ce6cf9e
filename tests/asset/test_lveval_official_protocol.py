"""LV-Eval under `protocol: official` (issue 30, acceptance 2 for LV-Eval): with LCP_OFFICIAL=../shared/official and
fixture records in the released layout (tests/fixtures/lveval_released), every instance prompt of the packaged
``lveval`` config is ``DATASET_PROMPT[dataset].format(**record)`` byte for byte (the authors' config.py parsed here by
the test itself, never imported), with ``DATASET_MAXGEN`` new tokens; every task is cut by ``prompt_middle:lveval``
(prediction.py's truncate_prompt to the window - 500, before the chat template, which every task then gets).
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import built_lakes
import polars as pl
import pytest

from lc_pipeline.config import load_config
from lc_pipeline.construct.truncation import prompt_budget
from lc_pipeline.tasks.catalog import catalog_for

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lveval_released"
SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
OFFICIAL = SHARED.parent / "official"
CONFIG_PY = OFFICIAL / "infinigence+LVEval" / "config.py"
pytestmark = pytest.mark.skipif(not CONFIG_PY.is_file(), reason=f"the authors' LV-Eval config.py not found at "
                                f"{CONFIG_PY} (set LCP_SHARED_DATA to the shared/data directory, beside shared/official)")


def literal(name: str):
    tree = ast.parse(CONFIG_PY.read_text(encoding="utf-8"))
    [value] = [n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == name]
    return ast.literal_eval(value)


def released_records() -> dict[str, dict]:
    """record_id (the adapter's ``<file stem>-<5-digit position>``) -> the record as released."""
    return {f"{path.stem}-{i:05d}": json.loads(line) for path in sorted((FIXTURES / "lveval").glob("*.jsonl"))
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines())}


def build(config) -> pl.DataFrame:
    return pl.concat(built_lakes.build_instances(config).values())


def test_every_instance_prompt_is_dataset_prompt_formatted_with_the_record(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_DATA", str(FIXTURES))
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    config = load_config("lveval")
    instances = build(config)
    records, prompts, maxgen = released_records(), literal("DATASET_PROMPT"), literal("DATASET_MAXGEN")
    commit = (OFFICIAL / "infinigence+LVEval" / "COMMIT").read_text().strip()
    assert instances.height == len(records) > 0
    for row in instances.iter_rows(named=True):
        assert row["prompt"] == prompts[row["task"]].format(**records[row["record_id"]]), row["record_id"]
        assert row["max_new_tokens"] == maxgen[row["task"]]
    assert set(instances["protocol"]) == {f"official@{commit[:7]}"}
    assert {16, 64} <= set(instances["max_new_tokens"])  # factrecall's 16 and the QA datasets' 64

    catalog = catalog_for(config)
    for task in config.released.tasks:
        spec = catalog.resolve("lveval", task)
        assert spec.truncation == "prompt_middle:lveval" and spec.chat_template, task
    assert prompt_budget("prompt_middle:lveval").tokens("any-model", 16384) == 16384 - 500

    ours = build(config.replace(protocol="ours"))
    assert set(ours["protocol"]) == {"ours"} and not set(ours["instance_id"]) & set(instances["instance_id"])
    assert not set(ours["prompt"]) & set(instances["prompt"])  # our wording differs from theirs
