"""HELMET synthetic recall (spec helmet.md §2, §5): JSON KV and RULER's multi-key / multi-value needles.

* ``kind: json_kv``: a JSON object of random UUID pairs, the queried key at ``n_depths`` evenly
  spaced positions; the demonstration pairs belong to the object (HELMET draws them from it).
* ``kind: multikey`` (options ``key``: word | uuid, ``value``: number | uuid): RULER MK, the
  context is all needles, one of them asked for; word keys with 7-digit values is RULER's
  variant 2 (``ruler_mk_needle``), UUID keys and values its variant 3 (``ruler_mk_uuid``). The
  prompt's ``{kind}`` placeholder names the value ("number" / "uuid").
* ``kind: multivalue``: RULER MV, four values of one word key hidden between corpus documents
  (RULER uses essays); ``{kind}`` is "number".

The queried key and value are drawn from the seed, the task's name and the index alone, so they
are the same at every level; the rest is drawn per level.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable

from lc_pipeline.benchmarks.helmet.construction.context import (
    CONSTRUCTION_VERSION,
    BuildContext,
    Row,
)
from lc_pipeline.benchmarks.helmet.construction.fitting import (
    Fit,
    cut_to_tokens,
    depth_position,
    evenly_spaced_depths,
    fit,
    shortfall,
)
from lc_pipeline.construct.assembly import derive_seed
from lc_pipeline.fingerprints import short_id

MV_VALUES = 4  # RULER MV: one key, four values
NEEDLE = "One of the special magic {kind}s for {key} is: {value}."  # RULER's needle sentence

_ADJECTIVES = (
    "amber", "ancient", "bitter", "bold", "brave", "brisk", "calm", "clever", "coral", "crimson", "curly", "damp",
    "dapper", "eager", "early", "fancy", "fierce", "fluffy", "frosty", "gentle", "giant", "glossy", "golden", "grumpy",
    "hasty", "hollow", "humble", "icy", "idle", "jolly", "keen", "lanky", "lively", "lucky", "mellow", "misty",
    "modest", "muddy", "narrow", "nimble", "noisy", "odd", "olive", "pale", "plucky", "polite", "proud", "quaint",
    "quiet", "rapid", "rusty", "salty", "scarlet", "shiny", "silent", "silky", "sleepy", "slender", "smoky", "snowy",
    "sober", "solid", "sour", "spicy", "steady", "stormy", "sturdy", "sunny", "swift", "tame", "tawny", "tender",
    "thorny", "tidy", "timid", "tiny", "vast", "velvet", "violet", "vivid", "wary", "wicked", "windy", "witty",
    "wooden", "woolly", "yellow", "young", "zealous", "zesty",
)
_NOUNS = (
    "anchor", "apricot", "badger", "bagel", "banjo", "beacon", "beetle", "biscuit", "bison", "blossom", "bobcat",
    "bucket", "cactus", "camel", "canoe", "carrot", "castle", "cedar", "cello", "chisel", "cobra", "comet", "cricket",
    "dagger", "dolphin", "donkey", "dragon", "eagle", "falcon", "ferret", "fiddle", "finch", "galaxy", "garlic",
    "gecko", "goblet", "goose", "harbor", "hazel", "hedgehog", "heron", "iguana", "island", "jackal", "jasmine",
    "kettle", "kiwi", "ladder", "lantern", "lemur", "lizard", "lobster", "magnet", "mango", "marble", "meadow",
    "mitten", "monsoon", "moose", "nectar", "otter", "oyster", "panther", "parrot", "pebble", "pelican", "pepper",
    "pigeon", "pillow", "quartz", "quill", "rabbit", "raven", "saddle", "salmon", "sparrow", "spruce", "squid",
    "tapioca", "teapot", "thistle", "tiger", "trumpet", "tulip", "turnip", "walnut", "walrus", "wombat", "yak",
)


def random_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def word_key(rng: random.Random, used: set[str]) -> str:
    """An unused ``adjective-noun`` key (RULER's word keys)."""
    for _ in range(1000):
        k = f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}"
        if k not in used:
            used.add(k)
            return k
    k = f"{rng.choice(_ADJECTIVES)}-{rng.choice(_NOUNS)}-{rng.choice(_NOUNS)}"  # the 2-word space is full
    used.add(k)
    return k


def number(rng: random.Random) -> str:
    return str(rng.randint(1_000_000, 9_999_999))  # RULER's 7-digit values


# multikey options -> drawing functions (rng, keys used so far) -> str
KEY_DRAWS: dict[str, Callable[[random.Random, set[str]], str]] = {
    "word": word_key, "uuid": lambda rng, used: random_uuid(rng)}
