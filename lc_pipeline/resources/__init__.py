from lc_pipeline.resources.benchmark import BenchmarkResource
from lc_pipeline.resources.embedder import EmbedderResource
from lc_pipeline.resources.generator import ModelsResource
from lc_pipeline.resources.lake import LakeResource
from lc_pipeline.resources.parquet_io import HiveParquetIOManager
from lc_pipeline.resources.tokenizer import TokenizerResource
from lc_pipeline.resources.vector_index import VectorIndexResource

__all__ = [
    "BenchmarkResource",
    "EmbedderResource",
    "HiveParquetIOManager",
    "LakeResource",
    "ModelsResource",
    "TokenizerResource",
    "VectorIndexResource",
]
