"""Instance variants (LV-Eval's construction methods, run on any corpus): one assembled plain instance -> its CFI,
KPR and CFI+KPR rows.

The paper's pipeline order is mixing, then confusing-fact insertion (CFI), then keyword and
phrase replacement (KPR) (spec ``lveval.md`` §3, §6.4). Assembly does the mixing and yields
the ``plain`` row; :func:`derive_variants` derives the others from it:

* ``cfi``: the item's accepted confusing facts inserted at seeded random sentence boundaries
  of the plain context (each fact its own boundary, drawn per instance);
* ``kpr``: the item's replacement rules applied to question, answers, answer keywords and
  context;
* ``cfi_kpr``: the ``cfi`` row (same insertion points) with the rules applied on top, so
  the facts are rewritten too.

Contract (what the instances asset relies on):

* input: one INSTANCES row as a dict with ``variant == "plain"``, its item's accepted facts as
  ``(fact_id, text)`` in ``fact_index`` order, its item's rules, the instance seed, and the
  token counter the plain row was measured with (``count_many``);
* output: one dict per requested variant, always in the order ``cfi``, ``kpr``, ``cfi_kpr``.
  Each is the plain row with ``variant``, ``instance_id`` (hash of the plain id, the variant
  and the facts/rules used), ``question``, ``answers``, ``answer_keywords``, ``context``,
  ``prompt`` (the plain prompt with the new context and question put in place),
  ``input_tokens``, ``context_tokens`` and ``evidence_depths`` re-measured, plus two keys
  INSTANCES added for LV-Eval: ``insertions`` (list of {fact_id, sentence_index, char_offset,
  char_length} in the row's own context, [] without CFI) and ``replacement_rule_ids``
  ([] without KPR). Everything else (``target_tokens``, ``depth``, ids of the context's
  documents ...) is copied: facts make a CFI prompt longer than the plain one by their own
  tokens;
* deterministic: the same inputs and seed give identical rows;
* refuses (``ValueError`` naming the instance and the field) a variant it cannot build: CFI
  without facts, KPR without rules, a rule whose new term already occurs in the instance, a
  replaced term left anywhere afterwards.

Pure functions, no Dagster.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from lc_pipeline import schemas
from lc_pipeline.construct.confusing_facts import Insertion, insert_facts
from lc_pipeline.construct.replacement import (
    ReplacementRule,
    apply_rules,
    check_new_terms_absent,
    remaining_terms,
    rule_id,
)
from lc_pipeline.fingerprints import short_id

__all__ = [
    "INSERTIONS_DTYPE",
    "INSERTION_FIELDS",
    "VARIANT_ORDER",
    "available_variants",
    "derive_variants",
    "kpr_problems",
]

VARIANT_ORDER = ("plain", "cfi", "kpr", "cfi_kpr")
INSERTION_FIELDS = ("fact_id", "sentence_index", "char_offset", "char_length")
# Polars type of the instances table's ``insertions`` column ([] for plain / kpr rows).
INSERTIONS_DTYPE = schemas.INSERTIONS


class _Counter(Protocol):
    def count_many(self, texts: Sequence[str]) -> list[int]: ...


def available_variants(n_facts: int, n_rules: int) -> tuple[str, ...]:
    """The LV-Eval variants an item can have beyond ``plain``, in pipeline order."""
    return tuple(v for v in VARIANT_ORDER[1:]
                 if ("cfi" not in v or n_facts > 0) and ("kpr" not in v or n_rules > 0))


def _seed(*parts: object) -> int:
    blob = json.dumps([str(p) for p in parts]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


def _block_start(context: str, index: int) -> int | None:
    # Blocks are "Document [i] (Title: ...)" (construct.prompts) joined by blank lines.
    from lc_pipeline.construct.prompts import format_block

    prefix = format_block(index, "\x00", "").split("\x00")[0]
    m = re.search(r"(?:^|(?<=\n\n))" + re.escape(prefix), context)
    return m.start() if m else None


def _measure(row: dict, counter: _Counter, where: str) -> None:
    """Recount input/context tokens and the evidence depths of a rewritten row, in place."""
    context = row["context"]
    starts = []
    for doc_id in row["evidence_doc_ids"]:
        try:
            index = list(row["context_doc_ids"]).index(doc_id) + 1
        except ValueError:
            raise ValueError(f"{where}: field 'evidence_doc_ids': {doc_id!r} is not in context_doc_ids") from None
        start = _block_start(context, index)
        if start is None:
            raise ValueError(f"{where}: field 'context': the block header of evidence {doc_id!r} (block {index}) "
                             "is not found")
        starts.append(start)
    counts = counter.count_many([row["prompt"], context] + [context[:s] for s in starts])
    row["input_tokens"], row["context_tokens"] = counts[0], counts[1]
    row["evidence_depths"] = [c / counts[1] for c in counts[2:]]


def _rebuild_prompt(plain: Mapping, context: str, question: str, where: str) -> str:
    prompt, old_context, old_question = plain["prompt"], plain["context"], plain["question"]
    at = prompt.find(old_context)
    if at < 0:
        raise ValueError(f"{where}: field 'prompt' does not contain the row's context")
    before, after = prompt[:at], prompt[at + len(old_context):]
    if question != old_question:
        q = after.rfind(old_question)
        if q >= 0:
            after = after[:q] + question + after[q + len(old_question):]
        else:
            q = before.rfind(old_question)
            if q < 0:
                raise ValueError(f"{where}: field 'prompt' does not contain the row's question")
            before = before[:q] + question + before[q + len(old_question):]
    return before + context + after


def _kpr_with_insertions(
    fields: dict, insertions: list[Insertion], rules: Sequence[ReplacementRule], where: str
) -> tuple[dict, list[Insertion]]:
    """Apply rules to all fields; the context piecewise, so the facts' new offsets are known."""
    context = fields["context"]
    cuts = sorted((ins.char_offset, ins.char_offset + ins.char_length, k) for k, ins in enumerate(insertions))
    pieces, kinds, cursor = [], [], 0
    for start, end, k in cuts:
        pieces += [context[cursor:start], context[start:end]]
        kinds += [None, k]
        cursor = end
    pieces.append(context[cursor:])
    kinds.append(None)
    replaced, _ = apply_rules({"pieces": pieces}, rules)
    new_pieces = replaced["pieces"]
    out, _ = apply_rules({k: v for k, v in fields.items()}, rules)
    if "".join(new_pieces) != out["context"]:  # a term spanning a fact's edge: offsets would lie
        raise ValueError(f"{where}: a replacement term spans the edge of an inserted confusing fact")
    new_insertions: list[Insertion | None] = [None] * len(insertions)
    offset = 0
    for piece, k in zip(new_pieces, kinds):
        if k is not None:
            old = insertions[k]
            new_insertions[k] = Insertion(old.fact_id, old.sentence_index, offset, len(piece))
        offset += len(piece)
    return out, [ins for ins in new_insertions if ins is not None]


