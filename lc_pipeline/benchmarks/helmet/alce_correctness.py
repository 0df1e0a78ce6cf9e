"""ALCE correctness (spec helmet.md §3 "ALCE", §2.4): ASQA STR-EM and QAMPARI recall-top-5, deterministic.

Both score the output with its citations removed (ALCE's ``remove_citations``: ``[n`` and `` [n``,
``]`` and `` |`` deleted) after HELMET's preprocessing (newlines to spaces, ``<|im_end|>`` removed).

* **ours** (``protocol: ours`` and constructed HELMET): a reply that starts with the task's answer prefix
  (``Answer: ...``, as a model may repeat it) is scored after it, so the prefix never costs a QAMPARI answer
  its match.
* **official** (an instance whose ``record_fields.protocol`` is HELMET's official protocol; fidelity review
  HE10): as HELMET scores it. In completion mode (the prompt went without a chat template:
  task_metrics.completion_mode) ``eval.py`` prepends the prefix to the output before ``eval_alce.py`` reads it,
  and nothing strips it: QAMPARI's first comma piece is then "answer <item>" and matches no gold. In chat mode
  the reply is read as it is (a repeated prefix stays too). Newlines are collapsed as ``re.sub(r"\n+", " ")``.

* **STR-EM** (ASQA): the mean over the question's QA pairs of [some short answer of the pair is a
  normalized substring of the output] (ALCE ``compute_str_em`` / ``exact_presence``). A blank short
  answer is never counted (ALCE would count "" as present in any output; the alce source drops them).
* **rec-5** (QAMPARI): the output, a trailing ``.``/``,`` stripped, split on commas and each piece
  normalized; a gold cluster is hit when any of its aliases equals a piece;
  ``min(5, hits) / min(5, clusters)`` (ALCE ``compute_qampari_f1``'s ``rec_top5``).

Normalization is SQuAD's (``lc_pipeline.text.normalize_answer``), as every HELMET metric's. Citation
recall and precision need an entailment judge: ``score/citations.py``, not here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from lc_pipeline.score.task_metrics import Metric, completion_mode, official_instance
from lc_pipeline.text import normalize_answer

__all__ = ["QAMPARI_REC5", "STR_EM", "official_preprocess", "preprocess", "qampari_rec_top5", "record_fields_of",
           "remove_citations", "str_em"]

_CITATION_SPACE = re.compile(r" \[\d+")
_CITATION = re.compile(r"\[\d+")


def remove_citations(text: str) -> str:
    """ALCE's ``remove_citations``: ``" [3"`` then ``"[3"`` removed, then ``" |"`` and ``"]"``."""
    return _CITATION.sub("", _CITATION_SPACE.sub("", text)).replace(" |", "").replace("]", "")


def preprocess(output: str, prefix: str | None = None) -> str:
    """HELMET's ALCE preprocessing: newlines to spaces, ``<|im_end|>`` removed, stripped; a leading
    ``prefix`` (the task's answer prefix, any case, repeated or not) dropped."""
    text = output.replace("\n", " ").replace("<|im_end|>", "").strip()
    if prefix:
        while text.lower().startswith(prefix.lower()):
            text = text[len(prefix):].strip()
    return text


def official_preprocess(output: str, prefix: str = "Answer:", completion: bool = False) -> str:
    """The output as HELMET's ``eval_alce.py`` reads it: ``prefix`` prepended as is in completion mode (``eval.py``
    does it for parsing), runs of newlines to one space, ``<|im_end|>`` removed; no prefix stripped."""
    text = prefix + output if completion else output
    return re.sub(r"\n+", " ", text).replace("<|im_end|>", "")


def _prepared(output: str, prefix: str | None, official: bool, completion: bool) -> str:
    return official_preprocess(output, prefix or "Answer:", completion) if official else preprocess(output, prefix)


def str_em(output: str, qa_pairs: Sequence[Sequence[str]], prefix: str | None = None, *, official: bool = False,
           completion: bool = False) -> float:
    """ASQA STR-EM of one output: the share of QA pairs with a short answer in the citation-free output
    (``official``: read as HELMET reads it, :func:`official_preprocess`)."""
    if not qa_pairs:
        raise ValueError("str_em: qa_pairs is empty; an ASQA question has at least one QA pair")
    text = normalize_answer(remove_citations(_prepared(output, prefix, official, completion)))
    hits = [any((n := normalize_answer(a)) and n in text for a in pair) for pair in qa_pairs]
    return sum(hits) / len(hits)


def qampari_rec_top5(output: str, clusters: Sequence[Sequence[str]], prefix: str | None = None, *,
                     official: bool = False, completion: bool = False) -> float:
    """QAMPARI recall-top-5 of one output: min(5, clusters hit) / min(5, clusters) (``official``: the output read as
    HELMET reads it, :func:`official_preprocess`: in completion mode the first piece keeps the prefix)."""
    if not clusters:
        raise ValueError("qampari_rec_top5: answer_clusters is empty; a QAMPARI question has at least one answer")
    text = remove_citations(_prepared(output, prefix, official, completion)).rstrip().rstrip(".").rstrip(",")
    preds = {p for p in (normalize_answer(x.strip()) for x in text.split(",")) if p}
    hits = sum(any(normalize_answer(a) in preds for a in cluster) for cluster in clusters)
    return min(5, hits) / min(5, len(clusters))


def record_fields_of(instance: Mapping[str, Any], field: str) -> Any:
    """``instance["record_fields"][field]`` (the column is JSON text; a dict is taken as is); a ValueError
    naming the instance and the field when it is absent."""
    raw = instance.get("record_fields")
    fields = json.loads(raw) if isinstance(raw, str) and raw else raw if isinstance(raw, Mapping) else {}
    if field not in fields:
        raise ValueError(f"instance {instance.get('instance_id', '?')!r} (task {instance.get('task', '?')!r}): "
                         f"field 'record_fields.{field}' is missing; the cite builder writes it "
                         "(benchmarks/helmet/construction/cite.py)")
    return fields[field]


# --------------------------------------------------------------------------- registered metrics (tasks/registry.py)

def _mode(instance: Mapping[str, Any], task: Any) -> dict[str, bool]:
    return {"official": official_instance(instance), "completion": completion_mode(instance, task)}


def _str_em(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
    return str_em(output, record_fields_of(instance, "qa_pairs"), getattr(task, "answer_prefix", None),
                  **_mode(instance, task))


def _rec_top5(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
    return qampari_rec_top5(output, record_fields_of(instance, "answer_clusters"), getattr(task, "answer_prefix", None),
                            **_mode(instance, task))


STR_EM = Metric("str_em", _str_em, "ASQA STR-EM: share of QA pairs with a short answer in the output, citations "
                                    "removed (ALCE, helmet.md §3)")
QAMPARI_REC5 = Metric("rec_top5", _rec_top5, "QAMPARI recall-top-5: min(5, answer clusters named) / min(5, "
                                              "clusters), comma-split output, citations removed (helmet.md §3)")
