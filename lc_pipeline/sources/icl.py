"""Labelled text classification in Hugging Face dataset layouts -> HELMET many-shot ICL items.

HELMET's ICL category (spec ``helmet.md`` §2.7) reads five classification datasets from the Hub:
TREC (``CogComp/trec``: ``coarse_label`` 6 / ``fine_label`` 50, train -> demos, test -> eval),
BANKING77 (``PolyAI/banking77``: ``label`` 77, train / test), CLINC150 (``clinc_oos`` config
``plus``: ``intent`` 151, train -> demos, **validation** -> eval) and NLU
(``xingkunliuxtracta/nlu_evaluation_data``: ``label`` 68, train only, split 90/10 with the seed).
This adapter reads any of them, through ``datasets``, from:

* a ``save_to_disk`` folder (``dataset_dict.json``; a config's own ``save_to_disk`` folder under
  ``{path}/{config}`` too);
* a folder laid out like a Hub repository (per-split data files: ``data/train-*.parquet``,
  ``train.jsonl``, ``plus/validation-*.parquet`` ..., the README's ``configs:`` honoured), read by
  ``datasets.load_dataset(path, config)``; a config without a ``configs:`` entry falls back to the
  folder ``{path}/{config}``;
* the Hub itself (``hf_dataset``), online, with :mod:`lc_pipeline.sources.hub`'s errors (``datasets``
  missing, ``HF_HUB_OFFLINE`` set, the download failing).

Options (``kind: icl``)::

    path: $LCP_DATA/helmet/icl/trec   # a local folder (or hf_dataset: CogComp/trec); path wins
    config: plus                      # the dataset's config name (optional)
    revision: refs/convert/parquet    # Hub revision (optional)
    text: text                        # the text column (default "text")
    label: coarse_label               # the label column (default "label")
    demo_split: train                 # where demonstrations come from (default "train")
    test_split: test                  # where test items come from (default "test")
    holdout: 0.1                      # instead of test_split: a seeded share of demo_split is the test set
    holdout_seed: 42                  # seed of the holdout split (HELMET's seed)
    label_names: [...]                # the label names, when the column has no ClassLabel feature
    language: en
    on_error: fail | reject

Label names: the label column's ``ClassLabel`` names, else ``label_names`` (an int column indexes
into it; a string column's values must be in it), else a string column's distinct values sorted.
The holdout split is ``datasets``' own ``train_test_split(test_size=holdout, seed=holdout_seed)``,
the call HELMET makes for NLU.

Items: one per record of both splits, id ``{source}-{dataset split}-{row}``, task ``icl``, category
``classification`` (:data:`ICL_CATEGORY`: no other HELMET kind reads them), question = the text,
answers = [the label name], all_classes = the label names in label order, no documents, and
``record_fields`` ``{"split": "demo" | "test", "label": name, "label_index": i, "dataset_split": ...,
"row": ...}``. A record with a blank text or a label outside the label set is a located error
(``{dataset} split {split}`` record ``row``, field the column name).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from lc_pipeline.sources.hub import HubError, hub_offline_variable
from lc_pipeline.sources.validation import (
    OnError,
    Record,
    RecordError,
    Rejected,
    ValidationReport,
    accepted,
    source_frames,
)

__all__ = ["ICL_CATEGORY", "ICL_OPTIONS", "ICL_TASK", "ROLES", "icl_item_rows", "icl_source", "load_icl"]

ICL_CATEGORY = "classification"  # SOURCE_ITEMS.category of ICL items (benchmarks/helmet/construction/icl.py selects them by it)
ICL_TASK = "icl"
ROLES = ("demo", "test")  # record_fields["split"]: demonstration pool or test item
ICL_OPTIONS = ("path", "hf_dataset", "config", "revision", "text", "label", "demo_split", "test_split", "holdout",
               "holdout_seed", "label_names", "language", "on_error")
_ROW = "__lcp_row"  # the record's row number in its split, carried through a holdout split


def _load(where: str, *, local: bool, config: str | None, revision: str | None):
    """The ``DatasetDict`` at ``where`` (a local folder or a Hub id)."""
    try:
        import datasets  # type: ignore[import-not-found]
    except ImportError:
        raise HubError(f"cannot load {where}: the 'datasets' package is not installed (pip install datasets)") from None
    if local:
        root = Path(where)
        for folder in ([root / config] if config else []) + [root]:
            if (folder / "dataset_dict.json").exists() or (folder / "state.json").exists():
                loaded = datasets.load_from_disk(str(folder))
                return loaded if isinstance(loaded, datasets.DatasetDict) else datasets.DatasetDict({"train": loaded})
        try:
            return datasets.load_dataset(str(root), config)
        except Exception as exc:
            if config and (root / config).is_dir():  # a config folder the README does not declare
                return datasets.load_dataset(str(root / config))
            raise HubError(f"cannot load the dataset folder {where}"
                           f"{f' (config {config!r})' if config else ''}: {type(exc).__name__}: {exc}") from exc
    var = hub_offline_variable()
    if var is not None:
        raise HubError(f"cannot load Hugging Face dataset {where}: the Hub is offline ({var} is set); unset it and "
                       "make sure huggingface.co is reachable, or save the dataset to a folder and use 'path'")
    try:
        return datasets.load_dataset(where, config, revision=revision)
    except Exception as exc:  # network, auth, unknown config: all reach the user the same way
        raise HubError(f"cannot load Hugging Face dataset {where}{f' (config {config!r})' if config else ''}"
                       f"{f' at revision {revision!r}' if revision else ''}: {type(exc).__name__}: {exc}") from exc


def _label_names(feature: Any, column: str, given: Sequence[str] | None, values: list, where: str) -> list[str]:
    names = getattr(feature, "names", None)  # datasets.ClassLabel
    if given is not None:
        if not isinstance(given, list | tuple) or not given or not all(isinstance(n, str) and n.strip() for n in given):
            raise ValueError(f"{where}: option 'label_names': expected a non-empty list of label names, got {given!r}")
        if len(set(given)) != len(given):
            raise ValueError(f"{where}: option 'label_names': names repeat: "
                             f"{sorted(n for n, c in Counter(given).items() if c > 1)}")
        if names is not None and len(names) != len(given):
            raise ValueError(f"{where}: option 'label_names' has {len(given)} names, the ClassLabel of column "
                             f"{column!r} has {len(names)}")
        return list(given)
    if names is not None:
        return list(names)
    if all(isinstance(v, str) for v in values):
        return sorted(set(values))
    raise ValueError(f"{where}: column {column!r} holds label numbers without a ClassLabel feature; "
                     "give the names as option 'label_names'")


def _label_of(rec: Record, column: str, names: list[str]) -> int:
    value = rec.data.get(column)
    if isinstance(value, str):
        if value not in names:
            raise rec.error(column, f"label {value!r} is not one of the {len(names)} label names")
        return names.index(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise rec.error(column, f"expected a label number or name, got {type(value).__name__} {value!r}")
    if not 0 <= value < len(names):
        raise rec.error(column, f"label {value} is outside 0..{len(names) - 1} (the {len(names)} label names)")
    return value


def icl_item_rows(records: Sequence[tuple[str, str, int, str, int]], names: Sequence[str], *, source: str,
                  language: str = "en") -> list[tuple]:
    """SOURCE_ITEMS rows of labelled texts: ``records`` are (role, dataset split, row, text, label index)."""
    classes = list(names)
    rows = []
    for role, split, row, text, label in records:
        if role not in ROLES:
            raise ValueError(f"source {source!r}: record role {role!r} is not one of {ROLES}")
        fields = {"split": role, "label": classes[label], "label_index": label, "dataset_split": split, "row": row}
        rows.append((f"{source}-{split}-{row:06d}", source, ICL_TASK, ICL_CATEGORY, language, text, [classes[label]],
                     [], [], 0, classes, [], "", "", json.dumps(fields, ensure_ascii=False, sort_keys=True)))
    return rows


def load_icl(
    location: str,
    *,
    source: str,
    local: bool,
    config: str | None = None,
    revision: str | None = None,
    text: str = "text",
    label: str = "label",
    demo_split: str = "train",
    test_split: str | None = None,
    holdout: float | None = None,
    holdout_seed: int = 42,
    label_names: Sequence[str] | None = None,
    language: str = "en",
    on_error: OnError = "fail",
) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """(documents (none), items, one report per split) of one labelled dataset; see the module docstring."""
    if on_error not in ("fail", "reject"):
        raise ValueError(f"source {source!r} (icl): on_error must be 'fail' or 'reject', got {on_error!r}")
    where = f"source {source!r} (icl, {location}{f' config {config!r}' if config else ''})"
    data = _load(location, local=local, config=config, revision=revision)
    splits = list(data)
    if holdout is not None:
        if test_split is not None:
            raise ValueError(f"{where}: options 'holdout' and 'test_split' exclude each other (the test items are "
                             "either a split of their own or a share of demo_split)")
        if isinstance(holdout, bool) or not isinstance(holdout, int | float) or not 0 < holdout < 1:
            raise ValueError(f"{where}: option 'holdout': expected a share between 0 and 1, got {holdout!r}")
        if demo_split not in data:
            raise ValueError(f"{where}: demo_split {demo_split!r} is not a split of the dataset (splits: {splits})")
        pool = data[demo_split]
        parts = pool.add_column(_ROW, list(range(len(pool)))).train_test_split(test_size=holdout, seed=holdout_seed)
        roles = [("demo", demo_split, parts["train"]), ("test", demo_split, parts["test"])]
    else:
        test_split = test_split or "test"
        for option, split in (("demo_split", demo_split), ("test_split", test_split)):
            if split not in data:
                raise ValueError(f"{where}: {option} {split!r} is not a split of the dataset (splits: {splits}); "
                                 "a dataset with one split takes option 'holdout' (e.g. 0.1) instead")
        roles = [("demo", demo_split, data[demo_split]), ("test", test_split, data[test_split])]
    for _, split, ds in roles:
        missing = [c for c in (text, label) if c not in ds.column_names]
        if missing:
            raise ValueError(f"{where}: split {split!r} has no column {missing[0]!r} (columns: {ds.column_names}); "
                             "name the text and label columns with options 'text' and 'label'")
    feature = roles[0][2].features[label]
    values = [v for _, _, ds in roles for v in ds[label]] if getattr(feature, "names", None) is None else []
    names = _label_names(feature, label, label_names, values, where)

    records: list[tuple[str, str, int, str, int]] = []
    reports = []
    for role, split, ds in roles:
        file = f"{location}{f' ({config})' if config else ''} split {split}" + (f" ({role} part)" if holdout else "")
        report = ValidationReport(file=file, format="hf_dataset")
        for index, row in enumerate(ds):
            report.records += 1
            rownum = row.pop(_ROW, index)
            rec = Record(file, rownum, row)
            try:
                records.append((role, split, rownum, rec.required_str(text), _label_of(rec, label, names)))
                report.accepted += 1
            except RecordError as err:
                if on_error == "fail":
                    raise
                report.rejected.append(Rejected.from_error(err))
        if report.records == 0:
            raise RecordError(file, None, None, "<file>", f"no records ({role} split empty)")
        counts = Counter(r[4] for r in records if r[0] == role)
        report.notes.append(f"{role} items: {report.accepted}, {len(counts)} of {len(names)} labels present "
                            f"(fewest per label {min(counts.values()) if counts else 0})")
        reports.append(report)
    items = icl_item_rows(records, names, source=source, language=language)
    return (*source_frames([], items), reports)


def icl_source(config) -> tuple[pl.DataFrame, pl.DataFrame, list[ValidationReport]]:
    """``SOURCE_KINDS["icl"]``: options as in the module docstring (``path`` or ``hf_dataset`` required)."""
    options: dict[str, Any] = dict(config.options)
    unknown = sorted(set(options) - set(ICL_OPTIONS))
    if unknown:
        raise ValueError(f"source {config.name!r} (icl): unknown option{'s' if len(unknown) > 1 else ''} {unknown}; "
                         f"known: {list(ICL_OPTIONS)}")
    path, hub = options.pop("path", None), options.pop("hf_dataset", None)
    if path is None and hub is None:
        raise ValueError(f"source {config.name!r} (icl): option 'path' (a local dataset folder) or 'hf_dataset' "
                         "(a Hub id) is required")
    if path is not None and not Path(path).exists():
        raise ValueError(f"source {config.name!r} (icl): option 'path': {path} does not exist")
    location = str(path) if path is not None else str(hub)
    return accepted(load_icl(location, source=config.name, local=path is not None, **options))

