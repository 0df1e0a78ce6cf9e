"""Seeds, instance ids and the seeded choice of a level's items (shared by every length level)."""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from typing import Any

import polars as pl

from lc_pipeline.construct.prompts import PROMPT_VERSION
from lc_pipeline.fingerprints import short_id


def derive_seed(*parts: Any) -> int:
    """A stable 63-bit seed from any parts (sha256; Python's hash() is salted per process)."""
    blob = json.dumps([str(p) for p in parts]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


def instance_id(item_id: str, level: str, target: int, depth: float, variant: str, fingerprint: str,
                salt: str = "") -> str:
    """A stable id of one instance. The prompt wording is part of an instance: rewording our prompt
    (PROMPT_VERSION) or a task's own template (its ``QAPrompt.id_salt``; "" adds nothing) yields
    new ids, not reused rows."""
    if salt:
        return short_id(item_id, level, target, depth, variant, fingerprint, PROMPT_VERSION, salt, length=16)
    return short_id(item_id, level, target, depth, variant, fingerprint, PROMPT_VERSION, length=16)


def select_items(items: pl.DataFrame, n: int, seed: int) -> pl.DataFrame:
    """A seeded choice of ``n`` items, balanced across tasks, used at every length level.

    Levels share their QA pairs and differ only in context (LV-Eval), so score changes
    across lengths are not item-sampling noise. Each task's items are shuffled with a seed
    of their own, then tasks are taken round-robin (in a seeded task order).
    """
    if n > items.height:
        raise ValueError(f"select_items: asked for {n} items but only {items.height} exist")
    if n <= 0:
        return items.clear()
    rows = sorted(items.iter_rows(named=True), key=lambda r: r["item_id"])  # independent of input row order
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_task[r["task"]].append(r)
    for task, task_rows in by_task.items():
        random.Random(derive_seed(seed, "select_items", task)).shuffle(task_rows)
    tasks = sorted(by_task)
    random.Random(derive_seed(seed, "task_order")).shuffle(tasks)
    picked: list[dict] = []
    depth = 0
    while len(picked) < n:
        for task in tasks:
            if depth < len(by_task[task]) and len(picked) < n:
                picked.append(by_task[task][depth])
        depth += 1
    return pl.DataFrame(picked, schema=items.schema, orient="row")
