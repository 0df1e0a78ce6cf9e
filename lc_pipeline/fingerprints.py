"""What each stage's output depends on, as a short hash.

Every materialization records ``lcp/fingerprint``; ``lcp demo`` and ``lcp backfill`` skip a
partition whose latest materialization carries the current fingerprint and whose file is
on disk. A config or model-settings change therefore re-runs exactly the affected stages,
and ids that embed the fingerprint produce new rows instead of reusing stale ones.
Bump a stage's code version when its logic changes what it writes.
"""

from __future__ import annotations

import hashlib

from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.ids import short_id  # noqa: F401  (row ids live in ids.py, which needs no config; kept here for importers)

CODE_VERSIONS = {
    "source_documents": "1",
    "source_items": "2",  # 2: record_id, context, record_fields (a benchmark run as released)
    "rejected_records": "1",
    "passages": "1",
    "passage_index": "2",  # 2: efSearch / nprobe tuned on the items' questions
    "hard_negatives": "2",  # 2: searched with the index tuned on questions
    "confusing_facts": "1",
    "replacement_rules": "1",
    "instances": "8",  # 8: protocol; 7: record_id and record_fields; 6: benchmark and all_classes, task files' prompts
    "prior_knowledge": "1",
    "generations": "2",  # 2: truncation, chat-template switch and stop sequences per task (task files)
    "metric_scores": "2",  # 2: each instance scored with its task's metrics
    "long_scores": "1",
    "leaderboard": "2",  # 2: protocol and missing_groups; null over a missing group; Loong's micro overall
    "judge_scores": "2",  # 2: rubrics per task (task files): LV-Eval and LongBench items are not judged
    "lveval_ablation": "1",
    "citation_scores": "1",
    "benchmark_scores": "3",  # 3: protocol, missing_groups (null rows), headline round and [all] rows; 2: judge cells
}

_SOURCES = ("sources",)
_PASSAGES = _SOURCES + ("passage_words", "tokenizer")
_INDEX = _PASSAGES + ("embedding_model",)
_NEGATIVES = _INDEX + ("retrieval_top_k", "hard_negatives_per_item")
# What changes the content of one instance (its item, level and depth are hashed separately).
INSTANCE_CONTENT_FIELDS = _NEGATIVES + ("seed", "length_tolerance", "max_new_tokens", "cross_domain_fill",
                                        "length_unit")
# The task files (the config's own; the packaged ones are versioned with the code), the extra tasks, and the
# protocol in force (config.official_protocol: hashed only when official, with the authors' commit).
_TASKS = ("task_files_sha256", "tasks", "released", "protocol")
_INSTANCES = INSTANCE_CONTENT_FIELDS + ("lengths", "depths", "items_per_length", "longbench100", "helmet") + _TASKS
# LV-Eval variants: facts and rules are made for the items the QA suite selects.
# The QA items they are made for depend on each item's prompt, hence on the task files too.
_LVEVAL = _SOURCES + ("seed", "tokenizer", "lengths", "items_per_length", "lveval") + _TASKS
_INSTANCES += ("lveval",)
_PRIOR = _INSTANCES + ("prior_knowledge",)
_LONG = _PRIOR + ("base_lengths", "long_lengths")

STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "source_documents": _SOURCES,
    "source_items": _SOURCES,
    "rejected_records": _SOURCES,
    "passages": _PASSAGES,
    "passage_index": _INDEX,
    "hard_negatives": _NEGATIVES,
    "confusing_facts": _LVEVAL,
    "replacement_rules": _LVEVAL,
    "lveval_ablation": _INSTANCES,
    "instances": _INSTANCES,
    "generations": _INSTANCES,
    "metric_scores": _INSTANCES,
    "prior_knowledge": _PRIOR,
    "long_scores": _LONG,
    "leaderboard": _LONG,
    "benchmark_scores": _INSTANCES,
    "judge_scores": _INSTANCES,  # plus the model's and the judge's settings (assets/judge.py)
    "citation_scores": _INSTANCES,  # plus the model's settings and the NLI judge's identity (assets/citations.py)
}

MODEL_STAGES = {"generations", "metric_scores", "prior_knowledge", "long_scores", "lveval_ablation", "judge_scores",
                "benchmark_scores", "citation_scores"}


def stage_fingerprint(stage: str, config: BenchmarkConfig, model_fingerprint: str | None = None) -> str:
    if stage in MODEL_STAGES and model_fingerprint is None:
        raise ValueError(f"stage {stage!r} depends on the model: pass its settings fingerprint")
    parts = [stage, CODE_VERSIONS[stage], config.fingerprint(*STAGE_FIELDS[stage]), model_fingerprint or ""]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
