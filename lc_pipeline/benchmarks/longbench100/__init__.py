"""100-LongBench (uservan/100-LongBench): the benchmark's own package."""

from pathlib import Path


def register(registries) -> None:
    """100-LongBench's builder, metrics and judge rubrics (tasks.registry)."""
    registries.config_sections.register("longbench100", "lc_pipeline.benchmarks.longbench100.config:LongBench100Config")
    registries.config_sections.register("prior_knowledge",
                                          "lc_pipeline.benchmarks.longbench100.config:PriorKnowledgeConfig")
    registries.task_files(Path(__file__).parent / "task_files")
    registries.builders.register("longbench100", "lc_pipeline.benchmarks.longbench100.construction:build")
    registries.named_field_builder("longbench100")
    # the tasks of config section longbench100.tasks, built after LV-Eval's factrecall and before HELMET's
    registries.task_selection("longbench100", "lc_pipeline.benchmarks.longbench100.construction:configured_tasks", 20)
    registries.suite_rules.register("longbench100", "lc_pipeline.benchmarks.longbench100.construction:ROWS")
    metrics = {"lb100.kv_retrieval": "LB100_KV_RETRIEVAL", "lb100.first_integer": "LB100_FIRST_INTEGER",
               "lb100.qa_f1": "LB100_QA_F1", "lb100.rouge": "LB100_ROUGE"}
    for name, attribute in metrics.items():
        registries.metrics.register(name, f"lc_pipeline.benchmarks.longbench100.metrics:{attribute}")
    registries.rubrics.register("lb100_qa", "lc_pipeline.benchmarks.longbench100.rubrics:LB100_QA")
    registries.rubrics.register("lb100_summ", "lc_pipeline.benchmarks.longbench100.rubrics:LB100_SUMM")
    for name in ("lb100_qa", "lb100_summ"):  # the authors' judge prompts and settings (judging.py)
        registries.official_rubrics.register(name, "lc_pipeline.benchmarks.longbench100.judging:official_rubric")
