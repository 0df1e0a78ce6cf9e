"""Length-controlled instance assembly, on a small hand-built corpus.

The corpus: fictional people and places. Single-hop items ask where a person was born
(evidence: the person's document); multi-hop items ask which river runs through a
person's birthplace (evidence: the person's and the place's documents).
"""

from __future__ import annotations

import random
import time

import polars as pl
import pytest

from lc_pipeline.config import BenchmarkConfig, SourceConfig
from lc_pipeline.construct.assembly import (
    DocumentIndex,
    assemble_instance,
    build_instances,
    derive_seed,
    filler_pool,
    fitting_items,
    items_per_batch_at,
    iter_instance_batches,
    select_items,
)
from lc_pipeline.construct.chunking import chunk_documents
from lc_pipeline.construct.prompts import QA_INSTRUCTION, QAPrompt, build_prompt, format_block, join_blocks
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.schemas import HARD_NEGATIVES, INSTANCES, PASSAGES, SOURCE_DOCUMENTS, SOURCE_ITEMS
from lc_pipeline.text import contains_answer

SYLLABLES = ["ka", "lo", "ve", "mir", "dan", "tor", "sel", "quin", "bra", "zu", "pel", "var", "ono", "reth", "gal", "fi"]
TRADES = ["weaver", "cartographer", "brewer", "glassblower", "archivist", "ferryman", "tanner", "astronomer"]
THINGS = ["lanterns", "maps", "copper bells", "salt", "wool", "ledgers", "clocks", "barley"]
PERSON_SENTENCES = [
    "{n} worked for many years as a {trade} and was known for {thing}.",
    "In later life {n} wrote a short treatise on {thing} that few people read.",
    "Neighbours remembered {n} as patient, careful and fond of long walks.",
    "{n} kept a notebook of every {trade} met on the road.",
    "A portrait of {n} hangs in a small hall beside a shelf of {thing}.",
    "Letters from {n} describe winters spent repairing {thing}.",
]
PLACE_SENTENCES = [
    "{n} is a market town whose fairs trade mostly in {thing}.",
    "The old quarter of {n} is built of grey stone and narrow lanes.",
    "Every spring {n} holds a festival in honour of the first {trade}.",
    "Travellers describe {n} as quiet, with a harbour full of {thing}.",
    "The council of {n} meets in a hall decorated with {thing}.",
    "Most families in {n} have at least one {trade} among them.",
]


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        n = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if n not in used:
            used.add(n)
            return n


def make_corpus(n_people: int = 40, n_places: int = 40, seed: int = 3) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(documents, items) conforming to SOURCE_DOCUMENTS / SOURCE_ITEMS."""
    rng = random.Random(seed)
    used: set[str] = set()
    places = [(_name(rng, used), _name(rng, used)) for _ in range(n_places)]  # (town, river)
    docs, items = [], []

    def body(templates: list[str], n: str, k: int) -> str:
        return " ".join(rng.choice(templates).format(n=n, trade=rng.choice(TRADES), thing=rng.choice(THINGS)) for _ in range(k))

    for i, (town, river) in enumerate(places):
        text = f"{town} is a town on the river {river}. " + body(PLACE_SENTENCES, town, rng.randint(8, 16))
        docs.append((f"place-{i:03d}", town, text, "places", "place"))
    for i in range(n_people):
        person = _name(rng, used)
        town, river = places[i % n_places]
        text = f"{person} was born in {town}. " + body(PERSON_SENTENCES, person, rng.randint(8, 16))
        docs.append((f"person-{i:03d}", person, text, "people", "person"))
        if i < 8:
            items.append((f"single-{i}", "single_hop_qa", "single-doc QA", f"In which town was {person} born?",
                          [town], [town], [f"person-{i:03d}"], 1))
        elif i < 14:
            items.append((f"multi-{i}", "multi_hop_qa", "multi-doc QA",
                          f"Which river flows through the town where {person} was born?",
                          [river], [river], [f"person-{i:03d}", f"place-{i % n_places:03d}"], 2))
    documents = pl.DataFrame(
        {
            "doc_id": [d[0] for d in docs],
            "source": ["handmade"] * len(docs),
            "title": [d[1] for d in docs],
            "text": [d[2] for d in docs],
            "language": ["en"] * len(docs),
            "domain": [d[3] for d in docs],
            "entity_type": [d[4] for d in docs],
        },
        schema=SOURCE_DOCUMENTS,
    )
    item_frame = pl.DataFrame(
        {
            "item_id": [t[0] for t in items],
            "source": ["handmade"] * len(items),
            "task": [t[1] for t in items],
            "category": [t[2] for t in items],
            "language": ["en"] * len(items),
            "question": [t[3] for t in items],
            "answers": [t[4] for t in items],
            "answer_keywords": [t[5] for t in items],
            "evidence_doc_ids": [t[6] for t in items],
            "hops": [t[7] for t in items],
            "all_classes": [[] for _ in items],
            "confusing_facts": [[] for _ in items],
            "record_id": [""] * len(items),
            "context": [""] * len(items),
            "record_fields": ["{}"] * len(items),
        },
        schema=SOURCE_ITEMS,
    )
    return documents, item_frame


def lexical_hard_negatives(items: pl.DataFrame, passages: pl.DataFrame, k: int = 30) -> pl.DataFrame:
    """A stand-in retriever (word overlap). Like the real table it drops answer-bearing
    passages, but it keeps the item's own evidence passages: assembly must skip those."""
    rows = []
    texts = passages.select("passage_id", "doc_id", "text").rows()
    for item in items.iter_rows(named=True):
        q = set(item["question"].lower().replace("?", "").split())
        scored = sorted(texts, key=lambda t: (-len(q & set(t[2].lower().split())), t[0]))
        rank = 0
        for retrieval_rank, (pid, doc_id, text) in enumerate(scored):
            if contains_answer(text, item["answers"]):
                continue
            rows.append((item["item_id"], rank, pid, doc_id, 1.0 / (1 + retrieval_rank), retrieval_rank))
            rank += 1
            if rank == k:
                break
    return pl.DataFrame(rows, schema=HARD_NEGATIVES, orient="row")


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter.load()


