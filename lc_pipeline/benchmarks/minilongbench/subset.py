"""Which released LongBench records a compressed benchmark runs (config ``released.subset``).

MiniLongBench (spec ``shared/specs/minilongbench.md``) names its samples by **LongBench's global
sample index**: LongBench v1's 21 tasks concatenated in the order of its score matrix (§3.1, the
table of global index ranges: 2wikimqa 0-199, dureader 200-399, ..., vcsum 4550-4749), each
task's records in the order of its released file. A record's index is therefore its task's
offset plus its 0-based position in its task file, which the LongBench adapter keeps in
``record_fields`` (``{"dataset", "index"}``; benchmarks/longbench/sources.py).

``released.subset`` may be:

- ``minilongbench``: the released 237 samples (spec Appendix A, the authors' ``anchor.pkl``; the
  same ids as ``shared/data/minilongbench/released_subset_237.json``);
- a folder written by ``lcp tools minilongbench fit`` (or the lake's ``_minilongbench/``) whose samples
  are LongBench's global indices (a model fitted on a LongBench score matrix): its subset;
- a JSON file holding a list of global indices.
  Paths may start with ``$LCP_DATA`` (sources/loader.py).

How a task's records are matched to sample indices, per (source, task):

- the records of the **whole released task file** (its last record is at position ``size - 1``,
  200, 150 or 500 records): a record's sample is offset + position. Rejected records leave gaps,
  never shift the others, because positions count the file's lines;
- a file holding **exactly the subset's records of that task** (as many records as the subset
  keeps there, at positions 0..k-1; how MiniLongBench's own test samples are distributed, and
  how ``shared/data/longbench/`` holds them): its records are the subset's, in ascending sample
  order;
- anything else (a prefix, a sample, a file with more lines than the task has) cannot be
  matched and is an error naming the source, the task and the counts: a position in it names no
  LongBench sample.

Decision on partial LongBench (a user with only some task files): **not an error**. The subset's
samples of a missing task are reported (:attr:`SampleIndex.missing_tasks`, a log warning at build
time; ``minilongbench_estimates`` records ``n_observed`` of ``n_subset`` and the missing tasks):
the IRT estimate (``predict``) still predicts every task from the samples that were run, while
``direct`` and ``weighted`` average only the tasks that ran and ``blend`` carries half of their bias
(on the shared files, 136 of 237 samples, one held-out LLM: predict +0.007, blend +0.052, direct
+0.097 off its true score; tests/unit/test_minilongbench_released.py): with a partial subset, read
``predict``. A subset none of whose records are present is an error. LongBench-E records (dataset ``*_e``) are not MiniLongBench samples and are
left out (counted). Pure: no Dagster.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

__all__ = [
    "MINILONGBENCH",
    "RELEASED_SUBSET",
    "TASK_ORDER",
    "TASK_SIZES",
    "ReleasedSubsetError",
    "SampleIndex",
    "global_sample",
    "released_sample_ids",
    "sample_index",
    "subset_item_ids",
    "subset_sample_ids",
    "task_of_sample",
]

log = logging.getLogger(__name__)

MINILONGBENCH = "minilongbench"

# LongBench v1's tasks in the score matrix's order, with their released sizes (spec §3.1).
TASK_SIZES: dict[str, int] = {
    "2wikimqa": 200, "dureader": 200, "gov_report": 200, "hotpotqa": 200, "lcc": 500, "lsht": 200,
    "multifieldqa_en": 150, "multifieldqa_zh": 200, "multi_news": 200, "musique": 200, "narrativeqa": 200,
    "passage_count": 200, "passage_retrieval_en": 200, "passage_retrieval_zh": 200, "qasper": 200, "qmsum": 200,
    "repobench-p": 500, "samsum": 200, "trec": 200, "triviaqa": 200, "vcsum": 200,
}
TASK_ORDER: tuple[str, ...] = tuple(TASK_SIZES)
OFFSETS: dict[str, int] = {}
_start = 0
for _task, _size in TASK_SIZES.items():
    OFFSETS[_task] = _start
    _start += _size
N_SAMPLES = _start  # 4,750

# The released MiniLongBench: per task, the 0-based positions kept (spec Appendix A, from anchor.pkl).
RELEASED_SUBSET: dict[str, tuple[int, ...]] = {
    "2wikimqa": (18, 23, 31, 34, 36, 37, 51, 57, 64, 69, 77, 88, 129),
    "dureader": (66, 156, 170, 173, 190, 199),
    "gov_report": (6, 7, 27, 31, 43, 45, 64, 77, 81, 123, 144, 180),
    "hotpotqa": (19, 22, 46, 58, 80, 83, 87, 89, 106, 110, 140, 174, 183),
    "lcc": (3, 8, 29, 95, 102, 113, 121, 122, 126, 129, 134, 161, 184, 235, 249, 254, 272, 282, 285, 295, 299,
            384, 391, 441, 476, 499),
    "lsht": (4, 33, 50, 86, 120, 162, 180, 199),
    "multifieldqa_en": (1, 6, 42, 60, 73, 83, 88),
    "multifieldqa_zh": (8, 15, 30, 36, 40, 58, 69, 87, 100, 105, 121, 127, 157, 184, 194),
    "multi_news": (6, 9, 16, 23, 34, 35, 64, 87, 142, 158, 190),
    "musique": (20, 82, 108, 133, 141, 155, 171),
    "narrativeqa": (28, 46, 72, 80, 109, 156),
    "passage_count": (111, 114, 136, 188),
    "passage_retrieval_en": (13, 32, 33, 36, 44, 47, 50, 85, 119, 122, 140, 147, 165, 178, 187),
    "passage_retrieval_zh": (5, 9, 22, 35, 37, 42, 62, 69, 97, 116, 154, 171, 177, 178, 194),
    "qasper": (34, 45, 83, 93, 95, 110, 121, 143, 172),
    "qmsum": (42, 70, 124, 152, 177, 188),
    "repobench-p": (15, 74, 165, 185, 189, 220, 222, 229, 243, 316, 321, 329, 338, 340, 362, 390, 416, 422, 431,
                    444, 458, 485, 486),
    "samsum": (0, 22, 24, 60, 67, 87, 89, 111, 117, 127, 163, 165, 184, 186, 194),
    "trec": (1, 9, 25, 59, 74, 105, 130, 147),
    "triviaqa": (2, 12, 26, 55, 76, 89, 103, 112, 120, 123, 177, 180),
    "vcsum": (71, 73, 88, 110, 111, 136),
}


class ReleasedSubsetError(ValueError):
    """A subset that cannot be resolved or matched to the records; the message names the subset, the
    source, the task or the item."""


def global_sample(task: str, position: int) -> int:
    """LongBench's global sample index of the record at ``position`` of ``task``'s released file."""
    if task not in OFFSETS:
        raise ReleasedSubsetError(f"{task!r} is not one of LongBench v1's 21 tasks ({', '.join(TASK_ORDER)})")
    if not 0 <= position < TASK_SIZES[task]:
        raise ReleasedSubsetError(f"position {position} is outside {task}'s {TASK_SIZES[task]} released records")
    return OFFSETS[task] + position


def task_of_sample(sample: int) -> tuple[str, int]:
    """(task, position in its file) of a global sample index."""
    for task in reversed(TASK_ORDER):
        if sample >= OFFSETS[task]:
            if sample - OFFSETS[task] >= TASK_SIZES[task]:
                break
            return task, sample - OFFSETS[task]
    raise ReleasedSubsetError(f"sample {sample!r} is not a LongBench sample index (0..{N_SAMPLES - 1})")


def released_sample_ids() -> tuple[int, ...]:
    """The released MiniLongBench's 237 global sample indices, ascending."""
    return tuple(sorted(global_sample(t, p) for t, positions in RELEASED_SUBSET.items() for p in positions))


