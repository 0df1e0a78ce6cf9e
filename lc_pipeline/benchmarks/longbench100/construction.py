"""100-LongBench instance construction at controllable length (pure logic, no Dagster).

Eight tasks (spec ``shared/specs/100longbench.md`` §2-§4), 4 categories x 2 tasks, each a
``TaskSpec`` (``lc_pipeline/benchmarks/longbench100/task_files/longbench100.yaml``): its ``builder.options.kind``
picks the construction below; its name, category, prompt (placeholders ``{context}``,
``{question}`` and, for the QA kinds, ``{instruction}``: which passages to read) and
``max_new_tokens`` are the spec's. A task's random draws are seeded by its name, which is part
of its instance ids (with its ``instance_salt`` when non-empty).

==================  ===========================  =============================================
kind                category (packaged task)     real / noise pools (our corpora)
==================  ===========================  =============================================
kv_retrieval        Key Retrieval                synthetic UUID chain / NOISE pool
counting_stars      Key Retrieval                synthetic star sentences / NOISE pool
passage_retrieval   Information Retrieval        docs with a known summary / SUMMARY pool
passage_count       Information Retrieval        NOISE pool, 1-3 copies of each picked doc
single_doc_qa       Information Comprehension    single-doc QA item / QA pool
multi_doc_qa        Information Comprehension    multi-doc QA item (its passages) / QA pool
single_doc_sum      Information Summarization    single-doc summarization item / SUM pool
multi_doc_sum       Information Summarization    multi-doc summarization item / SUM pool
==================  ===========================  =============================================

Pools are derived from the items (the paper's source numbers ①-⑳ do not exist here):

* QA pool (paper ①-⑧): documents of the domains that hold single-doc QA evidence.
* NOISE pool (paper ①-⑨): the QA pool plus the domains of "synthetic"-category evidence
  (LongBench's passage_count / passage_retrieval paragraphs: short wiki/news articles, our
  stand-in for ⑨ CNN/DailyMail).
* SUM pool (paper ⑩-⑮): documents of the domains that hold single-document summarization
  evidence (summarization items with exactly one evidence document).
* SUMMARY pool (paper ⑨-⑮): the SUM pool plus the "synthetic" domains; a passage-retrieval
  target must be a document whose summary we know (the answer of a single-doc summarization
  item, or the question of a LongBench passage_retrieval item).

Length (spec §3.1/§3.2, §10.1): a level's target is ``level_tokens(level)`` (1k = 1,024).
The budget applies to the sum of the raw document lengths, each counted on its own, and
:func:`greedy_fill` keeps it strictly under the target. Labels ("Passage i:") and
separators are not budgeted; ``context_tokens`` is the exact count of the final context,
``input_tokens`` of the whole prompt. Deviation: the KV / counting-stars needle sentences
*are* budgeted (subtracted before the fill), so those contexts stay under the target too.
Documented tolerance (checked by the tests): ``context_tokens < target + n_blocks *
LABEL_TOKENS``; from below, the raw sum misses the target by less than the shortest pool
document that was not picked (greedy fill stops only when nothing fits).

Tokenizer (spec §3.1): the paper's repo counts with ``meta-llama/Llama-2-7b-hf``
(``tokenizer.encode(text)``: its BOS included, :data:`COUNTS_SPECIAL_TOKENS`). Every length here is
counted with the config's ``tokenizer`` (``hf:meta-llama/Llama-2-7b-hf`` or a folder holding it, when
the user has it; cl100k_base by default) and the rows' ``tokenizer`` names it. cl100k gives roughly
10-20 % fewer tokens than Llama-2 for English, so a cl100k "8k" instance holds more text than the paper's.

Base Ability (spec §3.4, fidelity review LB100-2): at the config's base lengths the four QA and
summarization tasks are built as the repo builds its base set, from **unpadded original items** whose
context is under :data:`BASE_ORIGINALS_LIMIT` tokens (no distractors): up to ``n_per_task`` such items
in a seeded order, dealt in turn to the base lengths (the repo's one "0-8k" set of up to 100; the
per-length scores averaged over the base lengths give its mean). Their rows have ``target_tokens``
8,192 (the rule they meet) and ``n_filler_documents`` 0. Single-doc items are "Passage 1", a multi-doc
QA item keeps its passages in their order, a multi-doc summary's passages are shuffled and relabelled.
The synthetic tasks are built at the base lengths as at any other.

Sampling is WITHOUT replacement everywhere (the repo samples with replacement, which makes
Passage Count golds wrong, spec §12.15). Every random choice comes from
``random.Random(derive_seed(...))`` (sha256), so same inputs + seed -> identical rows.
Prompts are our own wording of the task instructions (spec §4.2 is the reference).
"""

