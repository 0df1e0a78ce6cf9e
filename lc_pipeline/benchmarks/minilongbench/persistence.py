"""The fitted model's directory (no pickle), written by ``lcp tools minilongbench fit`` and the
``minilongbench_subset`` asset::

    meta.json          format "lc_pipeline.minilongbench/1", threshold, dims, ratio, seed, IRT settings,
                       logit convention, training models, cluster budgets, sample-id type
    items.parquet      one row per sample, in sample order: global_sample, task, category,
                       alpha (list of d floats), beta, in_subset, cluster (-1 outside the subset)
    subset.parquet     the subset: global_sample, task, category, cluster_group, cluster, cluster_weight
    abilities.parquet  the training models' abilities: model, theta (list of d floats)

Sample ids are LongBench's global sample index (int) in the shared data, or any string
(e.g. our instance ids); the type is recorded in meta.json and restored on load.
Pure logic (numpy, polars); no Dagster.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from lc_pipeline import storage
from lc_pipeline.benchmarks.minilongbench.matrix import SAMPLE

if TYPE_CHECKING:
    from lc_pipeline.benchmarks.minilongbench.model import MiniLongBench

FORMAT = "lc_pipeline.minilongbench/1"


def write_model(mlb: MiniLongBench, directory: str | Path) -> Path:
    """Write ``mlb`` to ``directory`` (created if needed) in the format above; returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    in_subset = np.zeros(len(mlb.samples), dtype=bool)
    in_subset[mlb.subset] = True
    cluster_all = np.full(len(mlb.samples), -1, dtype=np.int64)
    if mlb.cluster is not None:
        cluster_all[mlb.subset] = mlb.cluster
    items = pl.DataFrame(
        {
            SAMPLE: mlb.samples,
            "task": mlb.tasks.astype(str),
            "category": mlb.categories.astype(str),
            "alpha": mlb.alpha.astype(np.float64).tolist(),
            "beta": mlb.beta.astype(np.float64),
            "in_subset": in_subset,
            "cluster": cluster_all,
        },
        schema_overrides={"alpha": pl.List(pl.Float64)},
    )
    items.write_parquet(d / "items.parquet")
    mlb.subset_frame().write_parquet(d / "subset.parquet")
    theta = mlb.train_theta if mlb.train_theta is not None else np.zeros((0, mlb.dims))
    pl.DataFrame(
        {"model": list(mlb.train_models), "theta": theta.astype(np.float64).tolist()},
        schema={"model": pl.String, "theta": pl.List(pl.Float64)},
    ).write_parquet(d / "abilities.parquet")
    meta = {
        "format": FORMAT,
        "sample_id_type": "int" if np.issubdtype(mlb.samples.dtype, np.integer) else "str",
        "threshold": mlb.threshold,
        "dims": mlb.dims,
        "n_samples": len(mlb.samples),
        "n_subset": len(mlb.subset),
        "logit": "sum_k clip(alpha_jk * theta_k - beta_j, -30, 30)  (= alpha.theta - dims*beta)",
        "train_models": list(mlb.train_models),
        **{k: v for k, v in mlb.meta.items() if k not in ("format",)},
    }
    (d / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True, default=_json_default) + "\n")
    return d


def read_model_fields(directory: str | Path) -> dict[str, Any]:
    """The :class:`MiniLongBench` fields saved in ``directory`` by :func:`write_model`."""
    d = Path(directory)
    meta_path = d / "meta.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{d} is not a MiniLongBench directory (no meta.json); run "
                                "`lcp tools minilongbench fit` first")
    meta = json.loads(meta_path.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{meta_path}: format {meta.get('format')!r}, expected {FORMAT!r}")
    items = pl.read_parquet(d / "items.parquet")
    subset = pl.read_parquet(d / "subset.parquet")
    abil = pl.read_parquet(d / "abilities.parquet")
    samples = items[SAMPLE].to_numpy()
    samples = samples.astype(np.int64) if meta["sample_id_type"] == "int" else samples.astype(str).astype(object)
    positions = np.flatnonzero(items["in_subset"].to_numpy())
    alpha = np.asarray(items["alpha"].to_list(), dtype=np.float64).reshape(len(samples), meta["dims"])
    # subset.parquet is in ascending sample order, the same order as ``positions``.
    return {
        "samples": samples,
        "tasks": items["task"].to_numpy().astype(str),
        "categories": items["category"].to_numpy().astype(str),
        "alpha": alpha,
        "beta": items["beta"].to_numpy().astype(np.float64),
        "subset": positions,
        "threshold": float(meta["threshold"]),
        "meta": {k: v for k, v in meta.items()},
        "cluster": subset["cluster"].to_numpy(),
        "cluster_group": subset["cluster_group"].to_numpy().astype(str),
        "cluster_weight": subset["cluster_weight"].to_numpy(),
        "train_models": tuple(abil["model"].to_list()),
        "train_theta": np.asarray(abil["theta"].to_list(), dtype=np.float64).reshape(abil.height, meta["dims"]),
    }


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def write_to_lake(mlb: MiniLongBench, model_dir: Path) -> Path:
    """Replace the fitted model at ``model_dir`` in the lake: a local folder is written beside it
    and swapped in by rename; on an object store the files are written to a local folder first,
    then put one by one."""
    if storage.is_local(model_dir):
        tmp = model_dir.with_name(model_dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        write_model(mlb, tmp)
        shutil.rmtree(model_dir, ignore_errors=True)
        tmp.rename(model_dir)
        return model_dir
    with tempfile.TemporaryDirectory(prefix="lcp-minilongbench-") as tmp:
        storage.upload_tree(write_model(mlb, Path(tmp) / model_dir.name), model_dir)
    return model_dir


def read_fields_from_lake(model_dir: Path) -> dict[str, Any]:
    """:func:`read_model_fields` of a model directory in the lake (local, or fetched from an object store)."""
    if storage.is_local(model_dir):
        return read_model_fields(model_dir)
    with tempfile.TemporaryDirectory(prefix="lcp-minilongbench-") as tmp:
        storage.download_tree(model_dir, Path(tmp))
        return read_model_fields(tmp)
