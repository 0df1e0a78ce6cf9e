"""A deterministic fictional encyclopedia: the embedded offline corpus.

The facts are invented, so no model can answer from memory: a correct answer shows that
the model read the context. Entities (people, places, organisations, works) are linked by
relations (birthplace, employer, founder, headquarters, creator, region, seat), which
yields single-hop questions (one document) and two-hop questions (a bridge entity named
in the first document, the answer stated in the second).

Everything is drawn from one ``random.Random(seed)`` and iterated in list order (never
over sets or ``hash()`` of strings), so the same arguments give identical frames.

Modules: ``data`` (word lists and sentence templates, packaged YAML under
``lc_pipeline/sources/data/``), ``names`` (invented names), ``world`` (entities and
relations), ``prose`` (one article per entity), ``questions`` (questions and answers).
"""

from __future__ import annotations

import random

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.sources.demo_corpus.prose import article
from lc_pipeline.sources.demo_corpus.questions import question_rows
from lc_pipeline.sources.demo_corpus.world import build_world

__all__ = ["DOMAIN", "ENTITY_TYPES", "MAX_ENTITIES", "MIN_ENTITIES", "build_demo_corpus"]

DOMAIN = "fictional_encyclopedia"
ENTITY_TYPES = ("person", "place", "organisation", "work")
MIN_ENTITIES = 8  # two of each type: every relation needs a partner of the right type
MAX_ENTITIES = 100_000  # name space and build time stay comfortable below this


def _check_args(n_entities, seed, source) -> None:
    if isinstance(n_entities, bool) or not isinstance(n_entities, int):
        raise ValueError(f"n_entities must be an int, got {n_entities!r}")
    if not MIN_ENTITIES <= n_entities <= MAX_ENTITIES:
        raise ValueError(f"n_entities must be between {MIN_ENTITIES} and {MAX_ENTITIES}, got {n_entities}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"source must be a non-empty string, got {source!r}")


def build_demo_corpus(n_entities: int = 240, seed: int = 7, source: str = "demo") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (documents, items), conforming exactly to schemas.SOURCE_DOCUMENTS and schemas.SOURCE_ITEMS.

    One document per entity (doc ids ``{source}-0001`` ...), 150-400 words of encyclopedic
    prose (~300 cl100k tokens on average). Per entity one single-hop question and, where a
    chain exists whose answer cannot be read off the first document alone, one two-hop
    question (item ids ``{source}-q00001`` ...). ``evidence_doc_ids`` follows the chain, the
    document stating the answer last.
    """
    _check_args(n_entities, seed, source)
    rng = random.Random(seed)
    world = build_world(n_entities, rng)

    entities: list = [*world.regions, *world.settlements, *world.people, *world.orgs, *world.works]
    rng.shuffle(entities)  # interleave the types, so any prefix of the corpus is mixed
    width = max(4, len(str(len(entities))))
    for i, e in enumerate(entities, 1):
        e.doc_id = f"{source}-{i:0{width}d}"
    for e in entities:
        e.text = article(e, world, rng)

    docs = pl.DataFrame(
        {
            "doc_id": [e.doc_id for e in entities],
            "source": [source] * len(entities),
            "title": [e.name for e in entities],
            "text": [e.text for e in entities],
            "language": ["en"] * len(entities),
            "domain": [DOMAIN] * len(entities),
            "entity_type": [e.etype for e in entities],
        },
        schema=schemas.SOURCE_DOCUMENTS,
    )

    rows = question_rows(entities, rng)
    qwidth = max(5, len(str(len(rows))))
    sep = "\x1f"  # list columns travel as joined strings: polars builds them far faster by splitting
    items = pl.DataFrame(
        {
            "item_id": [f"{source}-q{i:0{qwidth}d}" for i in range(1, len(rows) + 1)],
            "source": [source] * len(rows),
            "task": [r[0] for r in rows],
            "category": [r[1] for r in rows],
            "language": ["en"] * len(rows),
            "question": [r[3] for r in rows],
            "answers": [sep.join(r[4]) for r in rows],
            "answer_keywords": [sep.join(r[5]) for r in rows],
            "evidence_doc_ids": [sep.join(r[6]) for r in rows],
            "hops": [r[2] for r in rows],
            "all_classes": [[] for _ in rows],
            "confusing_facts": [[] for _ in rows],
            **{column: [default] * len(rows) for column, default in schemas.RECORD_COLUMN_DEFAULTS.items()},
        },
    ).with_columns(pl.col("answers", "answer_keywords", "evidence_doc_ids").str.split(sep))
    return schemas.conform(docs, "source_documents"), schemas.conform(items, "source_items")


def demo_corpus_source(source):
    """Source kind ``demo_corpus``: the embedded offline corpus (options: :func:`build_demo_corpus`'s keywords)."""
    documents, items = build_demo_corpus(source=source.name, **source.options)
    return documents, items, []
