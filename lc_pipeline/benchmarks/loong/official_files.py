"""Loong files of MozerWang/Loong, pinned by commit and sha256, and a reader in their format.

- :func:`judge_prompt`: the judge prompt, the string literal assigned to ``prompt`` inside
  ``get_evaluate_prompts()`` of ``src/utils/prompt.py`` (parsed with ``ast``, never imported). The authors fill
  it with ``prompt.format(question, gold_answer, predicted_answer)``: three positional ``{}`` fields.

The item prompt template is not in these files: each released item carries its own (``prompt_template``).
The other files (data loading, generation, token counting, metric) are pinned to be read, never run.
"""

from __future__ import annotations

from lc_pipeline.official import OfficialFile, OfficialFileError, read_python_literal
from lc_pipeline.settings import Settings

REPO = "MozerWang/Loong"
COMMIT = "e05a1fd3ebd89d16dcca4fbeb8e761c82609f819"

PROMPT = OfficialFile(REPO, COMMIT, "src/utils/prompt.py",
                      "9ae5cf67e442ff7867de36632739d7dc4561e098bf341287b367bc765c9aaa7a")
STEP1_LOAD_DATA = OfficialFile(REPO, COMMIT, "src/step1_load_data.py",
                               "39b0a8cc8ff5978c37bdda196a3e8e4ba8403918e7946643f5405aa0ef9a9623")
STEP4_CAL_METRIC = OfficialFile(REPO, COMMIT, "src/step4_cal_metric.py",
                                "7e7de2be244c0ea0e780d7e95e0e3892587c14b02696d2db470cdefbfb3a7ee1")
GENERATE = OfficialFile(REPO, COMMIT, "src/utils/generate.py",
                        "284cabcd1973b526fa9276d864791f5895542548a87aea0cd1c62920e383b3bf")
METRIC = OfficialFile(REPO, COMMIT, "src/utils/metric.py",
                      "c2082ff5d67f9558ccb374bce4739b6bcd2e5218fbb178a218fd981e623916b4")
TOKEN_LENGTH = OfficialFile(REPO, COMMIT, "src/utils/token_length.py",
                            "14d733321337720573e0ebc5622c6b0ce56528e82116bdd73784edf0c4a02478")

FILES = (PROMPT, STEP1_LOAD_DATA, STEP4_CAL_METRIC, GENERATE, METRIC, TOKEN_LENGTH)
JUDGE_FUNCTION = "get_evaluate_prompts"


def judge_prompt(*, settings: Settings | None = None) -> str:
    """The authors' judge prompt (three positional ``{}``: question, gold answer, predicted answer)."""
    value = read_python_literal(PROMPT, "prompt", function=JUDGE_FUNCTION, settings=settings)
    if not isinstance(value, str):
        raise OfficialFileError(f"{PROMPT}: 'prompt' in {JUDGE_FUNCTION}() is a {type(value).__name__}, not a string")
    return value
