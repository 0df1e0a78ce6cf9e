"""HELMET (princeton-nlp/HELMET): the benchmark's own package."""

from pathlib import Path


def register(registries) -> None:
    """HELMET's builders, metrics, judge rubrics, source kinds and released file kinds (tasks.registry)."""
    registries.config_sections.register("helmet", "lc_pipeline.benchmarks.helmet.config:HelmetConfig")
    registries.task_files(Path(__file__).parent / "task_files")
    builders = {
        "helmet": "lc_pipeline.benchmarks.helmet.construction:build",
        # HELMET on its released data: the released datasets' records, the others built as HELMET builds them
        "helmet.released": "lc_pipeline.benchmarks.helmet.released_build:helmet_released",
    }
    for name, target in builders.items():
        registries.builders.register(name, target)
        registries.named_field_builder(name)
    # the tasks of config section helmet.tasks, built after LV-Eval's factrecall and 100-LongBench's
    registries.task_selection("helmet", "lc_pipeline.benchmarks.helmet.construction:configured_tasks", 30)
    registries.suite_rules.register("helmet", "lc_pipeline.benchmarks.helmet.construction.checks:ROWS")
    metrics = {
        "helmet.subem": "HELMET_SUBEM", "helmet.recall": "HELMET_RECALL", "helmet.ndcg10": "HELMET_NDCG10",
        "helmet.rougel": "HELMET_ROUGEL", "helmet.mc": "HELMET_MC", "helmet.label": "HELMET_LABEL",
    }
    for name, attribute in metrics.items():
        registries.metrics.register(name, f"lc_pipeline.benchmarks.helmet.metrics:{attribute}")
    # ALCE (HELMET Cite): citation recall / precision, NLI-judged (citation_scores), and answer correctness
    registries.metrics.register("alce.citation_recall", "lc_pipeline.score.citations:CITATION_RECALL")
    registries.metrics.register("alce.citation_precision", "lc_pipeline.score.citations:CITATION_PRECISION")
    registries.metrics.register("helmet.str_em", "lc_pipeline.benchmarks.helmet.alce_correctness:STR_EM")  # ASQA
    registries.metrics.register("helmet.qampari_rec5", "lc_pipeline.benchmarks.helmet.alce_correctness:QAMPARI_REC5")
    registries.rubrics.register("helmet_longqa", "lc_pipeline.benchmarks.helmet.rubrics:HELMET_LONGQA")
    registries.rubrics.register("helmet_summ", "lc_pipeline.benchmarks.helmet.rubrics:HELMET_SUMM")
    for name in ("helmet_longqa", "helmet_summ"):  # the authors' judge prompts and settings (judging.py)
        registries.official_rubrics.register(name, "lc_pipeline.benchmarks.helmet.judging:official_rubric")
    # Long documents: whole books and case files, their items' own contexts
    for kind, function in {"narrativeqa": "narrativeqa_source", "infbench": "infbench_source",
                           "multi_lexsum": "multi_lexsum_source"}.items():
        registries.source_kinds.register(kind, f"lc_pipeline.benchmarks.helmet.long_documents:{function}")
        registries.own_context_source_kind(kind)
    # HELMET's released preprocessed files (data.tar.gz, its scripts/download_data.sh), one dataset per source;
    # the records carry their own contexts. The kind of each file is told by its fields.
    registries.source_kinds.register("helmet_released",
                                     "lc_pipeline.benchmarks.helmet.released_data:helmet_released_source")
    registries.own_context_source_kind("helmet_released")
    validator = "lc_pipeline.benchmarks.helmet.released_data:validate_released_files"
    registries.file_kind("helmet_rag", {"question", "answers", "ctxs"}, validator)
    registries.file_kind("helmet_rerank", {"qid", "query", "ctxs"}, validator)
    registries.file_kind("helmet_json_kv", {"context", "question", "answer", "demos", "num_kvs"}, validator)
    registries.file_kind("helmet_ruler", {"context", "query", "type_needle_v", "outputs"}, validator)
