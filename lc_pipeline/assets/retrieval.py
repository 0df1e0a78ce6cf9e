"""The retrieval group: passages, passage_index, hard_negatives (HELMET-style hard negatives; the
work is construct/chunking.py, construct/retrieval.py and construct/passage_embeddings.py)."""

import dagster as dg
import numpy as np
import polars as pl

from lc_pipeline import schemas
from lc_pipeline.assets.common import (
    ALL_SOURCES,
    configured_sources,
    json_metadata,
    preview,
)
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.passage_embeddings import (
    embedding_cache,
    encode_in_chunks,
    negatives_metadata,
    passage_index_frame,
)
from lc_pipeline.construct.retrieval import (
    IndexSettings,
    build_index,
    sample_rows,
    select_hard_negatives,
)
from lc_pipeline.fingerprints import INDEX_FIELDS, NEGATIVE_FIELDS, PASSAGE_FIELDS
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import (
    BenchmarkResource,
    EmbedderResource,
    LakeResource,
    TokenizerResource,
    VectorIndexResource,
)
from lc_pipeline.sources.loader import retrieval_sources


class PassageIndexConfig(dg.Config):
    """Run config of passage_index (defaults: construct.retrieval.IndexSettings)."""

    kind: str = "auto"  # auto | exact | hnsw | ivf
    ann_min_vectors: int = IndexSettings.ann_min_vectors  # approximate index at or above this many passages
    target_recall: float = IndexSettings.target_recall  # recall@10 vs exact search the search breadth is tuned to
    recall_queries: int = IndexSettings.recall_queries
    use_embedding_cache: bool = True

    def settings(self, use_gpu: bool | None) -> IndexSettings:
        return IndexSettings(kind=self.kind, ann_min_vectors=self.ann_min_vectors, target_recall=self.target_recall,
                             recall_queries=self.recall_queries, use_gpu=use_gpu)


def build(parts: Partitions) -> list:
    @dg.asset(
        ins={"source_documents": ALL_SOURCES},
        group_name="retrieval", **declared("1", PASSAGE_FIELDS, serves="constructed"),
        kinds={"parquet"},
        description="Documents chunked into ~100-word passages (HELMET/KILT style) with token counts",
    )
    def passages(context: dg.AssetExecutionContext, source_documents: pl.DataFrame, benchmark: BenchmarkResource,
                 tokenizer: TokenizerResource):
        config = benchmark.load()
        docs = configured_sources(source_documents, config, "source_documents").filter(
            pl.col("source").is_in(retrieval_sources(config.sources)))  # sources with their own contexts: not chunked
        out = chunk_documents(docs.select(schemas.SOURCE_DOCUMENTS.names()), config.passage_words, tokenizer.counter())
        return versioned(
            out, own_fingerprint(context, config),
            metadata={
                "passages": out.height,
                "mean_tokens": float(out["n_tokens"].mean() or 0),
                "preview": preview(out.select("passage_id", "n_words", "n_tokens", "text")),
            },
        )

    @dg.asset(
        ins={"source_items": ALL_SOURCES},
        group_name="retrieval", **declared("2", INDEX_FIELDS, serves="constructed"),
        kinds={"faiss", "parquet"},
        description="Sentence-transformers embeddings of every passage and a FAISS inner-product index over them "
                    "(an approximate index is tuned on the items' questions, the queries hard_negatives asks)",
    )
    def passage_index(context: dg.AssetExecutionContext, config: PassageIndexConfig, passages: pl.DataFrame,
                      source_items: pl.DataFrame, benchmark: BenchmarkResource, embedder: EmbedderResource,
                      vector_index: VectorIndexResource, lake: LakeResource):
        bench = benchmark.load()
        emb = embedder.embedder()
        if emb.model_name != bench.embedding_model:
            raise dg.Failure(
                f"embedder resource uses {emb.model_name!r} but config {bench.name!r} asks for {bench.embedding_model!r}",
                allow_retries=False,
            )
        cache = embedding_cache(lake.base_dir, bench.embedding_model) if config.use_embedding_cache else None
        vectors, stats = encode_in_chunks(emb, passages["text"].to_list(), cache, context.log)
        settings = config.settings(vector_index.use_gpu)

        def question_vectors() -> np.ndarray:
            # Only an approximate index asks; the sample's vectors land in the cache hard_negatives reads.
            questions = configured_sources(source_items, bench, "source_items")["question"].to_list()
            sample = [questions[i] for i in sample_rows(len(questions), settings.recall_queries, settings.seed)]
            return emb.encode(sample, cache=cache)

        built = build_index(vectors, settings, queries=question_vectors)
        path = vector_index.save(built.index)
        context.log.info(
            f"embedded {stats.encoded} of {stats.texts} passages in {stats.seconds:.1f}s ({stats.cache_hits} cached); "
            f"{built.kind} index at {path}"
        )
        out = passage_index_frame(passages["passage_id"], vectors, bench.embedding_model)
        return versioned(
            out, own_fingerprint(context, bench),
            metadata={
                "ntotal": int(built.index.ntotal),
                "dimension": int(vectors.shape[1]),
                "embedding_model": bench.embedding_model,
                "index_path": dg.MetadataValue.path(str(path)),
                "embed_seconds": round(stats.seconds, 2),
                "embedded_new": stats.encoded,
                "embedding_cache_hits": stats.cache_hits,
                **json_metadata(built.metadata()),
            },
        )

    @dg.asset(
        ins={"source_items": ALL_SOURCES},
        group_name="retrieval", **declared("2", NEGATIVE_FIELDS, serves="constructed"),
        kinds={"faiss", "parquet"},
        description="Per item: top-ranked passages for the question that contain no gold answer, with scores",
    )
    def hard_negatives(context: dg.AssetExecutionContext, source_items: pl.DataFrame, passages: pl.DataFrame,
                       passage_index: pl.DataFrame, benchmark: BenchmarkResource, embedder: EmbedderResource,
                       vector_index: VectorIndexResource, lake: LakeResource):
        config = benchmark.load()
        items = configured_sources(source_items, config, "source_items").filter(
            pl.col("source").is_in(retrieval_sources(config.sources)))  # items with their own contexts: none needed
        index = vector_index.load_for_search()
        queries = embedder.embedder().encode(
            items["question"].to_list(), cache=embedding_cache(lake.base_dir, config.embedding_model)
        )
        out = select_hard_negatives(
            items,
            passages,
            index,
            passage_index.sort("row")["passage_id"].to_list(),
            queries,
            top_k=config.retrieval_top_k,
            keep=config.hard_negatives_per_item,
        )
        return versioned(
            out, own_fingerprint(context, config),
            metadata={
                **negatives_metadata(items, out),
                "preview": preview(out.head(10)),
            },
        )

    return [passages, passage_index, hard_negatives]
