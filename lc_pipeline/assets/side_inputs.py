"""The tables each asset reads from the lake itself rather than loading them as inputs, and why (issue 32: every
table an asset reads is a declared input or a documented side input).

Two reasons recur. A table may be optional: judging runs only where a task is judge-scored, the NLI judge only where
a task declares citation metrics, 100-LongBench's prior-knowledge filter only in its configs; an input would fail
the run when the upstream never ran. And the leaderboards rank every model in the lake, whichever of them this run
materialized, while an input loads only the partitions the run's mapping selects.

Each entry is a ``SideInputs`` of {table: reason} with the partition mappings Dagster cannot infer (by name:
``SIDE_INPUT_MAPPINGS``); ``declared`` (versions.py) makes them ``deps`` and the ``lcp/side_inputs`` metadata, and
``side_input_reader`` holds the asset's body to them.
"""

from dataclasses import dataclass, field

import dagster as dg

from lc_pipeline.lake_files import SideInputReader
from lc_pipeline.partitions import MODEL_DIM

SIDE_INPUTS = "lcp/side_inputs"  # the metadata key: {table: reason}

# How a side input's partitions map to the reading asset's, where Dagster's default is not what it reads (made
# when the graph is built: Dagster warns each time one of its beta mappings is made, definitions.py quiets it).
SIDE_INPUT_MAPPINGS = {
    # a model-partitioned asset reading a length x model table: the model's partitions at every length
    "each length of the model": lambda: dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name=MODEL_DIM),
    "every partition": dg.AllPartitionMapping,
}


@dataclass(frozen=True)
class SideInputs:
    """The tables an asset reads from the lake itself, {table: why} (the entries below), with the partition
    mappings (names of :data:`SIDE_INPUT_MAPPINGS`) of those whose default mapping is not what the asset reads."""

    reasons: dict[str, str]
    mappings: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unexplained = [t for t, why in self.reasons.items() if not str(why).strip()]
        if unexplained:
            raise ValueError(f"side inputs {unexplained} need the reason they are read from the lake")
        if set(self.mappings) - set(self.reasons):
            raise ValueError("partition mappings for tables that are not side inputs: "
                             f"{sorted(set(self.mappings) - set(self.reasons))}")
        unknown = sorted(set(self.mappings.values()) - set(SIDE_INPUT_MAPPINGS))
        if unknown:
            raise ValueError(f"unknown side input mappings {unknown}: expected one of {sorted(SIDE_INPUT_MAPPINGS)}")

    def declaration(self) -> dict:
        """The ``deps`` and ``metadata`` keyword arguments of ``dg.asset`` that declare them."""
        deps = [dg.AssetDep(t, partition_mapping=SIDE_INPUT_MAPPINGS[self.mappings[t]]() if t in self.mappings
                            else None) for t in sorted(self.reasons)]
        return {"metadata": {SIDE_INPUTS: dg.MetadataValue.json(dict(sorted(self.reasons.items())))}, "deps": deps}


def side_input_reasons(spec: dg.AssetSpec) -> dict[str, str]:
    """{table: reason} of the tables ``spec`` reads from the lake (its ``lcp/side_inputs``), {} when none."""
    value = spec.metadata.get(SIDE_INPUTS)
    return dict(getattr(value, "value", value) or {})


def side_input_reader(context: dg.AssetExecutionContext, lake) -> SideInputReader:
    """The lake reader of the running asset, held to its declared side inputs."""
    spec = context.assets_def.specs_by_key[context.asset_key]
    return SideInputReader(lake.base_dir, set(side_input_reasons(spec)), context.asset_key.to_user_string())



EACH_LENGTH_OF_THE_MODEL = "each length of the model"
EVERY_PARTITION = "every partition"

PRIOR_KNOWLEDGE = "optional (100-LongBench's filter): items the model answered without context are left out"

LONG_SCORES = SideInputs({
    "judge_scores": "optional: the headline takes a judge-scored task's verdicts once the judge has run",
    "generations": "statuses: a task and length whose generations were all skipped or invalid gets null scores",
    "instances": "the task of each generation's instance, for the not-scored report (two columns)",
}, {"judge_scores": EACH_LENGTH_OF_THE_MODEL, "generations": EACH_LENGTH_OF_THE_MODEL, "instances": EVERY_PARTITION})

BENCHMARK_SCORES = SideInputs({
    "judge_scores": "optional: the judge runs only where a task is judge-scored; read when one is",
    "citation_scores": "optional: the NLI judge runs only where a task declares citation metrics; read when one does",
    "prior_knowledge": PRIOR_KNOWLEDGE,
    "generations": "each row's skipped / truncated shares and status counts, read with the verdicts so that the "
                   "leaderboard can recompute a table from the lake alone (score/lake_tables.paired_tables)",
}, dict.fromkeys(("judge_scores", "citation_scores", "generations"), EACH_LENGTH_OF_THE_MODEL))

LEADERBOARD = SideInputs({
    "metric_scores": "every model's rows, paired on the instances all of them answered",
    "judge_scores": "optional: each judged model's verdicts ('judge:<rubric>' rows and the headline)",
    "prior_knowledge": PRIOR_KNOWLEDGE,
    "generations": "each generation's status, for the skipped / truncated / invalid shares",
    "instances": "the config's current instances (rows of records removed since a model ran are left out) and each "
                 "generation's task",
})

RELEASED_LEADERBOARD = SideInputs({
    "benchmark_scores": "every model's published tables, whichever models this run scored",
    "metric_scores": "a model's rows, to recompute its tables on the instances every model was run on",
    "judge_scores": "optional: the verdicts of judge-scored tasks, for the same recomputation",
    "citation_scores": "optional: the citation rows of citation tasks, for the same recomputation",
    "prior_knowledge": PRIOR_KNOWLEDGE,
    "generations": "which instances each model was run on, and the shares of the recomputed rows",
    "instances": "the config's current instances",
})

MINILONGBENCH_SUBSET = SideInputs({
    "metric_scores": "the score matrix: every training model's rows in the lake, whichever models a run scored",
    "instances": "the samples' texts, for the embedding representation",
})

MINILONGBENCH_ESTIMATES = SideInputs({
    "metric_scores": "the model's own rows on the subset's samples",
    "instances": "released configs: which of the model's instances are the subset's released samples",
    "source_items": "released configs: the released records' ids the subset names",
}, {"instances": EVERY_PARTITION, "source_items": EVERY_PARTITION})