from __future__ import annotations

import random
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline.config import level_tokens
from lc_pipeline.construct.assembly import derive_seed, instance_id
from lc_pipeline.construct.build_request import BuildError, BuildRequest
from lc_pipeline.construct.instance_checks import SuiteRules
from lc_pipeline.construct.rows import instance_row, instances_frame
from lc_pipeline.construct.spec_checks import (
    check_builder,
    check_max_new_tokens,
    check_prompt,
)
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.fingerprints import short_id
from lc_pipeline.tasks.spec import TaskSpec
from lc_pipeline.text import fill_template

CONSTRUCTION_VERSION = "lb100-2"
# The repo counts with ``tokenizer.encode(text)``: with the tokenizer's special tokens (Llama-2's BOS); a tiktoken
# encoding adds none, so cl100k counts are the same either way.
COUNTS_SPECIAL_TOKENS = True
BASE_ORIGINALS_LIMIT = 8 * 1024  # base set: original QA / summarization items whose context is under 8,192 tokens
SUITE = "longbench100"  # INSTANCES.suite of rows built here
LABEL_TOKENS = 10  # allowance per block for "Passage i:\n" + separators (spec §11 "~10 label tokens")
MAX_FILL_ATTEMPTS = 50  # KV / counting stars: re-run greedy_fill until it yields >= 4 documents
MIN_SYNTHETIC_DOCS = 4

KV_RETRIEVAL = "kv_retrieval"
COUNTING_STARS = "counting_stars"
PASSAGE_RETRIEVAL = "passage_retrieval"
PASSAGE_COUNT = "passage_count"
SINGLE_DOC_QA = "single_doc_qa"
MULTI_DOC_QA = "multi_doc_qa"
SINGLE_DOC_SUM = "single_doc_sum"
MULTI_DOC_SUM = "multi_doc_sum"

KINDS: tuple[str, ...] = (  # TaskSpec.builder.options.kind of the tasks built here
    KV_RETRIEVAL,
    COUNTING_STARS,
    PASSAGE_RETRIEVAL,
    PASSAGE_COUNT,
    SINGLE_DOC_QA,
    MULTI_DOC_QA,
    SINGLE_DOC_SUM,
    MULTI_DOC_SUM,
)
BUILDER = "longbench100"  # TaskSpec.builder.name of the tasks built here
# What a kind's prompt template may name; the QA kinds' {instruction} names the passages to read.
PLACEHOLDERS = {kind: ("context", "question") for kind in KINDS} | {
    SINGLE_DOC_QA: ("context", "question", "instruction"),
    MULTI_DOC_QA: ("context", "question", "instruction"),
}

# Item categories (SOURCE_ITEMS.category) that feed each pool.
SINGLE_QA_CATEGORY = "single-doc QA"
MULTI_QA_CATEGORY = "multi-doc QA"
SUMMARIZATION_CATEGORY = "summarization"
SYNTHETIC_CATEGORY = "synthetic"
PASSAGE_RETRIEVAL_SOURCE_TASKS = ("passage_retrieval_en",)  # LongBench items whose question is a paragraph summary

# --------------------------------------------------------------------------- prompts (our wording)

STARS_QUESTION = (
    "On this misty night the little penguin looks up at the sky and counts ★. Collect the numbers of ★ the "
    "little penguin counted, in the order they appear in the passages, as a list like [x, x, x, ...]. Do not "
    "add them up.\nQuestion: Which list is the correct record of the ★ the little penguin counted?\n"
    "{options}\nAnswer with the option number only (1, 2, 3, ...), no explanation."
)


def _block(i: int, text: str, label: str = "Passage") -> str:
    return f"{label} {i}:\n{text.strip()}\n\n"


# --------------------------------------------------------------------------- fill


def greedy_fill(pool: Sequence[tuple[str, int]], budget: int, rng: random.Random) -> list[str]:
    """Spec §3.2 greedy fill, WITHOUT replacement.

    While documents strictly shorter than the remaining budget exist, pick one uniformly
    (``rng.choice`` over the candidates in pool order) and subtract its length. Returns the
    picked doc ids in draw order; their length sum is < ``budget`` (or 0 docs).
    """
    remaining = [(d, int(n)) for d, n in pool]
    chosen: list[str] = []
    while budget > 0:
        cand = [i for i, (_, n) in enumerate(remaining) if n < budget]
        if not cand:
            break
        i = rng.choice(cand)
        doc_id, n = remaining.pop(i)
        chosen.append(doc_id)
        budget -= n
    return chosen


