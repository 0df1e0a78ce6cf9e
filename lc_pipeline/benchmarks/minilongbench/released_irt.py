"""The authors' released item parameters (α, β) in our sample order: MiniLongBench without refitting (MI1).

``data/irt_model/best_parameters.json`` (read by :func:`.official_files.irt_parameters`) holds ``disc``
(items x dims) and ``diff`` (items x 1) of the authors' py-irt ``multidim_2pl`` fit, row ``i`` for item
``item_ids[str(i)]``. Their ``irt.py`` builds the response matrix with one column per LongBench sample named
``q<j>``, ``j`` the sample's global index (the order of the released score matrix), and predicts with the
same clipped logit :mod:`lc_pipeline.score.irt` uses (``sum_k clip(alpha_jk theta_k - beta_j)``), so the
released parameters drop in as our ``alpha`` (= disc) and ``beta`` (= diff[:, 0]).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from lc_pipeline.benchmarks.minilongbench.official_files import (
    BEST_PARAMETERS,
    irt_parameters,
)
from lc_pipeline.official import OfficialFileError
from lc_pipeline.settings import Settings

__all__ = ["SOURCE", "item_parameters"]

SOURCE = f"released {BEST_PARAMETERS.repo}@{BEST_PARAMETERS.commit[:12]} {BEST_PARAMETERS.path}"
_ITEM = re.compile(r"q(\d+)")


def item_parameters(samples: Sequence[int], *, settings: Settings | None = None,
                    data: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, beta)`` of the released file for ``samples`` (LongBench global sample indices), in that
    order: alpha (n x dims), beta (n,). ``data``: the file's dict already read (default: read it). A sample
    the file has no item for, or an item id not of the form ``q<index>``, is an error naming the file."""
    params = irt_parameters(settings=settings) if data is None else data
    where = str(BEST_PARAMETERS)
    disc = np.asarray(params["disc"], dtype=np.float64)
    diff = np.asarray(params["diff"], dtype=np.float64)
    if disc.ndim != 2 or diff.shape != (disc.shape[0], 1):
        raise OfficialFileError(f"{where}: disc {disc.shape} / diff {diff.shape}: expected items x dims and items x 1")
    row_of: dict[int, int] = {}
    for i in range(disc.shape[0]):
        item = params["item_ids"].get(str(i))
        m = _ITEM.fullmatch(str(item)) if item is not None else None
        if m is None:
            raise OfficialFileError(f"{where}: item_ids[{str(i)!r}] is {item!r}, expected 'q<sample index>'")
        row_of[int(m.group(1))] = i
    missing = [int(s) for s in samples if int(s) not in row_of]
    if missing:
        raise OfficialFileError(f"{where}: no item for {len(missing)} sample(s), e.g. {missing[:5]} "
                                f"(the file has q0..q{disc.shape[0] - 1})")
    rows = np.array([row_of[int(s)] for s in samples], dtype=np.int64)
    return disc[rows], diff[rows, 0]
