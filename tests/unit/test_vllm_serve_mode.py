"""How a vllm model is served (``serve: engine | server``) and how long its generator lives, without an engine:
the registry field, the server's command line, which generator a spec gets, and ModelsResource keeping one
generator per model until the runner releases it.

Real engines and servers run in tests/integration/test_vllm_engine_reuse.py.
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.registry import ModelSpec, ModelSpecError
from lc_pipeline.generate.vllm_backend import VLLMGenerator
from lc_pipeline.generate.vllm_server import SERVER_MODULE, VLLMServer, VLLMServerGenerator, server_flags
from lc_pipeline.resources.generator import ModelsResource

QWEN = ModelSpec(slug="qwen2.5-7b", backend="vllm", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                 max_model_len=32768, dtype="bfloat16")


def test_serve_mode_is_validated_naming_model_and_field():
    with pytest.raises(ModelSpecError, match=r"model 'qwen2.5-7b', field 'serve': unknown mode 'http'"):
        dataclasses.replace(QWEN, serve="http")
    with pytest.raises(ModelSpecError, match=r"model 'qwen2.5-7b', field 'serve': only backend 'vllm'.*'openai'"):
        dataclasses.replace(QWEN, backend="transformers", serve="server")


def test_serve_mode_is_not_identity():
    # Both modes decode the same token ids greedily: rows made one way are reused the other way.
    assert dataclasses.replace(QWEN, serve="server").fingerprint() == QWEN.fingerprint()
    assert dataclasses.replace(QWEN, serve="server").settings()["serve"] == "server"  # written to models.yaml
    assert "serve" not in QWEN.settings()


def test_registry_file_reads_the_serve_mode(tmp_path):
    from lc_pipeline.generate.registry import ModelRegistry

    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"m": {"backend": "vllm", "model_id": "/models/m", "max_model_len": 4096,
                                          "serve": "server"}}))
    assert ModelRegistry(path).get("m").serve == "server"


def test_server_mode_gets_the_server_generator_with_the_engines_rows():
    served = make_generator(dataclasses.replace(QWEN, serve="server"))
    engine = make_generator(QWEN)
    assert type(served) is VLLMServerGenerator and type(engine) is VLLMGenerator
    assert served.server is None  # nothing starts before the first generate
    assert (served.backend, served.model_id, served.sampling_params()) == (
        engine.backend, engine.model_id, engine.sampling_params())


def test_engine_arguments_become_server_flags():
    flags = server_flags({"model": "/m", "max_model_len": 8192, "enable_prefix_caching": False,
                          "enforce_eager": True, "kv_cache_memory_bytes": 1 << 30, "tokenizer": None,
                          "compilation_config": {"mode": 0}})
    assert flags == ["--model", "/m", "--max-model-len", "8192", "--no-enable-prefix-caching", "--enforce-eager",
                     "--kv-cache-memory-bytes", str(1 << 30), "--compilation-config", '{"mode": 0}']


def test_server_listens_on_loopback_under_the_models_name():
    cmd = VLLMServer(QWEN, {"model": "/m", "seed": 0}).command(8123)
    assert cmd[1:3] == ["-m", SERVER_MODULE]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "8123"
    assert cmd[cmd.index("--served-model-name") + 1] == "qwen2.5-7b"


def test_server_start_timeout_setting_is_checked(monkeypatch):
    monkeypatch.setenv("LCP_VLLM_SERVER_START_S", "soon")
    with pytest.raises(ValueError, match="LCP_VLLM_SERVER_START_S='soon'"):
        VLLMServer(QWEN, {"model": "/m"}).start_timeout_s()


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({
        "big-vllm": {"backend": "vllm", "model_id": "/models/big", "max_model_len": 4096},
        "small-hf": {"backend": "transformers", "model_id": "/models/small", "max_model_len": 4096},
    }))
    resource = ModelsResource(registry_path=str(path))
    yield resource, path
    resource.release("big-vllm")
    resource.release("small-hf")


def test_a_models_generator_is_kept_until_its_engine_is_released(models):
    resource, _ = models
    vllm_gen, hf_gen = resource.generator("big-vllm"), resource.generator("small-hf")
    assert resource.generator("big-vllm") is vllm_gen  # the model's next partition: the same engine
    assert resource.release_engines() == ["big-vllm"]
    assert resource.generator("big-vllm") is not vllm_gen
    assert resource.generator("small-hf") is hf_gen  # weights without an engine stay cached
    assert resource.release_engines("small-hf") == []


def test_changed_settings_replace_the_cached_generator(models):
    resource, path = models
    before = resource.generator("big-vllm")
    data = yaml.safe_load(path.read_text())
    data["big-vllm"]["serve"] = "server"  # not in the fingerprint, but another generator
    path.write_text(yaml.safe_dump(data))
    after = resource.generator("big-vllm")
    assert type(after) is VLLMServerGenerator and type(before) is VLLMGenerator
    assert resource.release_engines("big-vllm") == ["big-vllm"]  # one generator of it was left