@pytest.fixture(scope="module")
def corpus(counter):
    documents, items = make_corpus()
    passages = chunk_documents(documents, 40, counter)  # short passages so several per document
    hard_negatives = lexical_hard_negatives(items, passages)
    return items, documents, passages, hard_negatives


def make_config(**overrides) -> BenchmarkConfig:
    base = BenchmarkConfig(
        name="test",
        sources=(SourceConfig("handmade"),),
        lengths=("1k", "2k", "4k", "128", "64k"),
        base_lengths=("1k",),
        long_lengths=("2k", "4k"),
        depths=(0.0, 0.5, 1.0),
        items_per_length=4,
        seed=42,
        length_tolerance=0.05,
        max_new_tokens=24,
    )
    return base.replace(**overrides)


@pytest.fixture(scope="module")
def built(corpus, counter):
    config = make_config()
    return {lv: build_instances(*corpus, level=lv, config=config, counter=counter) for lv in ("1k", "2k", "4k")}


def block_text(row: dict, documents: pl.DataFrame, passages: pl.DataFrame, block_id: str) -> str:
    if "#" in block_id:
        return passages.filter(pl.col("passage_id") == block_id)["text"].item()
    return documents.filter(pl.col("doc_id") == block_id.removesuffix(":cut"))["text"].item()


# --------------------------------------------------------------------------- select_items


def test_select_items_is_seeded_balanced_and_order_independent(corpus):
    items = corpus[0]
    picked = select_items(items, 6, seed=42)
    assert picked.schema == items.schema
    assert picked["task"].value_counts()["count"].to_list() == [3, 3]  # round-robin over tasks
    assert picked.equals(select_items(items, 6, seed=42))
    assert picked.equals(select_items(items.reverse(), 6, seed=42))  # input row order does not matter
    assert set(select_items(items, 6, seed=7)["item_id"]) != set(picked["item_id"])
    # A smaller n is a prefix of a larger one: growing items_per_length keeps old items.
    assert select_items(items, 4, seed=42)["item_id"].to_list() == picked["item_id"].to_list()[:4]


def test_select_items_too_many_names_available_count(corpus):
    with pytest.raises(ValueError, match="only 14 exist"):
        select_items(corpus[0], 15, seed=1)


# --------------------------------------------------------------------------- filler_pool


def test_filler_pool_same_domain_no_evidence_no_answer(corpus):
    items, documents = corpus[0], corpus[1]
    item = items.filter(pl.col("item_id") == "single-0").row(0, named=True)
    pool = filler_pool(documents, item, cross_domain=False)
    ids = {r["doc_id"] for r in pool}
    assert ids and all(i.startswith("person-") for i in ids)  # same domain only
    assert "person-000" not in ids  # not the evidence
    assert all(not contains_answer(r["text"], item["answers"]) for r in pool)
    # With the cross-domain fallback, other domains follow the same-domain documents, under the same rules.
    wide = filler_pool(documents, item)
    assert [r["doc_id"] for r in wide if r["tier"] == 0] == [r["doc_id"] for r in pool]
    fallback = [r for r in wide if r["tier"] == 1]
    assert fallback and not any(r["doc_id"].startswith("person-") for r in fallback)
    assert wide.index(fallback[0]) == len(pool)  # the fallback comes after every same-domain document
    assert all(not contains_answer(r["text"], item["answers"]) for r in fallback)
    # Person 0 and person 40 would share a birthplace if there were 41 people; here the
    # only other documents that mention the town are places, which are another domain.
    multi = items.filter(pl.col("item_id") == "multi-8").row(0, named=True)
    multi_ids = {r["doc_id"] for r in filler_pool(documents, multi, cross_domain=False)}
    assert any(i.startswith("place-") for i in multi_ids) and any(i.startswith("person-") for i in multi_ids)
    assert not multi_ids & set(multi["evidence_doc_ids"])