def fill_with_repeats(
    pool: Sequence[tuple[str, int]],
    budget: int,
    rng: random.Random,
    max_repeats: int = 3,
) -> list[tuple[str, int]]:
    """Passage Count fill (spec §3.3): draw r in 1..max_repeats, pick uniformly among unpicked
    documents with ``len * r < budget``, subtract ``len * r``. When no document fits r copies,
    r = 1 is tried before stopping. Without replacement, so the gold count is exact."""
    remaining = [(d, int(n)) for d, n in pool if n <= budget]
    picks: list[tuple[str, int]] = []
    while budget > 0:
        r = rng.randint(1, max_repeats)
        cand = [i for i, (_, n) in enumerate(remaining) if n * r < budget]
        if not cand and r != 1:
            r = 1
            cand = [i for i, (_, n) in enumerate(remaining) if n < budget]
        if not cand:
            break
        i = rng.choice(cand)
        doc_id, n = remaining.pop(i)
        picks.append((doc_id, r))
        budget -= n * r
    return picks


# --------------------------------------------------------------------------- corpus


@dataclass
class Corpus:
    """Documents (with token counts), items and the task pools derived from them."""

    docs: dict[str, dict]
    tokens: dict[str, int]
    qa_pool: list[str]
    noise_pool: list[str]
    sum_pool: list[str]
    summary_pool: list[str]
    summaries: dict[str, str]  # doc_id -> a reference summary of that document
    single_qa: list[dict]
    multi_qa: list[dict]
    single_sum: list[dict]
    multi_sum: list[dict]
    counter: TokenCounter
    missing: dict[str, str] = field(default_factory=dict)  # kind -> what it lacks

    @classmethod
    def build(cls, documents: pl.DataFrame, items: pl.DataFrame, counter: TokenCounter) -> Corpus:
        rows = documents.select("doc_id", "source", "title", "text", "language", "domain").sort("doc_id").to_dicts()
        docs = {r["doc_id"]: r for r in rows}
        if len(docs) != len(rows):
            raise ValueError("documents: field 'doc_id' has duplicates")
        tokens = dict(zip(docs, counter.count_many([r["text"] or "" for r in rows])))
        item_rows = sorted(items.to_dicts(), key=lambda r: r["item_id"])
        for it in item_rows:
            bad = [d for d in it["evidence_doc_ids"] or [] if d not in docs]
            if bad or not it["evidence_doc_ids"]:
                raise ValueError(f"item {it['item_id']!r}: evidence_doc_ids {bad or 'empty'} not in documents")

        def domains(its: Iterable[dict]) -> set[str]:
            return {docs[d]["domain"] for it in its for d in it["evidence_doc_ids"]}

        def pool(doms: set[str]) -> list[str]:
            return [d for d, r in docs.items() if r["domain"] in doms and (r["text"] or "").strip()]

        by_cat: dict[str, list[dict]] = defaultdict(list)
        for it in item_rows:
            by_cat[it["category"]].append(it)
        single_qa = by_cat[SINGLE_QA_CATEGORY]
        multi_qa = by_cat[MULTI_QA_CATEGORY]
        sums = [it for it in by_cat[SUMMARIZATION_CATEGORY] if it["answers"]]
        single_sum = [it for it in sums if len(it["evidence_doc_ids"]) == 1]
        multi_sum = [it for it in sums if len(it["evidence_doc_ids"]) > 1]
        synthetic = by_cat[SYNTHETIC_CATEGORY]
        qa_dom = domains(single_qa)
        syn_dom = domains(synthetic)
        sum_dom = domains(single_sum)
        summaries: dict[str, str] = {}
        for it in single_sum:
            summaries.setdefault(it["evidence_doc_ids"][0], it["answers"][0])
        for it in synthetic:
            if it["task"] in PASSAGE_RETRIEVAL_SOURCE_TASKS and len(it["evidence_doc_ids"]) == 1 and it["question"]:
                summaries.setdefault(it["evidence_doc_ids"][0], it["question"])
        c = cls(
            docs=docs,
            tokens=tokens,
            qa_pool=pool(qa_dom),
            noise_pool=pool(qa_dom | syn_dom),
            sum_pool=pool(sum_dom),
            summary_pool=pool(sum_dom | (syn_dom if summaries else set())),
            summaries=summaries,
            single_qa=single_qa,
            multi_qa=multi_qa,
            single_sum=single_sum,
            multi_sum=multi_sum,
            counter=counter,
        )
        need = {
            KV_RETRIEVAL: (
                c.noise_pool,
                "documents of single-doc QA or synthetic-item domains (noise pool)",
            ),
            COUNTING_STARS: (
                c.noise_pool,
                "documents of single-doc QA or synthetic-item domains (noise pool)",
            ),
            PASSAGE_COUNT: (
                c.noise_pool,
                "documents of single-doc QA or synthetic-item domains (noise pool)",
            ),
            PASSAGE_RETRIEVAL: (
                c.summaries,
                "documents with a known summary (single-doc summarization items or LongBench passage_retrieval items)",
            ),
            SINGLE_DOC_QA: (c.single_qa, "items with category 'single-doc QA'"),
            MULTI_DOC_QA: (
                c.multi_qa and c.qa_pool,
                "items with category 'multi-doc QA' and a single-doc QA document pool for distractors",
            ),
            SINGLE_DOC_SUM: (
                c.single_sum,
                "summarization items with one evidence document",
            ),
            MULTI_DOC_SUM: (
                c.multi_sum and c.sum_pool,
                "multi-document summarization items and single-doc summarization documents for distractors",
            ),
        }
        c.missing = {t: why for t, (have, why) in need.items() if not have}
        return c

    def pairs(self, ids: Iterable[str], exclude: set[str] = frozenset()) -> list[tuple[str, int]]:
        return [(d, self.tokens[d]) for d in ids if d not in exclude]


