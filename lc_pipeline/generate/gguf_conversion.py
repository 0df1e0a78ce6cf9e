"""A GGUF converted once into a Hugging Face folder (tokenizer + de-quantized fp32 weights), cached on disk.

transformers can read a GGUF, but slowly (~30 s for SmolLM2-135M, nearly all of it spent parsing the
metadata, not de-quantizing); vLLM 0.32 cannot read one at all. So the first use converts the file with
transformers and saves the result with ``save_pretrained`` under ``$LCP_CACHE_DIR/models`` (default
``~/.cache/lc_pipeline/models``), one folder per GGUF content and transformers version. Later loads read that
folder in well under a second. The transformers backend loads its model from it
(``transformers_backend.TransformersGenerator``), and the vllm backend hands vLLM its path (``converted_model_dir``).

Importing this module is cheap: transformers is imported only when a file is converted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lc_pipeline.generate.registry import ModelSpec, ModelSpecError, resolve_model_path
from lc_pipeline.settings import env

log = logging.getLogger(__name__)

CACHE_ENV = "LCP_CACHE_DIR"
_CACHE_FORMAT = 1  # bump when the layout of a cached model directory changes


def cache_root() -> Path:
    return Path(env(CACHE_ENV) or "~/.cache/lc_pipeline").expanduser()


@functools.lru_cache(maxsize=16)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file's bytes (~0.1 s CPU for a 100 MB GGUF), once per process while size and mtime hold."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def converted_folder(path: str, gguf_file: str) -> Path:
    """Where the conversion of ``path/gguf_file`` is cached (it may not exist yet).

    Keyed by the GGUF's content and the converter's version, not by a model's settings: max_model_len, prompts
    or dtype don't change the converted weights (a backend applies the dtype when it loads them), so e.g. a copy
    of a spec with a smaller window reuses them. Content, not path + mtime: every venv or clone installs its own
    copy of the same file.
    """
    import transformers

    gguf_path = os.path.realpath(os.path.join(path, gguf_file))
    st = os.stat(gguf_path)
    digest = _file_sha256(gguf_path, st.st_size, st.st_mtime_ns)
    key = hashlib.sha256(
        json.dumps([_CACHE_FORMAT, st.st_size, digest, transformers.__version__]).encode()
    ).hexdigest()[:16]
    return cache_root() / "models" / f"{Path(gguf_file).stem}-{key}"


def cached_conversion(path: str, gguf_file: str) -> Path | None:
    """The cached conversion of ``path/gguf_file`` when a complete one exists, else None (nothing is converted
    here): a tokenizer read from it takes well under a second, from the GGUF ~6 s of CPU (its metadata parsed)."""
    if not os.path.isdir(path):
        return None
    folder = converted_folder(path, gguf_file)
    return folder if folder.is_dir() and _is_complete(folder) else None


@contextlib.contextmanager
def _conversion_lock(folder: Path) -> Iterator[None]:
    """Held while one process converts into ``folder`` (a lock file beside it), so that a second process asking
    for the same conversion waits and then reads the folder instead of converting it again (~30 s of CPU each).
    A cache that cannot hold the lock file (read-only) converts without it; the temp dir + rename in ``_convert``
    keeps the folder whole either way."""
    from filelock import FileLock

    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(folder.parent / f".{folder.name}.lock"))
        lock.acquire()
    except OSError as exc:
        log.debug("converting %s without a lock: %s", folder, exc)
        yield
        return
    try:
        yield
    finally:
        lock.release()


def convert_gguf(path: str, gguf_file: str, folder: Path) -> tuple[Any, Any]:
    """The tokenizer and fp32 model read from ``path/gguf_file``, then saved into ``folder``.

    Returned as loaded, so a caller that needs them does not read the folder again. When the folder cannot be
    written (a read-only cache), a warning says so and the objects are still returned; the caller checks
    ``folder.is_dir()`` when it needs the folder. One process at a time converts into a folder: one that waited
    for another's conversion loads the folder it wrote.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with _conversion_lock(folder):
        if folder.is_dir() and _is_complete(folder):  # converted by another process while this one waited
            return (AutoTokenizer.from_pretrained(folder, local_files_only=True),
                    AutoModelForCausalLM.from_pretrained(folder, local_files_only=True))
        return _convert(path, gguf_file, folder)


def _convert(path: str, gguf_file: str, folder: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s (slow, ~30 s for a small model; cached afterwards in %s)",
             os.path.join(path, gguf_file), folder)
    tok = AutoTokenizer.from_pretrained(path, gguf_file=gguf_file, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, gguf_file=gguf_file, local_files_only=True)
    # The weights are plain de-quantized tensors now; only the GGUF marker blocks saving.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    root = folder.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
        # Written to a temp dir and renamed: a reader sees a complete directory or none,
        # even when two processes convert at once (the loser's rename fails; it cleans up).
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{folder.name}.tmp-"))
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache may be shared
        try:
            tok.save_pretrained(tmp)
            model.save_pretrained(tmp)
            os.rename(tmp, folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        if not folder.is_dir():
            log.warning("could not cache the converted model in %s: %s", root, exc)
    return tok, model


def _is_complete(folder: Path) -> bool:
    """Whether ``folder`` holds what ``save_pretrained`` writes: a config, weights (one file or an index of
    shards) and a tokenizer."""
    names = set(os.listdir(folder))
    return ("config.json" in names and bool(names & {"model.safetensors", "model.safetensors.index.json"})
            and "tokenizer_config.json" in names)


def converted_model_dir(spec: ModelSpec) -> str:
    """The Hugging Face folder of ``spec``'s GGUF (``model_id`` + ``gguf_file``), converted on first use.

    For backends that cannot read a GGUF (vLLM 0.32). A GGUF that cannot be converted or cached is a
    ModelSpecError naming the model and the field ``gguf_file``.
    """
    if spec.gguf_file is None:
        raise ValueError(f"model {spec.slug!r}: converted_model_dir needs a gguf_file")
    path = resolve_model_path(spec)  # a GGUF missing from a local model_id: FileNotFoundError naming both
    if not os.path.isdir(path):
        raise ModelSpecError(f"model {spec.slug!r}, field 'gguf_file': {spec.gguf_file!r} needs a local model_id "
                             f"(a directory or 'package:<module>'), got {spec.model_id!r}; download the .gguf first")
    folder = converted_folder(path, spec.gguf_file)
    if folder.is_dir() and _is_complete(folder):
        return str(folder)
    if folder.is_dir():  # damaged (written by hand, or by a converter that crashed before the rename existed)
        log.warning("cached model %s is incomplete; converting the GGUF again", folder)
        shutil.rmtree(folder, ignore_errors=True)
    try:
        convert_gguf(path, spec.gguf_file, folder)
    except Exception as exc:  # an architecture or quantization transformers' GGUF reader lacks, a damaged file
        raise ModelSpecError(f"model {spec.slug!r}, field 'gguf_file': transformers cannot convert "
                             f"{spec.gguf_file!r} into a Hugging Face folder ({type(exc).__name__}: {exc})") from exc
    if not folder.is_dir():
        raise ModelSpecError(f"model {spec.slug!r}, field 'gguf_file': {spec.gguf_file!r} was converted but the "
                             f"folder could not be written under {folder.parent} (see the warning above); set "
                             f"{CACHE_ENV} to a writable folder")
    return str(folder)
