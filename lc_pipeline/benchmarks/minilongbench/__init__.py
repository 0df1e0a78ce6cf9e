"""MiniLongBench (MilkThink-Lab/MiniLongBench), the benchmark's own package: compress a benchmark to ~5 % of its
samples and estimate full scores from them.

Pure logic (numpy, scikit-learn, scipy; the generic IRT model in :mod:`lc_pipeline.score.irt`); no
Dagster. Spec: ``shared/specs/minilongbench.md``. The steps, as the authors' code runs them:

1. **Representations** (§4.1): each sample's text embedding reduced by PCA to d = 10
   (:func:`text_representations`, sentence-transformers, offline model by default), or vectors the
   user supplies (reduced by PCA to d when they have more than d columns).
2. **Binarize** (§3.3): one global threshold c on ``linspace(0.01, 0.99, 100)`` chosen on the
   training models so each model's share of ``score > c`` matches its mean score.
3. **IRT** (§4.2): multidimensional 2PL with hierarchical priors, alpha initialized with the
   representations, beta with 0 (:func:`lc_pipeline.score.irt.fit_mirt`).
4. **Cluster** (§4.3): features [alpha_j, beta_j] (d + 1 dims, not standardized); K = int((1 -
   ratio) * n) clusters split over the categories as K_g = int(|G_g| / n * K), the last group
   (sorted by name) taking the remainder; K-Means per category weighted by the category-balance
   weights, seeded; the subset = for each centroid the nearest real sample. Unlike the authors'
   code (which would silently return fewer samples), a centroid whose nearest sample is already
   taken gets the nearest free one, so the subset always has K samples. Not in the paper: of
   ``candidates`` K-Means runs (8 by default; 1 = the paper) the one whose subset best recovers
   the training models' own scores is kept (:func:`choose_subset`).
5. **Estimate** a new model from its scores on the subset only (§5):
   ``predict`` (the paper's Eq. 4): fit its ability theta by BFGS from 0 on the raw subset scores
   (soft targets), keep the observed scores, predict the other samples with the 2PL; ``direct``
   (the paper's App. G): the mean of its subset scores. Both average task -> category -> overall
   (the mean of the category means), the same way the true score is computed from all samples
   (:func:`aggregate`). Two more, not in the paper: ``weighted``, each subset sample's score
   weighted by the share of the benchmark it stands for (its K-Means cluster's summed balance
   weight: tinyBenchmarks' anchor-point estimate, Polo et al. 2024, whose IRT MiniLongBench
   follows); and ``blend``, ``BLEND_WEIGHT`` x weighted + (1 - ``BLEND_WEIGHT``) x predict,
   tinyBenchmarks' gp-IRT idea: the IRT prediction is biased (it predicts P(score > c), not the
   score) but steady, the anchor estimate unbiased but noisy, and their errors partly cancel.
   Which to trust is measured, each mode against random stratified subsets scored in the same
   mode, on held-out models (:mod:`.validation`; ``benchmarks/minilongbench_validation.py`` on the
   20 real LLMs, many refits and splits with their spread): no mode ranks held-out models reliably
   better than a random stratified subset; ``blend`` has the highest median Spearman and the
   highest worst case, so it is the default (:data:`DEFAULT_MODE`).

The honest baseline (§7): random subsets with the same number of samples per task
(:func:`random_stratified_subset`), scored the same way (:func:`random_baseline_estimates`); a
random sample stands for an equal share of its task, so there ``weighted`` is ``direct``.

A fitted :class:`MiniLongBench` is saved as a directory (:meth:`MiniLongBench.save`; no pickle;
the format is described in :mod:`.persistence`).

Modules (every public name is re-exported here, so ``from lc_pipeline.benchmarks import minilongbench
as mlbm`` is all a caller needs; the re-exports load on first use, so importing the package, as the
registry does, pulls in neither numpy nor polars):

- :mod:`.matrix`: :class:`ScoreMatrix`, :class:`Estimate`, :func:`aggregate`, :func:`true_scores`, :func:`spearman`
- :mod:`.representations`: PCA of text embeddings or of given vectors (step 1)
- :mod:`.selection`: K, cluster budgets, balance weights, K-Means selection (step 4)
- :mod:`.fitting`: :func:`fit` (steps 2-4) and :func:`choose_subset`
- :mod:`.model`: :class:`MiniLongBench` and its estimates (step 5), :func:`estimate_frame`
- :mod:`.baseline`: random stratified subsets and the baseline report (§7)
- :mod:`.validation`: leave-models-out validation of every mode against its own random median
- :mod:`.persistence`: the fitted model's directory, locally and in the lake
- :mod:`lc_pipeline.benchmarks.minilongbench.options`: :class:`MiniLongBenchOptions`, the config's ``minilongbench:``
  section (it stays beside the core's config loader, which must not import a benchmark package)
- :mod:`.pipeline`: what the Dagster assets run (training data from the lake or imported files,
  the subset table and its metadata, one model's estimates)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lc_pipeline.benchmarks.minilongbench.baseline import (
        baseline_report,
        random_baseline_estimates,
        random_stratified_subset,
    )
    from lc_pipeline.benchmarks.minilongbench.fitting import choose_subset, fit
    from lc_pipeline.benchmarks.minilongbench.matrix import (
        SAMPLE,
        Estimate,
        ScoreMatrix,
        aggregate,
        spearman,
        true_scores,
    )
    from lc_pipeline.benchmarks.minilongbench.model import (
        BLEND_WEIGHT,
        DEFAULT_MODE,
        MODES,
        SELECTION_MODE,
        MiniLongBench,
        estimate_frame,
    )
    from lc_pipeline.benchmarks.minilongbench.options import (
        DEFAULT_METRICS,
        MiniLongBenchOptions,
    )
    from lc_pipeline.benchmarks.minilongbench.persistence import FORMAT
    from lc_pipeline.benchmarks.minilongbench.representations import (
        pca_reduce,
        representations_from_frame,
        text_representations,
    )
    from lc_pipeline.benchmarks.minilongbench.validation import (
        Validation,
        choose_modes,
        leave_models_out,
        mode_figures,
        summarize,
    )
    from lc_pipeline.benchmarks.minilongbench.selection import (
        Selection,
        balance_weights,
        cluster_budgets,
        n_selected,
        representative_weights,
        select_subset,
    )

# public name -> the submodule that defines it (a dotted name: a module outside this package)
_EXPORTS = {
    **dict.fromkeys(("baseline_report", "random_baseline_estimates", "random_stratified_subset"), "baseline"),
    **dict.fromkeys(("choose_subset", "fit"), "fitting"),
    **dict.fromkeys(("SAMPLE", "Estimate", "ScoreMatrix", "aggregate", "spearman", "true_scores"), "matrix"),
    **dict.fromkeys(("BLEND_WEIGHT", "DEFAULT_MODE", "MODES", "SELECTION_MODE", "MiniLongBench", "estimate_frame"), "model"),
    **dict.fromkeys(("Validation", "choose_modes", "leave_models_out", "mode_figures", "summarize"), "validation"),
    **dict.fromkeys(("DEFAULT_METRICS", "MiniLongBenchOptions"), "lc_pipeline.benchmarks.minilongbench.options"),
    **dict.fromkeys(("FORMAT",), "persistence"),
    **dict.fromkeys(("pca_reduce", "representations_from_frame", "text_representations"), "representations"),
    **dict.fromkeys(
        ("Selection", "balance_weights", "cluster_budgets", "n_selected", "representative_weights", "select_subset"),
        "selection",
    ),
}

__all__ = [
    "BLEND_WEIGHT",
    "DEFAULT_METRICS",
    "DEFAULT_MODE",
    "FORMAT",
    "MODES",
    "SAMPLE",
    "SELECTION_MODE",
    "Estimate",
    "MiniLongBench",
    "MiniLongBenchOptions",
    "ScoreMatrix",
    "Selection",
    "Validation",
    "aggregate",
    "balance_weights",
    "baseline_report",
    "choose_modes",
    "choose_subset",
    "cluster_budgets",
    "estimate_frame",
    "fit",
    "leave_models_out",
    "mode_figures",
    "n_selected",
    "pca_reduce",
    "random_baseline_estimates",
    "random_stratified_subset",
    "representations_from_frame",
    "representative_weights",
    "select_subset",
    "spearman",
    "summarize",
    "text_representations",
    "true_scores",
]


def __getattr__(name: str) -> Any:
    """Load a re-exported name from its submodule on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


def register(registries) -> None:
    """MiniLongBench's samples of LongBench's released records (config ``released.subset``, tasks.registry)."""
    registries.tables.register("minilongbench_subset",
                               "lc_pipeline.benchmarks.minilongbench.schemas:MINILONGBENCH_SUBSET")
    registries.tables.register("minilongbench_estimates",
                               "lc_pipeline.benchmarks.minilongbench.schemas:MINILONGBENCH_ESTIMATES")
    registries.config_sections.register("minilongbench",
                                        "lc_pipeline.benchmarks.minilongbench.options:MiniLongBenchOptions")
    registries.record_subsets.register("longbench", "lc_pipeline.benchmarks.minilongbench.subset:subset_item_ids")
