"""LV-Eval confusing-fact insertion (CFI): generate, validate, insert.

A confusing fact resembles the fact that answers an item's question but is about another
subject, so it misleads a careless reader without contradicting the gold answer (spec
``lveval.md`` §5; LV-Eval's annotators "change the main subject"). Two generators:

* :func:`llm_facts`: any :class:`~lc_pipeline.generate.base.Generator` backend, with our own
  prompt (input: question and answer; output: ``subject | statement`` lines, like the paper's
  "two descriptions" per QA pair). Rejected candidates are shown to the model in the next
  round, up to ``max_attempts`` rounds.
* :func:`knowledge_base_facts`: for the demo corpus, no model: the fact is what the corpus
  says about a *sibling* entity, i.e. the subject of another item with the same question
  pattern ("What was X's occupation?" -> the sentence stating Y's occupation). It is true of
  Y, so it contradicts nothing, and it has exactly the evidence's shape.

Every candidate goes through :func:`validate_fact` (LV-Eval's revision guidelines a-c turned
into checks) and is kept with its verdict and reason: rejected facts are recorded, never
silently dropped. :func:`insert_facts` puts the accepted facts at seeded random sentence
boundaries of an assembled context and returns the insertion points.

Pure functions, no Dagster.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.construct.replacement import entity_spans, term_pattern
from lc_pipeline.construct.word_levels import DEFAULT_PROTECTED, sentence_boundaries
from lc_pipeline.fingerprints import short_id
from lc_pipeline.score.keyword_recall import (
    BLACKLIST_EN,
    BLACKLIST_ZH,
    VARIANTS,
    dataset_rule,
    keyword_recall_score,
    tokens,
)
from lc_pipeline.score.token_scores import f1_from_tokens, normalize_zh_answer
from lc_pipeline.text import normalize_answer

__all__ = [
    "KNOWLEDGE_BASE",
    "PROMPT_VERSION",
    "CandidateFact",
    "Insertion",
    "accepted_facts",
    "build_prompt",
    "fact_id",
    "facts_frame",
    "insert_facts",
    "knowledge_base_facts",
    "llm_facts",
    "parse_statements",
    "validate_fact",
]

KNOWLEDGE_BASE = "knowledge_base"
RESTATE_F1 = 0.8  # token F1 with one evidence sentence at or above which a fact restates it
MAX_WORDS = {"en": 60, "zh": 120}  # a statement, not a passage (words en / characters zh)

# --------------------------------------------------------------------------- prompts (our wording)

_PROMPT_EN = """We are building a reading test. Below are a question and its correct answer.

Question: {question}
Correct answer: {answer}

Write {n} new {statements}, one per line, each in the form
subject | statement
Each statement must read like the fact that answers the question, but be about a different, invented {kind}: give \
it a new name and change the detail it states. Never mention {subjects}, never state the correct answer, and never \
contradict the original fact. Write nothing else."""

_PROMPT_ZH = """我们正在制作一份阅读理解测试。下面是一个问题及其正确答案。

问题：{question}
正确答案：{answer}