def subset_sample_ids(subset: str) -> tuple[int, ...]:
    """The global sample indices ``subset`` names (module docstring), ascending."""
    if subset == MINILONGBENCH:
        return released_sample_ids()
    from lc_pipeline.settings import (
        expand_data_dir,  # $LCP_DATA, a setting (no sources import)
    )

    path = Path(expand_data_dir(subset)).expanduser()
    where = f"released.subset {subset!r}"
    if path.is_dir():
        from lc_pipeline.benchmarks.minilongbench.persistence import read_model_fields

        try:
            fields = read_model_fields(path)
        except (FileNotFoundError, ValueError) as exc:
            raise ReleasedSubsetError(f"{where}: {exc}") from None
        if fields["meta"].get("sample_id_type") != "int":
            raise ReleasedSubsetError(f"{where}: the MiniLongBench fitted in {path} names its samples by instance id, "
                                      "not by LongBench's global sample index: fit it on a LongBench score matrix")
        ids = [int(s) for s in fields["samples"][fields["subset"]].tolist()]
    elif path.is_file():
        try:
            ids = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ReleasedSubsetError(f"{where}: {path} is not JSON: {exc}") from None
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ReleasedSubsetError(f"{where}: {path} must hold a JSON list of LongBench global sample indices")
    else:
        raise ReleasedSubsetError(f"{where}: expected {MINILONGBENCH!r}, a folder written by "
                                  "`lcp tools minilongbench fit` "
                                  f"or a JSON list of LongBench sample indices; {path} does not exist")
    for i in ids:
        task_of_sample(i)  # range check, naming the bad id
    if len(set(ids)) != len(ids):
        raise ReleasedSubsetError(f"{where}: a sample index is listed twice")
    return tuple(sorted(ids))


