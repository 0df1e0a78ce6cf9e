"""HELMET's deterministic metrics (spec helmet.md §3). Pure functions. The aggregation (§6: dataset -> category ->
the HELMET score) is the helmet task files' headline, computed by score/benchmark_scores.py.

Per task, one value in [0, 1] recorded as metric ``"helmet"``; which one a task uses, and the answer
prefix it parses after, is declared in lc_pipeline/benchmarks/helmet/task_files/helmet.yaml:

==================  ===================================================================
rag, rag_multi      SubEM: a normalized gold answer inside the normalized output, max of
                    the raw output and the text after "Answer:"
json_kv             SubEM, max of the raw output and the text after "Corresponding value:"
ruler_*             recall: the share of gold values found (case-insensitive) in the raw
                    output, so MV earns partial credit out of 4
rerank              NDCG@10 of the parsed "a > b > c" ranking against the graded qrels
                    (trec_eval's ``ndcg_cut.10`` through pytrec_eval)
longqa, summ        ROUGE-L F1 (stemmed), max over golds, max of the raw output and the text
                    after the answer prefix ("Answer:" / "Summary:"), as HELMET does for both
infbench_mc         accuracy (``helmet.mc``): the raw or parsed output equals the letter or
                    "letter. option" (normalized), or contains "letter. option" (§2.5, §10.21)
ICL (5 + icl)       accuracy on the label's integer (``helmet.label``, :data:`HELMET_LABEL`)
asqa, qampari       STR-EM / rec-5 (alce_correctness.py) and citation recall / precision
                    (score/citations.py, NLI-judged into ``citation_scores``)
==================  ===================================================================

The paper scores NarrativeQA and summarization with a GPT-4o judge; the judge rubrics live
in rubrics.py (ours) and judging.py (the authors'), their scores in the ``judge_scores`` table. ROUGE-L is
kept here as the n-gram metric beside them (the paper reports it too, Table 13).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from lc_pipeline.score.metrics import exact_match, parse_answer, substring_exact_match
from lc_pipeline.score.task_metrics import (
    Metric,
    answer_prefix_of,
    answers_of,
    completion_mode,
    official_instance,
)

METRIC = "helmet"  # metric_scores.metric of every HELMET task (the HELMET_* metrics below, registered by the package)


def subem(output: str, answers: Sequence[str], prefix: str = "Answer:") -> float:
    """HELMET SubEM: max over the raw output and the text after ``prefix``."""
    return max(substring_exact_match(output, answers), substring_exact_match(parse_answer(output, prefix), answers))


def _letter(text: str) -> str:
    """Lowercased, punctuation and spaces dropped: ``" (B). "`` -> ``"b"``."""
    return re.sub(r"[\W_]+", "", text.lower())


def mc_accuracy(output: str, answers: Sequence[str], prefix: str = "Answer:") -> float:
    """∞Bench MC accuracy as HELMET scores it (spec §2.5, §10.21): ``answers`` are ``[letter, "letter. option"]``.

    1 when the raw output or the text after ``prefix`` equals either gold (normalized), or when
    the output contains ``"letter. option"`` (case-insensitive; more lenient than letter EM);
    else 0. One deviation: the letter is compared without SQuAD's article removal, which turns
    the letter "A" into "" and so would credit an empty output with option A.
    """
    if len(answers) != 2 or not answers[0].strip():
        raise ValueError(f"answers {list(answers)!r}: expected [letter, 'letter. option'] (a multiple-choice row)")
    if answers[1].lower() in output.lower():
        return 1.0
    preds = [output, parse_answer(output, prefix)]
    if any(_letter(p) == _letter(answers[0]) for p in preds):
        return 1.0
    return max(exact_match(p, answers[1:]) for p in preds)


# An option letter given as the answer: "B", "(B)", "B.", "B)", "B: text", "B. text" (not the article in "A bird").
_MC_LETTER = re.compile(r"^\W*([A-Z])(?:\)|[.:]|\s*$)", re.IGNORECASE)


def mc_parses(output: str, answers: Sequence[str], prefix: str = "Answer:") -> bool:
    """Whether an MC reply gives an option at all (status "unparsable" otherwise; issue 21): a scoring reply
    (:func:`mc_accuracy` 1), or an option letter alone or before ``.`` ``)`` ``:`` in the raw output or after
    ``prefix``. The score is :func:`mc_accuracy`'s either way."""
    if mc_accuracy(output, answers, prefix):
        return True
    return any(_MC_LETTER.match(p.strip()) for p in (output, parse_answer(output, prefix)))


