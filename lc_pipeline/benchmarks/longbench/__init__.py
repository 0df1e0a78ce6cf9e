"""LongBench v1 and LongBench-E (THUDM/LongBench): the benchmark's own package."""

from pathlib import Path


def register(registries) -> None:
    """LongBench's metrics, source kind and file kind (tasks.registry)."""
    registries.task_files(Path(__file__).parent / "task_files")
    registries.source_kind_benchmark("longbench", "longbench")  # its items are tasks of its task files
    metrics = {
        "longbench.qa_f1": "LONGBENCH_QA_F1", "longbench.qa_f1_zh": "LONGBENCH_QA_F1_ZH",
        "longbench.rouge": "LONGBENCH_ROUGE", "longbench.rouge_zh": "LONGBENCH_ROUGE_ZH",
        "longbench.classification": "LONGBENCH_CLASSIFICATION", "longbench.retrieval": "LONGBENCH_RETRIEVAL",
        "longbench.retrieval_zh": "LONGBENCH_RETRIEVAL_ZH", "longbench.count": "LONGBENCH_COUNT",
        "longbench.code_sim": "LONGBENCH_CODE_SIM",
    }
    for name, attribute in metrics.items():
        registries.metrics.register(name, f"lc_pipeline.benchmarks.longbench.metrics:{attribute}")
    registries.source_kinds.register("longbench", "lc_pipeline.benchmarks.longbench.sources:longbench_source")
    registries.file_kind("longbench", {"_id", "dataset", "context", "input", "answers"},
                         "lc_pipeline.benchmarks.longbench.sources:validate_longbench_files")
