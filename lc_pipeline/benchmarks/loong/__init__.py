"""Loong (MozerWang/Loong): the benchmark's own package."""

from pathlib import Path


def register(registries) -> None:
    """Loong's builder, judge rubric, source kind and file kind (tasks.registry)."""
    registries.task_files(Path(__file__).parent / "task_files")
    registries.source_kind_benchmark("loong", "loong")  # its items are tasks of its task files
    # Loong's items, their documents assembled
    registries.builders.register("loong.released", "lc_pipeline.benchmarks.loong.released_build:loong_released")
    # its documents' header lines, by which the policy drop_documents cuts a released context (construct/truncation)
    registries.document_splitters.register("loong", "lc_pipeline.benchmarks.loong.released_build:split_documents")
    registries.rubrics.register("loong", "lc_pipeline.benchmarks.loong.rubrics:LOONG")
    registries.official_rubrics.register("loong", "lc_pipeline.benchmarks.loong.judging:official_rubric")
    registries.source_kinds.register("loong", "lc_pipeline.benchmarks.loong.sources:loong_source")
    registries.file_kind("loong", {"id", "doc", "question", "instruction", "answer", "level", "type"},
                         "lc_pipeline.benchmarks.loong.sources:validate_loong_files")