def test_filler_pool_drops_documents_containing_an_answer(corpus):
    items, documents = corpus[0], corpus[1]
    item = items.filter(pl.col("item_id") == "single-0").row(0, named=True)
    town = item["answers"][0]
    # Punctuation and case differences still count as containing the answer (SubEM rules).
    leaky = documents.with_columns(
        pl.when(pl.col("doc_id") == "person-005")
        .then(pl.col("text") + f" Later moved to {town.upper()}!")
        .otherwise(pl.col("text"))
        .alias("text")
    )
    assert "person-005" in {r["doc_id"] for r in filler_pool(documents, item)}
    assert "person-005" not in {r["doc_id"] for r in filler_pool(leaky, item)}


# --------------------------------------------------------------------------- build_instances


def test_filler_pool_screens_answers_exactly_as_contains_answer(corpus):
    # The pool screens documents by the words of each answer before the exact check: partial
    # words, answers split over sentences, articles and punctuation must decide as SubEM does.
    documents = corpus[1]
    texts = {
        "person-001": "She sailed from Lytoford at dawn.",  # "ford" inside a longer word: contains "ford"
        "person-002": "The river is called Kado; boats dock elsewhere.",  # both words, not the phrase
        "person-003": "Boats reach the Kado River twice a year.",  # "kado river" after normalization
        "person-004": "An inn called The Harbour, by the quay.",  # "harbour" (the article goes)
        "person-005": "Nothing relevant here, only wool and salt.",
    }
    docs = documents.with_columns(pl.col("doc_id").replace_strict(texts, default=pl.col("text")).alias("text"))
    item = {"item_id": "q", "evidence_doc_ids": ["person-000"], "answers": ["ford", "Kado river!", "the Harbour"]}
    pool_ids = {r["doc_id"] for r in filler_pool(docs, item)}
    expected = {d for d, t in docs.filter(pl.col("doc_id") != "person-000").select("doc_id", "text").iter_rows()
                if t.strip() and not contains_answer(t, item["answers"])}
    assert pool_ids == expected
    assert {"person-002", "person-005"} <= pool_ids and not {"person-001", "person-003", "person-004"} & pool_ids


def test_level_wide_answer_screen_keeps_the_pools(corpus):
    # A level screens all its items' answer words in one pass (screen_answers) before asking for
    # pools; the pools must be those of the per-item screen: overlapping and nested words, words
    # inside longer words, non-ASCII text.
    documents = corpus[1]
    texts = {
        "person-001": "banana bandana ananas",  # "ana" overlaps itself; "nan" inside "banana"
        "person-002": "Ünïcödé Städte: Zürich, Köln, 東京の川",
        "person-003": "Lytoford and Oxford and fordable",
        "person-004": "zürichsee",
    }
    docs = documents.with_columns(pl.col("doc_id").replace_strict(texts, default=pl.col("text")).alias("text"))
    items = [{"item_id": f"q{i}", "evidence_doc_ids": ["person-000"], "answers": answers}
             for i, answers in enumerate([["ana"], ["nan", "bandana"], ["Zürich"], ["東京"], ["ford able"],
                                          ["Köln!", "the Städte"], ["absent word"]])]
    screened = DocumentIndex(docs)
    screened.screen_answers(item["answers"] for item in items)
    for item in items:
        expected = filler_pool(docs, item)  # a fresh index: the per-item str.find sweep
        assert screened.filler_pool(item) == expected, item["answers"]
        assert all(not contains_answer(r["text"], item["answers"]) for r in expected)


def test_instances_conform_and_hit_their_targets(built):
    errors = {}
    for level, df in built.items():
        assert df.schema == INSTANCES
        assert df.height == 4 * 3
        assert df["instance_id"].n_unique() == df.height
        rel = (df["input_tokens"] - df["target_tokens"]) / df["target_tokens"]
        errors[level] = (rel.min(), rel.max())
        assert rel.abs().max() <= 0.01  # the aim; length_tolerance (5 %) is the hard limit
        assert (df["input_tokens"] <= df["target_tokens"]).all()
        assert set(df["variant"]) == {"plain"} and set(df["tokenizer"]) == {"cl100k_base"}
        assert set(df["max_new_tokens"]) == {24}
    print("relative length error (min, max) per level:", errors)


def test_recorded_counts_are_exact(built, counter):
    for df in built.values():
        for row in df.iter_rows(named=True):
            assert row["input_tokens"] == counter.count(row["prompt"])
            assert row["context_tokens"] == counter.count(row["context"])
            assert row["prompt"].startswith(QA_INSTRUCTION)
            assert row["context"] in row["prompt"]
            assert row["prompt"].endswith(f"Question: {row['question']}\nAnswer:")


