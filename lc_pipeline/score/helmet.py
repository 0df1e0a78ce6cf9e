"""HELMET's deterministic metrics (spec helmet.md §3). Pure functions. The aggregation (§6: dataset -> category ->
the HELMET score) is the helmet task files' headline, computed by score/benchmark_scores.py.

Per task, one value in [0, 1] recorded as metric ``"helmet"``; which one a task uses, and the answer
prefix it parses after, is declared in lc_pipeline/tasks/packaged/helmet.yaml:

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
ICL (5 + icl)       accuracy on the label's integer (``helmet.label``, score/task_metrics.py)
asqa, qampari       STR-EM / rec-5 (score/alce_correctness.py) and citation recall / precision
                    (score/citations.py, NLI-judged into ``citation_scores``)
==================  ===================================================================

The paper scores NarrativeQA and summarization with a GPT-4o judge; the judge rubrics live
in :mod:`lc_pipeline.score.judge` and their scores in the ``judge_scores`` table. ROUGE-L is
kept here as the n-gram metric beside them (the paper reports it too, Table 13).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache


from lc_pipeline.score.metrics import exact_match, parse_answer, substring_exact_match

METRIC = "helmet"  # metric_scores.metric of every HELMET task (score/task_metrics.py registers the metrics)


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
