"""Token F1 and ROUGE-L on English and Chinese text, as LongBench's ``metrics.py`` computes them.

Shared by several benchmarks' scorers (LongBench's, LV-Eval's keyword recall, 100-LongBench's original metric, which
all reuse LongBench's functions) and by construction checks (CFI's restatement check): English tokens are
``normalize_answer`` split on whitespace, Chinese tokens jieba's (precise mode), each normalized. ROUGE-L F comes
from the ``rouge`` package (1.0.1, as the official requirements), any exception -> 0, counted as a fallback zero
(score/fallbacks.py). Pure functions, no Dagster.
"""

from __future__ import annotations

import string
import sys
import threading
from collections import Counter
from collections.abc import Sequence

from lc_pipeline.score import fallbacks
from lc_pipeline.text import jieba_tokenizer, normalize_answer

__all__ = [
    "f1_from_tokens",
    "jieba_cut",
    "normalize_zh_answer",
    "qa_f1_score",
    "qa_f1_zh_score",
    "rouge_l",
    "rouge_score",
    "rouge_zh_score",
    "zh_tokens",
]

# LongBench's Chinese punctuation set. It has 》 but not 《, and no ·: those survive as tokens.
_ZH_PUNCT = "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
_ALL_PUNCT = frozenset(string.punctuation + _ZH_PUNCT)


# --------------------------------------------------------------------------- tokenization


def jieba_cut(text: str) -> list[str]:
    """jieba precise mode (``cut_all=False``) on the raw string, as LongBench and LV-Eval do."""
    return list(jieba_tokenizer().cut(text, cut_all=False))


def normalize_zh_answer(s: str) -> str:
    """LongBench ``normalize_zh_answer``: lower-case, drop ASCII + Chinese punctuation, drop all whitespace."""
    return "".join(ch for ch in s.lower() if ch not in _ALL_PUNCT and not ch.isspace())


def zh_tokens(text: str) -> list[str]:
    """jieba tokens, each normalized, empty ones dropped (LongBench ``qa_f1_zh_score``)."""
    return [t for t in (normalize_zh_answer(tok) for tok in jieba_cut(text)) if t]


def f1_from_tokens(prediction_tokens: Sequence[str], gold_tokens: Sequence[str]) -> float:
    """Multiset token F1; 0.0 when nothing is shared. Same arithmetic as LongBench ``f1_score``."""
    num_same = sum((Counter(prediction_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(gold_tokens)
    return (2 * precision * recall) / (precision + recall)


# --------------------------------------------------------------------------- metrics


def qa_f1_score(prediction: str, ground_truth: str) -> float:
    return f1_from_tokens(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def qa_f1_zh_score(prediction: str, ground_truth: str) -> float:
    return f1_from_tokens(zh_tokens(prediction), zh_tokens(ground_truth))


# `rouge` 1.0.1 reconstructs each LCS recursively, so a long unpunctuated pair of "sentences"
# (it splits on ASCII '.') raises RecursionError, which the official scorer turns into 0.
# Whether that happens depends on how much recursion budget is left at the call, so we give
# `rouge` the budget it has in LongBench's eval.py whatever stack we are called from (pytest,
# click, Dagster). The budget is counted by the interpreter itself (C-level calls included),
# so it is measured by probing rather than by counting frames. Measured with the official
# scripts under CPython's default limit of 1000: 996 calls fit below rouge_score (en), one
# fewer below rouge_zh_score's extra frame (zh).
_OFFICIAL_BUDGET = {"en": 996, "zh": 995}
_recursion_lock = threading.Lock()


def _remaining_recursion() -> int:
    """How many more nested Python calls fit below the caller under the current limit."""
    n = 0

    def probe() -> None:
        nonlocal n
        n += 1
        probe()

    try:
        probe()
    except RecursionError:
        pass
    return n


def rouge_l(prediction: str, ground_truth: str, *, language: str = "en") -> float:
    """``Rouge().get_scores([pred], [gold], avg=True)["rouge-l"]["f"]``, 0.0 on any exception.

    That 0 is noted as a fallback (``fallbacks.note``: counted by ``metric_scores`` and ``lcp score``,
    issue 22) when the prediction has text between its '.': RecursionError on a sentence of ~990 words
    or more (``rouge_recursion``), any other error (``rouge_error``, e.g. a gold with no sentence). An
    empty or dot-only prediction's 0 is its own.

    Only ROUGE-L is computed: ROUGE-1/2, which the official call also computes, fail exactly
    when ROUGE-L does (an empty hypothesis or reference), so the value is the same.
    """
    from rouge import Rouge

    rouge = Rouge(metrics=["rouge-l"])
    with _recursion_lock:  # the limit is process-wide: one adjustment at a time
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(previous + _OFFICIAL_BUDGET[language] - _remaining_recursion())
        try:
            return float(rouge.get_scores([prediction], [ground_truth], avg=True)["rouge-l"]["f"])
        except Exception as exc:  # the official bare `except:` (empty hypothesis, RecursionError, ...)
            failed = exc
        finally:
            sys.setrecursionlimit(previous)
    # The official 0, counted as a fallback (score/fallbacks.py) unless the prediction has nothing to score.
    if isinstance(failed, RecursionError):
        fallbacks.note(fallbacks.ROUGE_RECURSION)
    elif any(prediction.split(".")):
        fallbacks.note(fallbacks.ROUGE_ERROR)
    return 0.0


def rouge_score(prediction: str, ground_truth: str) -> float:
    return rouge_l(prediction, ground_truth, language="en")


def rouge_zh_score(prediction: str, ground_truth: str) -> float:
    return rouge_l(" ".join(jieba_cut(prediction)), " ".join(jieba_cut(ground_truth)), language="zh")