def ruler_recall(output: str, answers: Sequence[str]) -> float:
    """RULER's string match: the fraction of gold strings contained, case-insensitively, in the output."""
    if not answers:
        raise ValueError("answers is empty: a RULER record needs at least one gold value")
    low = output.lower()
    return sum(a.lower() in low for a in answers) / len(answers)


_RANKING = re.compile(r"(\d+)(?:\s*>\s*(\d+))*")


def parse_ranking(output: str) -> list[str]:
    """IDs of the longest ``a > b > c`` run in the output, first occurrence kept (spec §3).

    ``[``, ``]``, ``:`` and the word "id" are removed first, so ``[ID: 3] > [ID: 1]`` reads as
    ``3 > 1``. No number at all gives an empty ranking (which scores 0).
    """
    text = output.lower().replace("[", "").replace("]", "").replace(":", "").replace("id", "")
    best = max((m.group(0) for m in _RANKING.finditer(text)), key=len, default="")
    seen: list[str] = []
    for pid in (p.strip() for p in best.split(">")):
        if pid and pid not in seen:
            seen.append(pid)
    return seen


def ndcg_at_10(ranking: Sequence[str], qrels: dict[str, int]) -> float:
    """trec_eval ``ndcg_cut.10`` (linear gains, log2 discount) of ``ranking`` against ``qrels``."""
    import pytrec_eval

    if not any(g > 0 for g in qrels.values()):
        raise ValueError("qrels hold no relevant passage: NDCG is undefined")
    if not ranking:
        return 0.0
    n = len(ranking)
    run = {"q": {pid: float(n - i) for i, pid in enumerate(ranking)}}  # the i-th ID scores n - i
    evaluator = pytrec_eval.RelevanceEvaluator({"q": {k: int(v) for k, v in qrels.items()}}, {"ndcg_cut.10"})
    return float(evaluator.evaluate(run)["q"]["ndcg_cut_10"])


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(output: str, answers: Sequence[str], prefix: str | None = None) -> float:
    """ROUGE-L F1 (stemmed), max over golds; with ``prefix`` also on the parsed output, max kept."""
    if not answers:
        raise ValueError("answers is empty: ROUGE needs a reference")
    preds = [output] if prefix is None else [output, parse_answer(output, prefix)]
    return max(_rouge().score(g, p)["rougeL"].fmeasure for g in answers for p in preds)


def rerank_qrels(answers: Sequence[str]) -> dict[str, int]:
    """``["12345:2", "67890:1"]`` -> ``{"12345": 2, "67890": 1}`` (re-rank instances' answers)."""
    out = {}
    for a in answers:
        pid, sep, grade = a.rpartition(":")
        if not sep or not pid or not grade.isdigit():
            raise ValueError(f"re-rank answer {a!r}: expected '<ID>:<grade>'")
        out[pid] = int(grade)
    return out


def ranking_parses(output: str) -> bool:
    """Whether the output holds a ranking (:func:`parse_ranking` finds an ID); one without scores 0, unparsable."""
    return bool(parse_ranking(output))


def rerank_score(output: str, answers: Sequence[str]) -> float:
    """NDCG@10 of the ranking parsed from ``output`` against the graded answers (``"<ID>:<grade>"``)."""
    return ndcg_at_10(parse_ranking(output), rerank_qrels(answers))


# --------------------------------------------------------------------------- the registered metrics (spec helmet.md §3)

HELMET_SUBEM = Metric("helmet", lambda o, i, t, _: subem(o, answers_of(i), answer_prefix_of(t)),
                      "SubEM of the raw output or the text after the answer prefix")
HELMET_RECALL = Metric("helmet", lambda o, i, t, _: ruler_recall(o, answers_of(i)),
                       "RULER recall: share of gold values in the output")
