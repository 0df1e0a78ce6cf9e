"""MiniLongBench files of MilkThink-Lab/MiniLongBench, pinned by commit and sha256, and a reader in their format.

- :func:`irt_parameters`: ``data/irt_model/best_parameters.json`` as released, a dict of lists: ``disc``
  (items x dims, the α), ``diff`` (items x 1, the β), ``ability`` (training models x dims), the priors, and
  ``item_ids`` / ``subject_ids`` (str index -> id). ``irt.py`` loads it as ``A = disc.T``, ``B = diff.T``.

The scripts are pinned to be read, never run.
"""

from __future__ import annotations

from typing import Any

from lc_pipeline.official import OfficialFile, OfficialFileError, read_official_json
from lc_pipeline.settings import Settings

REPO = "MilkThink-Lab/MiniLongBench"
COMMIT = "504c24798b2f1bcf57d9e111251fd0f5454ed751"

BEST_PARAMETERS = OfficialFile(REPO, COMMIT, "data/irt_model/best_parameters.json",
                               "7d51c762db11240a9fd6f5ba5b5c16c2c7f20d286885c35f76a098848f8474bc")
IRT = OfficialFile(REPO, COMMIT, "irt.py", "32094de96cc46dbe939fa386f6463560f2ea663820543a0f65c33d3534686a75")
SCORER = OfficialFile(REPO, COMMIT, "minilongbench_scorer.py",
                      "e46574a432f66b4729c3f6977f0c51a2f7aef73f3cfe24d9c86e6a6eeebd7099")
METRICS = OfficialFile(REPO, COMMIT, "minilongbench_metrics.py",
                       "4f22961bac0abe804a5ae3adf221d8801e957b4413f7073fc85c88c19f768c56")

FILES = (BEST_PARAMETERS, IRT, SCORER, METRICS)
IRT_KEYS = ("disc", "diff", "ability", "item_ids")


def irt_parameters(*, settings: Settings | None = None) -> dict[str, Any]:
    """The released IRT parameters, as the file has them (see the module docstring)."""
    data = read_official_json(BEST_PARAMETERS, settings=settings)
    missing = [k for k in IRT_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise OfficialFileError(f"{BEST_PARAMETERS}: missing {', '.join(missing)}")
    if len(data["disc"]) != len(data["diff"]) or len(data["disc"]) != len(data["item_ids"]):
        raise OfficialFileError(f"{BEST_PARAMETERS}: disc ({len(data['disc'])}), diff ({len(data['diff'])}) and "
                                f"item_ids ({len(data['item_ids'])}) differ in length")
    return data
