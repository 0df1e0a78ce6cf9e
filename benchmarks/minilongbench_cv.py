"""MiniLongBench on held-out models: which estimate beats random subsets scored the same way.

    python benchmarks/minilongbench_cv.py [--quick] [--folds 2] [--splits 5] [--kmeans-seeds 5]
                                          [--draws 100] [--selection 8:blend,1] [--cache DIR] [--json FILE]

``--quick``: 300 IRT epochs, 2 splits, 2 K-Means seeds, 20 random draws (a few minutes on 2 cores).
The default (2,000 epochs) takes ~20-30 min on 2 shared cores with the IRT fits cached.

Data: ``../shared/data/minilongbench/`` (per-sample LongBench scores of MiniLongBench's 20 training
LLMs, the released PCA-10 sample representations, the released 237-sample subset).

The protocol is :func:`lc_pipeline.benchmarks.minilongbench.validation.leave_models_out`, the one the
``minilongbench_subset`` asset runs on its own training models: the 20 models split into ``--folds``
folds (2: train on 10, estimate the other 10, then the other way round), ``--splits`` times with
different seeds; on each fold's training models the threshold and the IRT model (alpha initialized
with the PCA-10 representations) are fitted and the subset selected (ratio 0.95 -> 237 of 4,750
samples) with ``--kmeans-seeds`` K-Means seeds; every held-out model is estimated from its subset
scores only in every mode. One unit = (split, K-Means seed), every model estimated once. Beside
each subset, ``--draws`` random subsets with its per-task counts, scored with the same fold's item
parameters **in the same mode**: each mode is judged by its margin over its own random median
(Spearman margin for ranking, MAE ratio for absolute error) and by how often it beats it.

``--selection C:MODE,...`` compares ways of picking the subset among K-Means runs: ``C`` candidates
judged by MODE's in-sample error (``1`` = the paper's single run). The released 237-sample subset
(chosen by the authors with all 20 models, so it has seen the held-out ones) is scored the same
way for reference. ``--cache DIR`` keeps each fold's fitted model (the ``lcp minilongbench fit``
directory format) so a rerun skips the IRT fits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import polars as pl

from lc_pipeline.benchmarks import minilongbench as mlbm

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "minilongbench"


def load(data: Path) -> tuple[mlbm.ScoreMatrix, np.ndarray, list | None]:
    matrix = mlbm.ScoreMatrix.from_frame(pl.read_parquet(data / "scores_train_models.parquet"))
    reps = mlbm.representations_from_frame(pl.read_parquet(data / "sample_pca10.parquet"), matrix.samples, 10)
    released = None
    if (data / "released_subset_237.json").exists():
        released = json.loads((data / "released_subset_237.json").read_text())
    return matrix, reps, released


def fold_fitter(reps: np.ndarray, cache: Path | None, log=print, **kw):
    """``fit_fold(train_matrix, seed)`` for the validation: ``mlbm.fit`` (one K-Means run; the
    validation re-selects), kept in memory and under ``cache`` keyed by the training models and settings."""
    memo: dict[str, mlbm.MiniLongBench] = {}

    def fit_fold(train: mlbm.ScoreMatrix, seed: int) -> mlbm.MiniLongBench:
        settings = {**kw, "seed": seed, "candidates": 1}
        key = hashlib.sha256(json.dumps([list(train.models), sorted(settings.items())], default=str).encode()
                             ).hexdigest()[:16]
        if key in memo:
            return memo[key]
        where = cache / key if cache else None
        if where and (where / "meta.json").exists():
            memo[key] = mlbm.MiniLongBench.load(where)
            return memo[key]
        t0 = time.perf_counter()
        mlb = mlbm.fit(train, reps, **settings)
        log(f"  IRT fit on {len(train.models)} models (seed {seed}): {time.perf_counter() - t0:.0f}s")
        if where:
            mlb.save(where)
        memo[key] = mlb
        return mlb

    return fit_fold


def parse_selection(text: str) -> list[tuple[int, str | None]]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        c, _, mode = part.partition(":")
        if mode and mode not in mlbm.MODES:
            raise SystemExit(f"--selection {part!r}: mode must be one of {mlbm.MODES}")
        out.append((int(c), mode or None))
    return out


def rows_of(summary: dict) -> list[tuple]:
    rows = []
    for mode, s in summary.items():
        rows.append((mode, f"{s['spearman']:.3f}", f"{s['random_median_spearman']:.3f}", f"{s['spearman_margin']:+.3f}",
                     f"{s['min_spearman_margin']:+.3f}", f"{s['beats_spearman']:.0%}", f"{s['mae']:.4f}",
                     f"{s['random_median_mae']:.4f}", f"{s['mae_ratio']:.2f}", f"{s['beats_mae']:.0%}"))
    return rows


HEADER = ("mode", "rho", "random rho", "margin", "min margin", "beats", "MAE", "random MAE", "ratio", "beats")


def print_table(title: str, summary: dict) -> None:
    rows = [HEADER, *rows_of(summary)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    print(title)
    for r in rows:
        print("  " + " | ".join(c.ljust(w) for c, w in zip(r, widths)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="fewer epochs, splits, seeds and draws (minutes)")
    ap.add_argument("--folds", type=int, default=2)
    ap.add_argument("--splits", type=int, default=None, help="fold splits (default 5; --quick 2)")
    ap.add_argument("--kmeans-seeds", type=int, default=None, help="subsets per fold (default 5; --quick 2)")
    ap.add_argument("--draws", type=int, default=None, help="random subsets per subset (default 100; --quick 20)")
    ap.add_argument("--epochs", type=int, default=None, help="IRT epochs (default 2000; --quick 300)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ratio", type=float, default=0.95)
    ap.add_argument("--selection", default="8:blend,1",
                    help="subset choices to compare: CANDIDATES[:MODE judging them], comma-separated")
    ap.add_argument("--no-released", action="store_true", help="skip the released 237-sample subset")
    ap.add_argument("--cache", type=Path, default=None, help="keep fitted fold models here (reruns skip the IRT fit)")
    ap.add_argument("--json", type=Path, default=Path("minilongbench_cv.json"))
    args = ap.parse_args()
    if not (args.data / "scores_train_models.parquet").exists():
        raise SystemExit(f"no data at {args.data} (expected scores_train_models.parquet there)")
    epochs = args.epochs or (300 if args.quick else 2000)
    splits = args.splits or (2 if args.quick else 5)
    kseeds = args.kmeans_seeds or (2 if args.quick else 5)
    draws = args.draws or (20 if args.quick else 100)
    matrix, reps, released = load(args.data)
    log = lambda s: print(s, flush=True)  # noqa: E731
    print(f"{len(matrix.models)} models x {len(matrix.samples)} samples; {args.folds}-fold leave-models-out x "
          f"{splits} splits x {kseeds} K-Means seeds, ratio {args.ratio}, IRT vi {epochs} epochs, {draws} random "
          f"draws per subset", flush=True)
    fit_fold = fold_fitter(reps, args.cache, log, ratio=args.ratio, epochs=epochs, representation="released PCA-10")
    t0 = time.perf_counter()
    result: dict = {"n_models": len(matrix.models), "n_samples": len(matrix.samples), "ratio": args.ratio,
                    "epochs": epochs, "folds": args.folds, "splits": splits, "kmeans_seeds": kseeds, "draws": draws,
                    "seed": args.seed, "selections": {}}
    common = {"folds": args.folds, "splits": splits, "draws": draws, "seed": args.seed}
    for candidates, mode in parse_selection(args.selection):
        name = f"{candidates} candidate(s)" + (f" by {mode} error" if candidates > 1 else "")
        log(f"subset: {name}")
        t1 = time.perf_counter()
        val = mlbm.leave_models_out(matrix, fit_fold, kmeans_seeds=kseeds, candidates=candidates,
                                    selection_mode=mode, log=log, **common)
        result["selections"][name] = {**val.to_json(), "seconds": round(time.perf_counter() - t1, 1)}
    if released is not None and not args.no_released:
        log("subset: released 237")
        val = mlbm.leave_models_out(matrix, fit_fold, subset_ids=released, log=log, **common)
        result["released"] = val.to_json()
    result["seconds"] = round(time.perf_counter() - t0, 1)
    print()
    for name, val in result["selections"].items():
        print_table(f"Subset chosen from {name} ({val['settings']['splits'] * val['settings']['kmeans_seeds']} units;"
                    f" choice: ranking {val['choice']['ranking']}, error {val['choice']['error']}, "
                    f"default {val['choice']['default']}):", val["summary"])
    if "released" in result:
        print_table(f"Released 237 (has seen every model; {splits} units):", result["released"]["summary"])
    print(f"({result['seconds']:.0f}s)")
    args.json.write_text(json.dumps(result, indent=1, default=float) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
