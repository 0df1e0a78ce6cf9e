"""LV-Eval (infinigence/LVEval): the benchmark's own package."""

from pathlib import Path


def register(registries) -> None:
    """LV-Eval's builder, metric, source kind and file kind (tasks.registry)."""
    registries.tables.register("lveval_ablation", "lc_pipeline.benchmarks.lveval.schemas:LVEVAL_ABLATION")
    registries.config_sections.register("lveval", "lc_pipeline.benchmarks.lveval.config:LVEvalConfig")
    registries.task_files(Path(__file__).parent / "task_files")
    registries.source_kind_benchmark("lveval", "lveval")  # its items are tasks of its task files
    registries.builders.register("lveval.factrecall", "lc_pipeline.benchmarks.lveval.factrecall:build")
    # factrecall's tasks when config section lveval asks for them (factrecall_positions), built first
    registries.task_selection("lveval", "lc_pipeline.benchmarks.lveval.factrecall:configured_tasks", 10)
    registries.metrics.register("lveval", "lc_pipeline.benchmarks.lveval.metrics:LVEVAL")
    registries.variant_metric("lveval")  # the CFI / KPR rows of any corpus compare on keyword recall
    registries.source_kinds.register("lveval", "lc_pipeline.benchmarks.lveval.sources:lveval_source")
    registries.file_kind("lveval", {"input", "context", "answers", "answer_keywords"},
                         "lc_pipeline.benchmarks.lveval.sources:validate_lveval_files")