请写出{n}条新的陈述，每行一条，格式为：
主语 | 陈述
每条陈述要读起来像回答该问题的那条事实，但必须是关于另一个虚构的{kind}：给它起一个新名字，并改变所陈述的细节。\
不要提到{subjects}，不要写出正确答案，也不要与原来的事实矛盾。除此之外不要写任何内容。"""

_RETRY_EN = "\n\nThese statements were rejected; write different ones:\n{rejected}"
_RETRY_ZH = "\n\n以下陈述未被采用，请写不同的陈述：\n{rejected}"

PROMPT_VERSION = hashlib.sha256("\x1f".join([_PROMPT_EN, _PROMPT_ZH, _RETRY_EN, _RETRY_ZH]).encode()).hexdigest()[:12]


def _question_subjects(question: str, language: str) -> list[str]:
    return entity_spans(question, language)


def build_prompt(item: Mapping, n: int, rejected: Sequence[tuple[str, str]] = ()) -> str:
    """The generation prompt for one item; ``rejected`` = (statement, reason) from earlier rounds."""
    language = item["language"]
    subjects = _question_subjects(item["question"], language)
    if language == "zh":
        text = _PROMPT_ZH.format(question=item["question"], answer=item["answers"][0], n=n, kind="对象",
                                 subjects="、".join(subjects) or "问题中的对象")
        retry = _RETRY_ZH
    else:
        text = _PROMPT_EN.format(question=item["question"], answer=item["answers"][0], n=n, kind="subject",
                                 statements="statement" if n == 1 else "statements",
                                 subjects=", ".join(subjects) or "the question's subject")
        retry = _RETRY_EN
    if rejected:
        text += retry.format(rejected="\n".join(f"- {s} ({why})" for s, why in rejected[-6:]))
    return text


_LIST_MARK = re.compile(r"^\s*(?:[-*•·]|\d+[.)、]|\(\d+\))\s*")


def parse_statements(output: str) -> list[tuple[str, str]]:
    """``(subject, statement)`` per non-empty line; a line without ``|`` gives subject ``None``."""
    out = []
    for line in output.splitlines():
        line = _LIST_MARK.sub("", line).strip()
        if not line:
            continue
        parts = re.split(r"\s*[|｜]\s*", line, maxsplit=1)
        if len(parts) == 2 and parts[0] and parts[1]:
            out.append((parts[0].strip(" *\"'"), parts[1].strip()))
        else:
            out.append((None, line))
    return out


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class CandidateFact:
    item_id: str
    text: str
    subject: str
    generator: str
    attempt: int
    accepted: bool
    reason: str = ""  # "" when accepted


def fact_id(fact: CandidateFact) -> str:
    return short_id(fact.item_id, fact.generator, fact.text, length=16)


def facts_frame(candidates: Iterable[CandidateFact]) -> pl.DataFrame:
    """CONFUSING_FACTS rows; ``fact_index`` numbers each item's accepted facts 0, 1, ... in order."""
    from lc_pipeline import schemas

    index: dict[str, int] = defaultdict(int)
    rows = []
    for f in candidates:
        k = None
        if f.accepted:
            k = index[f.item_id]
            index[f.item_id] += 1
        rows.append({"fact_id": fact_id(f), "item_id": f.item_id, "fact_index": k, "text": f.text,
                     "subject": f.subject, "generator": f.generator, "attempt": f.attempt, "accepted": f.accepted,
                     "reason": f.reason})
    return schemas.conform(pl.DataFrame(rows, schema=schemas.CONFUSING_FACTS), "confusing_facts")


def accepted_facts(frame: pl.DataFrame) -> dict[str, list[tuple[str, str]]]:
    """item_id -> [(fact_id, text)] of accepted facts in fact_index order."""
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for r in frame.filter(pl.col("accepted")).sort("item_id", "fact_index").iter_rows(named=True):
        out[r["item_id"]].append((r["fact_id"], r["text"]))
    return dict(out)


# --------------------------------------------------------------------------- validation


def _scoring_rule(item: Mapping) -> str:
    try:
        return dataset_rule(item.get("task") or "").name
    except ValueError:
        return f"keyword_recall_{item['language']}"


def _sentences(text: str, language: str) -> list[str]:
    cuts = [0, *sentence_boundaries(text, language, protected=()), len(text)]
    return [text[a:b].strip() for a, b in zip(cuts, cuts[1:]) if text[a:b].strip()]


def _content_tokens(text: str, language: str) -> list[str]:
    blacklist = BLACKLIST_ZH if language == "zh" else BLACKLIST_EN
    return [t for t in tokens(text, language) if t not in blacklist]


def _contains_answer(fact: str, answers: Sequence[str], language: str) -> str | None:
    if language == "zh":
        norm = normalize_zh_answer(fact)
        hits = [a for a in answers if normalize_zh_answer(a) and normalize_zh_answer(a) in norm]
    else:
        padded = f" {normalize_answer(fact)} "
        hits = [a for a in answers if normalize_answer(a) and f" {normalize_answer(a)} " in padded]
    return hits[0] if hits else None