def block_bodies(row: dict) -> list[str]:
    """The body text of each block, in context order (split on the numbered headers)."""
    context, ids = row["context"], row["context_doc_ids"]
    starts = []
    pos = 0
    for i in range(1, len(ids) + 1):
        pos = context.index(f"Document [{i}] (Title: ", pos)
        starts.append(pos)
    bodies = []
    for k, start in enumerate(starts):
        end = starts[k + 1] - len("\n\n") if k + 1 < len(starts) else len(context)
        bodies.append(context[start:end].split("): ", 1)[1])
    return bodies


def test_blocks_verbatim_and_distractors_answer_free(built, corpus):
    _, documents, passages, _ = corpus
    for df in built.values():
        for row in df.iter_rows(named=True):
            ids = row["context_doc_ids"]
            assert len(ids) == len(set(ids))
            for block_id, body in zip(ids, block_bodies(row)):
                source_text = block_text(row, documents, passages, block_id)
                if block_id.endswith(":cut"):
                    # A prefix of the document, cut at a word boundary.
                    assert source_text.startswith(body) and len(body) < len(source_text)
                    assert source_text[len(body)].isspace()
                else:
                    assert body == source_text  # evidence, hard negatives, fillers: verbatim
                if block_id in row["evidence_doc_ids"]:
                    continue
                assert block_id.split("#")[0].removesuffix(":cut") not in row["evidence_doc_ids"]
                assert not contains_answer(source_text, row["answers"])
            assert set(row["evidence_doc_ids"]) <= set(ids)
            assert row["n_hard_negatives"] == sum("#" in b for b in ids)
            assert row["n_filler_documents"] == len(ids) - len(row["evidence_doc_ids"]) - row["n_hard_negatives"]
            assert sum(b.endswith(":cut") for b in ids) <= 1


def test_hard_negatives_come_first_in_rank_order(built, corpus):
    hard_negatives = corpus[3]
    row = built["4k"].row(0, named=True)
    used = [b for b in row["context_doc_ids"] if "#" in b]
    ranked = (
        hard_negatives.filter(pl.col("item_id") == row["item_id"])
        .filter(~pl.col("doc_id").is_in(row["evidence_doc_ids"]))
        .sort("rank")["passage_id"]
        .to_list()
    )
    assert used and set(used) == set(ranked[: len(used)])  # a rank-order prefix, then shuffled


def test_depth_places_first_evidence(built):
    for df in built.values():
        for row in df.iter_rows(named=True):
            first = row["evidence_doc_ids"][0]
            ids = row["context_doc_ids"]
            measured = row["evidence_depths"][0]
            if row["depth"] == 0.0:
                assert ids[0] == first and measured == 0.0
            elif row["depth"] == 1.0:
                assert ids[-1] == first and measured > 0.6
            else:
                assert 0.3 < measured < 0.7
            assert all(0.0 <= d < 1.0 for d in row["evidence_depths"])


def test_depths_share_distractors(built):
    # Instances of one (item, level) differ only in where the evidence sits.
    df = built["2k"]
    for item_id in df["item_id"].unique():
        rows = df.filter(pl.col("item_id") == item_id).sort("depth").iter_rows(named=True)
        sets = [{b.removesuffix(":cut") for b in r["context_doc_ids"]} for r in rows]
        assert all(s == sets[0] for s in sets)


def test_same_items_at_every_level(built):
    per_level = [sorted(df["item_id"].unique().to_list()) for df in built.values()]
    assert per_level[0] == per_level[1] == per_level[2]
    assert set(built["1k"]["task"]) == {"single_hop_qa", "multi_hop_qa"}


def test_deterministic(corpus, counter, built):
    items, documents, passages, hard_negatives = corpus
    again = build_instances(
        items.reverse(), documents.reverse(), passages.reverse(), hard_negatives.reverse(),
        level="2k", config=make_config(), counter=counter,
    )
    assert again.equals(built["2k"])
    other_seed = build_instances(*corpus, level="2k", config=make_config(seed=43), counter=counter)
    assert not set(other_seed["instance_id"]) & set(built["2k"]["instance_id"])


def test_levels_get_longer_contexts(built):
    ctx = {lv: df["context_tokens"].mean() for lv, df in built.items()}
    assert ctx["1k"] < ctx["2k"] < ctx["4k"]
    assert built["4k"]["n_filler_documents"].max() >= 1


