"""What a benchmark run records about itself: which lc_pipeline it measured, and the machine's load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def code_under_test() -> dict:
    """Which lc_pipeline the runs import (PYTHONPATH may put a copy of another commit first) and its state."""
    found = subprocess.run([sys.executable, "-c", "import lc_pipeline, os; print(os.path.dirname(lc_pipeline.__file__))"],
                           capture_output=True, text=True, env=os.environ).stdout.strip()
    root = Path(found).parent
    if (root / "COMMIT_MEASURED").is_file():  # a `git archive` copy of one commit, named by whoever made it
        return {"lc_pipeline": found, "commit": (root / "COMMIT_MEASURED").read_text().strip() + " (archive copy)",
                "uncommitted_files_in_lc_pipeline": 0}
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "lc_pipeline"], cwd=root, capture_output=True,
                           text=True)
    return {"lc_pipeline": found, "commit": head.stdout.strip() if head.returncode == 0 else "not a git checkout",
            "uncommitted_files_in_lc_pipeline": len(dirty.stdout.splitlines()) if dirty.returncode == 0 else None}


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