# --------------------------------------------------------------------------- rows


@dataclass
class _Built:
    """What a task builder returns; ``_finish`` turns it into an INSTANCES row."""

    item_id: str
    source: str
    language: str
    question: str  # the task input shown after the context: the prompt's {question}
    answers: list[str]
    answer_keywords: list[str]
    evidence_doc_ids: list[str]
    blocks: list[tuple[str, str]]  # (block id, formatted text) in context order
    evidence_blocks: list[int]  # indices into blocks of the true context (first = depth)
    n_filler: int
    prompt_fields: dict[str, str]  # the kind's own placeholders (the QA kinds' {instruction})


def _finish(
    spec: TaskSpec,
    b: _Built,
    *,
    level: str,
    target: int,
    seed: int,
    index: int,
    counter: TokenCounter,
) -> dict:
    context = "".join(text for _, text in b.blocks).rstrip("\n")
    prompt = fill_template(spec.prompt, {**b.prompt_fields, "context": context, "question": b.question})
    starts, pos = [], 0
    for _, text in b.blocks:
        starts.append(pos)
        pos += len(text)
    counts = counter.count_many([context, prompt] + [context[: starts[i]] for i in b.evidence_blocks])
    context_tokens, input_tokens, ev = counts[0], counts[1], counts[2:]
    ev_depths = [c / context_tokens if context_tokens else 0.0 for c in ev]
    depth = ev_depths[0] if ev_depths else 0.0
    salt = (spec.instance_salt,) if spec.instance_salt else ()
    fingerprint = short_id(CONSTRUCTION_VERSION, spec.name, seed, index, counter.name, *salt, length=16)
    return instance_row(
        instance_id=instance_id(b.item_id, level, target, round(depth, 6), "plain", fingerprint),
        item_id=b.item_id,
        source=b.source,
        suite=SUITE,
        task=spec.name,
        category=spec.category,
        language=b.language,
        depth=depth,
        evidence_depths=ev_depths,
        question=b.question,
        answers=b.answers,
        answer_keywords=b.answer_keywords,
        evidence_doc_ids=b.evidence_doc_ids,
        context_doc_ids=[bid for bid, _ in b.blocks],
        n_hard_negatives=0,
        n_filler_documents=b.n_filler,
        context=context,
        prompt=prompt,
        tokenizer=counter.name,
        target_tokens=target,
        input_tokens=input_tokens,
        context_tokens=context_tokens,
        max_new_tokens=spec.max_new_tokens,
    )


def _source_of(c: Corpus, ids: Iterable[str]) -> str:
    return ",".join(sorted({c.docs[d]["source"] for d in ids}))


def _language_of(c: Corpus, ids: Iterable[str]) -> str:
    langs = sorted({c.docs[d]["language"] for d in ids})
    return langs[0] if len(langs) == 1 else ",".join(langs)


