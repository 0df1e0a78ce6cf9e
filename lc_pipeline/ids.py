"""Row ids: a short stable hash of a row's inputs. The bottom layer: imports nothing of lc_pipeline, so the task
catalog, the builders and the scorers make ids without importing the config (fingerprints.py does)."""

from __future__ import annotations

import hashlib


def short_id(*parts: object, length: int = 20) -> str:
    """Stable row id from its inputs (never Python's salted hash()); the unit separator keeps
    ("ab", "c") and ("a", "bc") apart."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:length]