VALUE_DRAWS: dict[str, Callable[[random.Random], str]] = {"number": number, "uuid": random_uuid}


def build_json_kv(ctx: BuildContext) -> list[dict]:
    depths = evenly_spaced_depths(ctx.cfg.n_depths)
    rows = []
    for index in range(ctx.cfg.n_per_task):
        g = random.Random(derive_seed(ctx.seed, ctx.task, index))
        key, value = random_uuid(g), random_uuid(g)  # the queried pair: the same at every level
        rng = random.Random(derive_seed(ctx.seed, ctx.task, index, ctx.level))
        demo_pairs = [(random_uuid(rng), random_uuid(rng)) for _ in range(ctx.cfg.shots)]
        demos = "".join(f"Key: \"{k}\"\n{ctx.answer_line(v)}\n\n" for k, v in demo_pairs)
        pair_text = lambda k, v: f"{json.dumps(k)}: {json.dumps(v)}"  # noqa: E731
        per_pair = ctx.counter.count(pair_text(key, value) + ", ")
        base = ctx.counter.count(ctx.render(context="{}", demos=demos, question=key))
        n_max = max(1, 2 * (ctx.target - base) // per_pair + 10)  # generous: pairs differ in cost
        others = [(random_uuid(rng), random_uuid(rng)) for _ in range(n_max)]
        # The demo pairs belong to the object too (HELMET draws demos from the sample's own pairs).
        for i, (k, v) in enumerate(demo_pairs):
            others[i] = (k, v)
        rng.shuffle(others)

        def pairs(n: int, depth: float) -> list[tuple[str, str]]:
            ps = list(others[: n - 1])
            ps.insert(depth_position(depth, n), (key, value))
            return ps

        def render(n: int, depth: float = 0.0) -> str:
            obj = "{" + ", ".join(pair_text(k, v) for k, v in pairs(n, depth)) + "}"
            return ctx.render(context=obj, demos=demos, question=key)

        n = fit(render, [per_pair] * n_max, base, ctx.target, ctx.counter, floor=max(1, ctx.cfg.shots + 1)).n
        while n > 1 and max(ctx.counter.count(render(n, d)) for d in depths) > ctx.target:
            n -= 1
        shortfall(ctx.task, ctx.level, Fit(n, "", ctx.counter.count(render(n))), ctx.target, ctx.tolerance, "pairs")
        item_id = f"helmet-jsonkv-{short_id(CONSTRUCTION_VERSION, ctx.seed, index, key, length=12)}"
        for d in depths:
            # The context is the JSON object itself; blocks are its pairs (ids = keys).
            blocks = [(k, pair_text(k, v)) for k, v in pairs(n, d)]
            obj = "{" + ", ".join(t for _, t in blocks) + "}"
            row = Row(
                item_id=item_id, source="synthetic", language="en", question=key, answers=[value],
                answer_keywords=[value], evidence_doc_ids=[], blocks=blocks, separator=", ",
                gold_blocks=[depth_position(d, n)], depth=d, variant_key=f"d{d}", n_hard_negatives=0, n_filler=n - 1,
                prompt_fields={"demos": demos, "question": key},
            )
            # Keep the braces in the stored context (the prompt shows the object whole); depths are
            # measured inside the object, one token ("{") off at most.
            rows.append(ctx.finish(row, prompt=ctx.render(context=obj, demos=demos, question=key), stored_context=obj))
    return rows


def build_multikey(ctx: BuildContext) -> list[dict]:
    """RULER MK: all needles, one asked for; keys and values drawn as ``options.key`` / ``options.value``."""
    draw_key, draw_value = KEY_DRAWS[ctx.options["key"]], VALUE_DRAWS[ctx.options["value"]]
    kind = ctx.options["value"]  # what the prompt calls the values: "number" or "uuid"
    rows = []
    for index in range(ctx.cfg.n_per_task):
        g = random.Random(derive_seed(ctx.seed, ctx.task, index))
        used: set[str] = set()
        key = draw_key(g, used)
        value = draw_value(g)
        rng = random.Random(derive_seed(ctx.seed, ctx.task, index, ctx.level))
        gold = NEEDLE.format(kind=kind, key=key, value=value)
        per = ctx.counter.count(gold + "\n")
        base = ctx.counter.count(ctx.render(kind=kind, context="", question=key))
        n_max = max(1, 2 * (ctx.target - base) // per + 10)  # generous: needles differ in cost
        needles = []
        for _ in range(n_max):
            k = draw_key(rng, used)
            needles.append((k, NEEDLE.format(kind=kind, key=k, value=draw_value(rng))))
        position_seed = rng.random()

        def blocks(n: int) -> list[tuple[str, str]]:
            bs = list(needles[: n - 1])
            bs.insert(int(position_seed * n), (key, gold))  # RULER places the gold needle at a random depth
            return bs

        def render(n: int) -> str:
            return ctx.render(kind=kind, context="\n".join(t for _, t in blocks(n)), question=key)

        fitted = fit(render, [per] * n_max, base, ctx.target, ctx.counter, floor=1)
        shortfall(ctx.task, ctx.level, fitted, ctx.target, ctx.tolerance, "needles")
        rows.append(ctx.finish(Row(
            item_id=f"helmet-{ctx.task}-{short_id(CONSTRUCTION_VERSION, ctx.seed, index, key, length=12)}",
            source="synthetic", language="en", question=key, answers=[value], answer_keywords=[value],
            evidence_doc_ids=[], blocks=blocks(fitted.n), separator="\n", gold_blocks=[int(position_seed * fitted.n)],
            depth=None, variant_key=str(index), n_hard_negatives=0, n_filler=fitted.n - 1,
            prompt_fields={"kind": kind, "question": key},
        ), prompt=fitted.prompt))
    return rows


def _haystack(ctx: BuildContext, order: list[dict], budget: int) -> list[tuple[str, str]]:
    """Documents in ``order`` up to ``budget`` tokens; the last one cut at a word to close the gap."""
    hay, used = [], 0
    for d in order:
        if used >= budget:
            break
        c = ctx.pools.tokens(d["doc_id"]) + 1
        text = d["text"].strip()
        if used + c > budget:
            text = cut_to_tokens(text, budget - used - 2, ctx.counter)
            if text:
                hay.append((d["doc_id"] + ":cut", text))
            break
        hay.append((d["doc_id"], text))
        used += c
    return hay


def build_multivalue(ctx: BuildContext) -> list[dict]:
    """RULER MV: four values of one key hidden between corpus documents (RULER uses essays)."""
    docs = sorted((d for d in ctx.pools.docs.values() if (d["text"] or "").strip()), key=lambda d: d["doc_id"])
    if not docs:
        raise ValueError(f"task {ctx.task!r} at {ctx.level}: needs documents for the haystack")
    rows = []
    for index in range(ctx.cfg.n_per_task):
        g = random.Random(derive_seed(ctx.seed, ctx.task, index))
        key = word_key(g, set())
        values: list[str] = []
        while len(values) < MV_VALUES:
            v = number(g)
            if v not in values:
                values.append(v)
        needles = [NEEDLE.format(kind="number", key=key, value=v) for v in values]
        rng = random.Random(derive_seed(ctx.seed, ctx.task, index, ctx.level))
        order = list(docs)
        rng.shuffle(order)
        budget = ctx.target - ctx.counter.count(ctx.render(kind="number", context="\n\n".join(needles), question=key))
        hay = _haystack(ctx, order, budget)
        if not hay:
            raise ValueError(f"task {ctx.task!r} at {ctx.level}: no document fits the haystack budget of {budget} tokens")
        # Needles go between haystack documents, at seeded positions, in value order.
        slots = sorted(rng.randint(0, len(hay)) for _ in needles)
        blocks: list[tuple[str, str]] = []
        gold_idx = []
        ni = 0
        for i in range(len(hay) + 1):
            while ni < len(needles) and slots[ni] == i:
                gold_idx.append(len(blocks))
                blocks.append((f"needle:{ni}", needles[ni]))
                ni += 1
            if i < len(hay):
                blocks.append(hay[i])
        row = Row(
            item_id=f"helmet-mv-{short_id(CONSTRUCTION_VERSION, ctx.seed, index, key, length=12)}", source="synthetic",
            language="en", question=key, answers=values, answer_keywords=values, evidence_doc_ids=[],
            blocks=blocks, separator="\n\n", gold_blocks=gold_idx, depth=None, variant_key=str(index),
            n_hard_negatives=0, n_filler=len(hay), prompt_fields={"kind": "number", "question": key},
        )
        out = ctx.finish(row)
        while out["input_tokens"] > ctx.target and blocks:  # rare: counted text merged differently
            last = max(i for i, (b, _) in enumerate(blocks) if not b.startswith("needle:"))
            bid, text = blocks[last]
            blocks[last] = (bid.removesuffix(":cut") + ":cut",
                            cut_to_tokens(text, ctx.counter.count(text) - (out["input_tokens"] - ctx.target) - 2,
                                          ctx.counter))
            out = ctx.finish(row)
        rows.append(out)
    return rows
