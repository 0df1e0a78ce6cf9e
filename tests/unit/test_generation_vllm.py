"""The vLLM backend's pieces that need no GPU: engine and sampling arguments, the import guard.

A real vLLM run needs a CUDA GPU and the ``gpu`` extra; it is not faked here.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os

import pytest

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.registry import ModelSpec
from lc_pipeline.generate.vllm_backend import engine_args, import_vllm, sampling_args

QWEN = ModelSpec(slug="qwen2.5-7b", backend="vllm", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                 max_model_len=32768, dtype="bfloat16", tensor_parallel_size=2, gpu_memory_utilization=0.85)


def test_engine_arguments_carry_window_parallelism_and_prefix_caching():
    assert engine_args(QWEN) == {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "max_model_len": 32768,
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.85,
        "enable_prefix_caching": True,
        "dtype": "bfloat16",
        "seed": 0,
        "trust_remote_code": False,
    }
    assert engine_args(dataclasses.replace(QWEN, enable_prefix_caching=False))["enable_prefix_caching"] is False


def test_gguf_is_loaded_by_file_with_its_directory_as_tokenizer(tmp_path):
    (tmp_path / "m.Q4_K_M.gguf").write_bytes(b"GGUF")
    args = engine_args(dataclasses.replace(QWEN, model_id=str(tmp_path), gguf_file="m.Q4_K_M.gguf"))
    assert args["model"] == os.path.join(str(tmp_path), "m.Q4_K_M.gguf")
    assert args["tokenizer"] == str(tmp_path)


def test_sampling_is_greedy_and_stops_on_eos_ids():
    assert sampling_args(64, [2, 0, 2]) == {
        "temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "stop_token_ids": [0, 2], "skip_special_tokens": True,
        "seed": 0,
    }


def test_generator_builds_without_vllm_and_records_its_settings():
    gen = make_generator(QWEN)
    assert gen.backend == "vllm" and gen.model_id == "Qwen/Qwen2.5-7B-Instruct"
    assert gen.sampling_params()["decoding"] == "greedy"
    gen.close()  # nothing to free yet


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_missing_vllm_names_the_gpu_extra():
    with pytest.raises(ImportError, match=r"lc_pipeline\[gpu\]"):
        import_vllm()