@dataclass(frozen=True)
class SampleIndex:
    """The subset's samples matched to the records present."""

    subset: tuple[int, ...]  # the subset's global sample indices, ascending
    samples: dict[str, int]  # item_id -> global sample index, for the present records of the subset
    layouts: dict[str, str] = field(default_factory=dict)  # "source/task" -> "full file" | "subset records"
    skipped_longbench_e: int = 0

    @property
    def missing(self) -> tuple[int, ...]:
        """The subset's samples no record stands for."""
        present = set(self.samples.values())
        return tuple(s for s in self.subset if s not in present)

    @property
    def missing_tasks(self) -> dict[str, int]:
        """Task -> how many of the subset's samples of that task no record stands for."""
        out: dict[str, int] = {}
        for s in self.missing:
            task = task_of_sample(s)[0]
            out[task] = out.get(task, 0) + 1
        return out

    def describe(self) -> str:
        text = f"{len(self.subset) - len(self.missing)} of the subset's {len(self.subset)} samples present"
        if self.missing:
            text += "; missing: " + ", ".join(f"{t} ({n})" for t, n in self.missing_tasks.items())
        return text


def _fields(item_id: str, raw: str) -> tuple[str, int]:
    try:
        fields = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        raise ReleasedSubsetError(f"item {item_id!r}: field 'record_fields' is not JSON: {exc}") from None
    dataset, index = (fields.get("dataset"), fields.get("index")) if isinstance(fields, dict) else (None, None)
    if not isinstance(dataset, str) or isinstance(index, bool) or not isinstance(index, int):
        raise ReleasedSubsetError(f"item {item_id!r}: field 'record_fields' lacks the LongBench 'dataset' and 'index' "
                                  f"a MiniLongBench sample is found by (got {raw!r}); only LongBench v1 records "
                                  "(source kind longbench) can run a LongBench subset")
    return dataset, index


def sample_index(items: pl.DataFrame, subset: str | tuple[int, ...] = MINILONGBENCH) -> SampleIndex:
    """Match ``subset`` (a ``released.subset`` value or its resolved ids) to ``items`` (SOURCE_ITEMS
    or any frame with ``item_id, source, record_fields``), by the rules of the module docstring."""
    ids = subset_sample_ids(subset) if isinstance(subset, str) else tuple(sorted(subset))
    kept: dict[str, list[int]] = {}
    for s in ids:
        task, position = task_of_sample(s)
        kept.setdefault(task, []).append(position)
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    skipped_e = 0
    for item_id, source, raw in items.select("item_id", "source", "record_fields").iter_rows():
        dataset, index = _fields(item_id, raw)
        if dataset.endswith("_e"):
            skipped_e += 1
            continue
        if dataset not in TASK_SIZES:
            raise ReleasedSubsetError(f"item {item_id!r} of source {source!r}: dataset {dataset!r} is not one of "
                                      f"LongBench v1's 21 tasks")
        groups.setdefault((source, dataset), []).append((index, item_id))
    samples: dict[str, int] = {}
    held_by: dict[int, str] = {}
    layouts: dict[str, str] = {}
    for (source, task), records in sorted(groups.items()):
        records.sort()
        positions = [p for p, _ in records]
        size, mine = TASK_SIZES[task], kept.get(task, [])
        if positions[-1] == size - 1:
            layouts[f"{source}/{task}"] = "full file"
            wanted = set(mine)
            matched = [(OFFSETS[task] + p, i) for p, i in records if p in wanted]
        elif mine and positions == list(range(len(mine))):
            layouts[f"{source}/{task}"] = "subset records"
            matched = [(OFFSETS[task] + mine[p], i) for p, i in records]
        else:
            raise ReleasedSubsetError(
                f"source {source!r}, task {task}: {len(records)} records at positions {positions[0]}..{positions[-1]}; "
                f"a subset sample is found either in the whole released file ({size} records, the last at position "
                f"{size - 1}) or in a file holding exactly the subset's {len(mine)} records of {task}: the positions "
                f"of this file name no LongBench sample")
        for sample, item_id in matched:
            if sample in held_by:
                raise ReleasedSubsetError(f"sample {sample} ({task}) is held by two records: items {held_by[sample]!r} "
                                          f"and {item_id!r}")
            held_by[sample] = item_id
            samples[item_id] = sample
    return SampleIndex(subset=ids, samples=samples, layouts=layouts, skipped_longbench_e=skipped_e)


def subset_item_ids(items: pl.DataFrame, subset: str) -> set[str]:
    """The ids of the items (SOURCE_ITEMS) that are samples of ``subset`` (``released.subset``):
    what ``released.records`` runs. Tasks whose records are absent are logged, not an error; a
    subset with no record present is (module docstring)."""
    index = sample_index(items, subset)
    if not index.samples:
        raise ReleasedSubsetError(f"released.subset {subset!r}: none of its {len(index.subset)} samples is among the "
                                  f"{items.height} records of the sources ({index.describe()})")
    if index.missing:
        log.warning("released.subset %r: %s", subset, index.describe())
    return set(index.samples)
