"""The prompt-format guard: a blocking check on every generations partition (generate/prompt_guard.py).

It runs in the same run as its partition of ``generations`` (asset jobs, the UI, ``lcp demo`` / ``backfill``);
a failing verdict (a doubled BOS, a template that drops the question, a row without its record) stops the
run's downstream steps, so ``metric_scores`` never scores prompts the model was not fed as it expects.
"""

import warnings

import dagster as dg
import polars as pl

from lc_pipeline.generate.partition import with_stored_defaults
from lc_pipeline.generate.prompt_guard import check_prompt_format
from lc_pipeline.generate.prompting import load_tokenizer
from lc_pipeline.partitions import MODEL_DIM, Partitions
from lc_pipeline.resources import ModelsResource

CHECK_NAME = "prompt_format"


def build(parts: Partitions) -> list:
    with warnings.catch_warnings():
        # A partitioned check is "preview" in this Dagster and its length mapping "beta" (specs/dagster.md); the
        # check is ours to keep working (tests/asset/test_prompt_guard_check.py), so the warnings would only
        # repeat on every `lcp` command.
        warnings.filterwarnings("ignore", category=dg.PreviewWarning)
        warnings.filterwarnings("ignore", category=dg.BetaWarning)
        return [_prompt_format(parts)]


def _prompt_format(parts: Partitions) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset="generations",
        name=CHECK_NAME,
        partitions_def=parts.length_x_model,
        blocking=True,
        additional_ins={"instances": dg.AssetIn(
            "instances", partition_mapping=dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="length"))},
        description="Prompt-format guard: the BOS ids every prompt was fed are the ones the model's template implies "
        "(no doubled BOS), the template keeps the user's message and a real row's question, every sent row records "
        "its token-id hash and template source (model, file:<name>, none; server-rendered rows are counted, not "
        "checked). Blocking: a failure stops metric_scores for the partition",
    )
    def prompt_format(context: dg.AssetCheckExecutionContext, generations: pl.DataFrame, instances: pl.DataFrame,
                      models: ModelsResource) -> dg.AssetCheckResult:
        slug = context.partition_key.keys_by_dimension[MODEL_DIM]
        spec = models.spec(slug)
        # The vocabulary and template the backends render with, without loading weights; needed only when some
        # row was fed by us (not skipped, not rendered by a server).
        verdict = check_prompt_format(spec, lambda: load_tokenizer(spec), with_stored_defaults(generations),
                                      instances)
        metadata = {
            "model": slug,
            "template_source": verdict.template_source,
            "bos_expected": dg.MetadataValue.json(verdict.bos_expected),
            "bos_found": dg.MetadataValue.json({k: {str(n): c for n, c in v.items()}
                                                for k, v in verdict.bos_found.items()}),
            "rows_checked": verdict.rows_checked,
            "rows_skipped": verdict.rows_skipped,
            "rows_server_rendered": verdict.rows_server,
            "rows_unrecorded": verdict.rows_unrecorded,
            "question_checked_in": verdict.question_checked or "",
            "example": dg.MetadataValue.json(verdict.example or {}),
            "verdict": verdict.message,
        }
        if verdict.notes:
            metadata["notes"] = dg.MetadataValue.json(verdict.notes)
        if not verdict.passed:  # the console (lcp) shows errors; Dagster's failure names only the check
            context.log.error(verdict.message)
        return dg.AssetCheckResult(passed=verdict.passed, metadata=metadata, description=verdict.message)

    return prompt_format