def measured_the_slow_way(row: dict, documents: pl.DataFrame, passages: pl.DataFrame, counter) -> dict:
    """input_tokens, context_tokens and evidence_depths of a row recomputed the obvious way: rebuild
    context and prompt from the block ids, and encode the whole context before each evidence block."""
    bodies = block_bodies(row)
    titles = {**dict(documents.select("doc_id", "title").iter_rows()),
              **dict(passages.select("passage_id", "title").iter_rows())}
    blocks = [format_block(i, titles[b.removesuffix(":cut")], body)
              for i, (b, body) in enumerate(zip(row["context_doc_ids"], bodies), start=1)]
    context = join_blocks(blocks)
    assert context == row["context"] and build_prompt(context, row["question"]) == row["prompt"]
    context_tokens = counter.count(context)
    depths = []
    for doc_id in row["evidence_doc_ids"]:
        k = row["context_doc_ids"].index(doc_id)
        start = len(join_blocks(blocks[:k])) + (len("\n\n") if k else 0)
        assert context[start:].startswith(f"Document [{k + 1}] ")
        depths.append(counter.count(context[:start]) / context_tokens)
    return {"input_tokens": counter.count(row["prompt"]), "context_tokens": context_tokens, "evidence_depths": depths}


def test_token_counts_and_depths_equal_the_slow_way(built, corpus, counter):
    # The assembler reads block offsets off the prompt's one encoding; they must be exactly
    # what encoding each context prefix alone gives, for every evidence document (multi-hop
    # items have two) at every depth.
    _, documents, passages, _ = corpus
    for df in built.values():
        for row in df.iter_rows(named=True):
            fast = {k: row[k] for k in ("input_tokens", "context_tokens", "evidence_depths")}
            assert fast == measured_the_slow_way(row, documents, passages, counter), row["instance_id"]


def test_token_offsets_are_exact_in_non_ascii_text(corpus, counter):
    # Multi-byte characters (some split across tokens) shift byte offsets away from
    # character offsets: the offsets must still match the slow way.
    items, documents, passages, hard_negatives = corpus
    accented = pl.col("text").str.replace_all(" and ", " and — «Ünïcödé» 東京の川 ")
    documents = documents.with_columns(accented, pl.col("title") + "·é")
    passages = passages.with_columns(accented, pl.col("title") + "·é")
    config = make_config(depths=(0.0, 0.3, 0.7, 1.0), items_per_length=6)
    df = build_instances(items, documents, passages, hard_negatives, level="2k", config=config, counter=counter)
    assert not any(p.isascii() for p in df["prompt"])
    for row in df.iter_rows(named=True):
        fast = {k: row[k] for k in ("input_tokens", "context_tokens", "evidence_depths")}
        assert fast == measured_the_slow_way(row, documents, passages, counter), row["instance_id"]


def test_token_counts_add_up_at_awkward_block_edges(corpus, counter):
    # The assembler adds up per-block counts instead of encoding each prompt (exact for cl100k_base:
    # every block starts a pre-token). Texts that start or end with whitespace of every kind,
    # digits, contractions, symbols or CJK must still give the counts of the whole prompt.
    items, documents, passages, hard_negatives = corpus
    leads = ["", " ", "\n", "  \n\t", "\u3000", "\r\n", "'s ", "12 "]
    tails = ["", " ", "\n", " \n ", "\u00a0", "...", " 1234", "'s", "!!\n", "東京。", "\t", " <|endoftext|>"]

    def decorate(frame: pl.DataFrame) -> pl.DataFrame:
        n = frame.height
        return frame.with_columns(text=pl.Series([leads[i % len(leads)] for i in range(n)])
                                  + pl.col("text") + pl.Series([tails[i % len(tails)] for i in range(n)]))

    config = make_config(depths=(0.0, 0.5, 1.0), items_per_length=8)
    df = build_instances(items, decorate(documents), decorate(passages), hard_negatives, level="2k", config=config,
                         counter=counter)
    for row in df.iter_rows(named=True):
        fast = {k: row[k] for k in ("input_tokens", "context_tokens", "evidence_depths")}
        assert fast == measured_the_slow_way(row, decorate(documents), decorate(passages), counter), row["instance_id"]


def test_token_counts_add_up_past_a_thousand_blocks(counter):
    # Block numbers of 4 digits are two tokens ("100", "0"): the count of a block numbered 1 plus
    # one token, wherever the block sits.
    n = 1700
    documents = pl.DataFrame({
        "doc_id": [f"note-{i:04d}" for i in range(n)], "source": ["notes"] * n,
        "title": [f"N{i}" for i in range(n)],
        "text": [f"Note {i} says " + ("seven." if i == 7 else "little.") for i in range(n)],
        "language": ["en"] * n, "domain": ["notes"] * n, "entity_type": ["note"] * n,
    }, schema=SOURCE_DOCUMENTS)
    items = pl.DataFrame([("q-0", "notes", "single_hop_qa", "single-doc QA", "en", "What does note 7 say?",
                           ["seven"], ["seven"], ["note-0007"], 1, [], [], "", "", "{}")], schema=SOURCE_ITEMS, orient="row")
    config = make_config(sources=(SourceConfig("notes"),), depths=(0.5,), items_per_length=1)
    no_passages = pl.DataFrame(schema=PASSAGES)
    df = build_instances(items, documents, no_passages, pl.DataFrame(schema=HARD_NEGATIVES), level="24k",
                         config=config, counter=counter)
    row = df.row(0, named=True)
    assert len(row["context_doc_ids"]) > 1000
    fast = {k: row[k] for k in ("input_tokens", "context_tokens", "evidence_depths")}
    assert fast == measured_the_slow_way(row, documents, no_passages, counter)


