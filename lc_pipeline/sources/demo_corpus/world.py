"""The fictional world: places, people, organisations and works, and the relations between them.

Relations are functional (one birthplace per person, one founder per organisation, ...), so
every question that follows them has one answer. Dates are consistent: an organisation is
founded in its founder's lifetime, a work is made in its creator's, and nobody dies before
their last foundation or work.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from lc_pipeline.sources.demo_corpus.data import reserved_text, vocabulary
from lc_pipeline.sources.demo_corpus.names import NameMaker


@dataclass(eq=False)
class Place:
    name: str
    kind: str  # "region" or a settlement kind
    region: Place | None = None
    river: str = ""
    founded: int = 0
    population: int = 0
    area: int = 0
    seat: Place | None = None
    settlements: list[Place] = field(default_factory=list)
    natives: list[Person] = field(default_factory=list)
    hosted: list[Org] = field(default_factory=list)
    doc_id: str = ""
    text: str = ""
    etype: str = "place"


@dataclass(eq=False)
class Person:
    name: str
    given: str
    family: str
    female: bool
    birth: int
    birthplace: Place
    occupation: str = ""
    occupations: str = ""  # plural, for prose
    employer: Org | None = None
    death: int = 0
    founded_orgs: list[Org] = field(default_factory=list)
    works: list[Work] = field(default_factory=list)
    doc_id: str = ""
    text: str = ""
    etype: str = "person"


@dataclass(eq=False)
class Org:
    name: str
    stem: str
    kind: str
    field_: str
    hq: Place
    founder: Person | None = None
    founded: int = 0
    members: list[Person] = field(default_factory=list)
    doc_id: str = ""
    text: str = ""
    etype: str = "organisation"


@dataclass(eq=False)
class Work:
    name: str
    stem: str
    kind: str
    style: str
    creator: Person
    year: int
    doc_id: str = ""
    text: str = ""
    etype: str = "work"


Entity = Place | Person | Org | Work


@dataclass
class World:
    regions: list[Place]
    settlements: list[Place]
    people: list[Person]
    orgs: list[Org]
    works: list[Work]
    given_names: list[str]  # 60 female, then 60 male


def build_world(n: int, rng: random.Random) -> World:
    """``n`` entities: about 22% places (a sixth of them regions), 18% organisations, 20% works, the rest people."""
    v = vocabulary()
    names = NameMaker(rng, reserved_text())
    female_given = names.given_names("female", 60)
    male_given = names.given_names("male", 60)

    n_places = max(2, round(n * 0.22))
    n_orgs = max(2, round(n * 0.18))
    n_works = max(2, round(n * 0.20))
    n_people = n - n_places - n_orgs - n_works
    n_regions = max(1, round(n_places / 6))
    n_settlements = n_places - n_regions

    regions = [Place(names.make("region"), "region", area=rng.randrange(800, 9000, 10)) for _ in range(n_regions)]
    rivers = [names.make("river") for _ in range(max(1, round(n_settlements * 0.6)))]
    settlements = []
    for i in range(n_settlements):
        region = regions[i] if i < n_regions else rng.choice(regions)  # round-robin first: every region gets a seat
        s = Place(names.make("settlement"), rng.choice(v.settlement_kinds), region=region, river=rng.choice(rivers),
                  founded=rng.randint(1040, 1690))
        s.population = rng.randrange(40_000, 600_000, 1_000) if "city" in s.kind else rng.randrange(2_000, 60_000, 500)
        region.settlements.append(s)
        settlements.append(s)
    for r in regions:
        r.seat = rng.choice(r.settlements)

    orgs = []
    for _ in range(n_orgs):
        fld = rng.choice(list(v.fields))
        stem = names.make("org")
        kind = rng.choice(v.fields[fld].organisations)
        orgs.append(Org(f"{stem} {kind}", stem, kind, fld, hq=rng.choice(settlements)))

    people = []
    for _ in range(n_people):
        female = rng.random() < 0.5
        given = rng.choice(female_given if female else male_given)
        family = names.make("family")
        p = Person(f"{given} {family}", given, family, female, birth=rng.randint(1690, 1920),
                   birthplace=rng.choice(settlements))
        p.birthplace.natives.append(p)
        people.append(p)

    # Founders: distinct people while there are enough; founding 24-55 years after birth.
    pool = rng.sample(people, len(people))
    for i, org in enumerate(orgs):
        founder = pool[i % len(pool)]
        org.founder = founder
        org.founded = founder.birth + rng.randint(24, 55)
        founder.founded_orgs.append(org)

    # Employers: a founder works for (the first of) their own foundations; anyone else for an
    # organisation that already existed when they were about 45, when there is one.
    for p in people:
        if p.founded_orgs:
            p.employer = p.founded_orgs[0]
        else:
            existing = [o for o in orgs if o.founded <= p.birth + 45]
            p.employer = rng.choice(existing or orgs)
            p.employer.members.append(p)
        p.occupation, p.occupations = rng.choice(v.fields[p.employer.field_].occupations)

    works = []
    for _ in range(n_works):
        creator = rng.choice(people)
        kind = rng.choice(v.occupation_works[creator.occupation])  # a violinist writes no atlas
        stem = names.make("work")
        title = rng.choice(v.title_patterns).format(stem=stem, noun=rng.choice(v.title_nouns),
                                                    plural=rng.choice(v.title_plurals))
        style = rng.choice(v.work_kinds[kind].styles)
        w = Work(title, stem, kind, style, creator, year=creator.birth + rng.randint(22, 60))
        creator.works.append(w)
        works.append(w)

    for p in people:  # die after everything the person did
        last_event = max([p.birth + 30] + [o.founded for o in p.founded_orgs] + [w.year for w in p.works])
        p.death = max(p.birth + rng.randint(52, 88), last_event + rng.randint(2, 12))
    for o in orgs:
        o.hq.hosted.append(o)
    return World(regions, settlements, people, orgs, works, female_given + male_given)