def validate_fact(
    text: str,
    item: Mapping,
    evidence_texts: Sequence[str],
    subject: str | None = "",
) -> str:
    """Why ``text`` is not an acceptable confusing fact for ``item``; "" when it is.

    ``item`` needs ``question, answers, answer_keywords, language`` (``task`` picks the LV-Eval
    scoring rule when it names an LV-Eval dataset). Checks, in order:

    1. a single statement (not empty, at most ``MAX_WORDS``), and, when the generator named a
       subject, the statement mentions it (its full name or its last word, e.g. a surname);
    2. it contains no gold answer string (normalized, whole words in English);
    3. a model that copies it scores 0 on the item's keyword-recall metric, in both variants
       (so it cannot carry answer keywords past the recall gate);
    4. it is about another subject: it names none of the question's entities (guideline c);
    5. it does not restate the evidence: token F1 with every evidence sentence stays below
       ``RESTATE_F1`` (guideline b: it must not repeat or alter the original fact).
    """
    language = item["language"]
    text = (text or "").strip()
    if not text:
        return "empty statement"
    size = len(text.split()) if language == "en" else len(re.sub(r"\s", "", text))
    if size > MAX_WORDS[language]:
        return f"too long for one statement ({size} {'words' if language == 'en' else 'characters'})"
    if subject is None:
        return "not in the form 'subject | statement'"
    if subject and not _mentions(text, subject):
        return f"the statement does not mention its own subject {subject!r}"
    answers = list(item["answers"])
    hit = _contains_answer(text, answers, language)
    if hit is not None:
        return f"contains the gold answer {hit!r}"
    rule = _scoring_rule(item)
    for variant in VARIANTS:
        value = keyword_recall_score(rule, text, answers, list(item.get("answer_keywords") or []), variant)
        if value > 0:
            return f"a model copying it would score {value:.3f} on {rule} ({variant} variant)"
    for name in _question_subjects(item["question"], language):
        if term_pattern(name).search(text) or (subject and subject.lower() == name.lower()):
            return f"same subject as the question: mentions {name!r}"
    fact_tokens = _content_tokens(text, language)
    for sentence in (s for ev in evidence_texts for s in _sentences(ev, language)):
        overlap = f1_from_tokens(fact_tokens, _content_tokens(sentence, language))
        if overlap >= RESTATE_F1:
            return f"restates the evidence (token F1 {overlap:.2f} with {sentence[:80]!r})"
    return ""


def _complete(text: str, language: str) -> str:
    """A fact ends like a sentence, so the next context sentence does not run into it."""
    text = text.strip()
    if language == "zh":
        return text if text[-1:] in "。！？" else text + "。"
    return text if text[-1:] in ".!?\"'\u201d" else text + "."


# --------------------------------------------------------------------------- LLM generator


def llm_facts(
    items: Iterable[Mapping],
    evidence: Mapping[str, Sequence[str]],
    generator,
    *,
    n_facts: int = 2,
    max_attempts: int = 3,
    max_new_tokens: int = 160,
    progress: Callable[[int], None] | None = None,
) -> list[CandidateFact]:
    """Facts from any generation backend: one request per item and round, batched.

    ``evidence`` maps item_id -> evidence texts (for the restatement check). Each round asks
    the items still short of ``n_facts`` again, listing their rejected statements and reasons;
    after ``max_attempts`` rounds an item keeps what it has (possibly nothing: the rejections
    say why). Every parsed line becomes a candidate row, accepted or not.
    """
    if n_facts < 1 or max_attempts < 1:
        raise ValueError(f"n_facts and max_attempts must be >= 1, got {n_facts} and {max_attempts}")
    from lc_pipeline.generate.base import GenerationRequest

    label = f"llm:{generator.backend}:{generator.model_id}:{PROMPT_VERSION}"
    todo = {item["item_id"]: item for item in sorted(items, key=lambda it: it["item_id"])}
    accepted: dict[str, list[str]] = defaultdict(list)
    rejected: dict[str, list[tuple[str, str]]] = defaultdict(list)
    out: list[CandidateFact] = []
    for attempt in range(1, max_attempts + 1):
        pending = [i for i in todo if len(accepted[i]) < n_facts]
        if not pending:
            break
        requests = [GenerationRequest(key=i, prompt=build_prompt(todo[i], n_facts - len(accepted[i]), rejected[i]),
                                      max_new_tokens=max_new_tokens) for i in pending]
        results = generator.generate(requests, progress)
        for result in results:
            item = todo[result.key]
            statements = parse_statements(result.output)
            if not statements:
                why = "no statement in the output"
                out.append(CandidateFact(item["item_id"], "", "", label, attempt, False, why))
                rejected[result.key].append(("(nothing)", why))
            for subject, text in statements:
                why = validate_fact(text, item, evidence.get(item["item_id"], ()), subject)
                if not why and len(accepted[result.key]) >= n_facts:
                    why = f"more than the {n_facts} facts asked for"
                if not why and any(text.lower() == a.lower() for a in accepted[result.key]):
                    why = "duplicate of an accepted fact"
                final = _complete(text, item["language"]) if not why else text
                out.append(CandidateFact(item["item_id"], final, subject or "", label, attempt, not why, why))
                if why:
                    rejected[result.key].append((text, why))
                else:
                    accepted[result.key].append(text)
    return out


# --------------------------------------------------------------------------- knowledge-base generator

_PRONOUN = re.compile(r"^(He|She|It|They|His|Her|Its|Their)\b")
# "The town is ...", "The symphony was ...": a determiner, one noun, then a verb.
_NOMINAL = re.compile(r"^(?:The|This) [a-z]+(?= (?:is|was|has|had|lies|stands|serves|belongs|flows|became|remains)\b)")


