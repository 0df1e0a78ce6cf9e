"""Records from the Hugging Face Hub (``datasets.load_dataset``), for the source adapters.

:func:`hub_records` yields ``(index, dict)`` like :func:`validation.read_records`.
:func:`hub_to_file` writes those records to a local JSONL file named after the dataset
(or ``file_stem``), so an adapter validates Hub data with the same
:func:`validation.validate_file` path, messages and reports as a local file.

Errors are :class:`HubError` with a message saying what to do: ``datasets`` not installed,
the Hub switched off (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``), or the download failing.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lc_pipeline.settings import env, first_switched_on

__all__ = ["HubError", "hub_records", "hub_to_file"]



class HubError(RuntimeError):
    """A Hugging Face dataset could not be loaded."""


HUB_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def hub_offline_variable() -> str | None:
    """The Hugging Face switch that turns the Hub off (set to 1, true, yes or on), else None."""
    return first_switched_on(HUB_OFFLINE_VARIABLES)


def _label(dataset: str, name: str | None, split: str, revision: str | None) -> str:
    s = dataset + (f" (config {name!r})" if name else "") + f" split {split!r}"
    return s + (f" at revision {revision!r}" if revision else "")


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist") and not isinstance(value, str):  # numpy arrays
        value = value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def hub_records(
    dataset: str, *, name: str | None = None, split: str = "test", revision: str | None = None
) -> Iterator[tuple[int, dict]]:
    """Yield ``(index, record)`` for every row of a Hub dataset split (downloads it: online).

    Raises :class:`HubError` before anything is yielded when ``datasets`` is missing, the Hub
    is switched off by ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``, or the load fails.
    """
    label = _label(dataset, name, split, revision)
    var = hub_offline_variable()
    if var is not None:
        raise HubError(
            f"cannot load Hugging Face dataset {label}: the Hub is offline ({var}={env(var)!r}); "
            f"unset {var} and make sure huggingface.co is reachable, or download the files and use 'paths'"
        )
    try:
        import datasets  # type: ignore[import-not-found]
    except ImportError:
        raise HubError(
            f"cannot load Hugging Face dataset {label}: the 'datasets' package is not installed "
            "(pip install datasets), or download the files and use 'paths'"
        ) from None
    try:
        ds = datasets.load_dataset(dataset, name, split=split, revision=revision)
    except Exception as exc:  # network, auth, unknown config/split: all reach the user the same way
        raise HubError(f"cannot load Hugging Face dataset {label}: {type(exc).__name__}: {exc}") from exc

    def rows() -> Iterator[tuple[int, dict]]:
        for index, row in enumerate(ds):
            yield index, _plain(dict(row))

    return rows()


def hub_to_file(
    dataset: str,
    *,
    name: str | None = None,
    split: str = "test",
    revision: str | None = None,
    file_stem: str | None = None,
    directory: str | Path | None = None,
) -> Path:
    """Write a Hub split to ``{directory}/{file_stem}.jsonl`` and return the path.

    ``file_stem`` defaults to the config name or the dataset's last path part: adapters that
    read meaning from file names (LV-Eval's ``hotpotwikiqa_mixup_16k``) keep working.
    """
    records = hub_records(dataset, name=name, split=split, revision=revision)
    stem = file_stem or name or dataset.rsplit("/", 1)[-1]
    out_dir = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="lcp-hub-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for _, row in records:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    return path


HUB_OPTIONS = ("hf_dataset", "hf_name", "hf_split", "hf_revision")


def source_paths(options: dict, *, source: str, kind: str, path_keys: tuple[str, ...] = ("paths",),
                 file_stem: str | None = None) -> Any:
    """Pop the input location from a source's ``options``: local ``paths`` or a Hub dataset.

    ``hf_dataset`` (e.g. ``THUDM/LongBench``) with ``hf_name`` (one config name or a list:
    LongBench has one config per task; each becomes ``{name}.jsonl`` so adapters that read the
    task from the file name keep working), ``hf_split`` (default ``test``), ``hf_revision``.
    Local paths win when both are given. Raises ``ValueError`` naming the source when neither is.
    """
    paths = None
    for key in path_keys:
        value = options.pop(key, None)
        paths = value if paths is None else paths
    hf = {k: options.pop(k) for k in HUB_OPTIONS if k in options}
    if paths is None and "hf_dataset" in hf:
        names = hf.get("hf_name")
        names = names if isinstance(names, list | tuple) else [names]
        directory = Path(tempfile.mkdtemp(prefix="lcp-hub-"))
        paths = [
            hub_to_file(hf["hf_dataset"], name=n, split=hf.get("hf_split", "test"), revision=hf.get("hf_revision"),
                        file_stem=file_stem, directory=directory)
            for n in names
        ]
        paths = paths[0] if len(paths) == 1 else paths
    if paths is None:
        keys = " or ".join(repr(k) for k in path_keys)
        raise ValueError(f"source {source!r} ({kind}): option {keys} or 'hf_dataset' is required")
    return paths
