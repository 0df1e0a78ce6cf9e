"""What each stage's output depends on, as a short hash.

Every materialization records its fingerprint as its Dagster data version (and as ``lcp/fingerprint``);
``lcp run`` skips a partition whose latest materialization carries the current one and whose file is on disk
(runner.py). Each asset declares its code version and the config fields it hashes (assets/versions.py). A config or model-settings change therefore re-runs exactly the affected stages,
and ids that embed the fingerprint produce new rows instead of reusing stale ones.
Bump an asset's ``code_version`` when its logic changes what it writes.

Input data (issue 31). A source's options name its files by path (``$LCP_DATA/longbench``): the config alone
does not say what they hold. Every stage that reads the sources therefore also hashes their content
(:func:`config_input_sha256`: the sha256 of every regular file each source option names, a folder's files
recursively, hidden ones left out): records removed, added or edited, or ``LCP_DATA`` pointing at another
folder with other files, change every fingerprint from the sources on, so the sources and instances are built
again and each model's partitions re-run (the generation store is keyed per prompt: only new prompts are asked).
A config whose sources name no file (the demo corpus is generated) hashes nothing more. Hashing is cheap on a
rerun: a file's sha256 is kept, in this process and in ``$LCP_LOCAL_CACHE/input_sha256.json``, under its path,
size, mtime and inode, and read again only when one of them changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from lc_pipeline.config import BenchmarkConfig, SourceConfig
from lc_pipeline.ids import short_id  # noqa: F401  (row ids live in ids.py, which needs no config; kept here for importers)

# The config fields a stage's output depends on, in groups: each asset declares the group it hashes beside its
# code version (assets/versions.py: ``declared``), and :func:`asset_fingerprint` hashes them.
SOURCE_FIELDS = ("sources",)
PASSAGE_FIELDS = SOURCE_FIELDS + ("passage_words", "tokenizer")
INDEX_FIELDS = PASSAGE_FIELDS + ("embedding_model",)
NEGATIVE_FIELDS = INDEX_FIELDS + ("retrieval_top_k", "hard_negatives_per_item")
# What changes the content of one instance (its item, level and depth are hashed separately).
INSTANCE_CONTENT_FIELDS = NEGATIVE_FIELDS + ("seed", "length_tolerance", "max_new_tokens", "cross_domain_fill",
                                             "length_unit")
# The task files (the config's own; the packaged ones are versioned with the code), the extra tasks, and the
# protocol in force (config.official_protocol: hashed only when official, with the authors' commit).
# ``only``: part of the config (lcp run --tasks / --limit), hashed only when set.
TASK_FIELDS = ("task_files_sha256", "tasks", "released", "protocol", "only")
# LV-Eval variants: facts and rules are made for the items the QA suite selects.
# The QA items they are made for depend on each item's prompt, hence on the task files too.
LVEVAL_FIELDS = SOURCE_FIELDS + ("seed", "tokenizer", "lengths", "items_per_length", "lveval") + TASK_FIELDS
INSTANCE_FIELDS = INSTANCE_CONTENT_FIELDS + ("lengths", "depths", "items_per_length", "longbench100", "helmet") + \
    TASK_FIELDS + ("lveval",)
PRIOR_FIELDS = INSTANCE_FIELDS + ("prior_knowledge",)
LONG_FIELDS = PRIOR_FIELDS + ("base_lengths", "long_lengths")


def asset_fingerprint(stage: str, code_version: str, fields: tuple[str, ...], config: BenchmarkConfig,
                      model_fingerprint: str | None = None) -> str:
    """The data version of ``stage``'s output: its code version, the config ``fields`` it declares, what else it
    adds (a model's settings fingerprint, ...) and, when it reads the sources, their input files' content."""
    parts = [stage, code_version, config.fingerprint(*fields), model_fingerprint or ""]
    data = config_input_sha256(config) if "sources" in fields else ""
    if data:  # a config without input files keeps the fingerprint it had before input data was hashed
        parts.append(data)
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------ input data content

INPUT_CACHE_FILE = "input_sha256.json"
_memo: dict[str, tuple[int, int, int, str]] = {}  # resolved path -> (size, mtime_ns, inode, sha256)
_memo_lock = threading.Lock()
_loaded: list[bool] = []  # [True] once the cache file was read into _memo
_dirty: list[bool] = []  # entries added to _memo since the cache file was written


def _cache_path() -> Path:
    from lc_pipeline.settings import DEFAULT_LOCAL_CACHE, env

    return Path(env("LCP_LOCAL_CACHE") or DEFAULT_LOCAL_CACHE) / INPUT_CACHE_FILE


def _load_cache() -> None:
    if _loaded:
        return
    _loaded.append(True)
    try:
        stored = json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return
    if isinstance(stored, dict):
        for path, entry in stored.items():  # files gone since (a test's temporary folder) are forgotten
            if isinstance(entry, list) and len(entry) == 4 and os.path.exists(path):
                _memo.setdefault(path, tuple(entry))


def _save_cache() -> None:
    path = _cache_path()
    entries = {k: list(v) for k, v in _memo.items()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, path)
    except OSError:  # a read-only cache folder: the sha256s are computed again next time, nothing else changes
        pass


def file_sha256(path: Path, save: bool = True) -> str:
    """The sha256 (hex) of a regular file's bytes, from the cache when its size, mtime and inode are unchanged
    (``save=False``: the cache file is written later, by the caller's :func:`_save_cache`)."""
    st = path.stat()
    key = str(path)
    with _memo_lock:
        _load_cache()
        hit = _memo.get(key)
        if hit is not None and tuple(hit[:3]) == (st.st_size, st.st_mtime_ns, st.st_ino):
            return hit[3]
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()
    with _memo_lock:
        _memo[key] = (st.st_size, st.st_mtime_ns, st.st_ino, sha)
        if save:
            _save_cache()
        else:
            _dirty.append(True)
    return sha


def _option_paths(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _option_paths(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _option_paths(v)


def _files_under(root: Path) -> list[tuple[str, Path]]:
    """(relative name, path) of every regular file under the folder ``root``, hidden entries left out, sorted."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        prefix = os.path.relpath(folder, root)
        for name in files:
            path = os.path.join(folder, name)
            if not name.startswith(".") and os.path.isfile(path):
                out.append((name if prefix == "." else f"{prefix}/{name}", Path(path)))
    return sorted(out)


def source_input_files(source: SourceConfig, listings: dict | None = None) -> list[tuple[str, str, Path]]:
    """(option, name, path) of every file the source's options name: each option value (a string, or a list of
    them) that is an existing file or folder once ``$LCP_DATA`` is expanded; a folder's regular files recursively
    (``name`` relative to it), hidden ones left out. Values that are not paths (a task name, a label) name
    nothing here. ``listings``: folder -> its files, shared by the sources of one config (HELMET's name one
    folder each)."""
    from lc_pipeline.settings import expand_data_dir

    listings = {} if listings is None else listings
    out = []
    for option in sorted(source.options):
        for value in _option_paths(expand_data_dir(source.options[option])):
            if not value or "\x00" in value:
                continue
            path = Path(value)
            try:
                if path.is_file():
                    out.append((option, path.name, path.resolve()))
                elif path.is_dir():
                    if value not in listings:
                        listings[value] = _files_under(path.resolve())
                    out += [(option, name, p) for name, p in listings[value]]
            except OSError:  # an unreadable entry: the adapter says why when it reads it
                continue
    return out


def source_input_sha256(source: SourceConfig, listings: dict | None = None) -> str:
    """The sha256 of the content of the files ``source`` reads (:func:`source_input_files`), with their names;
    "" when it names none. ``listings``: as for :func:`source_input_files`; a folder's digest is kept there too,
    so sources naming one folder stat its files once."""
    from lc_pipeline.settings import expand_data_dir

    listings = {} if listings is None else listings
    outer, named = hashlib.sha256(), False
    try:
        for option in sorted(source.options):
            for value in _option_paths(expand_data_dir(source.options[option])):
                key = ("digest", value)
                if key not in listings:
                    files = source_input_files(SourceConfig(source.name, source.kind, {option: value}), listings)
                    inner = hashlib.sha256()
                    for _, name, path in files:
                        inner.update(f"{name}\x00{file_sha256(path, save=False)}\n".encode())
                    listings[key] = inner.hexdigest() if files else ""
                if listings[key]:
                    named = True
                    outer.update(f"{option}\x00{listings[key]}\n".encode())
    finally:
        with _memo_lock:
            if _dirty:  # once for every file hashed now, not once per file
                _save_cache()
                _dirty.clear()
    return outer.hexdigest() if named else ""


def config_input_sha256(config: BenchmarkConfig) -> str:
    """The sha256 of every source's input data (:func:`source_input_sha256`), "" when no source names a file."""
    listings: dict = {}
    parts = [(s.name, source_input_sha256(s, listings)) for s in config.sources]
    if not any(sha for _, sha in parts):
        return ""
    return hashlib.sha256("".join(f"{name}\x00{sha}\n" for name, sha in parts).encode()).hexdigest()


INSTANCES_CODE_VERSION = "8"  # 8: protocol; 7: record_id and record_fields; 6: benchmark and all_classes, task files' prompts


def instances_fingerprint(config: BenchmarkConfig) -> str:
    """The data version the instances of ``config`` record (what lake.built_by holds), without Dagster: the
    instances asset declares the same code version and fields (assets/instances.py)."""
    return asset_fingerprint("instances", INSTANCES_CODE_VERSION, INSTANCE_FIELDS, config)