@dataclass
class _Doc:
    doc_id: str
    title: str
    text: str
    sentences: list[str] = field(default_factory=list)


def _mentions(sentence: str, title: str) -> bool:
    if term_pattern(title).search(sentence):
        return True
    parts = [p for p in title.split() if len(p) > 3 and p[:1].isupper()]
    return any(term_pattern(p).search(sentence) for p in parts[1:])  # a surname or a name's last word


def _name_the_subject(sentence: str, title: str) -> str:
    """Replace a leading pronoun ("She") or noun phrase ("The town") by the entity's name: the
    fact must say whom it is about."""
    if _mentions(sentence, title):
        return sentence
    m = _PRONOUN.match(sentence)
    if m is not None:
        possessive = m.group(1) in ("His", "Her", "Its", "Their")
        return (f"{title}'s" if possessive else title) + sentence[m.end():]
    m = _NOMINAL.match(sentence)
    return title + sentence[m.end():] if m is not None else sentence


def _stating_sentence(doc: _Doc, predicate: Callable[[str], bool]) -> str | None:
    candidates = [s for s in doc.sentences if predicate(s)]
    if not candidates:
        return None
    named = [s for s in candidates if _mentions(s, doc.title)]
    return _name_the_subject((named or candidates)[0], doc.title)


def _chain_fact(item: Mapping, docs: Mapping[str, _Doc]) -> tuple[str, str] | str:
    """(fact, subject) built from an item's evidence chain, or the reason it cannot be built."""
    chain = [docs[d] for d in item["evidence_doc_ids"]]
    parts = []
    for k, doc in enumerate(chain):
        if k + 1 < len(chain):
            nxt = chain[k + 1].title
            sentence = _stating_sentence(doc, lambda s, nxt=nxt: bool(term_pattern(nxt).search(s)))
            want = f"a link to {nxt!r}"
        else:
            sentence = _stating_sentence(doc, lambda s: _contains_answer(s, item["answers"], "en") is not None)
            want = f"the answer {item['answers'][0]!r}"
        if sentence is None:
            return f"no sentence of sibling document {doc.doc_id} states {want}"
        parts.append(sentence)
    return " ".join(parts), chain[0].title


def _question_shape(item: Mapping, docs: Mapping[str, _Doc]) -> str | None:
    title = docs[item["evidence_doc_ids"][0]].title
    pattern = term_pattern(title)
    if not pattern.search(item["question"]):
        return None
    return f"{item['hops']}|" + pattern.sub("{}", item["question"])


def knowledge_base_facts(
    documents: pl.DataFrame,
    items: pl.DataFrame,
    *,
    n_facts: int = 2,
    seed: int = 0,
    max_candidates: int = 8,
) -> list[CandidateFact]:
    """Confusing facts for every item of a knowledge-base corpus, from sibling entities.

    ``documents``/``items`` are SOURCE_DOCUMENTS/SOURCE_ITEMS frames whose documents are titled
    by their entity and whose questions name the entity of their first evidence document (the
    demo corpus). Siblings are the subjects of other items with the same question pattern and
    hop count; they are tried in a seeded order, at most ``max_candidates`` per item, until
    ``n_facts`` pass :func:`validate_fact`. Items without such a sibling get one rejected row
    saying so.
    """
    if n_facts < 1:
        raise ValueError(f"n_facts must be >= 1, got {n_facts}")
    docs = {
        r["doc_id"]: _Doc(r["doc_id"], r["title"], r["text"], _sentences(r["text"], "en"))
        for r in documents.select("doc_id", "title", "text", "language").iter_rows(named=True)
    }
    rows = sorted(items.iter_rows(named=True), key=lambda r: r["item_id"])
    for r in rows:
        missing = [d for d in r["evidence_doc_ids"] if d not in docs]
        if missing or not r["evidence_doc_ids"]:
            raise ValueError(f"item {r['item_id']!r}: field 'evidence_doc_ids' names unknown documents {missing}")
        if r["language"] != "en":
            raise ValueError(f"item {r['item_id']!r}: field 'language': the knowledge-base generator writes English "
                             f"facts, got {r['language']!r}")
    by_shape: dict[str, list[Mapping]] = defaultdict(list)
    shapes = {}
    for r in rows:
        shapes[r["item_id"]] = _question_shape(r, docs)
        if shapes[r["item_id"]] is not None:
            by_shape[shapes[r["item_id"]]].append(r)

    out: list[CandidateFact] = []
    for item in rows:
        shape = shapes[item["item_id"]]
        subject_doc = item["evidence_doc_ids"][0]
        siblings = [s for s in by_shape.get(shape, []) if s["evidence_doc_ids"][0] != subject_doc] if shape else []
        if not siblings:
            why = ("the question does not name its first evidence document's entity" if shape is None
                   else "no sibling item with the same question pattern")
            out.append(CandidateFact(item["item_id"], "", "", KNOWLEDGE_BASE, 1, False, why))
            continue
        random.Random(short_id(seed, item["item_id"])).shuffle(siblings)
        evidence = [docs[d].text for d in item["evidence_doc_ids"]]
        accepted: list[str] = []
        for sibling in siblings[:max_candidates]:
            built = _chain_fact(sibling, docs)
            if isinstance(built, str):
                out.append(CandidateFact(item["item_id"], "", docs[sibling["evidence_doc_ids"][0]].title,
                                         KNOWLEDGE_BASE, 1, False, built))
                continue
            text, subject = built
            why = validate_fact(text, item, evidence, subject)
            if not why and text in accepted:
                why = "duplicate of an accepted fact"
            out.append(CandidateFact(item["item_id"], text, subject, KNOWLEDGE_BASE, 1, not why, why))
            if not why:
                accepted.append(text)
                if len(accepted) == n_facts:
                    break
    return out


