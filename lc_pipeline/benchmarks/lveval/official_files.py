"""LV-Eval files of infinigence/LVEval, pinned by commit and sha256, and readers in their formats.

``config.py`` is read as data: each table is the literal assigned at its module level (parsed with ``ast``,
never imported). Readers (call once per run):

- :func:`dataset_prompts`: ``DATASET_PROMPT``, dataset -> template; ``prediction.py`` builds a prompt as
  ``template.format(**record)`` (the record's ``context`` and ``input``).
- :func:`dataset_max_new_tokens`: ``DATASET_MAXGEN``, dataset -> tokens generated.
- :func:`datasets`: ``DATASET_SELECTED``, the datasets the authors run, in their order.
- :func:`length_levels`: ``DATASET_LENGTH_LEVEL``, the length levels (``16k`` .. ``256k``).
- :func:`api_system_turn`: the system turn ``prediction_gpt.py`` (their API models' script) sends before every
  prompt: the ``content`` of the one ``{"role": "system", "content": <string>}`` message in its ``get_pred()``
  (parsed with ``ast``, never run).

The prompt budget is not in ``config.py``: ``prediction.py`` takes it as ``--model-max-length`` (pinned here to be
read, never run). ``DATASET_METRIC`` maps to the authors' functions, so it is not a literal and has no reader.
"""

from __future__ import annotations

import ast

from lc_pipeline.official import (
    OfficialFile,
    OfficialFileError,
    mapping_of,
    read_official_text,
    read_python_literal,
)
from lc_pipeline.settings import Settings

REPO = "infinigence/LVEval"
COMMIT = "63e7ae939bd347c76b2cdb1cebfb216faca26897"

CONFIG = OfficialFile(REPO, COMMIT, "config.py", "7c278132c6cd744e3a57dc87947a20d23d66f6928b9b7f37b0d1bf42e43df8e6")
PREDICTION = OfficialFile(REPO, COMMIT, "prediction.py",
                          "82f568dae42fdff58438fb206c9afa5bedbf1c85457076947f3777e2b099f1bd")
UTILS = OfficialFile(REPO, COMMIT, "utils.py", "653f2854f4a20ffecadb265b93f068009327cf91678ac8241ab39594bd3ed96b")
PREDICTION_GPT = OfficialFile(REPO, COMMIT, "prediction_gpt.py",
                              "c5b6f0f42204ad3eaefdf597e49494d10d995ed64e97187d78e376522bd8da34")

FILES = (CONFIG, PREDICTION, UTILS)  # the files of ../shared/official's checkout (tests verify each against it)
# Pinned, read at run time, but not in ../shared/official (fidelity review LV3 listed it as not read): fetched into
# the cache at the pinned commit, or found under $LCP_OFFICIAL in a full checkout. Move it into FILES once the
# shared checkout holds it.
NOT_SHARED = (PREDICTION_GPT,)
API_FUNCTION = "get_pred"  # prediction_gpt.py's function that sends each prompt


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


def api_system_turn(*, settings: Settings | None = None, file: OfficialFile = PREDICTION_GPT) -> str:
    """The system turn of the authors' API script: the string ``content`` of the one message whose ``role`` is
    ``"system"`` in ``get_pred()`` of ``prediction_gpt.py`` (module docstring); ``file``: another pin of a file
    of that shape."""
    try:
        tree = ast.parse(read_official_text(file, settings=settings), filename=str(file))
    except SyntaxError as exc:
        raise OfficialFileError(f"{file}: does not parse as Python ({exc})") from None
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == API_FUNCTION]
    if len(funcs) != 1:
        raise OfficialFileError(f"{file}: expected one function {API_FUNCTION}(), found {len(funcs)}")
    turns = []
    for node in ast.walk(funcs[0]):
        if not isinstance(node, ast.Dict) or any(k is None for k in node.keys):
            continue
        fields = {k.value: v for k, v in zip(node.keys, node.values, strict=True)
                  if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        role = fields.get("role")
        if isinstance(role, ast.Constant) and role.value == "system":
            content = fields.get("content")
            if not (isinstance(content, ast.Constant) and isinstance(content.value, str)):
                raise OfficialFileError(f"{file}: the system message in {API_FUNCTION}() (line {node.lineno}) has no "
                                        "string literal 'content'")
            turns.append(content.value)
    if len(turns) != 1:
        raise OfficialFileError(f"{file}: expected one {{'role': 'system', 'content': '...'}} message in "
                                f"{API_FUNCTION}(), found {len(turns)}")
    return turns[0]
