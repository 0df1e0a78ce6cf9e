"""Deterministic answer metrics: SubEM, EM and token F1, plus HELMET-style output parsing.

Pure functions (no Dagster). Definitions follow the specs:

* ``exact_match`` / ``substring_exact_match``: HELMET §3 (SQuAD normalization, max over golds).
* ``token_f1``: LongBench v1 ``qa_f1_score`` (English), max over golds.
* ``parse_answer``: HELMET ``parse_output``; ``score_qa`` keeps, per metric, the max of the
  raw output and the parsed output (HELMET's default QA post-processing).

All normalization goes through :func:`lc_pipeline.text.normalize_answer`, the same function
construction uses to decide that a distractor "contains no gold answer".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.fingerprints import short_id
from lc_pipeline.score.keyword_recall import dataset_rule, lveval_score
from lc_pipeline.text import normalize_answer

__all__ = [
    "KNOWN_METRICS",
    "exact_match",
    "substring_exact_match",
    "token_f1",
    "first_line",
    "parse_answer",
    "score_qa",
    "score_id",
    "score_frame",
]


def _golds(answers: Sequence[str]) -> list[str]:
    # A bare string would be iterated character by character and score nonsense.
    if isinstance(answers, str):
        raise TypeError("answers must be a sequence of gold strings, not a single str")
    golds = list(answers)
    if not golds:
        # The official scorers take max() over golds and would crash; say so clearly instead.
        raise ValueError("answers is empty: a record needs at least one gold answer")
    return golds


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals any normalized gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(g) == pred for g in _golds(answers)))


def substring_exact_match(prediction: str, answers: Sequence[str]) -> float:
    """SubEM: 1.0 when any normalized gold answer is a substring of the normalized prediction.

    A gold that normalizes to "" (e.g. "The.") never matches: "" is a substring of every
    string and would credit any output.
    """
    pred = normalize_answer(prediction)
    return float(any(ng and ng in pred for ng in map(normalize_answer, _golds(answers))))


def _f1_tokens(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(pred_tokens) & Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    # Same arithmetic as LongBench's f1_score so per-record values agree to the last bit.
    precision = 1.0 * num_same / len(pred_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


def token_f1(prediction: str, answers: Sequence[str]) -> float:
    """LongBench ``qa_f1_score``: multiset token F1 after English normalization, max over golds."""
    pred_tokens = normalize_answer(prediction).split()
    return max(_f1_tokens(pred_tokens, normalize_answer(g).split()) for g in _golds(answers))


def first_line(prediction: str) -> str:
    """LongBench's few-shot rule (trec, triviaqa, samsum, lsht) and 100-LongBench's rule for
    every task: drop leading newlines, keep the text before the next newline."""
    return prediction.lstrip("\n").split("\n")[0]


def parse_answer(output: str, prefix: str = "Answer:") -> str:
    """HELMET ``parse_output``: the rest of the line after the first ``prefix`` (case-insensitive),
    otherwise the first line; whitespace and leading repeats of ``prefix`` are stripped.

    Example: ``parse_answer("Answer: Paris\\nmore text")`` -> ``"Paris"``.
    """
    # `.` does not cross newlines, so the group ends at the end of the line.
    m = re.search(f"(?:{re.escape(prefix)})(.*)(?:\n|$)", output, flags=re.IGNORECASE)
    if m is None:
        m = re.search(r"(?:^)(.*)(?:\n|$)", output)  # always matches (possibly "")
    parsed = m.group(1).strip()
    lead = re.compile(f"^{re.escape(prefix)}", flags=re.IGNORECASE)
    # Models sometimes echo the prefix ("Answer: Answer: Paris").
    while prefix and lead.match(parsed):
        parsed = lead.sub("", parsed, count=1).strip()
    return parsed


_METRIC_FUNCS: dict[str, Callable[[str, Sequence[str]], float]] = {
    "subem": substring_exact_match,
    "em": exact_match,
    "f1": token_f1,
}
KNOWN_METRICS: tuple[str, ...] = tuple(_METRIC_FUNCS)


def _check_metrics(metrics: Sequence[str]) -> tuple[str, ...]:
    if isinstance(metrics, str):
        raise TypeError(f"metrics must be a sequence of names, e.g. ({metrics!r},), not a single str")
    names = tuple(metrics)
    unknown = [m for m in names if m not in _METRIC_FUNCS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known metrics are {list(KNOWN_METRICS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate metric names in {list(names)}")
    return names


def score_qa(
    output: str,
    answers: Sequence[str],
    metrics: Sequence[str] = ("subem", "em", "f1"),
) -> dict[str, float]:
    """Score one model output against its gold answers.

    Each metric is the max of its value on the raw output and on ``parse_answer(output)``:
    the raw output rescues answers without the "Answer:" prefix, the parsed one rescues EM/F1
    when the model adds a second line of chatter.
    """
    names = _check_metrics(metrics)
    golds = _golds(answers)
    parsed = parse_answer(output)
    return {m: max(_METRIC_FUNCS[m](output, golds), _METRIC_FUNCS[m](parsed, golds)) for m in names}


def score_id(generation_id: str, metric: str) -> str:
    """Stable short id of one (generation, metric) score row."""
    return short_id(generation_id, metric, length=16)


_INSTANCE_FIELDS = ("instance_id", "item_id", "suite", "task", "category", "depth", "answers")
# Read when present (INSTANCES has them): the LV-Eval metric needs them; hand-made frames may lack them.
_LVEVAL_FIELDS = ("variant", "language", "answer_keywords")
LVEVAL_METRIC = "lveval"

# Metrics per instance suite: the QA suite gets HELMET's SubEM/EM and LongBench's F1; a
# 100-LongBench instance gets its task's own metric (accuracy / F1 / ROUGE-L) as "lb100".
SUITE_METRICS: dict[str, tuple[str, ...]] = {
    "qa": ("subem", "em", "f1"), "longbench100": ("lb100",),
    "helmet": ("helmet",),  # its task's metric: SubEM / recall / NDCG@10 / ROUGE-L (score.helmet)
}


def _suite_scorer(suite: str, metrics: Sequence[str]) -> Callable[[dict, str], dict[str, float]]:
    if suite == "longbench100":
        from lc_pipeline.score.longbench100 import METRIC, task_score  # imports score.metrics itself

        return lambda inst, output: {METRIC: task_score(inst["task"], output, inst["answers"] or [])}
    if suite == "helmet":
        from lc_pipeline.score.helmet import METRIC as HELMET_METRIC
        from lc_pipeline.score.helmet import task_score as helmet_score

        return lambda inst, output: {HELMET_METRIC: helmet_score(inst["task"], output, inst["answers"] or [])}
    if suite == "qa":
        def qa(inst: dict, output: str) -> dict[str, float]:
            try:
                return score_qa(output, inst["answers"] or [], metrics)
            except ValueError as exc:
                raise ValueError(f"field answers: {exc}") from exc

        return qa
    raise ValueError(f"field suite: unknown instance suite {suite!r}; known: {sorted(SUITE_METRICS)}")


def lveval_rule(task: str, language: str) -> str:
    """The LV-Eval scoring rule of an instance: its dataset's own rule when the task is an LV-Eval
    dataset (cmrc, dureader, factrecall ... differ), else keyword-recall F1 in its language."""
    try:
        return dataset_rule(task or "").name
    except ValueError:
        return f"keyword_recall_{language}"


def _is_lveval_dataset(task: str) -> bool:
    try:
        return not dataset_rule(task or "").name.startswith("keyword_recall_")
    except ValueError:
        return False


def _lveval_value(inst: dict, output: str, variant: str) -> float:
    language = inst.get("language") or "en"
    return lveval_score(lveval_rule(inst["task"], language), output, inst["answers"] or [],
                        inst.get("answer_keywords") or [], variant)


def score_frame(
    generations: pl.DataFrame,
    instances: pl.DataFrame,
    metrics: Sequence[str] = ("subem", "em", "f1"),
    lveval_variant: str = "code",
) -> pl.DataFrame:
    """METRIC_SCORES rows: per generation, one row per metric of its instance's suite.

    Plus LV-Eval's keyword-recall metric (``"lveval"``, score.keyword_recall, ``lveval_variant``
    "code" or "paper") for every instance of an item that has LV-Eval variants in ``instances``
    (its plain row too, so plain and CFI / KPR compare on one metric) and for every instance of
    an LV-Eval dataset (task ``hotpotwikiqa_mixup`` ...). Other instances are scored as before.

    ``generations`` needs ``generation_id, instance_id, output`` (GENERATIONS rows; extra
    columns such as partition keys are ignored); ``instances`` needs the INSTANCES columns
    ``instance_id, item_id, suite, task, category, depth, answers``. QA-suite instances get
    ``metrics``; 100-LongBench instances get their task metric ("lb100"). Rows come out in
    generation order, metrics in the order given.
    """
    names = _check_metrics(metrics)
    for frame, label, cols in (
        (generations, "generations", ("generation_id", "instance_id", "output")),
        (instances, "instances", _INSTANCE_FIELDS),
    ):
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise ValueError(f"{label} frame lacks column(s) {missing}")

    by_id: dict[str, dict] = {}
    optional = [c for c in _LVEVAL_FIELDS if c in instances.columns]
    with_variants = set()
    if "variant" in instances.columns:
        with_variants = set(instances.filter(pl.col("variant") != "plain")["item_id"])
    for row in instances.select(*_INSTANCE_FIELDS, *optional).iter_rows(named=True):
        iid = row["instance_id"]
        if iid in by_id:
            raise ValueError(f"instances: instance_id {iid!r} occurs more than once")
        by_id[iid] = row

    scorers: dict[str, Callable[[dict, str], dict[str, float]]] = {}
    rows: dict[str, list] = {c: [] for c in schemas.METRIC_SCORES}
    for gen in generations.select("generation_id", "instance_id", "output").iter_rows(named=True):
        gid, iid, output = gen["generation_id"], gen["instance_id"], gen["output"]
        inst = by_id.get(iid)
        if inst is None:
            raise ValueError(f"generation {gid!r}: field instance_id={iid!r} not found in instances")
        if output is None:
            raise ValueError(f"generation {gid!r}: field output is null")
        if inst["suite"] not in scorers:
            try:
                scorers[inst["suite"]] = _suite_scorer(inst["suite"], names)
            except ValueError as exc:
                raise ValueError(f"instance {iid!r}: {exc}") from exc
        try:
            values = scorers[inst["suite"]](inst, output)
            if inst["item_id"] in with_variants or _is_lveval_dataset(inst["task"]):
                values[LVEVAL_METRIC] = _lveval_value(inst, output, lveval_variant)
        except ValueError as exc:
            raise ValueError(f"generation {gid!r} (instance {iid!r}): {exc}") from exc
        for m, value in values.items():
            rows["score_id"].append(score_id(gid, m))
            rows["generation_id"].append(gid)
            rows["instance_id"].append(iid)
            rows["item_id"].append(inst["item_id"])
            rows["task"].append(inst["task"])
            rows["category"].append(inst["category"])
            rows["depth"].append(inst["depth"])
            rows["metric"].append(m)
            rows["score"].append(value)
    return schemas.conform(pl.DataFrame(rows, schema=schemas.METRIC_SCORES), "metric_scores")
