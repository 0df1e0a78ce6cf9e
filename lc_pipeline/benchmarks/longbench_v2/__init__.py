"""LongBench v2 (THUDM/LongBench): the benchmark's own package."""

from pathlib import Path


def register(registries) -> None:
    """LongBench v2's metric, source kind and file kind (tasks.registry)."""
    registries.task_files(Path(__file__).parent / "task_files")
    registries.source_kind_benchmark("longbench_v2", "longbench_v2")  # its items are tasks of its task files
    registries.metrics.register("longbench_v2.choice", "lc_pipeline.benchmarks.longbench_v2.metrics:CHOICE")
    registries.source_kinds.register("longbench_v2", "lc_pipeline.benchmarks.longbench_v2.sources:longbench_v2_source")
    registries.file_kind("longbench_v2", {"_id", "domain", "difficulty", "length", "question", "choice_A", "answer"},
                         "lc_pipeline.benchmarks.longbench_v2.sources:validate_longbench_v2_files")
