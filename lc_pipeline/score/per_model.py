"""A model's scores across lengths: 100-LongBench's prior-knowledge filter (which QA items are asked
without context, spec ``100longbench.md`` §5.4; their answers scored by a metric or, with
``prior_knowledge.scorer: judge``, by the LLM judge with the task's rubric) and its long_scores table
(LongScore and the old metric per metric, and the headline: each task scored by its task file's source,
judge rubric or metric; score/longscore.py), from the scores of the items the filter keeps.

Drops (spec §5.4: "excluded from the statistical analysis"): an item the filter drops is left out of
every score made for that model, at every length: its metric_scores rows (long_scores) and its
judge_scores rows (the headline, and the leaderboard's ``judge:<rubric>`` rows through
``resources.parquet_io.read_judge_scores``). The rows themselves stay in metric_scores and judge_scores, which
are the auditable record of what was generated and judged; the judge is therefore asked about dropped
items too (at most the QA items a model answers from memory; its replies are cached).

Not scored (issue 21): with truncation policy ``skip`` a model may have no scored instance in a (task, length)
cell, or at a whole length (every prompt above its window). Such cells, read from its generations
(``score.board.not_scored_cells``), get null scores (score/longscore.py); a length without metric rows whose
generations are not all skipped or invalid (not run) is still :func:`missing_lengths`' failure.
Pure, no Dagster (assets/scoring.py wires them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from lc_pipeline.construct.prompts import NO_CONTEXT_PROMPT
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.score.judge import Judgment, judge_frame, plan_judgments
from lc_pipeline.score.longscore import HeadlineUnavailable, ScoreSource, headline_long_scores, long_scores_frame

NO_CONTEXT_GENERATION = "no_context:"  # generation_id prefix of a no-context answer sent to the judge


def no_context_questions(instances: pl.DataFrame, prior_knowledge) -> pl.DataFrame:
    """One row per QA item of the filtered tasks (``item_id, task, question, answers, prompt``, by
    item id) with its no-context prompt; none when ``prior_knowledge.enabled`` is false. The item's
    first instance (``instance_id``) comes along: the judge grades the answer against its task."""
    pk = prior_knowledge
    return (
        instances.filter(pl.col("task").is_in(list(pk.tasks)) if pk.enabled else pl.lit(False))
        .select("item_id", "task", "question", "answers", "instance_id")
        .unique("item_id", keep="first")
        .sort("item_id")
        .with_columns(prompt=pl.col("question").map_elements(
            lambda q: NO_CONTEXT_PROMPT.format(input=q), return_dtype=pl.String))
    )


def no_context_requests(questions: pl.DataFrame, max_new_tokens: int,
                        chat_template: Mapping[str, bool] | None = None) -> list[GenerationRequest]:
    """The generation requests of :func:`no_context_questions`' rows, keyed by item id.

    ``chat_template``: task -> whether its prompts go through the model's chat template
    (:func:`probe_chat_templates`): the probe is fed as its task's own prompts are (100-LongBench's repo feeds
    its ``qa_old`` probe raw, like every prompt of it, fidelity review LB100-5). A task not in it: templated."""
    templated = chat_template or {}
    return [GenerationRequest(key=i, prompt=p, max_new_tokens=max_new_tokens, chat_template=templated.get(t, True))
            for i, t, p in questions.select("item_id", "task", "prompt").iter_rows()]


def probe_chat_templates(instances: pl.DataFrame, catalog) -> dict[str, bool]:
    """Task -> its TaskSpec's ``chat_template`` (``catalog``: tasks/catalog.py), for the tasks of ``instances``."""
    pairs = instances.select("benchmark", "task").unique().iter_rows()
    return {task: catalog.resolve(benchmark, task).chat_template for benchmark, task in pairs}


