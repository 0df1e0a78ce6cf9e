"""Where the tests find the shared data and the authors' files, and the switch to read those files offline.

``../shared/data`` beside the checkout (or ``$LCP_SHARED_DATA``) and ``../shared/official`` beside it; a test
that needs them skips with :func:`skip_unless`, naming what it looked for.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("LCP_SHARED_DATA") or REPO.parent / "shared" / "data")
OFFICIAL = SHARED_DATA.parent / "official"


def skip_unless(path: Path, what: str) -> pytest.MarkDecorator:
    """A skip mark for a test (module) that needs ``path``, saying what it is and where it was looked for."""
    return pytest.mark.skipif(not path.exists(), reason=f"{what} not found: {path} (../shared beside the checkout, "
                                                        "or LCP_SHARED_DATA set to shared/data)")


@contextlib.contextmanager
def official_offline(cache: Path) -> Iterator[None]:
    """The authors' files read from ../shared/official only (``LCP_OFFICIAL``), never fetched (``LCP_OFFLINE``),
    with a cache of its own; the environment restored afterwards (usable in module-scoped fixtures)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("LCP_OFFICIAL", str(OFFICIAL))
    mp.setenv("LCP_LOCAL_CACHE", str(cache))
    mp.setenv("LCP_OFFLINE", "1")
    try:
        yield
    finally:
        mp.undo()
