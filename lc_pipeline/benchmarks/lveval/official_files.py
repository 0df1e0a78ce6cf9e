"""LV-Eval files of infinigence/LVEval, pinned by commit and sha256, and readers in their formats.

``config.py`` is read as data: each table is the literal assigned at its module level (parsed with ``ast``,
never imported). Readers (call once per run):

- :func:`dataset_prompts`: ``DATASET_PROMPT``, dataset -> template; ``prediction.py`` builds a prompt as
  ``template.format(**record)`` (the record's ``context`` and ``input``).
- :func:`dataset_max_new_tokens`: ``DATASET_MAXGEN``, dataset -> tokens generated.
- :func:`datasets`: ``DATASET_SELECTED``, the datasets the authors run, in their order.
- :func:`length_levels`: ``DATASET_LENGTH_LEVEL``, the length levels (``16k`` .. ``256k``).

The prompt budget is not in ``config.py``: ``prediction.py`` takes it as ``--model-max-length`` (pinned here to be
read, never run). ``DATASET_METRIC`` maps to the authors' functions, so it is not a literal and has no reader.
"""

from __future__ import annotations

from lc_pipeline.official import (
    OfficialFile,
    OfficialFileError,
    mapping_of,
    read_python_literal,
)
from lc_pipeline.settings import Settings

REPO = "infinigence/LVEval"
COMMIT = "63e7ae939bd347c76b2cdb1cebfb216faca26897"

CONFIG = OfficialFile(REPO, COMMIT, "config.py", "7c278132c6cd744e3a57dc87947a20d23d66f6928b9b7f37b0d1bf42e43df8e6")
PREDICTION = OfficialFile(REPO, COMMIT, "prediction.py",
                          "82f568dae42fdff58438fb206c9afa5bedbf1c85457076947f3777e2b099f1bd")
UTILS = OfficialFile(REPO, COMMIT, "utils.py", "653f2854f4a20ffecadb265b93f068009327cf91678ac8241ab39594bd3ed96b")

FILES = (CONFIG, PREDICTION, UTILS)


def _str_list(name: str, settings: Settings | None) -> list[str]:
    value = read_python_literal(CONFIG, name, settings=settings)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise OfficialFileError(f"{CONFIG}: {name} is not a list of strings")
    return value


def dataset_prompts(*, settings: Settings | None = None) -> dict[str, str]:
    """``DATASET_PROMPT``: dataset -> the authors' prompt template (fields ``context`` and ``input``)."""
    return mapping_of(CONFIG, read_python_literal(CONFIG, "DATASET_PROMPT", settings=settings), str, "DATASET_PROMPT")


def dataset_max_new_tokens(*, settings: Settings | None = None) -> dict[str, int]:
    """``DATASET_MAXGEN``: dataset -> the number of tokens the authors generate."""
    return mapping_of(CONFIG, read_python_literal(CONFIG, "DATASET_MAXGEN", settings=settings), int, "DATASET_MAXGEN")


def datasets(*, settings: Settings | None = None) -> list[str]:
    """``DATASET_SELECTED``: the datasets the authors evaluate, in their order."""
    return _str_list("DATASET_SELECTED", settings)


def length_levels(*, settings: Settings | None = None) -> list[str]:
    """``DATASET_LENGTH_LEVEL``: the length levels, shortest first."""
    return _str_list("DATASET_LENGTH_LEVEL", settings)