def _fill_min_docs(c: Corpus, task: str, pool: list[tuple[str, int]], budget: int, rng: random.Random) -> list[str]:
    for _ in range(MAX_FILL_ATTEMPTS):
        chosen = greedy_fill(pool, budget, rng)
        if len(chosen) >= MIN_SYNTHETIC_DOCS:
            return chosen
    raise ValueError(
        f"task {task!r}: greedy_fill never returned >= {MIN_SYNTHETIC_DOCS} documents within a budget of {budget} "
        f"tokens ({MAX_FILL_ATTEMPTS} attempts); the noise pool needs shorter documents for this level"
    )


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def build_kv_retrieval(c: Corpus, target: int, rng: random.Random, index: int, task: str = KV_RETRIEVAL) -> _Built:
    keys = [_uuid(rng) for _ in range(4)]
    needles = [f"The value of {keys[i]} is {keys[i + 1]}.\n\n" for i in range(3)]
    budget = target - sum(_needle_tokens(c, needles))
    chosen = _fill_min_docs(c, task, c.pairs(c.noise_pool), budget, rng)
    positions = rng.sample(range(len(chosen)), 3)  # pair i goes before the document at positions[i]
    at = {p: i for i, p in enumerate(positions)}
    blocks: list[tuple[str, str]] = []
    first = -1
    for k, d in enumerate(chosen):
        text = _block(k + 1, c.docs[d]["text"])
        if k in at:
            text = needles[at[k]] + text
            if at[k] == 0:
                first = k
        blocks.append((d, text))
    question = f"Question: what is the value of the key {keys[0]}?\nAnswer: the value of {keys[0]} is"
    return _Built(
        item_id=f"lb100-kv-{keys[0]}",
        source=_source_of(c, chosen),
        language=_language_of(c, chosen),
        question=question,
        answers=[keys[1]],
        answer_keywords=[keys[1]],
        evidence_doc_ids=[],
        blocks=blocks,
        evidence_blocks=[first],
        n_filler=len(chosen),
        prompt_fields={},
    )


def _needle_tokens(c: Corpus, texts: Sequence[str]) -> list[int]:
    return c.counter.count_many(list(texts))


def _swap2(gold: list[int], rng: random.Random) -> list[int]:
    out = list(gold)
    i, j = rng.sample(range(len(out)), 2)
    out[i], out[j] = out[j], out[i]
    return out


def _modify1(gold: list[int], rng: random.Random) -> list[int]:
    out = list(gold)
    out[rng.randrange(len(out))] = rng.randint(1, 100)
    return out


def star_options(gold: list[int], rng: random.Random) -> tuple[list[str], int]:
    """Options ["unanswerable"] + shuffle([swap2, modify1, gold, swap2]) and the 1-based gold index.

    Deviation from the repo: each distractor is redrawn until it differs from the gold and
    from the other distractors, so exactly one option is correct."""
    seen = {tuple(gold)}
    distractors = []
    for make in (_swap2, _modify1, _swap2):
        for _ in range(1000):
            cand = make(gold, rng)
            if tuple(cand) not in seen:
                break
        else:  # all four numbers equal: swaps cannot differ; fall back to modifying
            cand = list(gold)
            while tuple(cand) in seen:
                cand = _modify1(cand, rng)
        seen.add(tuple(cand))
        distractors.append(cand)
    lists = [distractors[0], distractors[1], list(gold), distractors[2]]
    rng.shuffle(lists)
    options = ["unanswerable"] + [str(x) for x in lists]
    return options, 2 + lists.index(list(gold))


STAR_NEEDLE = "The little penguin counted {} ★"


def build_counting_stars(c: Corpus, target: int, rng: random.Random, index: int, task: str = COUNTING_STARS) -> _Built:
    counts = [rng.randint(1, 100) for _ in range(4)]
    # Needle tokens depend only weakly on the numbers: budget the 3-digit worst case.
    budget = target - sum(_needle_tokens(c, [STAR_NEEDLE.format(100) + "\n\n"] * 4))
    chosen = _fill_min_docs(c, task, c.pairs(c.noise_pool), budget, rng)
    positions = sorted(rng.sample(range(len(chosen)), 4))  # stars go before these documents, in text order
    gold = counts  # counts[i] is placed before chosen[positions[i]], so text order = counts order
    blocks = []
    for k, d in enumerate(chosen):
        text = _block(k + 1, c.docs[d]["text"])
        if k in positions:
            text = STAR_NEEDLE.format(gold[positions.index(k)]) + "\n\n" + text
        blocks.append((d, text))
    options, gold_index = star_options(gold, rng)
    question = STARS_QUESTION.format(options="\n".join(f"{i}. {o}" for i, o in enumerate(options, start=1)))
    return _Built(
        item_id=f"lb100-stars-{short_id(CONSTRUCTION_VERSION, gold, chosen, length=12)}",
        source=_source_of(c, chosen),
        language=_language_of(c, chosen),
        question=question,
        answers=[str(gold_index)],
        # The four star sentences: the evidence the answer rests on (the instances asset checks that
        # each is in the context; the gold list itself is in the question's options, not the context).
        answer_keywords=[STAR_NEEDLE.format(n) for n in gold],
        evidence_doc_ids=[],
        blocks=blocks,
        evidence_blocks=positions,
        n_filler=len(chosen),
        prompt_fields={},
    )


