"""Source adapters by kind: each returns (documents, items) in the source table schemas."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from lc_pipeline.config import SourceConfig


def _demo_corpus(source: SourceConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    from lc_pipeline.sources.demo_corpus import build_demo_corpus

    return build_demo_corpus(source=source.name, **source.options)


def _longbench(source: SourceConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    from lc_pipeline.sources.longbench import longbench_source

    return longbench_source(source)


SOURCE_KINDS: dict[str, Callable[[SourceConfig], tuple[pl.DataFrame, pl.DataFrame]]] = {
    "demo_corpus": _demo_corpus,
    "longbench": _longbench,
}


def load_source(source: SourceConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    try:
        adapter = SOURCE_KINDS[source.kind]
    except KeyError:
        raise ValueError(f"source {source.name!r}: unknown kind {source.kind!r}; known kinds: {sorted(SOURCE_KINDS)}") from None
    try:
        return adapter(source)
    except TypeError as exc:  # unknown option names surface here
        raise ValueError(f"source {source.name!r} (kind {source.kind!r}): {exc}") from exc
