"""Where things live, from the environment (with project-relative defaults).

LCP_CONFIG       benchmark config: packaged name (demo, default) or YAML path             [demo]
LCP_LAKE         Parquet lake: a directory or any fsspec URL (s3://bucket/lake, gs://...)  [./data_lake]
LCP_MODELS       model registry file (models added with `lcp add-model`)                   [./models.yaml]
LCP_LOCAL_CACHE  node-local cache for what cannot live in an object store (the judge's
                 SQLite reply cache when LCP_LAKE is a URL)                     [~/.cache/lc_pipeline]
DAGSTER_HOME     Dagster instance directory (dagster.yaml: SQLite or Postgres storage)     [./.dagster]
LCP_EXECUTOR     how a run's steps execute: multiprocess | k8s | celery                    [multiprocess]
LCP_EXECUTOR_CONFIG  YAML file with that executor's config (deploy/<profile>/executor.yaml)  [none]
LCP_OFFICIAL     the benchmark authors' checkouts as <owner>+<repo>/<path> (the layout of ../shared/official),
                 read before the cache and the network (lc_pipeline/official.py)           [none]
LCP_OFFICIAL_URL host of the authors' files at pinned commits: <url>/<owner>/<repo>/<commit>/<path>
                                                                  [https://raw.githubusercontent.com]
LCP_DATA         where the released benchmarks' files live: ``$LCP_DATA`` in a source option
                 (the packaged configs read $LCP_DATA/<config>/)                           [./data]
LCP_TASKS        run only these of the config's tasks, comma-separated (`lcp run --tasks`)  [all]
LCP_LIMIT        at most this many instances per task and length level (`lcp run --limit`) [all]

A bucket's credentials are not settings: s3fs / gcsfs read them from the environment
(see :mod:`lc_pipeline.storage`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lc_pipeline import storage

# Every environment variable the package reads, with what it sets (issue 32 "settings in one place"): read through
# :func:`env` (or :func:`key_in`, for the key variable a model or judge names), listed by `lcp --help`, documented in
# docs/environment.md. No other module reads os.environ (tests/unit/test_environment_documented.py).
VARIABLES: dict[str, str] = {
    "LCP_CONFIG": "the benchmark config of a command without --config (packaged name or YAML path)",
    "LCP_LAKE": "the Parquet lake: a folder or an fsspec URL (lcp --lake sets it)",
    "LCP_MODELS": "the model registry file",
    "LCP_DATA": "where released benchmarks' files live ($LCP_DATA in a source path)",
    "LCP_PROJECT_DIR": "the folder relative defaults are taken from",
    "LCP_LOCAL_CACHE": "node-local cache (the authors' fetched files, the judge's cache for a bucket lake)",
    "LCP_CACHE_DIR": "where GGUF models converted for transformers / vLLM are kept",
    "DAGSTER_HOME": "the Dagster instance (run and event storage)",
    "LCP_TASKS": "run only these of the config's tasks, comma-separated (lcp run --tasks)",
    "LCP_LIMIT": "at most this many instances per task and level (lcp run --limit)",
    "LCP_EXECUTOR": "how a run's steps execute: multiprocess | k8s | celery",
    "LCP_EXECUTOR_CONFIG": "that executor's YAML config",
    "LCP_GPU_POOL_SLOTS": "generation steps that run at once (the gpu pool)",
    "CUDA_VISIBLE_DEVICES": "read to count the GPUs for the gpu pool",
    "LCP_DAGSTER_URL": "a running lcp ui that lcp backfill --url launches on",
    "LCP_VLLM_SERVER_START_S": "how long a managed vllm serve may take to answer",
    "LCP_VLLM_SERVER_API_KEY": "the key sent to the vllm serve the project manages",
    "LCP_LLAMACPP_EXTRA_BUFTS": "1 keeps llama.cpp's repacked extra buffer types",
    "OPENAI_BASE_URL": "the server of an openai model without --base-url, and of the LLM judge",
    "OPENAI_API_KEY": "the key sent to those servers (never printed, logged or stored)",
    "LCP_JUDGE_MODEL": "the LLM judge's model",
    "LCP_NLI_BACKEND": "the NLI judge of citation metrics",
    "LCP_NLI_MODEL": "that NLI judge's model",
    "LCP_OFFICIAL": "a folder of the benchmark authors' checkouts (<owner>+<repo>/<path>)",
    "LCP_OFFICIAL_URL": "the host the authors' files are fetched from at pinned commits",
    "LCP_OFFLINE": "1: never fetch the authors' files",
    "HF_HUB_OFFLINE": "the Hugging Face switch: no download when set",
    "HF_DATASETS_OFFLINE": "the same for datasets",
}
_TRUE = frozenset({"1", "true", "yes", "on"})


def env(name: str) -> str | None:
    """Environment variable ``name`` as set (None when unset); ``name`` must be one of :data:`VARIABLES`."""
    if name not in VARIABLES:
        raise KeyError(f"{name}: not a setting of the package (settings.VARIABLES)")
    return os.environ.get(name)


def env_flag(name: str) -> bool:
    """Whether switch ``name`` is on (``1``, ``true``, ``yes``, ``on``, any case)."""
    return (env(name) or "").strip().lower() in _TRUE


def first_switched_on(names: tuple[str, ...]) -> str | None:
    """The first of ``names`` that is on (:func:`env_flag`), else None (e.g. the Hugging Face offline switches)."""
    return next((name for name in names if env_flag(name)), None)


def key_in(variable: str) -> str | None:
    """The API key held by environment variable ``variable``: the name a model's or the judge's ``api_key_env``
    gives (the user chooses it, so it is not in :data:`VARIABLES`). The value is a secret: callers send it and
    never print, log or store it."""
    return os.environ.get(variable) or None


def variables_help() -> str:
    """:data:`VARIABLES` as lines for `lcp --help`."""
    width = max(map(len, VARIABLES))
    return "\n".join(f"{name.ljust(width)}  {what}" for name, what in VARIABLES.items())


DEFAULT_LOCAL_CACHE = Path("~/.cache/lc_pipeline").expanduser()
DEFAULT_OFFICIAL_URL = "https://raw.githubusercontent.com"
DATA_DIR_VARIABLE = "LCP_DATA"  # where the released benchmarks' files live (default ./data)


@dataclass(frozen=True)
class Settings:
    project_dir: Path
    config: str
    lake_dir: Path  # a local Path, or a upath.UPath for an fsspec URL (same pathlib API)
    models_file: Path
    dagster_home: Path
    local_cache_dir: Path = DEFAULT_LOCAL_CACHE
    executor: str = "multiprocess"
    executor_config: Path | None = None
    official_dir: Path | None = None  # the authors' checkouts (LCP_OFFICIAL); None: cache, then network
    official_url: str = DEFAULT_OFFICIAL_URL
    # Part of the config (``lcp run --tasks`` / ``--limit``, config.RunSelection): its tasks (empty: all) and the
    # most instances per task and level (None: all). lcp sets LCP_TASKS / LCP_LIMIT for the runs it starts.
    tasks: tuple[str, ...] = ()
    limit: int | None = None

    @classmethod
    def from_env(cls, project_dir: str | Path | None = None) -> Settings:
        root = Path(project_dir or env("LCP_PROJECT_DIR") or Path.cwd()).resolve()

        def path(var: str, default: str) -> Path:
            p = Path(env(var) or default)
            return (p if p.is_absolute() else root / p).resolve()

        lake = storage.lake_path(env("LCP_LAKE") or "data_lake")
        if storage.is_local(lake):
            lake = (lake if lake.is_absolute() else root / lake).resolve()
        return cls(
            project_dir=root,
            config=env("LCP_CONFIG") or "demo",
            lake_dir=lake,
            models_file=path("LCP_MODELS", "models.yaml"),
            dagster_home=path("DAGSTER_HOME", ".dagster"),
            local_cache_dir=path("LCP_LOCAL_CACHE", str(DEFAULT_LOCAL_CACHE)),
            executor=(env("LCP_EXECUTOR") or "multiprocess").strip().lower(),
            executor_config=path("LCP_EXECUTOR_CONFIG", "") if env("LCP_EXECUTOR_CONFIG") else None,
            official_dir=path("LCP_OFFICIAL", "") if env("LCP_OFFICIAL") else None,
            official_url=(env("LCP_OFFICIAL_URL") or DEFAULT_OFFICIAL_URL).rstrip("/"),
            tasks=tuple(t.strip() for t in (env("LCP_TASKS") or "").split(",") if t.strip()),
            limit=_positive_int("LCP_LIMIT", env("LCP_LIMIT")),
        )

    @property
    def lake_url(self) -> str:
        """The lake as resources take it: an absolute directory or a URL."""
        return storage.url(self.lake_dir)

    @property
    def lake_is_local(self) -> bool:
        return storage.is_local(self.lake_dir)

    @property
    def judge_cache_path(self) -> Path:
        """SQLite needs a real file system: beside the tables for a local lake, else node-local."""
        if self.lake_is_local:
            return Path(self.lake_dir) / "_cache" / "judge.sqlite"
        return Path(self.local_cache_dir) / "judge.sqlite"


def _positive_int(var: str, value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"${var}={value!r}: expected a whole number >= 1")
    return number


def cli_settings(config: str | None) -> Settings:
    """The settings of an ``lcp`` command: ``--config`` (if given) as ``LCP_CONFIG``, then the environment;
    DAGSTER_HOME (default ./.dagster) made, with the project's dagster.yaml copied into it."""
    if config:
        os.environ["LCP_CONFIG"] = config
    s = Settings.from_env()
    s.dagster_home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(s.dagster_home)
    template = s.project_dir / "dagster.yaml"
    target = s.dagster_home / "dagster.yaml"
    if template.exists() and (not target.exists() or target.read_text() != template.read_text()):
        import shutil

        # Temp file + rename: a second lcp starting at the same moment reads the old file or the
        # new one, never a half-copied one.
        with storage.replacing(target) as tmp:
            shutil.copyfile(template, tmp)
    return s


def data_dir() -> Path:
    """``$LCP_DATA``, or ``./data`` when unset: the packaged benchmark configs read ``$LCP_DATA/<config>/``."""
    return Path(os.environ.get(DATA_DIR_VARIABLE) or "data")


def expand_data_dir(value: Any) -> Any:
    """``$LCP_DATA`` / ``${LCP_DATA}`` in a source option (a string or a list of them) -> :func:`data_dir`."""
    if isinstance(value, str):
        for token in ("${" + DATA_DIR_VARIABLE + "}", "$" + DATA_DIR_VARIABLE):
            value = value.replace(token, str(data_dir()))
        return value
    if isinstance(value, list | tuple):
        return [expand_data_dir(v) for v in value]
    return value