def build_passage_count(c: Corpus, target: int, rng: random.Random, index: int, task: str = PASSAGE_COUNT) -> _Built:
    picks = fill_with_repeats(c.pairs(c.noise_pool), target, rng)
    if not picks:
        raise ValueError(f"task {task!r}: no noise-pool document is shorter than {target} tokens")
    expanded = [d for d, r in picks for _ in range(r)]
    rng.shuffle(expanded)
    blocks = [(d, _block(k + 1, c.docs[d]["text"], "Paragraph")) for k, d in enumerate(expanded)]
    distinct = [d for d, _ in picks]
    firsts = sorted({expanded.index(d) for d in distinct})
    question = "How many distinct paragraphs are there?"
    return _Built(
        item_id=f"lb100-count-{short_id(CONSTRUCTION_VERSION, expanded, length=12)}",
        source=_source_of(c, distinct),
        language=_language_of(c, distinct),
        question=question,
        answers=[str(len(distinct))],
        answer_keywords=[],
        evidence_doc_ids=sorted(distinct),
        blocks=blocks,
        evidence_blocks=firsts,
        n_filler=0,
        prompt_fields={},
    )


def _place(real: list[str], noise: list[str], rng: random.Random) -> tuple[list[str], list[int]]:
    """Shuffle real and noise ids together; return the order and the real ids' positions."""
    order = list(real) + list(noise)
    rng.shuffle(order)
    real_set = set(real)
    return order, [i for i, d in enumerate(order) if d in real_set]


def build_passage_retrieval(c: Corpus, target: int, rng: random.Random, index: int, targets: list[str]) -> _Built:
    t = targets[index]
    noise = greedy_fill(c.pairs(c.summary_pool, exclude={t}), target - c.tokens[t], rng)
    order, pos = _place([t], noise, rng)
    blocks = [(d, _block(k + 1, c.docs[d]["text"])) for k, d in enumerate(order)]
    summary = c.summaries[t]
    return _Built(
        item_id=f"lb100-pr-{t}",
        source=c.docs[t]["source"],
        language=c.docs[t]["language"],
        question=summary,
        answers=[str(pos[0] + 1)],  # the prompt ends "Answer: Passage ", so the model writes the number
        answer_keywords=[],
        evidence_doc_ids=[t],
        blocks=blocks,
        evidence_blocks=pos,
        n_filler=len(noise),
        prompt_fields={},
    )


def _item_tokens(c: Corpus, item: dict) -> int:
    return sum(c.tokens[d] for d in item["evidence_doc_ids"])


def _build_from_item(kind: str, c: Corpus, item: dict, target: int, rng: random.Random, pool: list[str],
                     original: bool = False) -> _Built:
    """An item padded with pool documents to ``target`` (shuffled together), or, ``original``, the item's own
    documents alone (the base set, spec §3.4: a multi-doc QA item's passages in their order)."""
    real = list(item["evidence_doc_ids"])
    if original:
        noise: list[str] = []
        order, pos = (real, list(range(len(real)))) if kind == MULTI_DOC_QA else _place(real, noise, rng)
    else:
        noise = greedy_fill(c.pairs(pool, exclude=set(real)), target - _item_tokens(c, item), rng)
        order, pos = _place(real, noise, rng)  # multi-doc items: each passage is shuffled on its own
    blocks = [(d, _block(k + 1, c.docs[d]["text"])) for k, d in enumerate(order)]
    labels = [k + 1 for k in pos]
    fields: dict[str, str] = {}
    query = (item["question"] or "").strip()
    if kind == SINGLE_DOC_QA:
        fields = {"instruction": f"Answer the question about Passage {labels[0]}."}
        question = query
    elif kind == MULTI_DOC_QA and original:
        fields = {"instruction": "Answer the question about these passages."}
        question = query
    elif kind == MULTI_DOC_QA:
        fields = {"instruction": "Answer the question about Passages " + ", ".join(map(str, labels)) + "."}
        question = query
    elif kind == SINGLE_DOC_SUM:
        ask = f"Summarize Passage {labels[0]} in a few short sentences"
        question = f"{ask}: {query}" if query else f"{ask}."
    else:
        ask = "Combine the main ideas of these passages into one summary: " + ", ".join(f"Passage {k}" for k in labels)
        question = f"{ask}: {query}" if query else f"{ask}."
    return _Built(
        item_id=item["item_id"],
        source=item["source"],
        language=item["language"],
        question=question,
        answers=list(item["answers"]),
        answer_keywords=list(item["answer_keywords"] or []),
        evidence_doc_ids=real,
        blocks=blocks,
        evidence_blocks=pos,
        n_filler=len(noise),
        prompt_fields=fields,
    )


