"""passages, passage_index, hard_negatives: the retrieval stage (HELMET-style hard negatives)."""


import dagster as dg
import numpy as np
import polars as pl

from lc_pipeline import schemas, storage
from lc_pipeline.assets.common import ALL_SOURCES, FINGERPRINT_KEY, configured_sources, preview
from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.retrieval import (
    EmbeddingCache,
    EncodeStats,
    IndexSettings,
    build_index,
    sample_rows,
    select_hard_negatives,
)
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import Partitions
from lc_pipeline.progress import Progress
from lc_pipeline.resources import (
    BenchmarkResource,
    EmbedderResource,
    LakeResource,
    TokenizerResource,
    VectorIndexResource,
)

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


def embedding_cache(lake: LakeResource, model: str) -> EmbeddingCache:
    # Beside the tables, never inside a table folder (DuckDB globs must not see it).
    return EmbeddingCache(storage.lake_path(lake.base_dir) / "_cache" / "embeddings", model)


EMBED_CHUNK = 1024  # passages per encode call: one progress step (and one cache shard) each


def encode_with_progress(
    context: dg.AssetExecutionContext, emb, texts: list[str], cache
) -> tuple[np.ndarray, EncodeStats]:
    """``emb.encode`` chunk by chunk with counts/ETA in the log; stats summed over the chunks."""
    if not texts:
        return emb.encode(texts, cache=cache), emb.last_stats
    parts, total = [], EncodeStats()
    with Progress(context.log, len(texts), "embed passages", unit="passage") as bar:
        for start in range(0, len(texts), EMBED_CHUNK):
            parts.append(emb.encode(texts[start:start + EMBED_CHUNK], cache=cache))
            s = emb.last_stats
            total = EncodeStats(total.texts + s.texts, total.unique + s.unique, total.cache_hits + s.cache_hits,
                                total.encoded + s.encoded, total.seconds + s.seconds)
            bar.update(s.texts)
    return np.concatenate(parts), total


def build(parts: Partitions) -> list:
    @dg.asset(
        ins={"source_documents": ALL_SOURCES},
        group_name="retrieval",
        kinds={"parquet"},
        description="Documents chunked into ~100-word passages (HELMET/KILT style) with token counts",
    )
    def passages(source_documents: pl.DataFrame, benchmark: BenchmarkResource, tokenizer: TokenizerResource):
        config = benchmark.load()
        docs = configured_sources(source_documents, config, "source_documents")
        out = chunk_documents(docs.select(schemas.SOURCE_DOCUMENTS.names()), config.passage_words, tokenizer.counter())
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("passages", config),
                "passages": out.height,
                "mean_tokens": float(out["n_tokens"].mean() or 0),
                "preview": preview(out.select("passage_id", "n_words", "n_tokens", "text")),
            },
        )

    @dg.asset(
        ins={"source_items": ALL_SOURCES},
        group_name="retrieval",
        kinds={"faiss", "parquet"},
        description="Sentence-transformers embeddings of every passage and a FAISS inner-product index over them "
                    "(an approximate index is tuned on the items' questions, the queries hard_negatives asks)",
    )
    def passage_index(
        context: dg.AssetExecutionContext,
        config: PassageIndexConfig,
        passages: pl.DataFrame,
        source_items: pl.DataFrame,
        benchmark: BenchmarkResource,
        embedder: EmbedderResource,
        vector_index: VectorIndexResource,
        lake: LakeResource,
    ):
        bench = benchmark.load()
        emb = embedder.embedder()
        if emb.model_name != bench.embedding_model:
            raise dg.Failure(
                f"embedder resource uses {emb.model_name!r} but config {bench.name!r} asks for {bench.embedding_model!r}",
                allow_retries=False,
            )
        cache = embedding_cache(lake, bench.embedding_model) if config.use_embedding_cache else None
        vectors, stats = encode_with_progress(context, emb, passages["text"].to_list(), cache)
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
        out = schemas.conform(
            pl.DataFrame(
                {
                    "row": range(len(vectors)),
                    "passage_id": passages["passage_id"],
                    "embedding": vectors.tolist(),
                    "embedding_model": [bench.embedding_model] * len(vectors),
                }
            ),
            "passage_index",
        )
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("passage_index", bench),
                "ntotal": int(built.index.ntotal),
                "dimension": int(vectors.shape[1]),
                "embedding_model": bench.embedding_model,
                "index_path": dg.MetadataValue.path(str(path)),
                "embed_seconds": round(stats.seconds, 2),
                "embedded_new": stats.encoded,
                "embedding_cache_hits": stats.cache_hits,
                **{k: (dg.MetadataValue.json(v) if isinstance(v, (dict, list)) else v)
                   for k, v in built.metadata().items()},
            },
        )

    @dg.asset(
        ins={"source_items": ALL_SOURCES},
        group_name="retrieval",
        kinds={"faiss", "parquet"},
        description="Per item: top-ranked passages for the question that contain no gold answer, with scores",
    )
    def hard_negatives(
        source_items: pl.DataFrame,
        passages: pl.DataFrame,
        passage_index: pl.DataFrame,
        benchmark: BenchmarkResource,
        embedder: EmbedderResource,
        vector_index: VectorIndexResource,
        lake: LakeResource,
    ):
        config = benchmark.load()
        items = configured_sources(source_items, config, "source_items")
        index = vector_index.load_for_search()
        queries = embedder.embedder().encode(
            items["question"].to_list(), cache=embedding_cache(lake, config.embedding_model)
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
        per_item = out.group_by("item_id").len()["len"]
        return dg.Output(
            out,
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("hard_negatives", config),
                "items": items.height,
                "negatives_per_item_min": int(per_item.min()),
                "negatives_per_item_mean": float(per_item.mean()),
                "mean_top1_score": float(out.filter(pl.col("rank") == 0)["score"].mean()),
                "preview": preview(out.head(10)),
            },
        )

    return [passages, passage_index, hard_negatives]
