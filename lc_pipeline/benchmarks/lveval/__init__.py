"""LV-Eval (infinigence/LVEval): the benchmark's own package."""


def register(registries) -> None:
    """LV-Eval's builder, metric, source kind and file kind (tasks.registry)."""
    registries.builders.register("lveval.factrecall", "lc_pipeline.construct.builders:lveval_factrecall")
    registries.metrics.register("lveval", "lc_pipeline.score.task_metrics:LVEVAL")
    registries.source_kinds.register("lveval", "lc_pipeline.benchmarks.lveval.sources:lveval_source")
    registries.file_kind("lveval", {"input", "context", "answers", "answer_keywords"},
                         "lc_pipeline.benchmarks.lveval.sources:validate_lveval_files")