def derive_variants(
    plain: Mapping,
    facts: Sequence[tuple[str, str]],
    rules: Sequence[ReplacementRule],
    *,
    seed: int,
    counter: _Counter,
    variants: Sequence[str] = ("cfi", "kpr", "cfi_kpr"),
) -> list[dict]:
    """The requested variants of one plain instance row, in pipeline order (see the module docstring)."""
    iid = plain.get("instance_id")
    where = f"instance {iid!r} (item {plain.get('item_id')!r})"
    if plain.get("variant") != "plain":
        raise ValueError(f"{where}: field 'variant': expected a 'plain' row, got {plain.get('variant')!r}")
    unknown = [v for v in variants if v not in VARIANT_ORDER[1:]]
    if unknown:
        raise ValueError(f"{where}: unknown variant(s) {unknown}; expected some of {VARIANT_ORDER[1:]}")
    wanted = [v for v in VARIANT_ORDER[1:] if v in variants]
    if any("cfi" in v for v in wanted) and not facts:
        raise ValueError(f"{where}: variants {wanted} need confusing facts, and the item has none accepted")
    if any("kpr" in v for v in wanted) and not rules:
        raise ValueError(f"{where}: variants {wanted} need replacement rules, and the item has none")
    bad = [r for r in rules if r.item_id != plain["item_id"]]
    if bad:
        raise ValueError(f"{where}: rule {bad[0].old!r} -> {bad[0].new!r} belongs to item {bad[0].item_id!r}")
    language = plain["language"]
    fact_ids = [f for f, _ in facts]
    rule_ids = [rule_id(r) for r in rules]

    cfi_context, insertions = plain["context"], []
    if any("cfi" in v for v in wanted):
        cfi_context, insertions = insert_facts(plain["context"], facts, seed=_seed(seed, iid, "cfi"),
                                               language=language)

    rows = []
    for variant in wanted:
        base_context = cfi_context if "cfi" in variant else plain["context"]
        base_insertions = list(insertions) if "cfi" in variant else []
        fields = {"question": plain["question"], "answers": list(plain["answers"]),
                  "answer_keywords": list(plain["answer_keywords"] or []), "context": base_context}
        used_rules: list[str] = []
        if "kpr" in variant:
            check_new_terms_absent(fields, rules, where)
            fields, base_insertions = _kpr_with_insertions(fields, base_insertions, rules, where)
            left = remaining_terms(fields, rules)
            if left:
                field, term, offset = left[0]
                raise ValueError(f"{where}: field {field!r}: replaced term {term!r} remains at offset {offset}")
            used_rules = rule_ids
        row = dict(plain)
        row.update(fields)
        row["variant"] = variant
        row["instance_id"] = short_id(iid, variant, *(fact_ids if "cfi" in variant else ()), "|",
                                      *used_rules, length=16)
        row["prompt"] = _rebuild_prompt(plain, fields["context"], fields["question"], where)
        row["insertions"] = [{k: getattr(ins, k) for k in INSERTION_FIELDS} for ins in base_insertions]
        row["replacement_rule_ids"] = used_rules
        _measure(row, counter, where)
        rows.append(row)
    return rows


def kpr_problems(instances: Iterable[Mapping], rules: Mapping[str, Sequence[ReplacementRule]]) -> list[str]:
    """For an asset check (acceptance 2): every old term still present in the question, answers,
    answer keywords, context or prompt of a KPR / CFI+KPR instance; [] when none is."""
    problems = []
    for row in instances:
        if "kpr" not in (row.get("variant") or ""):
            continue
        fields = {k: row[k] for k in ("question", "answers", "answer_keywords", "context", "prompt")}
        for field, term, offset in remaining_terms(fields, rules.get(row["item_id"], ())):
            problems.append(f"instance {row['instance_id']} (item {row['item_id']!r}): field {field!r} still has "
                            f"{term!r} at offset {offset}")
    return problems
