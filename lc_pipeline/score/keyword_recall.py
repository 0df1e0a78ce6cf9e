"""LV-Eval's keyword-recall-based metric, in the released code's and in the paper's variant.

Two stages (spec ``lveval.md`` §7): the recall of the answer keywords in the prediction must
reach a threshold, else the score is 0; then token F1 between prediction and gold answer,
with a word blacklist. The variants differ (spec §7.4):

========================  ======================================  ==========================================
                          ``code`` (default: published numbers)   ``paper``
========================  ======================================  ==========================================
threshold en / zh         0.2 / 0.4, ``recall >= t`` passes        0.4 / 0.2, ``recall > t`` passes
blacklist in stage 1      removed from the recall numerator only   not applied
blacklist in stage 2      not applied (F1 on all tokens)           removed from both sides before F1
cmrc                      stage 1 on the record's keywords, else  stage 2 only (F1 with blacklist)
                          on the gold answer
factrecall                plain token F1                           keyword-recall F1 (no keywords: stage 2)
dureader                  ROUGE-L on blacklist-filtered tokens     same
========================  ======================================  ==========================================

Only ``answers[0]`` is scored (the official scorer breaks after the first gold). Tokens:
English = LongBench ``normalize_answer`` split on whitespace; Chinese = jieba precise mode,
each token normalized, empties dropped. Dataset score = ``round(100 * mean, 2)``; level
score = unweighted mean of the dataset scores (spec §7.6).

Pure functions, no Dagster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from lc_pipeline.score.token_scores import (
    f1_from_tokens,
    jieba_cut,
    normalize_zh_answer,
    rouge_l,
    zh_tokens,
)
from lc_pipeline.text import normalize_answer

__all__ = [
    "BLACKLIST_EN",
    "BLACKLIST_ZH",
    "DATASETS",
    "DEFAULT_VARIANT",
    "THRESHOLDS",
    "VARIANTS",
    "DatasetRule",
    "ablation_table",
    "dataset_rule",
    "dataset_score",
    "keyword_recall",
    "keyword_recall_f1",
    "level_score",
    "keyword_recall_score",
    "rouge_l_blacklist",
    "tokens",
]

VARIANTS = ("code", "paper")
DEFAULT_VARIANT = "code"

# Released word blacklists (LV-Eval metrics.py ABANDON_WORDS_EN / _ZH), verbatim.
BLACKLIST_EN = frozenset(
    "and to of in her was with for it from is that his he by she they or at because be on are their what as had "
    "were about being this who but have has when which does".split()
)
BLACKLIST_ZH = frozenset(
    "的 和 是 等 在 年 可以 为 与 ‰ 了 或 一种 月 c 至 日 有 进行 于 不 中 × 根据 小 由 亩 也 要 指 法 会 元 主要 以及 通过 "
    "首先 对 然后 号 以 所 后 丁 包括 无 将 用 能 形 方面 因素 位于 而 从 到 一定 用于 但 使用 让 具有 并 亿元 万元 上 类 "
    "基于 才 来 地 片 其他 个 或者 变得 时 给 你 使 条 受 已经 带 度".split()
)
_BLACKLIST = {"en": BLACKLIST_EN, "zh": BLACKLIST_ZH}

# (variant, language) -> keyword-recall threshold. Paper §3.3 vs the released metrics.py (swapped).
THRESHOLDS: dict[tuple[str, str], float] = {
    ("code", "en"): 0.2,
    ("code", "zh"): 0.4,
    ("paper", "en"): 0.4,
    ("paper", "zh"): 0.2,
}


def _check(language: str, variant: str) -> None:
    if language not in _BLACKLIST:
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")


def tokens(text: str, language: str) -> list[str]:
    """The metric's tokens: LongBench-normalized words (en) or normalized jieba tokens (zh)."""
    if language == "zh":
        return zh_tokens(text)
    if language == "en":
        return normalize_answer(text).split()
    raise ValueError(f"language must be 'en' or 'zh', got {language!r}")


def _keyword_text(keywords: str | Sequence[str] | None) -> str:
    # The release has one string per record; our tables hold a list (joined: recall counts all tokens).
    if keywords is None:
        return ""
    if isinstance(keywords, str):
        return keywords
    return " ".join(k for k in keywords if k)


def keyword_recall(
    prediction: str,
    keywords: str | Sequence[str] | None,
    language: str,
    variant: str = DEFAULT_VARIANT,
) -> float | None:
    """Share of keyword tokens found in the prediction (multiset); None when there are no keyword tokens.

    ``code``: blacklisted matches do not count in the numerator, but blacklisted keyword tokens
    stay in the denominator. ``paper``: no blacklist. (A keyword string normalizing to no tokens
    makes the official code divide by zero; it counts as "no keywords" here.)
    """
    _check(language, variant)
    kw = tokens(_keyword_text(keywords), language)
    if not kw:
        return None
    common = Counter(tokens(prediction, language)) & Counter(kw)
    if variant == "code":
        blacklist = _BLACKLIST[language]
        hits = sum(n for w, n in common.items() if w not in blacklist)
    else:
        hits = sum(common.values())
    return 1.0 * hits / len(kw)


