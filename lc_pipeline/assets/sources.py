"""source_documents, source_items: one partition per configured source."""


import dagster as dg

from lc_pipeline import schemas
from lc_pipeline.assets.common import preview
from lc_pipeline.assets.versions import declared, own_fingerprint, versioned
from lc_pipeline.fingerprints import SOURCE_FIELDS, source_input_sha256
from lc_pipeline.partitions import Partitions
from lc_pipeline.resources import BenchmarkResource
from lc_pipeline.sources.loader import load_source


def build(parts: Partitions) -> list:
    @dg.multi_asset(
        outs={
            "source_documents": dg.AssetOut(description="Normalized documents of each source", kinds={"parquet"},
                                            **declared("1", SOURCE_FIELDS)),
            "source_items": dg.AssetOut(
                description="Questions with gold answers, answer keywords and evidence document ids",
                kinds={"parquet"}, **declared("2", SOURCE_FIELDS),
            ),
            "rejected_records": dg.AssetOut(
                description="Records the adapter refused (on_error: reject), with file, record, field and reason",
                kinds={"parquet"}, **declared("1", SOURCE_FIELDS),
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
        loaded = load_source(by_name[name])
        documents = schemas.conform(loaded.documents, "source_documents")
        items = schemas.conform(loaded.items, "source_items")
        rejected = loaded.rejected(name)
        counts = {
            # the content of the files the source's options name (fingerprints.source_input_sha256; "" for none):
            # part of every stage fingerprint from here on, so changed data is built again (issue 31)
            "input_sha256": source_input_sha256(by_name[name]),
            "records_read": sum(r.records for r in loaded.reports) if loaded.reports else items.height,
            "records_accepted": sum(r.accepted for r in loaded.reports) if loaded.reports else items.height,
            "records_rejected": rejected.height,
            "files_read": len(loaded.reports),
            # every entry of a source folder not read, with the reason (a subfolder, an unknown extension)
            "files_skipped": dg.MetadataValue.json([str(s) for s in loaded.skipped]),
        }
        for note in loaded.notes():
            context.log.info(note)
        yield versioned(
            documents, own_fingerprint(context, config, name="source_documents"), "source_documents",
            metadata={
                "documents": documents.height,
                "preview": preview(documents.select("doc_id", "title", "entity_type", "text")),
            },
        )
        yield versioned(
            items, own_fingerprint(context, config, name="source_items"), "source_items",
            metadata={
                "items": items.height,
                **counts,
                "items_by_task": dg.MetadataValue.json(
                    dict(items.group_by("task").len().sort("task").iter_rows())
                ),
                "preview": preview(items.select("item_id", "task", "question", "answers")),
            },
        )
        yield versioned(
            rejected, own_fingerprint(context, config, name="rejected_records"), "rejected_records",
            metadata={
                **counts,
                "first_reasons": dg.MetadataValue.json(
                    [f"{r['file']} record {r['record_index']} (id {r['record_id']!r}): field {r['field']!r}: {r['reason']}"
                     for r in rejected.head(10).iter_rows(named=True)]
                ),
            },
        )

    return [sources]