def no_context_probe(instances: pl.DataFrame, questions: pl.DataFrame, max_new_tokens: int,
                     catalog) -> tuple[list[GenerationRequest], str]:
    """The probe's requests, each fed as its task's prompts are (:func:`no_context_requests`), and what the
    prior_knowledge fingerprint adds for them: the tasks probed raw ("" when none), so answers cached before
    they were raw are asked again."""
    probed = instances.filter(pl.col("task").is_in(questions["task"].unique().to_list()))
    templated = probe_chat_templates(probed, catalog)
    raw = sorted(t for t, chat in templated.items() if not chat)
    return no_context_requests(questions, max_new_tokens, templated), (f"|raw probes: {raw}" if raw else "")


def no_context_judgments(questions: pl.DataFrame, outputs: Sequence[dict], instances: pl.DataFrame,
                         judge_model: str, decoding: dict, overrides: dict[str, str] | None = None,
                         catalog=None) -> list[Judgment]:
    """The judge's work for ``prior_knowledge.scorer: judge``: each no-context answer graded with its
    task's rubric (task file, or the judge's ``rubric_overrides``) against the item's gold answers, as
    a with-context answer is (spec §5.4: the same judge, max over golds, first line). Answers whose
    first line says "unanswerable" are not judged (they are never dropped; the repo skips them too).
    A filtered task without a rubric is a ValueError naming it: only a judged task can be judged."""
    from lc_pipeline.score.prior_knowledge import said_unanswerable

    if len(outputs) != questions.height:
        raise ValueError(f"prior_knowledge: {len(outputs)} outputs for {questions.height} items")
    rows = [(NO_CONTEXT_GENERATION + item, iid, out["output"] or "")
            for item, iid, out in zip(questions["item_id"], questions["instance_id"], outputs)
            if not said_unanswerable(out["output"] or "")]
    generations = pl.DataFrame(rows, schema={"generation_id": pl.String, "instance_id": pl.String,
                                             "output": pl.String}, orient="row")
    judgments = plan_judgments(generations, instances, judge_model, decoding, overrides, catalog)
    unjudged = sorted({r["task"] for r in questions.iter_rows(named=True)}
                      - {j.instance["task"] for j in judgments}) if generations.height else []
    if len(judgments) != generations.height:
        raise ValueError(f"prior_knowledge.scorer is 'judge' but task(s) {unjudged} have no judge rubric "
                         "(task file field rubric, or the judge's rubric_overrides)")
    return judgments


def judged_no_context(judgments: Sequence[Judgment], replies: dict[str, str], judge_model: str
                      ) -> dict[str, tuple[str, float | None]]:
    """{item id: ("judge:<rubric>", score in [0, 1] or None when the verdict could not be parsed)}."""
    frame = judge_frame(judgments, replies, judge_model)
    return {gid.removeprefix(NO_CONTEXT_GENERATION): (f"judge:{rubric}", score)
            for gid, rubric, score in frame.select("generation_id", "rubric", "score").iter_rows()}