def _passes(recall: float, language: str, variant: str) -> bool:
    threshold = THRESHOLDS[(variant, language)]
    return recall >= threshold if variant == "code" else recall > threshold  # paper: "exceeds"


def keyword_recall_f1(
    prediction: str,
    answer: str,
    keywords: str | Sequence[str] | None,
    language: str,
    variant: str = DEFAULT_VARIANT,
) -> float:
    """Stage 1 (keyword-recall gate, skipped without keywords) then stage 2 (token F1)."""
    recall = keyword_recall(prediction, keywords, language, variant)
    if recall is not None and not _passes(recall, language, variant):
        return 0.0
    pred, gold = tokens(prediction, language), tokens(answer, language)
    if variant == "paper":
        blacklist = _BLACKLIST[language]
        pred = [t for t in pred if t not in blacklist]
        gold = [t for t in gold if t not in blacklist]
    return f1_from_tokens(pred, gold)


def rouge_l_blacklist(prediction: str, answer: str) -> float:
    """dureader-mixup: ROUGE-L F on jieba tokens, normalized, blacklisted ones dropped (both variants).

    As released: the string is jieba-cut and space-joined, then cut *again*; whitespace tokens
    normalize to "" and are kept (ROUGE collapses the extra spaces).
    """

    def prepare(text: str) -> str:
        twice = jieba_cut(" ".join(jieba_cut(text)))
        return " ".join(t for t in (normalize_zh_answer(tok) for tok in twice) if t not in BLACKLIST_ZH)

    # Official call chain: scorer -> rouge_zh_score_blacklist -> rouge_score -> get_scores.
    return rouge_l(prepare(prediction), prepare(answer), language="zh")


@dataclass(frozen=True)
class DatasetRule:
    """How one LV-Eval dataset is scored."""

    name: str  # canonical name, e.g. "hotpotwikiqa_mixup"
    language: str
    # "keyword_f1" | "gold_keywords" (cmrc: code gates on the record's keywords, else on the gold answer)
    # | "rouge_blacklist" (dureader) | "plain_f1" (factrecall)
    kind: str


# Spec §7.3 (config.DATASET_METRIC). ``keyword_recall_en/zh`` score our own corpora the same way.
DATASETS: dict[str, DatasetRule] = {
    r.name: r
    for r in (
        DatasetRule("hotpotwikiqa_mixup", "en", "keyword_f1"),
        DatasetRule("loogle_SD_mixup", "en", "keyword_f1"),
        DatasetRule("loogle_CR_mixup", "en", "keyword_f1"),
        DatasetRule("loogle_MIR_mixup", "en", "keyword_f1"),
        DatasetRule("multifieldqa_en_mixup", "en", "keyword_f1"),
        DatasetRule("multifieldqa_zh_mixup", "zh", "keyword_f1"),
        DatasetRule("lic_mixup", "zh", "keyword_f1"),
        DatasetRule("cmrc_mixup", "zh", "gold_keywords"),
        DatasetRule("dureader_mixup", "zh", "rouge_blacklist"),
        DatasetRule("factrecall_en", "en", "plain_f1"),
        DatasetRule("factrecall_zh", "zh", "plain_f1"),
        DatasetRule("keyword_recall_en", "en", "keyword_f1"),
        DatasetRule("keyword_recall_zh", "zh", "keyword_f1"),
    )
}
DATASET_ALIASES = {"loogle_mr_mixup": "loogle_MIR_mixup"}  # the paper's name for the release's loogle_MIR


def dataset_rule(name: str) -> DatasetRule:
    """The rule for a dataset name in any usual spelling: ``hotpotwikiqa-mixup``, ``loogle_MR_mixup``,
    ``factrecall_en_16k`` (a trailing level is ignored)."""
    key = name.strip().replace("-", "_")
    parts = key.rsplit("_", 1)
    if len(parts) == 2 and parts[1].lower().endswith("k") and parts[1][:-1].isdigit():
        key = parts[0]
    lowered = {k.lower(): k for k in DATASETS}
    canonical = DATASET_ALIASES.get(key.lower()) or lowered.get(key.lower())
    if canonical is None:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return DATASETS[canonical]


def _first_answer(answers: str | Sequence[str]) -> str:
    if isinstance(answers, str) or not answers or not isinstance(answers[0], str):
        raise ValueError(f"field 'answers': expected a non-empty list of strings, got {answers!r}")
    return answers[0]


