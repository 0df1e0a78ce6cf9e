"""LongBench v1 / LongBench-E files of THUDM/LongBench, pinned by commit and sha256, and readers in their formats.

Readers (each reads and verifies the file through :mod:`lc_pipeline.official`; call once per run):

- :func:`dataset_prompts`: task -> prompt template; ``pred.py`` builds a prompt as
  ``template.format(**record)`` (the record's ``context`` and ``input``).
- :func:`dataset_max_new_tokens`: task -> ``max_gen``, the tokens ``pred.py`` generates.
- :func:`model_max_lengths`: model name -> ``max_length``, the prompt budget in tokens (``pred.py`` cuts the
  prompt in the middle to it, before the chat template).

``pred.py`` (the procedure: truncation, chat template, decoding) is pinned to be read, never run.
"""

from __future__ import annotations

from lc_pipeline.official import OfficialFile, mapping_of, read_official_json
from lc_pipeline.settings import Settings

REPO = "THUDM/LongBench"
COMMIT = "2e00731f8d0bff23dc4325161044d0ed8af94c1e"

DATASET2PROMPT = OfficialFile(REPO, COMMIT, "LongBench/config/dataset2prompt.json",
                              "56d22ad4f382169c2b8a11ff4c982a4a1bea096c8152b0f0b85b64686b157c30")
DATASET2MAXLEN = OfficialFile(REPO, COMMIT, "LongBench/config/dataset2maxlen.json",
                              "72966b3c0933e214591637fb085798c5e687ebff4ddaab5d99bbc31120532022")
MODEL2MAXLEN = OfficialFile(REPO, COMMIT, "LongBench/config/model2maxlen.json",
                            "2405c0b85b215a504fb6a8f69c4982db7e2be2d53d177c69891cdcf0fe78f3ce")
MODEL2PATH = OfficialFile(REPO, COMMIT, "LongBench/config/model2path.json",
                          "d36ac172d89e71404eae0f9a94e6d7ac50a4e15924ac03c73e6a406d1b828082")
PRED = OfficialFile(REPO, COMMIT, "LongBench/pred.py",
                    "fdbb0ab2bb68c822fc35126ac050ec60110396bd14fb6d27bed1969f6361835c")

FILES = (DATASET2PROMPT, DATASET2MAXLEN, MODEL2MAXLEN, MODEL2PATH, PRED)


def dataset_prompts(*, settings: Settings | None = None) -> dict[str, str]:
    """Task name -> the authors' prompt template (``str.format`` fields ``context`` and ``input``)."""
    return mapping_of(DATASET2PROMPT, read_official_json(DATASET2PROMPT, settings=settings), str, "the prompt table")


def dataset_max_new_tokens(*, settings: Settings | None = None) -> dict[str, int]:
    """Task name -> the number of tokens the authors generate for it."""
    table = read_official_json(DATASET2MAXLEN, settings=settings)
    return mapping_of(DATASET2MAXLEN, table, int, "the answer-length table")


def model_max_lengths(*, settings: Settings | None = None) -> dict[str, int]:
    """The authors' model name -> prompt budget in tokens."""
    return mapping_of(MODEL2MAXLEN, read_official_json(MODEL2MAXLEN, settings=settings), int, "the model budget table")