HELMET_NDCG10 = Metric("helmet", lambda o, i, t, _: rerank_score(o, answers_of(i)),
                       "NDCG@10 of the parsed ranking (trec_eval)",
                       parses=lambda o, i, t: ranking_parses(o))
# HELMET scores ROUGE-L on the raw and on the parsed output and keeps the better (its summ too: §3).
HELMET_ROUGEL = Metric("helmet", lambda o, i, t, _: rouge_l(o, answers_of(i), t.answer_prefix),
                       "ROUGE-L F1, the better of the raw output and the text after the answer prefix")
# ∞Bench MC (§2.5, §10.21): the letter or "letter. option", raw or after the answer prefix, or "letter. option" inside.
HELMET_MC = Metric("helmet", lambda o, i, t, _: mc_accuracy(o, answers_of(i), answer_prefix_of(t)),
                   "multiple-choice accuracy: the option's letter, raw or parsed, or 'letter. option' in the output",
                   parses=lambda o, i, t: mc_parses(o, answers_of(i), answer_prefix_of(t)))

_INTEGER = re.compile(r"-?\d+")


def icl_label(output: str, answers: Sequence[str], prefix: str = "label:", *, official: bool = False,
              chat: bool = False) -> float:
    """HELMET ICL accuracy (spec helmet.md §2.7, §3): 1 when the first integer of the text after ``prefix``
    (else of the first line) is the gold integer. The prefix is put back in front of the output first, as
    HELMET does in completion mode, so a model that goes on writing demonstrations is read at its first line.

    ``official`` (an instance built under HELMET's official protocol; fidelity review HE9): as HELMET's
    ``load_icl`` post-process scores it: in completion mode (not ``chat``) the prefix prepended as is, the rest of
    the line after it (``parse_output``), exact match after SQuAD normalization against the gold label, so
    "3 (refund)" for 3 scores 0."""
    try:
        gold = int(str(answers[0]).strip())
    except (IndexError, ValueError):
        raise ValueError(f"field answers: expected the gold label's integer, got {list(answers)!r}") from None
    if official:
        return exact_match(icl_official_parse(output, prefix, chat), [str(gold)])
    label = icl_predicted_label(output, prefix)
    return float(label is not None and label == gold)


def icl_official_parse(output: str, prefix: str = "label:", chat: bool = False) -> str:
    """HELMET's parsed ICL line: ``parse_output`` of the output, the prefix prepended in completion mode. As HELMET's
    ``parse_output``, a prefix the model repeats at the start of the parsed line is stripped once (ours strips every
    repeat: :func:`~lc_pipeline.score.metrics.parse_answer`)."""
    text = output if chat else prefix + output
    m = re.search(f"(?:{re.escape(prefix)})(.*)(?:\n|$)", text, flags=re.IGNORECASE)
    if m is None:
        m = re.search(r"(?:^)(.*)(?:\n|$)", text)
    return re.sub(f"^{re.escape(prefix)}", "", m.group(1).strip(), flags=re.IGNORECASE).strip()


def icl_predicted_label(output: str, prefix: str = "label:") -> int | None:
    """The label integer :func:`icl_label` reads from ``output``; None when there is none (unparsable)."""
    m = _INTEGER.search(parse_answer(f"{prefix} {output.lstrip()}", prefix))
    return int(m.group()) if m is not None else None


def _label_prefix(task: Any) -> str:
    return getattr(task, "answer_prefix", None) or "label:"


def _helmet_label(output: str, instance: Mapping[str, Any], task: Any) -> float:
    return icl_label(output, answers_of(instance), _label_prefix(task), official=official_instance(instance),
                     chat=not completion_mode(instance, task))


def _helmet_label_parses(output: str, instance: Mapping[str, Any], task: Any) -> bool:
    if official_instance(instance):
        return bool(icl_official_parse(output, _label_prefix(task), not completion_mode(instance, task)))
    return icl_predicted_label(output, _label_prefix(task)) is not None


HELMET_LABEL = Metric("helmet", lambda o, i, t, _: _helmet_label(o, i, t),
                      "ICL accuracy: the first integer after the answer prefix is the gold label's integer (official "
                      "protocol: HELMET's normalized exact match of the parsed line)",
                      parses=_helmet_label_parses)