def test_an_encoding_not_known_to_add_up_encodes_every_prompt(built, corpus, counter):
    # Same ranks, a pre-tokenizer pattern the assembler has no proof for (an alternative that never
    # matches is appended): every prompt is encoded whole, and the rows are the same.
    import tiktoken

    enc = counter.encoding
    other = tiktoken.Encoding("cl100k_probe", pat_str=enc._pat_str + r"|\s", mergeable_ranks=enc._mergeable_ranks,
                              special_tokens=enc._special_tokens)
    slow = build_instances(*corpus, level="2k", config=make_config(), counter=TokenCounter(other, counter.name))
    assert slow.equals(built["2k"])


def test_a_level_stops_when_added_up_counts_disagree_with_the_encoding(corpus, counter, monkeypatch):
    # The level's first prompt is also encoded whole. A pre-tokenizer wrongly listed as additive
    # (fixed 6-character pieces: block counts cannot add up) is caught there, not written as lengths.
    import tiktoken

    from lc_pipeline.construct.assembly import counting

    enc = counter.encoding
    chunks = tiktoken.Encoding("cl100k_chunks", pat_str=r"[\s\S]{1,6}", mergeable_ranks=enc._mergeable_ranks,
                               special_tokens=enc._special_tokens)
    monkeypatch.setattr(counting, "ADDITIVE_PATTERNS", counting.ADDITIVE_PATTERNS | {chunks._pat_str})
    with pytest.raises(RuntimeError, match=r"item '[\w-]+': block counts add up to .* pre-tokenizer splits differently"):
        build_instances(*corpus, level="1k", config=make_config(), counter=TokenCounter(chunks, counter.name))


def test_batches_hold_the_same_rows_as_one_frame(built, corpus, counter):
    batches = list(iter_instance_batches(*corpus, level="2k", config=make_config(), counter=counter,
                                         items_per_batch=3))
    assert [b["item_id"].n_unique() for b in batches] == [3, 1]  # 4 items per level, 3 depths each
    assert all(b.schema == INSTANCES for b in batches)
    assert pl.concat(batches).equals(built["2k"])


def test_batches_are_bounded_by_prompt_tokens():
    # ~4M prompt tokens a batch, at most 50 items: fewer items at long levels and with more rows per item.
    assert items_per_batch_at(64 * 1024, 1) == 50
    assert items_per_batch_at(256 * 1024, 1) == 16
    assert items_per_batch_at(128 * 1024, 6) == 5
    assert items_per_batch_at(256 * 1024, 6 * 4) == 1  # 6 depths x LV-Eval's 4 variants: never less than one item
    assert items_per_batch_at(4096, 3, cap=7) == 7


# --------------------------------------------------------------------------- errors


def test_target_below_evidence_is_an_error(corpus, counter):
    with pytest.raises(ValueError, match=r"item '\w+-\d+', target 128 tokens: .*evidence"):
        build_instances(*corpus, level="128", config=make_config(), counter=counter)


def test_exhausted_pool_is_an_error(corpus, counter):
    with pytest.raises(ValueError, match=r"target 65536 tokens: the distractor pool is exhausted"):
        build_instances(*corpus, level="64k", config=make_config(), counter=counter)


def test_missing_evidence_document_is_an_error(corpus, counter):
    items, documents, passages, hard_negatives = corpus
    broken = items.with_columns(
        pl.when(pl.col("item_id") == "single-0")
        .then(pl.lit(["person-999"], dtype=pl.List(pl.String)))
        .otherwise(pl.col("evidence_doc_ids"))
        .alias("evidence_doc_ids")
    )
    with pytest.raises(ValueError, match=r"single-0.*evidence_doc_ids.*person-999"):
        build_instances(broken, documents, passages, hard_negatives, level="1k",
                        config=make_config(items_per_length=14), counter=counter)


def test_assemble_instance_skips_answer_bearing_negatives(corpus, counter):
    items, documents, passages, _ = corpus
    item = items.filter(pl.col("item_id") == "single-1").row(0, named=True)
    evidence = documents.filter(pl.col("doc_id") == "person-001").to_dicts()
    leaky = {"passage_id": "x#0", "doc_id": "x", "title": "X", "text": f"Rumour says {item['answers'][0]}."}
    evidence_passage = passages.filter(pl.col("doc_id") == "person-001").to_dicts()[0]
    clean = passages.filter(pl.col("doc_id") == "person-020").to_dicts()
    row = assemble_instance(
        item, evidence, [leaky, evidence_passage, *clean], filler_pool(documents, item),
        target_tokens=1500, depth=0.5, seed=derive_seed(1), counter=counter, prompt=QAPrompt.default(16),
        length_tolerance=0.05,
    )
    assert "x#0" not in row["context_doc_ids"] and evidence_passage["passage_id"] not in row["context_doc_ids"]
    assert {p["passage_id"] for p in clean} <= set(row["context_doc_ids"])
    assert "person-020" not in row["context_doc_ids"]  # its passages are in: no duplicate text
    assert abs(row["input_tokens"] - 1500) <= 15


