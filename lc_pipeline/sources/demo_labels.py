"""A small labelled set from the embedded demo corpus, for HELMET's ICL category on ``helmet-demo``.

The demo corpus (``sources/demo_corpus``) asks one- and two-hop questions about its fictional
world; here every question it can ask (all candidates of every entity, not only the one its QA
items keep) is labelled by **what it asks for**, a TREC-like question-type task with 12 labels:
birth year, birthplace, occupation, employer, founding year, founder, headquarters, creator,
creation year, administrative seat, river, region. The label follows from the entity the question
ends at and the kind of its answer (a person's year is a birth year, a settlement's place its
region ...), never from the wording, so rewording a template keeps the labels right.

Deterministic: the world is ``build_world(n_entities, random.Random(seed))`` (the demo corpus's
own world for the same arguments) and the split is a seeded shuffle: ``test_share`` of each
label's questions are test items, the rest demonstrations. Items are those of the ``icl``
source (:func:`lc_pipeline.sources.icl.icl_item_rows`): task ``icl``, category ``classification``,
answers [label], ``record_fields.split`` demo | test.

Options (``kind: demo_labels``): ``n_entities`` (default 240), ``seed`` (7), ``test_share`` (0.2).
At 240 entities there are 1,608 distinct questions, at least 38 demonstrations of every label
(creator, creation year): the generic ``icl`` task's 4k and 8k shot counts (180 and 360, 15 and 30
rounds of 12; about 18 cl100k tokens a demonstration) repeat no example.
"""

from __future__ import annotations

import random
from collections import defaultdict

import polars as pl

from lc_pipeline.sources.demo_corpus import MAX_ENTITIES, MIN_ENTITIES
from lc_pipeline.sources.demo_corpus.questions import single_hop, two_hop
from lc_pipeline.sources.demo_corpus.world import Entity, Org, Person, Place, Work, build_world
from lc_pipeline.sources.icl import icl_item_rows
from lc_pipeline.sources.validation import ValidationReport, source_frames

__all__ = ["LABELS", "demo_labels", "demo_labels_source", "question_label"]

LABELS = ("birth year", "birthplace", "occupation", "employer", "founding year", "founder", "headquarters",
          "creator", "creation year", "administrative seat", "river", "region")

# (what the question ends at, what its answer is) -> label
_LABEL_OF = {
    ("person", "int"): "birth year", ("person", "place"): "birthplace", ("person", "str"): "occupation",
    ("person", "org"): "employer",
    ("org", "int"): "founding year", ("org", "person"): "founder", ("org", "place"): "headquarters",
    ("work", "person"): "creator", ("work", "int"): "creation year",
    ("region", "place"): "administrative seat",
    ("settlement", "str"): "river", ("settlement", "int"): "founding year", ("settlement", "place"): "region",
}


def _kind(x: object) -> str:
    if isinstance(x, Place):
        return "region" if x.kind == "region" else "settlement"
    for cls, name in ((Person, "person"), (Org, "org"), (Work, "work"), (bool, "bool"), (int, "int"), (str, "str")):
        if isinstance(x, cls):
            return name
    return type(x).__name__


def question_label(chain: list[Entity], value: object) -> str:
    """The label of a question that follows ``chain`` to ``value``: what it asks for."""
    end, answer = _kind(chain[-1]), _kind(value)
    answer = "place" if answer in ("region", "settlement") else answer
    try:
        return _LABEL_OF[(end, answer)]
    except KeyError:
        raise ValueError(f"demo_labels: no label for a question ending at a {end} with a {answer} answer") from None


def demo_labels(n_entities: int = 240, seed: int = 7, test_share: float = 0.2) -> list[tuple[str, str, int, str, int]]:
    """(role, split, row, question, label index) of every question the demo world can ask, in a seeded order."""
    if isinstance(n_entities, bool) or not isinstance(n_entities, int) or not MIN_ENTITIES <= n_entities <= MAX_ENTITIES:
        raise ValueError(f"demo_labels: n_entities must be an int between {MIN_ENTITIES} and {MAX_ENTITIES}, "
                         f"got {n_entities!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"demo_labels: seed must be an int, got {seed!r}")
    if isinstance(test_share, bool) or not isinstance(test_share, int | float) or not 0 < test_share < 1:
        raise ValueError(f"demo_labels: test_share must be between 0 and 1, got {test_share!r}")
    rng = random.Random(seed)
    world = build_world(n_entities, rng)
    by_label: dict[str, list[str]] = defaultdict(list)
    for e in [*world.regions, *world.settlements, *world.people, *world.orgs, *world.works]:
        for question, value, chain in single_hop(e) + two_hop(e):
            by_label[question_label(chain, value)].append(question)
    out: list[tuple[str, str, int, str, int]] = []
    rows = {"train": 0, "test": 0}
    for index, label in enumerate(LABELS):
        questions = list(dict.fromkeys(by_label[label]))  # one item per distinct text
        rng.shuffle(questions)
        n_test = max(1, round(len(questions) * test_share))
        for i, q in enumerate(questions):
            split = "test" if i < n_test else "train"
            out.append(("test" if split == "test" else "demo", split, rows[split], q, index))
            rows[split] += 1
    return out


def demo_labels_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``SOURCE_KINDS["demo_labels"]``: options ``n_entities``, ``seed``, ``test_share``, ``language``."""
    options = dict(config.options)
    language = options.pop("language", "en")
    unknown = sorted(set(options) - {"n_entities", "seed", "test_share"})
    if unknown:
        raise ValueError(f"source {config.name!r} (demo_labels): unknown options {unknown}; "
                         "known: ['n_entities', 'seed', 'test_share', 'language']")
    records = demo_labels(**options)
    items = icl_item_rows(records, LABELS, source=config.name, language=language)
    report = ValidationReport(file=f"demo world ({config.name})", format="generated", records=len(records),
                              accepted=len(records))
    counts = defaultdict(int)
    for role, _, _, _, label in records:
        counts[(role, label)] += 1
    report.notes.append("demonstrations per label: " + ", ".join(f"{lab} {counts[('demo', i)]}"
                                                                   for i, lab in enumerate(LABELS)))
    return (*source_frames([], items), [report])
