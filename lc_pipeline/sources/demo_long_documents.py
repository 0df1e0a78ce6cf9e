"""Long documents from the embedded demo corpus, for HELMET's long-document QA and summarization in
``helmet-demo`` (spec helmet.md §2.5, §2.6): ``kind: demo_long_documents``. Deterministic, offline.

The demo corpus (``sources/demo_corpus``, the same ``n_entities`` and ``seed``) has one ~300-token
article per invented entity: too short for a task that cuts one long document. Here the articles of
one entity type (people, places, organisations, works), in corpus order, are joined into dossiers
of at least ``dossier_tokens`` cl100k tokens (a type with more than twice that is split into
several; a type with less gives none, counted in the report). Per dossier:

* up to ``questions_per_dossier`` QA items (category ``long-document QA``): the demo corpus's
  single-hop questions about entities whose article starts within the dossier's first
  ``answerable_tokens`` tokens, so the answer survives any cut at the demo levels (4k, 8k);
* one summarization item: its key points (``record_fields.key_points``) are facts of the
  dossier's first ``key_points`` entities (the first sentence of each article that names its
  entity), and its gold summary is those facts in one paragraph.

Ids: documents ``{source}-dossier-{type}-{n}``, items ``{source}-dossier-{type}-{n}-q{k}`` and
``...-summary``.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import polars as pl

from lc_pipeline.construct.categories import LONG_DOCUMENT_QA, SUMMARIZATION_CATEGORY
from lc_pipeline.sources.demo_corpus import ENTITY_TYPES, build_demo_corpus
from lc_pipeline.sources.validation import ValidationReport, source_frames

__all__ = ["build_demo_long_documents", "demo_long_documents_source"]

PLURAL = {"person": "people", "place": "places", "organisation": "organisations", "work": "works"}
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def _fact(title: str, text: str) -> str:
    """The first sentence of an article that names its entity (else its first sentence)."""
    sentences = [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if s.strip()]
    return next((s for s in sentences if title in s), sentences[0] if sentences else title)


def _check(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"option {name}: expected an int >= {minimum}, got {value!r}")
    return value


def build_demo_long_documents(n_entities: int = 240, seed: int = 7, source: str = "demo_long",
                              dossier_tokens: int = 10_000, questions_per_dossier: int = 4,
                              answerable_tokens: int = 3_000, key_points: int = 6
                              ) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """(documents, items, one report): the dossiers and their QA and summarization items."""
    from lc_pipeline.construct.tokens import TokenCounter

    _check("dossier_tokens", dossier_tokens, 1)
    _check("questions_per_dossier", questions_per_dossier, 0)
    _check("answerable_tokens", answerable_tokens, 0)
    _check("key_points", key_points, 1)
    counter = TokenCounter.load()
    docs, items = build_demo_corpus(n_entities=n_entities, seed=seed, source=source)
    questions: dict[str, list[dict]] = {}
    for it in items.filter(pl.col("hops") == 1).iter_rows(named=True):
        questions.setdefault(it["evidence_doc_ids"][0], []).append(it)
    doc_rows, item_rows = [], []
    stats: Counter = Counter()
    for etype in ENTITY_TYPES:
        members = [(r["doc_id"], f"{r['title']}\n{r['text'].strip()}", r["title"], r["text"])
                   for r in docs.filter(pl.col("entity_type") == etype).iter_rows(named=True)]
        costs = counter.count_many([m[1] for m in members])
        total = sum(costs)
        if total < dossier_tokens:
            stats[f"no dossier: {PLURAL[etype]} have {total} tokens, fewer than dossier_tokens"] += 1
            continue
        n = max(1, total // dossier_tokens)
        share = total / n  # cut into n dossiers of about equal size, each >= dossier_tokens
        groups: list[list[int]] = [[]]
        used = 0
        for i, c in enumerate(costs):
            if used >= share * len(groups) and len(groups) < n:
                groups.append([])
            groups[-1].append(i)
            used += c
        for k, group in enumerate(groups, 1):
            doc_id = f"{source}-dossier-{etype}-{k}"
            text = "\n\n".join(members[i][1] for i in group)
            doc_rows.append((doc_id, source, f"Dossier of {PLURAL[etype]} ({k})", text, "en", "demo_dossiers", ""))
            start, asked = 0, 0
            for i in group:
                if start > answerable_tokens or asked == questions_per_dossier:
                    break
                for q in questions.get(members[i][0], [])[: questions_per_dossier - asked]:
                    asked += 1
                    item_rows.append((f"{doc_id}-q{asked}", source, "dossier_qa", LONG_DOCUMENT_QA, "en",
                                      q["question"], list(q["answers"]), list(q["answer_keywords"]), [doc_id], 1,
                                      [], [], "", "", "{}"))
                start += costs[i] + 1
            facts = [_fact(members[i][2], members[i][3]) for i in group[:key_points]]
            item_rows.append((f"{doc_id}-summary", source, "dossier_summary", SUMMARIZATION_CATEGORY, "en",
                              f"Summarize the dossier of {PLURAL[etype]}.", [" ".join(facts)], [], [doc_id], 1, [],
                              [], "", "", json.dumps({"key_points": facts}, ensure_ascii=False)))
            stats["dossiers"] += 1
            stats["dossier QA items"] += asked
    if not doc_rows:
        raise ValueError(f"demo_long_documents: no entity type reaches dossier_tokens={dossier_tokens} tokens with "
                         f"n_entities={n_entities}; raise n_entities or lower dossier_tokens")
    report = ValidationReport(file=f"demo corpus (n_entities={n_entities}, seed={seed})", format="generated",
                              records=len(item_rows), accepted=len(item_rows))
    report.notes.extend(f"{k}: {v}" for k, v in sorted(stats.items()))
    return (*source_frames(doc_rows, item_rows), [report])


def demo_long_documents_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``kind: demo_long_documents``: options ``n_entities`` (240), ``seed`` (7), ``dossier_tokens`` (10000),
    ``questions_per_dossier`` (4), ``answerable_tokens`` (3000), ``key_points`` (6)."""
    return build_demo_long_documents(source=config.name, **config.options)
