"""Questions about the world: one single-hop question per entity and, where a real chain exists, one two-hop.

A question names exactly one entity (names are unique) and follows functional relations
(one birthplace per person, one founder per organisation ...), so its answer is unique.
Each candidate is (question, answer value, evidence chain of entities, answer stated last).
"""

from __future__ import annotations

import random

from lc_pipeline.sources.demo_corpus.data import vocabulary
from lc_pipeline.sources.demo_corpus.world import Entity, Org, Person, Place, Work
from lc_pipeline.text import normalize_answer

Candidate = tuple[str, object, list[Entity]]
# (task, category, hops, question, answers, answer keywords, evidence doc ids)
QuestionRow = tuple[str, str, int, str, list[str], list[str], list[str]]


def answers_for(value: object) -> tuple[list[str], list[str]]:
    """(answers, answer_keywords) for an answer value."""
    if isinstance(value, Person):
        # The surname alone is a natural short answer, and still unique (surnames are unique).
        return [value.name, value.family], [value.family]
    if isinstance(value, Org):
        return [value.name], [value.stem]
    if isinstance(value, Place):
        return [value.name], [value.name]
    return [str(value)], [str(value)]


def single_hop(e: Entity) -> list[Candidate]:
    if isinstance(e, Person):
        qs = [(f"In what year was {e.name} born?", e.birth, [e]),
              (f"Where was {e.name} born?", e.birthplace, [e]),
              (f"What was {e.name}'s occupation?", e.occupation, [e])]
        if len(e.founded_orgs) <= 1:  # two foundations would make "worked for" ambiguous
            qs.append((f"Which organisation did {e.name} work for?", e.employer, [e]))
        return qs
    if isinstance(e, Org):
        return [(f"In what year was the {e.name} founded?", e.founded, [e]),
                (f"Who founded the {e.name}?", e.founder, [e]),
                (f"Where is the {e.name} headquartered?", e.hq, [e])]
    if isinstance(e, Work):
        kind = vocabulary().work_kinds[e.kind]
        return [(f"Who {kind.verb} the {e.kind} {e.name}?", e.creator, [e]),
                (f"In what year was the {e.kind} {e.name} {kind.when}?", e.year, [e])]
    if e.kind == "region":
        return [(f"What is the administrative seat of the region of {e.name}?", e.seat, [e])]
    return [(f"On which river does {e.name} lie?", e.river, [e]),
            (f"In what year was {e.name} founded?", e.founded, [e]),
            (f"In which region is {e.name} located?", e.region, [e])]


def two_hop(e: Entity) -> list[Candidate]:
    if isinstance(e, Person):
        b, o = e.birthplace, e.employer
        return [(f"On which river does the birthplace of {e.name} lie?", b.river, [e, b]),
                (f"In which region was {e.name} born?", b.region, [e, b]),
                (f"Where is the organisation that {e.name} worked for headquartered?", o.hq, [e, o]),
                (f"In what year was the organisation that {e.name} worked for founded?", o.founded, [e, o]),
                (f"Who founded the organisation that {e.name} worked for?", o.founder, [e, o])]
    if isinstance(e, Org):
        f, h = e.founder, e.hq
        return [(f"Where was the founder of the {e.name} born?", f.birthplace, [e, f]),
                (f"In what year was the founder of the {e.name} born?", f.birth, [e, f]),
                (f"In which region is the {e.name} headquartered?", h.region, [e, h]),
                (f"On which river does the town where the {e.name} has its headquarters lie?", h.river, [e, h])]
    if isinstance(e, Work):
        role = vocabulary().work_kinds[e.kind].role
        c = e.creator
        return [(f"Where was the {role} of {e.name} born?", c.birthplace, [e, c]),
                (f"In what year was the {role} of {e.name} born?", c.birth, [e, c]),
                (f"Which organisation did the {role} of {e.name} work for?", c.employer, [e, c])]
    if e.kind == "region":
        s = e.seat
        return [(f"On which river does the seat of {e.name} lie?", s.river, [e, s]),
                (f"In what year was the seat of {e.name} founded?", s.founded, [e, s])]
    r = e.region
    return [(f"What is the administrative seat of the region in which {e.name} lies?", r.seat, [e, r])]


def question_rows(entities: list[Entity], rng: random.Random) -> list[QuestionRow]:
    """Per entity (in order) one random single-hop question and the first two-hop candidate,
    in random order, whose answer cannot be read off the first document alone."""
    normalized: dict[str, str] = {}  # doc id -> normalized text, computed once per document

    def mentions(doc: Entity, answers: list[str]) -> bool:
        # The test of text.contains_answer, without re-normalizing the document per question.
        if doc.doc_id not in normalized:
            normalized[doc.doc_id] = normalize_answer(doc.text)
        return any(na and na in normalized[doc.doc_id] for na in map(normalize_answer, answers))

    rows: list[QuestionRow] = []
    for e in entities:
        question, value, chain = rng.choice(single_hop(e))
        answers, keywords = answers_for(value)
        rows.append(("single_hop_qa", "single-doc QA", 1, question, answers, keywords, [d.doc_id for d in chain]))
        candidates = two_hop(e)
        for question, value, chain in rng.sample(candidates, len(candidates)):
            answers, keywords = answers_for(value)
            # Only real two-hop questions: the answer must not already be readable in the
            # first document (e.g. a founder born in the town that hosts the society).
            if mentions(chain[0], answers):
                continue
            rows.append(("multi_hop_qa", "multi-doc QA", 2, question, answers, keywords, [d.doc_id for d in chain]))
            break
    return rows
