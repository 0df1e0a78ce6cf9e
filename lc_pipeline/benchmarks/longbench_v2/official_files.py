"""LongBench v2 files of THUDM/LongBench, pinned by commit and sha256, and readers in their formats.

Readers (each reads and verifies the file through :mod:`lc_pipeline.official`; call once per run):

- :func:`prompt_template`: one of :data:`PROMPT_NAMES` as ``pred.py`` reads it (``open(...).read()``); its
  placeholders (``$DOC$``, ``$Q$``, ``$C_A$`` .. ``$C_D$``, ``$COT$``) are filled with ``str.replace``.
- :func:`model_max_lengths`: model name -> prompt budget in tokens (``pred.py`` cuts the prompt in the middle
  to it).

``pred.py`` (the procedure: the CoT answer call, truncation, decoding) is pinned to be read, never run.
"""

from __future__ import annotations

from lc_pipeline.official import (
    OfficialFile,
    OfficialFileError,
    mapping_of,
    read_official_json,
    read_official_text,
)
from lc_pipeline.settings import Settings

REPO = "THUDM/LongBench"
COMMIT = "2e00731f8d0bff23dc4325161044d0ed8af94c1e"

PROMPTS = {
    "0shot": OfficialFile(REPO, COMMIT, "prompts/0shot.txt",
                          "68a162252bc9ff71d5d7abca3d69bb31aac3c35f832d657a2866f2018b8a6950"),
    "0shot_cot": OfficialFile(REPO, COMMIT, "prompts/0shot_cot.txt",
                              "6cc33d92fd8f611662b756c1f10f302c541ca005b58c46d5f3188ac3a939bfe8"),
    "0shot_cot_ans": OfficialFile(REPO, COMMIT, "prompts/0shot_cot_ans.txt",
                                  "85ec59df4ac0e27aabbc619a7ca5cf3ae1787dd5a76cf51a18944eb52c91955f"),
    "0shot_no_context": OfficialFile(REPO, COMMIT, "prompts/0shot_no_context.txt",
                                     "125fb44183af01ffc623df19392b80a287db62af3e2a2805e5b2ff9c7b2bee30"),
    "0shot_rag": OfficialFile(REPO, COMMIT, "prompts/0shot_rag.txt",
                              "5c50ce4fa24d297b8c72eb048599681ee01ced5d24a6636464386d6d3c72c4c9"),
}
PROMPT_NAMES = tuple(PROMPTS)
MODEL2MAXLEN = OfficialFile(REPO, COMMIT, "config/model2maxlen.json",
                            "c37ec6e5d77e68e4cf6280183c6e68e885852ced6904e049ed75d3e73fc61ebe")
PRED = OfficialFile(REPO, COMMIT, "pred.py", "ab63f77866a1c0dc770582bc3fe6b014c3b4be4667399b0ee267075780c6a138")

FILES = (*PROMPTS.values(), MODEL2MAXLEN, PRED)


def prompt_template(name: str, *, settings: Settings | None = None) -> str:
    """The authors' template ``prompts/<name>.txt``; ``name`` is one of :data:`PROMPT_NAMES`."""
    if name not in PROMPTS:
        raise OfficialFileError(f"LongBench v2 has no prompt {name!r} (known: {', '.join(PROMPT_NAMES)})")
    return read_official_text(PROMPTS[name], settings=settings)


def model_max_lengths(*, settings: Settings | None = None) -> dict[str, int]:
    """The authors' model name -> prompt budget in tokens."""
    return mapping_of(MODEL2MAXLEN, read_official_json(MODEL2MAXLEN, settings=settings), int, "the model budget table")
