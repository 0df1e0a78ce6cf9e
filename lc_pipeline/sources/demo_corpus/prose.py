"""Encyclopedia articles: one per entity, rendered from the templates of ``demo_corpus_templates.yaml``.

An entity's article states every fact its questions rely on: the composer picks fact
templates until none is left, so the phrasing and the order vary while content is
complete. Mentions of related entities and neutral fillers are added, shuffled within their
section (0 origins, 1 main body, 2 later history); each non-empty section is a paragraph.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from lc_pipeline.sources.demo_corpus.data import Fact, Filler, templates, vocabulary
from lc_pipeline.sources.demo_corpus.world import (
    Entity,
    Org,
    Person,
    Place,
    Work,
    World,
)

MAX_WORDS = 400
TARGET_WORDS = (170, 290)  # ~300 cl100k tokens per document on average


def a(phrase: str) -> str:
    return ("an " if phrase[0].lower() in "aeiou" else "a ") + phrase


def join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def anaphor(kind: str) -> str:
    # "Guild of Painters" -> "guild", "Choral Society" -> "society"
    words = kind.lower().split()
    return words[0] if "of" in words else words[-1]


def years(rng: random.Random, lo: int, hi: int, k: int) -> list[int]:
    """k distinct years in [lo, hi], so two fillers of one document never share a year."""
    return rng.sample(range(lo, max(hi, lo + k) + 1), k)


def slot_words(rng: random.Random, **names: str) -> dict[str, str]:
    """Slot -> random word from a slot vocabulary; ``trait2="trait"`` draws a second, different one."""
    slots = vocabulary().slots
    out: dict[str, str] = {}
    for slot, vocab in names.items():
        taken = [v for s, v in out.items() if names[s] == vocab]
        out[slot] = rng.choice([w for w in slots[vocab] if w not in taken])
    return out


def compose(rng: random.Random, intros: Sequence[tuple[tuple[str, ...], str]], facts: Sequence[Fact], slots: dict,
            extra: list[tuple[int, str]], fillers: Sequence[Filler], needed: list[str]) -> str:
    """Intro, then the required facts (random templates), mentions of related entities and
    neutral fillers, shuffled within their section; one paragraph per non-empty section."""
    usable = [(k, t) for k, t in intros if all(f in needed for f in k)]
    keys, tpl = rng.choice(usable)
    intro = tpl.format_map(slots)
    sections: list[list[str]] = [[], [], []]
    remaining = [f for f in needed if f not in keys]
    while remaining:
        cands = [(sec, k, t) for sec, k, t in facts if all(f in remaining for f in k)]
        sec, k, t = rng.choice(cands)
        sections[sec].append(t.format_map(slots))
        remaining = [f for f in remaining if f not in k]
    for sec, sentence in extra:
        sections[sec].append(sentence)
    words = len(intro.split()) + sum(len(s.split()) for sec in sections for s in sec)
    target = rng.randint(*TARGET_WORDS)
    for filler in rng.sample(fillers, len(fillers)):
        if words >= target:
            break
        sentence = rng.choice(filler.alternatives).format_map(slots)
        n = len(sentence.split())
        if words + n <= MAX_WORDS - 10:
            sections[filler.section].append(sentence)
            words += n
    for sec in sections:
        rng.shuffle(sec)
    sections[0].insert(0, intro)
    return "\n\n".join(" ".join(sec) for sec in sections if sec)


def pronouns(p: Person) -> dict[str, str]:
    if p.female:
        return {"pron": "she", "Pron": "She", "poss": "her", "Poss": "Her", "obj": "her"}
    return {"pron": "he", "Pron": "He", "poss": "his", "Poss": "His", "obj": "him"}


def person_text(p: Person, world: World, rng: random.Random) -> str:
    t, v = templates()["person"], vocabulary()
    ya, yb, yc, yd, ye, yf = years(rng, p.birth + 18, p.death - 2, 6)
    spouses = world.given_names[60:] if p.female else world.given_names[:60]
    slots = {
        **pronouns(p), "name": p.name, "surname": p.family, "birth": p.birth, "death": p.death,
        "birthplace": p.birthplace.name, "bp_kind": p.birthplace.kind, "occupation": p.occupation,
        "a_occupation": a(p.occupation), "occupations": p.occupations, "employer": p.employer.name,
        "a_adj_occupation": a(f"{rng.choice(v.slots['person_adj'])} {p.occupation}"), "age": p.death - p.birth,
        "ya": ya, "yb": yb, "yc": yc, "yd": yd, "ye": ye, "yf": yf, "ypost": p.death + rng.randint(3, 10),
        "teen": rng.randint(11, 16), "spouse": rng.choice(spouses),
        "travel": rng.choice([s.name for s in rng.sample(world.settlements, min(3, len(world.settlements)))
                              if s is not p.birthplace] or [p.birthplace.name]),
        **slot_words(rng, num="num", num2="num", num3="num", parent_job="parent_job", parent_job2="parent_job",
                     talent="talent", talent2="talent", sibling_rank="sibling_rank", trait="trait", trait2="trait",
                     trait3="flaw", spouse_job="spouse_job"),
    }
    extra = [(1, rng.choice(t.sentences["founded"]).format_map({**slots, "org": o.name, "year": o.founded}))
             for o in p.founded_orgs]
    for w in sorted(p.works, key=lambda w: w.year)[:3]:
        kind = v.work_kinds[w.kind]
        extra.append((1, rng.choice(t.sentences["work"]).format_map(
            {**slots, "verb": kind.verb, "when": kind.when, "kind": w.kind, "a_kind": a(w.kind), "title": w.name,
             "year": w.year})))
    facts = t.facts["facts"] + t.facts["founder_employer_facts" if p.founded_orgs else "employee_facts"]
    return compose(rng, t.intros, facts, slots, extra, t.fillers, ["birth", "occupation", "employer", "death"])


def org_text(o: Org, rng: random.Random) -> str:
    t = templates()["organisation"]
    ya, yb, yc, yd, ye, yf = years(rng, o.founded + 3, min(2015, o.founded + 160), 6)
    slots = {
        "name": o.name, "kindl": anaphor(o.kind), "a_desc": vocabulary().organisation_descriptors[o.kind],
        "field": o.field_, "hq": o.hq.name, "founder": o.founder.name, "year": o.founded,
        "occupations": o.founder.occupations,
        "ya": ya, "yb": yb, "yc": yc, "yd": yd, "ye": ye, "yf": yf, "decade": f"{yb // 10 * 10}s",
        "pages": rng.randint(6, 40), "staff": rng.randrange(15, 400, 5),
        **slot_words(rng, num="num", emblem="emblem", venue="venue", periodical="periodical"),
    }
    extra = []
    if o.members:
        members = [m.name for m in rng.sample(o.members, min(3, len(o.members)))]
        were = "was" if len(members) == 1 else "were"
        extra.append((1, rng.choice(t.sentences["members"]).format(list=join(members), were=were)))
    return compose(rng, t.intros, t.facts["facts"], slots, extra, t.fillers, ["founded", "founder", "hq", "field"])


def work_text(w: Work, world: World, rng: random.Random) -> str:
    t, v = templates()["work"], vocabulary()
    kind = v.work_kinds[w.kind]
    ya, yb, yc, yd = sorted(years(rng, w.year + 5, min(2018, w.year + 180), 4))  # fillers stay chronological
    slots = {
        "title": w.name, "kind": w.kind, "a_kind": a(w.kind), "a_style_kind": a(f"{w.style} {w.kind}"),
        "creator": w.creator.name, "verb": kind.verb, "when": kind.when, "When": kind.when.capitalize(),
        "year": w.year, "ya": ya, "yb": yb, "yc": yc, "yd": yd, "char": rng.choice(world.given_names),
        "minutes": rng.randrange(15, 150, 5), "pages": rng.randrange(90, 900, 10), "h": rng.randrange(30, 400, 5),
        "w": rng.randrange(30, 400, 5), "glyphs": rng.randrange(150, 600, 10), "count": rng.randint(20, 90),
        "coverage": rng.choice(v.coverage.get(w.kind, ["its subject in detail"])),
        **slot_words(rng, theme="theme", quality="quality", num="num", forces="forces", support="support",
                     scene="scene", char_job="char_job", setting="setting", setting2="setting"),
    }
    # A star catalogue has no plot and a painting no chapters: only the fillers that suit the family.
    fillers = [f for f in t.fillers if f.families is None or kind.family in f.families]
    return compose(rng, t.intros, t.facts["facts"], slots, [], fillers, ["creator", "year"])


def settlement_text(s: Place, rng: random.Random) -> str:
    t, v = templates()["settlement"], vocabulary()
    ya = rng.randint(1840, 1910)  # railways
    yb, yc = years(rng, max(s.founded + 20, 1700), 1990, 2)
    slots = {
        "name": s.name, "skind": s.kind, "a_skind": a(s.kind),
        "a_adj_skind": a(f"{rng.choice(v.slots['place_adj'])} {s.kind}"), "region": s.region.name,
        "river": s.river, "year": s.founded, "pop": f"{s.population:,}", "ya": ya, "yb": yb, "yc": yc,
        "yplague": rng.randint(s.founded + 10, 1720), "alt": rng.randrange(5, 900, 5),
        "century": v.ordinals[(rng.randint(s.founded + 10, 1899) - 1) // 100 + 1],
        "century2": v.ordinals[(rng.randint(max(s.founded + 10, 1601), 1899) - 1) // 100 + 1],
        **slot_words(rng, landmark="landmark", industry="industry", produce="produce", emblem="emblem",
                     tincture="tincture"),
    }
    extra = []
    if s.region.seat is s:
        extra.append((0, rng.choice(t.sentences["seat_of"]).format_map(slots)))
    if s.natives:
        names = [p.name for p in rng.sample(s.natives, min(3, len(s.natives)))]
        were = "was" if len(names) == 1 else "were"
        extra.append((2, rng.choice(t.sentences["natives"]).format(name=s.name, list=join(names), were=were)))
    if s.hosted:
        orgs = ["the " + o.name for o in rng.sample(s.hosted, min(3, len(s.hosted)))]
        extra.append((2, rng.choice(t.sentences["hosted"]).format(name=s.name, list=join(orgs))))
    needed = ["region", "river", "founded", "population"]
    return compose(rng, t.intros, t.facts["facts"], slots, extra, t.fillers, needed)


def region_text(r: Place, rng: random.Random) -> str:
    t = templates()["region"]
    ya, yb = years(rng, 1780, 1990, 2)
    slots = {
        "name": r.name, "seat": r.seat.name, "area": f"{r.area:,}", "ya": ya, "yb": yb,
        "decade": f"{rng.randrange(1950, 2000, 10)}s", "peak": rng.randrange(200, 2400, 10),
        "century": rng.choice(["eighteenth", "nineteenth"]),
        **slot_words(rng, direction="direction", landscape="landscape", landscape2="landscape", num="num",
                     habitat="habitat"),
    }
    others = [s for s in r.settlements if s is not r.seat]
    extra = []
    if others:
        towns = join([s.name for s in rng.sample(others, min(4, len(others)))])
        extra.append((1, rng.choice(t.sentences["towns"]).format(list=towns)))
    return compose(rng, t.intros, t.facts["facts"], slots, extra, t.fillers, ["seat", "area"])


def article(e: Entity, world: World, rng: random.Random) -> str:
    """The article about ``e``."""
    if isinstance(e, Person):
        return person_text(e, world, rng)
    if isinstance(e, Org):
        return org_text(e, rng)
    if isinstance(e, Work):
        return work_text(e, world, rng)
    if e.kind == "region":
        return region_text(e, rng)
    return settlement_text(e, rng)