# --------------------------------------------------------------------------- level


def _pick(task: str, candidates: list, n: int, seed: int, level: str, what: str) -> list:
    """``n`` candidates in a seeded order that does not depend on the level (so the same items
    recur across levels where they fit)."""
    order = list(candidates)
    random.Random(derive_seed(seed, CONSTRUCTION_VERSION, task, "order")).shuffle(order)
    if len(order) < n:
        raise ValueError(
            f"task {task!r}, level {level!r}: only {len(order)} {what} fit the target, {n} requested "
            "(sampling is without replacement)"
        )
    return order[:n]


def check_spec(spec: TaskSpec) -> str:
    """The kind of ``spec``; a ValueError naming the task and the field when it cannot be built here."""
    kind = check_builder(spec, BUILDER, {k: {} for k in KINDS})
    check_prompt(spec, PLACEHOLDERS[kind])
    check_max_new_tokens(spec)
    return kind


def build_longbench100(
    documents: pl.DataFrame,
    items: pl.DataFrame,
    *,
    level: str,
    n_per_task: int,
    seed: int,
    counter: TokenCounter,
    tasks: Sequence[TaskSpec],
    base_levels: Sequence[str] = (),
) -> pl.DataFrame:
    """``n_per_task`` INSTANCES rows per task at one length level (e.g. "8k" = 8,192 tokens), tasks in order.

    Each spec is checked first (``check_spec``). A task whose inputs the corpus lacks raises
    ValueError naming the task and what it needs; leave it out of ``tasks`` to build the others.
    ``base_levels`` (the config's ``base_lengths``): at these levels the QA and summarization tasks take the
    unpadded original items under 8k instead (module docstring), ``level``'s share of them.
    Lengths are counted with ``counter`` as the repo counts (:data:`COUNTS_SPECIAL_TOKENS`).
    """
    counter = counter.counting_special_tokens(COUNTS_SPECIAL_TOKENS)
    names = [s.name for s in tasks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"build_longbench100: tasks {twice} are given twice")
    kinds = [check_spec(spec) for spec in tasks]
    if n_per_task < 1:
        raise ValueError("n_per_task must be >= 1")
    target = level_tokens(level)
    c = Corpus.build(documents, items, counter)
    missing = {spec.name: c.missing[kind] for spec, kind in zip(tasks, kinds) if kind in c.missing}
    if missing:
        raise ValueError(
            "the corpus cannot build: " + "; ".join(f"task {t!r} needs {why}" for t, why in missing.items())
        )
    base = list(dict.fromkeys(base_levels))
    share = (base.index(level), len(base)) if level in base else None
    rows = []
    for spec, kind in zip(tasks, kinds):
        rows.extend(_build_task(spec, kind, c, level=level, target=target, n=n_per_task, seed=seed, counter=counter,
                                base_share=share))
    return instances_frame(rows)


