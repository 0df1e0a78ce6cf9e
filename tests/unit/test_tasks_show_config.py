"""`lcp tasks show/list --config`: what that config really runs (newcomer review: `builder qa.assemble` was shown for
a released config, which builds with `released.records`; issue 30 item 9). A released benchmark's tasks show the
config's released builder beside the one the task file declares, and the protocol the config runs them under;
with the authors' files (../shared/official), the official protocol's truncation, answer lengths and followup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lc_pipeline.cli import main

OFFICIAL = Path(__file__).resolve().parents[2].parent / "shared" / "official"


def lcp(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def shown(text: str) -> dict[str, str]:
    fields = {}
    for line in text.split("\nprompt")[0].splitlines():
        key, _, value = line.partition("  ")
        fields[key] = value.strip()
    return fields


def test_a_released_config_shows_the_builder_it_runs_with_and_the_declared_one(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "none"))  # no authors' files: protocol ours
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    plain = shown(lcp("tasks", "show", "longbench_v2/longbench_v2"))
    assert plain["builder"] == "qa.assemble" and "protocol" not in plain
    released = shown(lcp("tasks", "show", "longbench_v2/longbench_v2", "--config", "longbench-v2"))
    assert (released["builder"], released["declared_builder"], released["protocol"]) == (
        "released.records", "qa.assemble", "ours")
    listed = json.loads(lcp("tasks", "list", "--benchmark", "longbench", "--config", "longbench", "--format", "json"))
    assert {t["builder"] for t in listed} == {"released.records"} and len(listed) == 21


@pytest.mark.skipif(not (OFFICIAL / "THUDM+LongBench" / "prompts").is_dir(),
                    reason=f"the authors' files are not at {OFFICIAL} (../shared/official)")
def test_under_the_official_protocol_the_task_shows_the_protocols_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    out = lcp("tasks", "show", "longbench_v2/cot", "--config", "longbench-v2")
    fields = shown(out)
    assert fields["protocol"] == "official@2e00731" and fields["truncation"] == "prompt_middle:longbench_v2"
    assert fields["max_new_tokens"] == "1024" and json.loads(fields["followup"])["max_new_tokens"] == 128
    assert "prompt: the authors' (protocol official@2e00731" in out
