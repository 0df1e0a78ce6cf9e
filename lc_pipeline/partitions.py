"""Partitions: static length levels (from the benchmark config) x dynamic models; dynamic sources.

Model and source names become partition keys and directory names, so they are validated
slugs: Dagster itself accepts ``|``, ``/`` and ``,`` in dynamic keys and then silently drops
the key from multi-partition spaces or nests directories.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from lc_pipeline.generate.registry import validate_model_slug
from lc_pipeline.lake_files import LENGTH_DIM, MODEL_DIM, SOURCE_DIM

model_partitions = dg.DynamicPartitionsDefinition(name=MODEL_DIM)
source_partitions = dg.DynamicPartitionsDefinition(name=SOURCE_DIM)


def validate_source_name(name: str) -> str:
    """Source names follow the same slug rule as model names."""
    try:
        return validate_model_slug(name)
    except ValueError as exc:
        raise ValueError(str(exc).replace("model", "source")) from None


@dataclass(frozen=True)
class Partitions:
    lengths: tuple[str, ...]

    @property
    def length(self) -> dg.StaticPartitionsDefinition:
        return dg.StaticPartitionsDefinition(list(self.lengths))

    @property
    def length_x_model(self) -> dg.MultiPartitionsDefinition:
        return dg.MultiPartitionsDefinition({LENGTH_DIM: self.length, MODEL_DIM: model_partitions})

    @property
    def model(self) -> dg.DynamicPartitionsDefinition:
        return model_partitions

    @property
    def source(self) -> dg.DynamicPartitionsDefinition:
        return source_partitions


def length_model_key(length: str, model: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({LENGTH_DIM: length, MODEL_DIM: model})
