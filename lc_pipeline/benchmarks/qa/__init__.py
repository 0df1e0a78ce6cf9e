"""Our constructed QA suite: evidence documents, FAISS hard negatives and fillers assembled to each length level."""

from pathlib import Path


def register(registries) -> None:
    """The QA suite's builder (tasks.registry)."""
    registries.task_files(Path(__file__).parent / "task_files")
    registries.builders.register("qa.assemble", "lc_pipeline.benchmarks.qa.suite:assemble")
    registries.item_builder("qa.assemble")  # its tasks are the sources' items'
    registries.batch_counts.register("qa.assemble", "lc_pipeline.benchmarks.qa.suite:batches")