def test_special_token_text_is_plain_text(corpus, counter):
    items, documents, passages, hard_negatives = corpus
    odd = documents.with_columns(pl.col("text").str.replace(r"\.$", ". <|endoftext|>"))
    df = build_instances(items, odd, passages, hard_negatives, level="1k", config=make_config(), counter=counter)
    assert df["prompt"].str.contains("<|endoftext|>", literal=True).any()
    assert ((df["input_tokens"] - 1024).abs() <= 10).all()


# --------------------------------------------------------------------------- demo corpus


def test_demo_corpus_levels(counter):
    demo = pytest.importorskip("lc_pipeline.sources.demo_corpus")
    config = make_config(lengths=("1k", "2k", "4k", "128k"))

    def build(n_entities: int, levels: tuple[str, ...], n_items: int) -> dict[str, pl.DataFrame]:
        documents, items = demo.build_demo_corpus(n_entities=n_entities)
        cfg = config.replace(items_per_length=n_items)
        passages = chunk_documents(documents, cfg.passage_words, counter)
        # The stand-in retriever only for the items the levels use (it is quadratic).
        negatives = lexical_hard_negatives(select_items(items, n_items, cfg.seed), passages, k=50)
        out = {}
        for lv in levels:
            t0 = time.perf_counter()
            out[lv] = build_instances(items, documents, passages, negatives, level=lv, config=cfg, counter=counter)
            print(f"demo {lv}: {out[lv].height} instances in {time.perf_counter() - t0:.2f}s")
        return out

    built = build(240, ("1k", "2k", "4k"), 4) | build(3000, ("128k",), 1)
    for lv, df in built.items():
        rel = (df["input_tokens"] - df["target_tokens"]) / df["target_tokens"]
        print(f"demo {lv}: relative error {rel.min():+.3%} .. {rel.max():+.3%}")
        assert rel.abs().max() <= 0.01
        for row in df.iter_rows(named=True):
            first, ids = row["evidence_doc_ids"][0], row["context_doc_ids"]
            if row["depth"] == 0.0:
                assert ids[0] == first
            elif row["depth"] == 1.0:
                assert ids[-1] == first
            assert all(doc_id in ids for doc_id in row["evidence_doc_ids"])
    assert built["1k"]["item_id"].to_list() == built["4k"]["item_id"].to_list()
    assert built["128k"]["n_filler_documents"].min() > 100


# --------------------------------------------------------------------------- a task's own prompt (QAPrompt)

# Question first, another instruction with literal braces (JSON-ish), the context last but one.
CUSTOM = ("Question: {question}\n\nAnswer from these notes only; reply as {\"answer\": ...} if you like, "
          "{not a placeholder}.\n\n{context}\n\nYour answer:")


def test_the_default_prompt_renders_as_build_prompt():
    default = QAPrompt.default(24)
    context, question = "Document [1] (Title: {x}): a {question} and {context} here.", "Why {context}?"
    assert default.template.format(context="C", question="Q") == build_prompt("C", "Q")
    assert default.render(context, question) == build_prompt(context, question)  # braces in the texts stay verbatim
    assert (default.max_new_tokens, default.id_salt) == (24, "")


def test_a_template_needs_each_placeholder_once():
    for bad, name, n in [("Read {context}", "{question}", 0), ("{question} {context} {question}", "{question}", 2),
                         ("{question}", "{context}", 0)]:
        with pytest.raises(ValueError, match=rf"template must contain \{name}\ exactly once, found {n}"):
            QAPrompt(bad, 8)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive integer"):
        QAPrompt("{context}{question}", 0)
    rendered = QAPrompt("{question}|{{doubled}} {other}|{context}", 4).render("C {question}", "Q {context}")
    assert rendered == "Q {context}|{{doubled}} {other}|C {question}"  # literal: one substitution each, nothing else


def test_added_up_counts_need_a_clean_cut_around_the_context():
    from lc_pipeline.construct.assembly.counting import additive_layout

    assert additive_layout(*QAPrompt.default(8).around("Who?"))
    assert additive_layout(*QAPrompt(CUSTOM, 8).around("Who?"))
    assert additive_layout("", "\n\nQuestion: {question}")  # the context first
    assert additive_layout("Notes:\n", "\n\n")  # the context last
    assert not additive_layout("Notes: ", "\n\nQ")  # a block header would follow a space
    assert not additive_layout("Notes:\n", "\nQ")  # the last block's separator is not the one counted
    assert not additive_layout("Notes:\n", "\n\n\nQ")  # a whitespace run would continue past the cut


