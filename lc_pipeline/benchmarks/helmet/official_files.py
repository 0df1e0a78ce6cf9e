"""HELMET files of princeton-nlp/HELMET, pinned by commit and sha256, and readers in their formats.

The ``.py`` files are read as data (parsed with ``ast``, never imported). Readers (call once per run):

- :func:`longqa_judge_prompt`: ``judge_prompt`` of ``scripts/eval_gpt4_longqa.py`` (``str.format`` fields
  ``question``, ``correct_answers``, ``parsed_output``).
- :func:`summ_judge_prompts`: the six judge prompts of ``scripts/eval_gpt4_summ.py`` by the authors' variable
  names (:data:`SUMM_JUDGE_PROMPTS`): ``fluency_prompt[_book]`` (field ``text``), ``recall_prompt[_book]``
  (``keypoints``, ``summary``), ``precision_prompt[_book]`` (``expert_summary``, ``summary``); ``_book`` for
  ∞Bench Sum, the others for Multi-LexSum.
- :func:`alce_demos`: ``prompts/<name>.json`` (:data:`ALCE_DEMO_NAMES`): ``instruction``, ``demo_sep``,
  ``demo_prompt``, ``doc_prompt``, ``demos`` (each ``question``, ``answer``, ``docs``).
- :func:`data_templates`: every literal assigned inside one loader function of ``data.py`` (e.g. ``load_qa``),
  as ``(name, line, value)``: the task templates, which ``data.py`` sets per branch.
"""

from __future__ import annotations

from typing import Any

from lc_pipeline.official import (
    OfficialFile,
    OfficialFileError,
    function_literals,
    mapping_of,
    read_official_json,
    read_python_literal,
)
from lc_pipeline.settings import Settings

REPO = "princeton-nlp/HELMET"
COMMIT = "4526dfbdc512bd9ff721da336bff4e3e75ecfd27"

DATA = OfficialFile(REPO, COMMIT, "data.py", "a47c53d5f42d67468f920ebe8d38058d571fafba5eab5c1c54365cc23f3d4b55")
MODEL_UTILS = OfficialFile(REPO, COMMIT, "model_utils.py",
                           "c8020e3d2180c5f1d0328fc006fa4f5f15355617e70660fd6c8162974f34a761")
EVAL_GPT4_LONGQA = OfficialFile(REPO, COMMIT, "scripts/eval_gpt4_longqa.py",
                                "9297b773cdfda8bc4f7bd52ebdac35bbd5cfefc3b3f716730dc8fdf6b910c3b7")
EVAL_GPT4_SUMM = OfficialFile(REPO, COMMIT, "scripts/eval_gpt4_summ.py",
                              "ad89dd22953326c4036772da97d00904dbaf74129b04e5ea9cc8f6cf75b70bde")
DOWNLOAD_DATA = OfficialFile(REPO, COMMIT, "scripts/download_data.sh",
                             "dcf5eb0c71dc2a78886e4e4fe09dfa0784722d836a24f2464c48160381aade5e")
ALCE_DEMOS = {
    "asqa_nocite": OfficialFile(REPO, COMMIT, "prompts/asqa_nocite.json",
                                "512b525835de1d2d610334d31d002ffa9396474ac141c31ad12adec8d121ac8f"),
    "asqa_revised": OfficialFile(REPO, COMMIT, "prompts/asqa_revised.json",
                                 "99ebb9d7371895dc352a7f9135ef9e84c3757a9d9d4ce2091b4e2b1d7c39299c"),
    "qampari_nocite": OfficialFile(REPO, COMMIT, "prompts/qampari_nocite.json",
                                   "0f2c2762e5a96031004c4220e3f3c9b65f6359b5fc44187ef687ae7127a8f4a1"),
    "qampari_revised": OfficialFile(REPO, COMMIT, "prompts/qampari_revised.json",
                                    "d73e184ec6d9fd6ba821ea1e537d2dec96be602aa693706862acc1b3d9586104"),
}
ALCE_DEMO_NAMES = tuple(ALCE_DEMOS)

FILES = (DATA, MODEL_UTILS, EVAL_GPT4_LONGQA, EVAL_GPT4_SUMM, DOWNLOAD_DATA, *ALCE_DEMOS.values())

LONGQA_JUDGE_PROMPT = "judge_prompt"
SUMM_JUDGE_PROMPTS = ("fluency_prompt", "fluency_prompt_book", "recall_prompt", "recall_prompt_book",
                      "precision_prompt", "precision_prompt_book")
ALCE_DEMO_KEYS = ("instruction", "demo_sep", "demo_prompt", "doc_prompt", "demos")


def _string(file: OfficialFile, name: str, settings: Settings | None) -> str:
    value = read_python_literal(file, name, settings=settings)
    if not isinstance(value, str):
        raise OfficialFileError(f"{file}: {name} is a {type(value).__name__}, not a string")
    return value


def longqa_judge_prompt(*, settings: Settings | None = None) -> str:
    """The LongQA (NarrativeQA) judge prompt."""
    return _string(EVAL_GPT4_LONGQA, LONGQA_JUDGE_PROMPT, settings)


def summ_judge_prompts(*, settings: Settings | None = None) -> dict[str, str]:
    """The summarization judge prompts by the authors' variable names (:data:`SUMM_JUDGE_PROMPTS`)."""
    return {name: _string(EVAL_GPT4_SUMM, name, settings) for name in SUMM_JUDGE_PROMPTS}


def alce_demos(name: str, *, settings: Settings | None = None) -> dict[str, Any]:
    """The ALCE instruction, templates and demonstrations of ``prompts/<name>.json`` (:data:`ALCE_DEMO_NAMES`)."""
    if name not in ALCE_DEMOS:
        raise OfficialFileError(f"HELMET has no ALCE prompt file {name!r} (known: {', '.join(ALCE_DEMO_NAMES)})")
    file = ALCE_DEMOS[name]
    data = mapping_of(file, read_official_json(file, settings=settings), (str, list), "the demo file")
    missing = [k for k in ALCE_DEMO_KEYS if k not in data]
    if missing:
        raise OfficialFileError(f"{file}: missing {', '.join(missing)}")
    return data


def data_templates(function: str, *, settings: Settings | None = None) -> list[tuple[str, int, Any]]:
    """Every ``name = <literal>`` inside ``function`` of ``data.py``, as ``(name, line, value)`` in source order."""
    return function_literals(DATA, function, settings=settings)
