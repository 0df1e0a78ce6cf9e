"""The metrics a task names (``metrics:`` in its task file), registered by name in ``tasks.registry.METRICS``.

Each is a small public ``Metric``: a ``label`` (the ``metric_scores.metric`` value of its rows) and a
function ``(output, instance, task, options) -> float`` in [0, 1]. ``instance`` is the INSTANCES row
(``answers``, ``all_classes``, ``answer_keywords``, ``language``, ``task``); ``task`` its TaskSpec, whose
``answer_prefix`` is the one place a task's prefix is declared; ``options`` the metric's options from
the task file merged over the run's (e.g. LV-Eval's ``variant``). Families share a label so that a
benchmark's tables keep one metric column: every HELMET task writes ``helmet`` (spec helmet.md §3),
every 100-LongBench task ``lb100`` (100longbench.md §4.4), every LongBench task ``longbench``
(longbench_metrics.md), LV-Eval's keyword recall ``lveval`` (lveval.md §7).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lc_pipeline.score import helmet as helmet_metrics
from lc_pipeline.score import longbench as longbench_metrics
from lc_pipeline.score import longbench100 as lb100_metrics
from lc_pipeline.score.metrics import (
    exact_match,
    parse_answer,
    substring_exact_match,
    token_f1,
)

DEFAULT_ANSWER_PREFIX = "Answer:"


@dataclass(frozen=True)
class Metric:
    label: str  # metric_scores.metric
    fn: Callable[[str, Mapping[str, Any], Any, Mapping[str, Any]], float]
    description: str = ""
    # What the metric needs besides the output and the instance: "" (nothing: metric_scores computes it) or
    # "nli" (an NLI judge: the citation_scores asset computes it, score/citations.py; metric_scores skips it).
    needs: str = ""
    # For a metric that parses an answer (an MC letter, a label integer, a ranking): ``(output, instance, task)
    # -> bool``, whether the output holds one. A row it finds none in is scored as the metric scores it (0) and
    # its metric_scores status says "unparsable", so invalid outputs are counted apart from wrong ones.
    parses: Callable[[str, Mapping[str, Any], Any], bool] | None = None

    def __call__(self, output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        return self.fn(output, instance, task, options)


def _answers(instance: Mapping[str, Any]) -> list[str]:
    answers = instance.get("answers")
    if answers is None or isinstance(answers, str) or len(answers) == 0:
        raise ValueError(f"field answers: expected a non-empty list of gold strings, got {answers!r}")
    return list(answers)


def _prefix(task: Any) -> str:
    return getattr(task, "answer_prefix", None) or DEFAULT_ANSWER_PREFIX


def _raw_or_parsed(fn: Callable[[str, Sequence[str]], float]) -> Callable[..., float]:
    """HELMET's QA post-processing: the better of the raw output and the text after the task's answer prefix."""
    def score(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        golds = _answers(instance)
        return max(fn(output, golds), fn(parse_answer(output, _prefix(task)), golds))
    return score


SUBEM = Metric("subem", _raw_or_parsed(substring_exact_match), "SubEM (HELMET §3), raw or after the answer prefix")
EM = Metric("em", _raw_or_parsed(exact_match), "exact match (SQuAD normalization), raw or after the answer prefix")
F1 = Metric("f1", _raw_or_parsed(token_f1), "LongBench token F1, raw or after the answer prefix")

# --------------------------------------------------------------------------- HELMET (spec helmet.md §3)

HELMET_SUBEM = Metric("helmet", lambda o, i, t, _: helmet_metrics.subem(o, _answers(i), _prefix(t)),
                      "SubEM of the raw output or the text after the answer prefix")
HELMET_RECALL = Metric("helmet", lambda o, i, t, _: helmet_metrics.ruler_recall(o, _answers(i)),
                       "RULER recall: share of gold values in the output")
HELMET_NDCG10 = Metric("helmet", lambda o, i, t, _: helmet_metrics.rerank_score(o, _answers(i)),
                       "NDCG@10 of the parsed ranking (trec_eval)",
                       parses=lambda o, i, t: helmet_metrics.ranking_parses(o))
# HELMET scores ROUGE-L on the raw and on the parsed output and keeps the better (its summ too: §3).
HELMET_ROUGEL = Metric("helmet", lambda o, i, t, _: helmet_metrics.rouge_l(o, _answers(i), t.answer_prefix),
                       "ROUGE-L F1, the better of the raw output and the text after the answer prefix")
# ∞Bench MC (§2.5, §10.21): the letter or "letter. option", raw or after the answer prefix, or "letter. option" inside.
HELMET_MC = Metric("helmet", lambda o, i, t, _: helmet_metrics.mc_accuracy(o, _answers(i), _prefix(t)),
                   "multiple-choice accuracy: the option's letter, raw or parsed, or 'letter. option' in the output",
                   parses=lambda o, i, t: helmet_metrics.mc_parses(o, _answers(i), _prefix(t)))

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


def official_instance(instance: Mapping[str, Any]) -> bool:
    """Whether the instance was built under a benchmark's official protocol (its ``record_fields.protocol``)."""
    raw = instance.get("record_fields") if hasattr(instance, "get") else None
    if not raw:
        return False
    fields = raw if isinstance(raw, Mapping) else json.loads(raw)
    return isinstance(fields, Mapping) and str(fields.get("protocol") or "").startswith("official")