@pytest.mark.parametrize("template", [CUSTOM, "Notes: {context}\nQ: {question}\nA:"], ids=["added-up", "encoded"])
def test_a_custom_prompt_gives_exact_rows_at_the_configured_depths(built, corpus, counter, template):
    config = make_config()
    prompt = QAPrompt(template, 40)
    custom = build_instances(*corpus, level="2k", config=config, counter=counter, prompt_for=lambda item: prompt)
    default = built["2k"]
    assert custom["item_id"].to_list() == default["item_id"].to_list()
    assert set(custom["max_new_tokens"]) == {40}
    for row in custom.iter_rows(named=True):
        assert row["prompt"] == prompt.render(row["context"], row["question"])
        assert row["input_tokens"] == counter.count(row["prompt"])
        assert row["context_tokens"] == counter.count(row["context"])
        assert abs(row["input_tokens"] - 2048) / 2048 <= 0.01 and row["input_tokens"] <= 2048
        first, ids = row["evidence_doc_ids"][0], row["context_doc_ids"]
        if row["depth"] == 0.0:
            assert ids[0] == first and row["evidence_depths"][0] == 0.0
        elif row["depth"] == 1.0:
            assert ids[-1] == first
        else:
            assert 0.3 < row["evidence_depths"][0] < 0.7
    # The measured depths are those of encoding each context prefix alone (the slow way).
    _, documents, passages, _ = corpus
    for row in custom.iter_rows(named=True):
        slow = {k: row[k] for k in ("context_tokens", "evidence_depths")}
        context_tokens = counter.count(row["context"])
        k = row["context_doc_ids"].index(row["evidence_doc_ids"][0])
        start = row["context"].index(f"Document [{k + 1}] (Title: ")
        assert slow["context_tokens"] == context_tokens
        assert slow["evidence_depths"][0] == counter.count(row["context"][:start]) / context_tokens
    # Without a salt a custom prompt keeps the default's ids; a salt gives new ones.
    assert custom["instance_id"].to_list() == default["instance_id"].to_list()
    salted = build_instances(*corpus, level="2k", config=config, counter=counter,
                             prompt_for=lambda item: QAPrompt(template, 40, id_salt="task-v2"))
    assert not set(salted["instance_id"]) & set(default["instance_id"])
    assert salted.drop("instance_id").equals(custom.drop("instance_id"))


def test_prompts_per_item_and_the_default_prompt_for_unchanged(built, corpus, counter):
    config = make_config()
    default = QAPrompt.default(config.max_new_tokens)
    same = build_instances(*corpus, level="2k", config=config, counter=counter, prompt_for=lambda item: default)
    assert same.equals(built["2k"])
    # Single-hop items take their own prompt, the others keep ours: each row from its item's prompt.
    own = QAPrompt(CUSTOM, 12, id_salt="single")
    mixed = build_instances(*corpus, level="2k", config=config, counter=counter,
                            prompt_for=lambda item: own if item["task"] == "single_hop_qa" else default)
    for row, before in zip(mixed.iter_rows(named=True), built["2k"].iter_rows(named=True)):
        if row["task"] == "single_hop_qa":
            assert row["prompt"].startswith("Question: ") and row["max_new_tokens"] == 12
            assert row["instance_id"] != before["instance_id"]
        else:
            assert row == before


def test_each_template_of_a_level_is_checked_by_a_full_encode_once(corpus, counter, monkeypatch):
    from lc_pipeline.construct.assembly import instance

    checked = []
    real = instance.verify_additive

    def counting_checks(counter, item, *args, **kwargs):
        checked.append(item["item_id"])
        return real(counter, item, *args, **kwargs)

    monkeypatch.setattr(instance, "verify_additive", counting_checks)
    own = QAPrompt(CUSTOM, 12)
    config = make_config()
    build_instances(*corpus, level="1k", config=config, counter=counter,
                    prompt_for=lambda item: own if item["task"] == "single_hop_qa" else QAPrompt.default(24))
    assert len(checked) == 2  # one instance of each template, not one per instance
    picked = select_items(corpus[0], config.items_per_length, config.seed)
    assert {t for t in picked.filter(pl.col("item_id").is_in(checked))["task"]} == {"single_hop_qa", "multi_hop_qa"}


def test_fitting_items_measures_the_items_own_prompt(corpus, counter):
    items, documents = corpus[0], corpus[1]
    eligible, too_long = fitting_items(items, documents, counter, 400)
    longer = QAPrompt("{question}\n\n" + "Consider every word of the documents carefully. " * 40 + "{context}", 8)
    fewer, more_too_long = fitting_items(items, documents, counter, 400, prompt_for=lambda item: longer)
    assert fewer.height < eligible.height and more_too_long.height > too_long.height
    assert set(fewer["item_id"]) <= set(eligible["item_id"])