# --------------------------------------------------------------------------- insertion


@dataclass(frozen=True)
class Insertion:
    fact_id: str
    sentence_index: int  # number of context sentences before the fact (0 = before the first)
    char_offset: int  # offset of the fact's first character in the new context
    char_length: int  # length of the inserted fact text


def insert_facts(
    context: str,
    facts: Sequence[tuple[str, str]],
    *,
    seed: int,
    language: str,
    protected: Sequence[re.Pattern] = DEFAULT_PROTECTED,
) -> tuple[str, list[Insertion]]:
    """Insert ``(fact_id, text)`` facts, each at its own uniformly random boundary between two
    sentences of ``context`` (spec §5.4, §11 #12); block and passage headers are never split.

    Returns the new context and one :class:`Insertion` per fact, in ``facts`` order. Facts
    drawing the same boundary are inserted in ``facts`` order. Same inputs and seed, same output.
    """
    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    if not facts:
        return context, []
    boundaries = sentence_boundaries(context, language, protected)
    if not boundaries:
        raise ValueError("the context has no boundary between two sentences to insert a confusing fact at")
    rng = random.Random(seed)
    picks = [rng.randrange(len(boundaries)) for _ in facts]
    pieces: list[str] = []
    cursor = written = 0
    result: dict[int, Insertion] = {}
    for i in sorted(range(len(facts)), key=lambda i: (picks[i], i)):
        offset = boundaries[picks[i]]
        pieces.append(context[cursor:offset])
        written += offset - cursor
        cursor = offset
        text = _complete(facts[i][1], language)
        # An English boundary sits after a sentence's punctuation and before whitespace, so one
        # leading space makes "end. Fact. Next"; Chinese needs no space.
        lead = " " if language == "en" else ""
        pieces.append(lead + text)
        result[i] = Insertion(facts[i][0], picks[i] + 1, written + len(lead), len(text))
        written += len(lead) + len(text)
    pieces.append(context[cursor:])
    return "".join(pieces), [result[i] for i in range(len(facts))]


def fact_problems(facts: pl.DataFrame, items: pl.DataFrame) -> list[str]:
    """For an asset check: every accepted fact that contains a gold answer, or that a model could
    copy for a non-zero keyword-recall score (either variant); [] when all is well."""
    by_id = {r["item_id"]: r for r in items.iter_rows(named=True)}
    problems = []
    for f in facts.filter(pl.col("accepted")).iter_rows(named=True):
        item = by_id.get(f["item_id"])
        if item is None:
            problems.append(f"fact {f['fact_id']}: field 'item_id': {f['item_id']!r} is not an item")
            continue
        hit = _contains_answer(f["text"], item["answers"], item["language"])
        if hit is not None:
            problems.append(f"fact {f['fact_id']} (item {f['item_id']!r}) contains the gold answer {hit!r}")
            continue
        rule = _scoring_rule(item)
        for variant in VARIANTS:
            value = keyword_recall_score(rule, f["text"], item["answers"], list(item["answer_keywords"] or []), variant)
            if value > 0:
                problems.append(f"fact {f['fact_id']} (item {f['item_id']!r}): copying it scores {value:.3f} "
                                f"on {rule} ({variant} variant)")
    return problems