_official_instance = official_instance

# The key under which metric_scores.score_frame hands a metric the generation's ``chat_template_source``
# (GENERATIONS: "none" when the prompt went without a chat template), beside the instance's own fields.
FED_TEMPLATE = "chat_template_source"
NO_TEMPLATE = "none"


def completion_mode(instance: Mapping[str, Any], task: Any) -> bool:
    """Whether the output continues a plain prompt (HELMET's completion mode, ``use_chat_template`` False) rather
    than answering a chat turn: the generation's ``chat_template_source`` when the caller gave it (``"none"``: no
    template, e.g. a base model on a chat task), else the task's switch (``chat_template: false``)."""
    fed = instance.get(FED_TEMPLATE) if hasattr(instance, "get") else None
    if fed:
        return fed == NO_TEMPLATE
    return not bool(getattr(task, "chat_template", False))


def _helmet_label(output: str, instance: Mapping[str, Any], task: Any) -> float:
    return icl_label(output, _answers(instance), _label_prefix(task), official=official_instance(instance),
                     chat=not completion_mode(instance, task))


def _helmet_label_parses(output: str, instance: Mapping[str, Any], task: Any) -> bool:
    if official_instance(instance):
        return bool(icl_official_parse(output, _label_prefix(task), not completion_mode(instance, task)))
    return icl_predicted_label(output, _label_prefix(task)) is not None


HELMET_LABEL = Metric("helmet", lambda o, i, t, _: _helmet_label(o, i, t),
                      "ICL accuracy: the first integer after the answer prefix is the gold label's integer (official "
                      "protocol: HELMET's normalized exact match of the parsed line)",
                      parses=_helmet_label_parses)

# --------------------------------------------------------------------------- 100-LongBench (spec §4.4)


def _lb100(scorer: Callable[[str, str], float]) -> Callable[..., float]:
    def score(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        return lb100_metrics.first_line_score(scorer, output, _answers(instance))
    return score


LB100_KV_RETRIEVAL = Metric("lb100", _lb100(lb100_metrics.kv_retrieval_score), "last UUID of the first line",
                            parses=lambda o, i, t: lb100_metrics.first_line_parses("uuid", o))
LB100_FIRST_INTEGER = Metric("lb100", _lb100(lb100_metrics.first_integer_score), "first integer of the first line",
                             parses=lambda o, i, t: lb100_metrics.first_line_parses("integer", o))
LB100_QA_F1 = Metric("lb100", _lb100(longbench_metrics.qa_f1_score), "token F1 of the first line")
LB100_ROUGE = Metric("lb100", _lb100(longbench_metrics.rouge_score), "ROUGE-L of the first line")

# --------------------------------------------------------------------------- LongBench v1 (longbench_metrics.md)


def _longbench(kind: str) -> Callable[..., float]:
    def score(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
        return longbench_metrics.score_with(kind, output, _answers(instance), instance.get("all_classes"),
                                            first_line=bool(options.get("first_line", False)))
    return score


LONGBENCH_QA_F1 = Metric("longbench", _longbench("qa_f1"), "QA F1 (English normalization)")
LONGBENCH_QA_F1_ZH = Metric("longbench", _longbench("qa_f1_zh"), "QA F1 on jieba tokens")
LONGBENCH_ROUGE = Metric("longbench", _longbench("rouge"), "ROUGE-L F (rouge package)")
LONGBENCH_ROUGE_ZH = Metric("longbench", _longbench("rouge_zh"), "ROUGE-L F on jieba tokens")
LONGBENCH_CLASSIFICATION = Metric("longbench", _longbench("classification"), "class names found, gold share")
LONGBENCH_RETRIEVAL = Metric("longbench", _longbench("retrieval"), "share of numbers equal to the gold paragraph")
LONGBENCH_RETRIEVAL_ZH = Metric("longbench", _longbench("retrieval_zh"), "the same, Chinese paragraph labels")
LONGBENCH_COUNT = Metric("longbench", _longbench("count"), "share of numbers equal to the gold count")
LONGBENCH_CODE_SIM = Metric("longbench", _longbench("code_sim"), "fuzz ratio of the first code line")

# --------------------------------------------------------------------------- LV-Eval (spec lveval.md §7)


def lveval_rule(task: str, language: str) -> str:
    """The LV-Eval rule of an instance: its dataset's own rule when the task is an LV-Eval dataset
    (cmrc, dureader, factrecall ... differ), else keyword-recall F1 in its language."""
    from lc_pipeline.score.keyword_recall import dataset_rule

    try:
        return dataset_rule(task or "").name
    except ValueError:
        return f"keyword_recall_{language if language in ('en', 'zh') else 'en'}"


def _lveval(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
    from lc_pipeline.score.keyword_recall import DEFAULT_VARIANT, lveval_score

    rule = options.get("rule") or lveval_rule(instance.get("task") or "", instance.get("language") or "en")
    return lveval_score(rule, output, instance.get("answers") or [], instance.get("answer_keywords") or [],
                        options.get("variant", DEFAULT_VARIANT))


LVEVAL = Metric("lveval", _lveval, "keyword-recall gate, then F1 (the dataset's own rule)")
