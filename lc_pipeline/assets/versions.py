"""What each asset declares about its data and its runs, read by the asset itself and by ``lcp`` (runner.py).

On every asset definition (:func:`declared`):

- ``code_version`` (Dagster's own): bump it when the asset's logic changes what it writes;
- metadata ``lcp/hashes``: the config fields its output depends on (a group of :mod:`lc_pipeline.fingerprints`);
- metadata ``lcp/adds``: what else its data version hashes: ``model`` (the model settings of the partition's
  model), ``fact_generator`` (the settings of LV-Eval's fact-generating model, when one is used);
- tag ``lcp/serves``: the configs whose graph holds it: ``all``, ``constructed`` (built from corpora) or
  ``released`` (a published benchmark run as released: ``released:`` in the config);
- metadata ``lcp/side_inputs``: the tables it reads from the lake instead of loading them as inputs, each with
  its reason ({table: reason}); they are its ``deps`` in the lineage, and the body reads them through
  side_inputs.side_input_reader, which refuses any table not declared there (lake_files.SideInputReader);
- tag ``lcp/runs``: when ``lcp run`` materializes it: ``always`` (reused while its data version is current),
  ``judged`` / ``cited`` (only when a task of the instances is scored by the LLM judge / the NLI judge; then
  every time: the judges' replies are cached), ``every_time`` (cheap, reads every model: the leaderboard) or
  ``manual`` (a command of its own, e.g. ``lcp minilongbench``).

Each materialization records its fingerprint (:func:`own_fingerprint`) as its Dagster ``data_version``; the
runner compares it with :func:`current_fingerprint` of the same declarations, the same way for every asset.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import dagster as dg

from lc_pipeline.assets.common import FINGERPRINT_KEY
from lc_pipeline.benchmarks.lveval.config import KNOWLEDGE_BASE_FACTS
from lc_pipeline.config import BenchmarkConfig
from lc_pipeline.fingerprints import asset_fingerprint
from lc_pipeline.partitions import MODEL_DIM

if TYPE_CHECKING:
    from lc_pipeline.assets.side_inputs import SideInputs

HASHES = "lcp/hashes"
ADDS = "lcp/adds"
SERVES = "lcp/serves"
RUNS = "lcp/runs"
SERVES_VALUES = ("all", "constructed", "released")
RUNS_VALUES = ("always", "judged", "cited", "every_time", "manual")
ADDS_VALUES = ("model", "fact_generator")


def declared(code_version: str, hashes: tuple[str, ...], adds: tuple[str, ...] = (), serves: str = "all",
             runs: str = "always", side_inputs: SideInputs | None = None) -> dict:
    """The keyword arguments of ``dg.asset`` / ``dg.AssetOut`` that declare the above."""
    if serves not in SERVES_VALUES or runs not in RUNS_VALUES or set(adds) - set(ADDS_VALUES):
        raise ValueError(f"declared({code_version!r}, serves={serves!r}, runs={runs!r}, adds={adds!r}): expected "
                         f"serves in {SERVES_VALUES}, runs in {RUNS_VALUES}, adds in {ADDS_VALUES}")
    kwargs = {"code_version": code_version, "metadata": {HASHES: ",".join(hashes), ADDS: ",".join(adds)},
              "tags": {SERVES: serves, RUNS: runs}}
    if side_inputs is not None:
        declaration = side_inputs.declaration()
        kwargs["metadata"].update(declaration["metadata"])
        kwargs["deps"] = declaration["deps"]
    return kwargs


def serves(spec: dg.AssetSpec, released: bool) -> bool:
    """Whether a config (released or constructed) has this asset in its graph."""
    return spec.tags.get(SERVES, "all") in ("all", "released" if released else "constructed")


def runs(spec: dg.AssetSpec) -> str:
    return spec.tags.get(RUNS, "always")


def _listed(spec: dg.AssetSpec, key: str) -> tuple[str, ...]:
    value = spec.metadata.get(key, "")
    value = getattr(value, "value", value) or ""
    return tuple(v for v in str(value).split(",") if v)


def hashes(spec: dg.AssetSpec) -> tuple[str, ...]:
    return _listed(spec, HASHES)


def adds(spec: dg.AssetSpec) -> tuple[str, ...]:
    return _listed(spec, ADDS)


def fingerprint(spec: dg.AssetSpec, config: BenchmarkConfig, added: str | None = None) -> str:
    """The data version of ``spec``'s output under ``config``, ``added`` being what its ``lcp/adds`` name."""
    if spec.code_version is None:
        raise ValueError(f"asset {spec.key.to_user_string()!r} declares no code_version (assets/versions.declared)")
    return asset_fingerprint(spec.key.to_user_string(), spec.code_version, hashes(spec), config, added)


def own_fingerprint(context: dg.AssetExecutionContext, config: BenchmarkConfig, added: str | None = None,
                    name: str | None = None) -> str:
    """An asset body's own data version (``name``: the output of a multi-asset)."""
    key = dg.AssetKey(name) if name else context.asset_key
    return fingerprint(context.assets_def.specs_by_key[key], config, added)


def fact_generator_fingerprint(config: BenchmarkConfig, models) -> str:
    """The settings fingerprint of LV-Eval's fact-generating model ("" when facts come from the knowledge base or
    no CFI row is made): rules are proposed against the facts' words, so both tables hash it."""
    generator = config.lveval.fact_generator
    if not config.lveval.wants_cfi or generator == KNOWLEDGE_BASE_FACTS:
        return ""
    return models.spec(generator).fingerprint()


def current_fingerprint(spec: dg.AssetSpec, config: BenchmarkConfig, models, dims: dict[str, str]) -> str:
    """What :func:`own_fingerprint` gives for the partition ``dims`` now, from the declarations alone."""
    added = ""
    for name in adds(spec):
        if name == "model":
            added += models.spec(dims[MODEL_DIM]).fingerprint()
        else:  # fact_generator
            added += fact_generator_fingerprint(config, models)
    return fingerprint(spec, config, added or None)


def versioned(value, fingerprint_: str, output_name: str = "result", metadata: dict | None = None) -> dg.Output:
    """The asset's output with its data version (and, for older readers, the ``lcp/fingerprint`` metadata).
    Without the BetaWarning Dagster gives for ``data_version`` each time (no library warnings on a normal run)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=dg.BetaWarning, message=".*data_version")
        return dg.Output(value, output_name, metadata={FINGERPRINT_KEY: fingerprint_, **(metadata or {})},
                         data_version=dg.DataVersion(fingerprint_))
