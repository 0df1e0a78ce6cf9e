"""The fictional encyclopedia's words and sentence templates, read from packaged YAML.

``lc_pipeline/sources/data/demo_corpus_vocabulary.yaml`` holds the word lists (fields,
occupations, kinds of work, slot vocabularies, name syllables, blocked names);
``demo_corpus_templates.yaml`` the prose templates per entity type (intros, facts, fillers,
sentences about related entities). Each file is read once per process. The order of every
list is part of the corpus: entries are drawn with one ``random.Random(seed)``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any, NamedTuple

import yaml

VOCABULARY_FILE = "demo_corpus_vocabulary.yaml"
TEMPLATES_FILE = "demo_corpus_templates.yaml"

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser when libyaml is there: 8x faster

# Sections order a document and become its paragraphs.
SECTIONS = {"early": 0, "main": 1, "later": 2}
ENTITY_TEMPLATES = ("person", "organisation", "work", "settlement", "region")


class DataFileError(ValueError):
    """A packaged data file is malformed; the message names the file and the entry."""


class Field(NamedTuple):
    organisations: tuple[str, ...]  # organisation kinds, e.g. "Conservatory"
    occupations: tuple[tuple[str, str], ...]  # (singular, plural)


class WorkKind(NamedTuple):
    role: str  # named in questions: "the composer of ..."
    verb: str  # "composed"
    when: str  # "first performed"
    styles: tuple[str, ...]
    family: str  # selects the fillers that suit it


class Fact(NamedTuple):
    section: int
    states: tuple[str, ...]  # the facts the sentence states
    text: str


class Filler(NamedTuple):
    section: int
    alternatives: tuple[str, ...]  # one sentence, alternative phrasings
    families: tuple[str, ...] | None = None  # work fillers: the families it suits; None: all


@dataclass(frozen=True)
class Vocabulary:
    fields: Mapping[str, Field]
    organisation_descriptors: Mapping[str, str]
    work_kinds: Mapping[str, WorkKind]
    occupation_works: Mapping[str, tuple[str, ...]]
    settlement_kinds: tuple[str, ...]
    title_nouns: tuple[str, ...]
    title_plurals: tuple[str, ...]
    title_patterns: tuple[str, ...]
    coverage: Mapping[str, tuple[str, ...]]
    slots: Mapping[str, tuple[str, ...]]
    ordinals: Mapping[int, str]
    onsets: tuple[str, ...]
    vowels: tuple[str, ...]
    codas: tuple[str, ...]
    suffixes: Mapping[str, tuple[str, ...]]
    blocked: tuple[str, ...]


@dataclass(frozen=True)
class EntityTemplates:
    intros: tuple[tuple[tuple[str, ...], str], ...]  # (facts stated, text)
    facts: Mapping[str, tuple[Fact, ...]]  # "facts", and e.g. the person's "employee_facts"
    fillers: tuple[Filler, ...]
    sentences: Mapping[str, tuple[str, ...]]  # about related entities, e.g. the person's "founded"


def _read(name: str) -> Any:
    path = resources.files("lc_pipeline.sources").joinpath("data", name)
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise DataFileError(f"{name}: not valid YAML: {exc}") from exc


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataFileError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataFileError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _section(value: Any, where: str) -> int:
    if value not in SECTIONS:
        raise DataFileError(f"{where}: section {value!r} is not one of {list(SECTIONS)}")
    return SECTIONS[value]


def _entry(record: Any, keys: tuple[str, ...], where: str, optional: tuple[str, ...] = ()) -> dict:
    if not isinstance(record, dict):
        raise DataFileError(f"{where}: expected a mapping with {list(keys)}, got {record!r}")
    missing = [k for k in keys if k not in record]
    unknown = [k for k in record if k not in keys + optional]
    if missing or unknown:
        raise DataFileError(f"{where}: missing field(s) {missing}, unknown field(s) {unknown}")
    return record


@functools.cache
def vocabulary() -> Vocabulary:
    """The word lists of ``demo_corpus_vocabulary.yaml``."""
    raw = _read(VOCABULARY_FILE)
    f = VOCABULARY_FILE
    try:
        fields = {
            name: Field(_strings(v["organisations"], f"{f}: fields.{name}.organisations"),
                        tuple((sing, plural) for sing, plural in v["occupations"]))
            for name, v in raw["fields"].items()
        }
        work_kinds = {
            kind: WorkKind(v["role"], v["verb"], v["when"], _strings(v["styles"], f"{f}: work_kinds.{kind}.styles"),
                           v["family"])
            for kind, v in raw["work_kinds"].items()
        }
        names = raw["names"]
        return Vocabulary(
            fields=fields,
            organisation_descriptors=dict(raw["organisation_descriptors"]),
            work_kinds=work_kinds,
            occupation_works={k: _strings(v, f"{f}: occupation_works.{k}") for k, v in raw["occupation_works"].items()},
            settlement_kinds=_strings(raw["settlement_kinds"], f"{f}: settlement_kinds"),
            title_nouns=_strings(raw["titles"]["nouns"], f"{f}: titles.nouns"),
            title_plurals=_strings(raw["titles"]["plurals"], f"{f}: titles.plurals"),
            title_patterns=_strings(raw["titles"]["patterns"], f"{f}: titles.patterns"),
            coverage={k: _strings(v, f"{f}: coverage.{k}") for k, v in raw["coverage"].items()},
            slots={k: _strings(v, f"{f}: slots.{k}") for k, v in raw["slots"].items()},
            ordinals={int(k): str(v) for k, v in raw["ordinals"].items()},
            onsets=_strings(names["onsets"], f"{f}: names.onsets"),
            vowels=_strings(names["vowels"], f"{f}: names.vowels"),
            codas=_strings(names["codas"], f"{f}: names.codas"),
            suffixes={k: _strings(v, f"{f}: names.suffixes.{k}") for k, v in names["suffixes"].items()},
            blocked=tuple(names["blocked"].split()),
        )
    except DataFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DataFileError(f"{f}: malformed vocabulary ({type(exc).__name__}: {exc})") from exc


def parse_entity_templates(name: str, raw: Any) -> EntityTemplates:
    """One entity type's section of ``demo_corpus_templates.yaml``: ``intros``, ``fillers``,
    fact lists (keys ending in ``facts``) and plain sentence lists (any other key)."""
    where = f"{TEMPLATES_FILE}: {name}"
    if not isinstance(raw, dict) or not {"intros", "facts", "fillers"} <= set(raw):
        raise DataFileError(f"{where}: needs 'intros', 'facts' and 'fillers'")
    intros = []
    for i, rec in enumerate(raw["intros"]):
        at = f"{where}.intros[{i}]"
        rec = _entry(rec, ("states", "text"), at)
        intros.append((_strings(rec["states"], f"{at}.states"), _text(rec["text"], f"{at}.text")))
    facts: dict[str, tuple[Fact, ...]] = {}
    sentences: dict[str, tuple[str, ...]] = {}
    for key, value in raw.items():
        if key in ("intros", "fillers"):
            continue
        if key.endswith("facts"):
            group = []
            for i, rec in enumerate(value):
                at = f"{where}.{key}[{i}]"
                rec = _entry(rec, ("section", "states", "text"), at)
                group.append(Fact(_section(rec["section"], f"{at}.section"), _strings(rec["states"], f"{at}.states"),
                                  _text(rec["text"], f"{at}.text")))
            facts[key] = tuple(group)
        else:
            sentences[key] = _strings(value, f"{where}.{key}")
    fillers = []
    for i, rec in enumerate(raw["fillers"]):
        at = f"{where}.fillers[{i}]"
        rec = _entry(rec, ("section", "text"), at, optional=("families",))
        text = rec["text"]
        alternatives = (_text(text, f"{at}.text"),) if isinstance(text, str) else _strings(text, f"{at}.text")
        families = _strings(rec["families"], f"{at}.families") if "families" in rec else None
        fillers.append(Filler(_section(rec["section"], f"{at}.section"), alternatives, families))
    return EntityTemplates(tuple(intros), facts, tuple(fillers), sentences)


@functools.cache
def templates() -> Mapping[str, EntityTemplates]:
    """Entity type (person, organisation, work, settlement, region) -> its templates."""
    raw = _read(TEMPLATES_FILE)
    missing = [t for t in ENTITY_TEMPLATES if t not in (raw or {})]
    if missing:
        raise DataFileError(f"{TEMPLATES_FILE}: no templates for {missing}")
    return MappingProxyType({name: parse_entity_templates(name, raw[name]) for name in ENTITY_TEMPLATES})


@functools.cache
def reserved_text() -> str:
    """The lower-cased fixed prose and vocabulary, parts joined by " | ".

    A generated name must not occur inside it, so that finding a name in a text always
    means the entity is mentioned (and never a word of the prose around it). Names are
    letters only, so only a part's own letters can contain one: the order of parts is free.
    """
    v = vocabulary()
    parts: list[str] = []
    for t in templates().values():
        parts += [text for _, text in t.intros]
        parts += [f.text for facts in t.facts.values() for f in facts]
        parts += ["|".join(f.alternatives) for f in t.fillers]
        parts += [s for sentences in t.sentences.values() for s in sentences]
    parts += [c for cs in v.coverage.values() for c in cs]
    parts += list(v.organisation_descriptors.values())
    parts += list(v.fields) + [k for fld in v.fields.values() for k in fld.organisations]
    parts += [o for fld in v.fields.values() for pair in fld.occupations for o in pair]
    parts += [" ".join([k, w.role, w.verb, w.when, *w.styles]) for k, w in v.work_kinds.items()]
    parts += [*v.settlement_kinds, *v.title_nouns, *v.title_plurals, *v.title_patterns, *v.ordinals.values()]
    parts += [w for words in v.slots.values() for w in words]
    return " | ".join(parts).lower()