def _build_task(
    spec: TaskSpec,
    kind: str,
    c: Corpus,
    *,
    level: str,
    target: int,
    n: int,
    seed: int,
    counter: TokenCounter,
    base_share: tuple[int, int] | None = None,
) -> list[dict]:
    task = spec.name

    def rng_for(i: int) -> random.Random:
        return random.Random(derive_seed(seed, CONSTRUCTION_VERSION, task, level, target, i))

    def finish(b: _Built, i: int) -> dict:
        return _finish(spec, b, level=level, target=target, seed=seed, index=i, counter=counter)

    if kind in (KV_RETRIEVAL, COUNTING_STARS, PASSAGE_COUNT):
        builder = {
            KV_RETRIEVAL: build_kv_retrieval,
            COUNTING_STARS: build_counting_stars,
            PASSAGE_COUNT: build_passage_count,
        }[kind]
        return [finish(builder(c, target, rng_for(i), i, task=task), i) for i in range(n)]
    if kind == PASSAGE_RETRIEVAL:
        fitting = [d for d in sorted(c.summaries) if c.tokens[d] < target]
        targets = _pick(task, fitting, n, seed, level, "documents with a known summary")
        return [finish(build_passage_retrieval(c, target, rng_for(i), i, targets), i) for i in range(n)]
    source_items, pool = {
        SINGLE_DOC_QA: (c.single_qa, c.qa_pool),
        MULTI_DOC_QA: (c.multi_qa, c.qa_pool),
        SINGLE_DOC_SUM: (c.single_sum, c.sum_pool),
        MULTI_DOC_SUM: (c.multi_sum, c.sum_pool),
    }[kind]
    if base_share is not None:
        return _base_originals(spec, kind, c, source_items, level=level, n=n, seed=seed, counter=counter,
                               share=base_share)
    fitting = [it for it in source_items if _item_tokens(c, it) < target]
    return [finish(_build_from_item(kind, c, item, target, rng_for(i), pool), i)
            for i, item in enumerate(_pick(task, fitting, n, seed, level, "items"))]


def _base_originals(spec: TaskSpec, kind: str, c: Corpus, source_items: list[dict], *, level: str, n: int, seed: int,
                    counter: TokenCounter, share: tuple[int, int]) -> list[dict]:
    """The base set's original items of one base level (spec §3.4): of the items whose unpadded context is under
    :data:`BASE_ORIGINALS_LIMIT` tokens, up to ``n`` in a seeded order (the repo: ``random.sample(..., 100)``),
    dealt in turn to the base levels; ``share`` = (this level's index, number of base levels)."""
    task, (index, n_levels) = spec.name, share
    target = BASE_ORIGINALS_LIMIT
    built: list[tuple[int, _Built]] = []
    order = sorted(source_items, key=lambda it: it["item_id"])
    random.Random(derive_seed(seed, CONSTRUCTION_VERSION, task, "base-originals")).shuffle(order)
    for it in order:
        if len(built) >= n:
            break
        i = len(built)
        b = _build_from_item(kind, c, it, target, random.Random(derive_seed(seed, CONSTRUCTION_VERSION, task,
                                                                             "base-originals", i)), [], original=True)
        context = "".join(text for _, text in b.blocks).rstrip("\n")
        if counter.count(context) < target:  # the repo's rule, on the context as built
            built.append((i, b))
    if not built:
        raise ValueError(f"task {task!r}, base level {level!r}: no original item's context is under {target} tokens "
                         f"(base set, spec §3.4)")
    return [_finish(spec, b, level=level, target=target, seed=seed, index=i, counter=counter)
            for i, b in built if i % n_levels == index]


# --------------------------------------------------------------------------- the builder and its rows' checks


def build(request: BuildRequest) -> Iterator[pl.DataFrame]:
    """Builder ``longbench100``: 100-LongBench's tasks, a real item or synthetic needles padded by the paper's greedy
    fill."""
    i = request.inputs
    try:
        yield build_longbench100(i.documents, i.items, level=i.level, n_per_task=i.config.longbench100.n_per_task,
                                 seed=i.config.seed, counter=i.counter, tasks=request.tasks,
                                 base_levels=i.config.base_lengths)
    except ValueError as exc:
        raise BuildError(f"100-LongBench instances at {i.level}: {exc}") from exc


def configured_tasks(config, catalog) -> list[TaskSpec]:
    """The tasks of config section ``longbench100.tasks``."""
    return [catalog.get(f"longbench100/{t}", "config longbench100.tasks") for t in config.longbench100.tasks]


class Longbench100Rows(SuiteRules):
    """The instance checks' rules for 100-LongBench's rows (registered as suite ``longbench100``): the paper's
    greedy fill budgets raw document tokens strictly under the target and leaves labels unbudgeted, so a row's
    context must stay under ``target + blocks * LABEL_TOKENS`` (spec 100longbench.md §11)."""

    def too_far(self) -> pl.Expr:
        return pl.col("context_tokens") >= pl.col("target_tokens") + pl.col("context_doc_ids").list.len() * LABEL_TOKENS


ROWS = Longbench100Rows()