def without_dropped(rows: pl.DataFrame, prior_knowledge: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (metric or judge scores of one model, with ``item_id``) less the items the model's
    prior-knowledge filter dropped."""
    dropped = prior_knowledge.filter(pl.col("dropped"))["item_id"]
    return rows.filter(~pl.col("item_id").is_in(dropped.implode())) if dropped.len() else rows


def missing_lengths(metric_scores: pl.DataFrame, base_lengths: Sequence[str], long_lengths: Sequence[str],
                    not_scored: Iterable[str] = ()) -> list[str]:
    """The base and long lengths without metric scores (LongScore needs them all), less the lengths
    ``not_scored`` (the model's generations there all skipped or invalid: null scores, not a gap)."""
    present = set(metric_scores["length"].unique()) | set(not_scored)
    return [lv for lv in (*base_lengths, *long_lengths) if lv not in present]


def not_scored_note(cells: Iterable[tuple[str, str]], base_lengths: Sequence[str], long_lengths: Sequence[str]
                    ) -> str:
    """What long_scores' metadata says about the cells not scored: "" when none, else the lengths and
    (task@length) cells, and that the averages run over the scored lengths."""
    cells = sorted(cells)
    needed = (*base_lengths, *long_lengths)
    cells = [(t, lv) for t, lv in cells if lv in needed]
    if not cells:
        return ""
    lengths = [lv for lv in needed if any(c[1] == lv for c in cells)]
    return (f"not scored (every generation skipped or invalid) at {', '.join(lengths)}: "
            f"{', '.join(f'{t}@{lv}' for t, lv in cells)}; scores there are null, Base Ability and the averages "
            "run over the scored lengths")


def model_long_scores(metric_scores: pl.DataFrame, prior_knowledge: pl.DataFrame, base_lengths: Sequence[str],
                      long_lengths: Sequence[str], not_scored: Iterable[tuple[str, str]] = ()
                      ) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series]:
    """(LONG_SCORES rows of every metric, the metric scores kept, the item ids the prior-knowledge
    filter dropped). ``not_scored``: the (task, length) cells whose generations were all skipped or
    invalid; each metric gets null rows at those of its tasks (a metric's tasks: those with rows)."""
    not_scored = list(not_scored)
    dropped = prior_knowledge.filter(pl.col("dropped"))["item_id"]
    kept = metric_scores.filter(~pl.col("item_id").is_in(dropped.implode()))
    tasks_of = {m: set(t) for m, t in metric_scores.group_by("metric").agg(pl.col("task").unique()).iter_rows()}
    frames = [
        long_scores_frame(
            kept.filter(pl.col("metric") == m).select("task", "length", "score"),
            list(base_lengths),
            list(long_lengths),
            metric=m,
            # A model scoring 0 at the base lengths has no defined LongScore (the paper needs a
            # non-trivial base ability): record null rather than fail the whole model.
            on_zero_base="null",
            not_scored=[c for c in not_scored if c[0] in tasks_of[m]],
        )
        for m in sorted(kept["metric"].unique())
    ]
    return pl.concat(frames), kept, dropped


def model_headline(metric_scores: pl.DataFrame, judge_scores: pl.DataFrame, prior_knowledge: pl.DataFrame,
                   sources: dict[str, ScoreSource], base_lengths: Sequence[str], long_lengths: Sequence[str],
                   not_scored: Iterable[tuple[str, str]] = ()) -> pl.DataFrame:
    """LONG_SCORES rows of the headline (metric ``"headline"``, score/longscore.py): every task scored
    by its source (``sources``: judge rubric or metric), the items the prior-knowledge filter dropped
    left out of both kinds of rows. Raises ``HeadlineUnavailable`` naming the (task, length) cells
    without scores (e.g. the judge has not run at some length), or when no task is judge-scored: the
    headline is then the first metric's rows, already there (configs without a judged headline keep
    the long_scores they had)."""
    if not any(s.kind == "judge" for s in sources.values()):
        raise HeadlineUnavailable("headline: no task is judge-scored (task files' headline.source); the "
                                  "metric rows are the headline")
    dropped = prior_knowledge.filter(pl.col("dropped"))["item_id"].to_list()
    return headline_long_scores(metric_scores, judge_scores, sources, list(base_lengths), list(long_lengths),
                                dropped, not_scored=not_scored)


def overall_scores(long_scores: pl.DataFrame) -> pl.DataFrame:
    """The rows of the overall LongScore and old metric (``task == "overall"``, ``length_level == "avg"``)."""
    return long_scores.filter((pl.col("task") == "overall") & (pl.col("length_level") == "avg"))


def judge_no_context(questions: pl.DataFrame, outputs: Sequence[dict], instances: pl.DataFrame, client,
                     rubric_overrides: dict, catalog) -> tuple[dict, dict]:
    """``prior_knowledge.scorer: judge``: the no-context answers graded by ``client`` (a score.judge
    JudgeClient) with each task's rubric -> (item_id -> (value, score), metadata)."""
    judgments = no_context_judgments(questions, outputs, instances, client.model, client.decoding, rubric_overrides,
                                     catalog)
    replies = client.ask([c for j in judgments for c in j.calls.values()])
    judged = judged_no_context(judgments, replies, client.model)
    return judged, {"judge_model": client.model, "judged": len(judged),
                    "judge_unparsed": sum(score is None for _, score in judged.values())}


def config_headline_sources(config, tasks: Iterable[str], rubric_overrides: dict) -> dict[str, ScoreSource]:
    """{task: headline source} of the scored ``tasks`` under ``config`` (its task files; HeadlineUnavailable
    when a task cannot be resolved)."""
    from lc_pipeline.construct.builders import build_plan
    from lc_pipeline.score.longscore import headline_sources
    from lc_pipeline.tasks.catalog import catalog_for

    catalog = catalog_for(config)
    built = [spec for _, specs in build_plan(config, catalog) for spec in specs]
    return headline_sources(built, tasks, rubric_overrides, catalog.headlines)


def config_headline(config, metric_scores: pl.DataFrame, judge_scores: pl.DataFrame, prior_knowledge: pl.DataFrame,
                    rubric_overrides: dict, not_scored: Iterable[tuple[str, str]] = ()
                    ) -> tuple[pl.DataFrame | None, str]:
    """long_scores' headline rows for ``config`` (each task scored by its task file's source, spec
    100longbench.md) and the note the metadata shows: the task -> source list, or why there are none."""
    try:
        sources = config_headline_sources(config, metric_scores["task"].unique(), rubric_overrides)
        headline = model_headline(metric_scores, judge_scores, prior_knowledge, sources, config.base_lengths,
                                  config.long_lengths, not_scored)
    except HeadlineUnavailable as exc:
        return None, str(exc)
    return headline, "; ".join(f"{t}: {s}" for t, s in sorted(sources.items()))


@dataclass(frozen=True)
class ModelLongScores:
    """One model's long_scores and what its metadata says: the rows (metrics, then the headline when there is
    one), the metric scores kept after the prior-knowledge filter, how many items it dropped, the headline's
    note, and the cells not scored (generations all skipped or invalid: null scores, named)."""

    rows: pl.DataFrame
    kept: pl.DataFrame
    dropped: int
    headline_note: str
    not_scored: str


class MissingLengths(ValueError):
    """A base or long length has no metric scores and no generations that explain it (not run yet)."""


def long_scores_of(config, slug: str, metric_scores: pl.DataFrame, prior_knowledge: pl.DataFrame,
                   judge_scores: pl.DataFrame, statuses: pl.DataFrame, rubric_overrides: dict) -> ModelLongScores:
    """The long_scores asset's table for model ``slug`` under ``config``. ``statuses`` is
    ``score.board.status_frame`` of the model's generations: cells and lengths whose generations were all skipped
    (truncation policy skip) or invalid have no metric rows by design and get null scores, named in
    ``not_scored``; a length with neither scores nor such generations raises :class:`MissingLengths`."""
    from lc_pipeline.score.board import not_scored_cells, not_scored_lengths

    cells = sorted(not_scored_cells(statuses).get(slug, set()))
    missing = missing_lengths(metric_scores, config.base_lengths, config.long_lengths,
                              not_scored_lengths(statuses).get(slug, set()))
    if missing:
        raise MissingLengths(f"long_scores {slug}: metric_scores missing for lengths {missing}")
    rows, kept, dropped = model_long_scores(metric_scores, prior_knowledge, config.base_lengths,
                                            config.long_lengths, cells)
    headline, note = config_headline(config, metric_scores, judge_scores, prior_knowledge, rubric_overrides, cells)
    if headline is not None:
        rows = pl.concat([rows, headline])
    return ModelLongScores(rows, kept, dropped.len(), note,
                           not_scored_note(cells, config.base_lengths, config.long_lengths))