def keyword_recall_score(
    dataset: str,
    prediction: str,
    answers: Sequence[str],
    answer_keywords: str | Sequence[str] | None = None,
    variant: str = DEFAULT_VARIANT,
) -> float:
    """One LV-Eval record's score in [0, 1], scoring ``answers[0]`` with the dataset's rule."""
    rule = dataset_rule(dataset)
    _check(rule.language, variant)
    if not isinstance(prediction, str):
        raise ValueError(f"field 'prediction': expected a string, got {type(prediction).__name__}")
    answer = _first_answer(answers)
    if rule.kind == "rouge_blacklist":
        return rouge_l_blacklist(prediction, answer)
    if rule.kind == "plain_f1":
        if variant == "code":
            return f1_from_tokens(tokens(prediction, rule.language), tokens(answer, rule.language))
        return keyword_recall_f1(prediction, answer, answer_keywords, rule.language, variant)
    if rule.kind == "gold_keywords":
        # Released code (metrics.qa_f1_zh_score_with_gold_ans, ``if not gold_ans: gold_ans = ground_truth``):
        # the record's answer_keywords when it carries some, else the gold answer; paper: F1 with
        # blacklist, no keywords.
        if variant == "code":
            keywords = answer_keywords if _keyword_text(answer_keywords) else answer
        else:
            keywords = None
        return keyword_recall_f1(prediction, answer, keywords, rule.language, variant)
    keywords = answer_keywords
    if variant == "code" and rule.language == "zh" and not _keyword_text(keywords):
        keywords = answer  # released qa_f1_zh_score_with_gold_ans: no keywords -> the gold answer
    return keyword_recall_f1(prediction, answer, keywords, rule.language, variant)


def dataset_score(instance_scores: Sequence[float]) -> float:
    """Dataset x level score: ``round(100 * mean, 2)`` over its instances (LV-Eval evaluation.py)."""
    if not instance_scores:
        raise ValueError("dataset_score: no instance scores")
    return round(100 * sum(instance_scores) / len(instance_scores), 2)


def level_score(dataset_scores: Mapping[str, float]) -> float:
    """A level's score: the unweighted mean of its dataset scores (not pooled over instances:
    factrecall's 200 needle positions would dominate)."""
    if not dataset_scores:
        raise ValueError("level_score: no dataset scores")
    return sum(dataset_scores.values()) / len(dataset_scores)


def ablation_table(scores: pl.DataFrame) -> pl.DataFrame:
    """The paper's CFI/KPR ablation (its Tables 8-9): per model, level and variant, each dataset's
    score and the level score, side by side for plain / cfi / kpr / cfi_kpr.

    ``scores`` has one row per scored instance: ``model, length, variant, task, item_id, score``
    (score in [0, 1]). Only items scored in every variant present for their (model, length)
    are kept, so the variants are compared on the same questions (an item without confusing
    facts has no CFI instance). Output rows: ``model, length, variant, task, score`` (100 x mean,
    2 decimals), ``n_instances``; ``task == "all"`` holds the level score (unweighted mean over
    the tasks).
    """
    needed = ["model", "length", "variant", "task", "item_id", "score"]
    missing = [c for c in needed if c not in scores.columns]
    if missing:
        raise ValueError(f"ablation_table: scores lack column(s) {missing}")
    variants_per_cell = scores.group_by("model", "length").agg(pl.col("variant").n_unique().alias("n_variants"))
    complete = (
        scores.group_by("model", "length", "item_id")
        .agg(pl.col("variant").n_unique().alias("n"))
        .join(variants_per_cell, on=["model", "length"])
        .filter(pl.col("n") == pl.col("n_variants"))
        .select("model", "length", "item_id")
    )
    kept = scores.join(complete, on=["model", "length", "item_id"], how="semi")
    per_task = (
        kept.group_by("model", "length", "variant", "task")
        .agg((pl.col("score").mean() * 100).round(2).alias("score"), pl.len().alias("n_instances"))
    )
    per_level = (
        per_task.group_by("model", "length", "variant")
        .agg(pl.col("score").mean().alias("score"), pl.col("n_instances").sum())
        .with_columns(pl.lit("all").alias("task"))
        .select(per_task.columns)
    )
    order = {v: i for i, v in enumerate(("plain", "cfi", "kpr", "cfi_kpr"))}
    return (
        pl.concat([per_task, per_level.with_columns(pl.col("n_instances").cast(per_task["n_instances"].dtype))])
        .with_columns(pl.col("variant").replace_strict(order, default=len(order)).alias("_order"))
        .sort("model", "length", "task", "_order")
        .drop("_order")
    )
