"""source_documents, source_items: one partition per configured source."""


import dagster as dg

from lc_pipeline import schemas
from lc_pipeline.assets.common import FINGERPRINT_KEY, preview
from lc_pipeline.fingerprints import stage_fingerprint
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource
from lc_pipeline.sources.loader import load_source


def build(parts: Partitions) -> list:
    @dg.multi_asset(
        outs={
            "source_documents": dg.AssetOut(description="Normalized documents of each source", kinds={"parquet"}),
            "source_items": dg.AssetOut(
                description="Questions with gold answers, answer keywords and evidence document ids",
                kinds={"parquet"},
            ),
        },
        partitions_def=parts.source,
        group_name="sources",
    )
    def sources(context: dg.AssetExecutionContext, benchmark: BenchmarkResource):
        config = benchmark.load()
        name = context.partition_key
        by_name = {s.name: s for s in config.sources}
        if name not in by_name:
            raise dg.Failure(
                f"source partition {name!r} is not in config {config.name!r} (sources: {sorted(by_name)})",
                allow_retries=False,
            )
        documents, items = load_source(by_name[name])
        documents = schemas.conform(documents, "source_documents")
        items = schemas.conform(items, "source_items")
        yield dg.Output(
            documents,
            "source_documents",
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("source_documents", config),
                "documents": documents.height,
                "preview": preview(documents.select("doc_id", "title", "entity_type", "text")),
            },
        )
        yield dg.Output(
            items,
            "source_items",
            metadata={
                FINGERPRINT_KEY: stage_fingerprint("source_items", config),
                "items": items.height,
                "items_by_task": dg.MetadataValue.json(
                    dict(items.group_by("task").len().sort("task").iter_rows())
                ),
                "preview": preview(items.select("item_id", "task", "question", "answers")),
            },
        )

    return [sources]
