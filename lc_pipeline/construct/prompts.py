"""Our QA prompt (our own wording) and the document block format.

The prompt is the whole user message: instruction, the documents, then the question. It
ends with "Answer:" so that base models in completion mode continue with the answer, and
chat models see the expected format.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

QA_INSTRUCTION = (
    "Read the documents below and answer the question that follows them. "
    "Base your answer only on the documents. Reply with the answer alone, "
    "as a short phrase, without explanation."
)

QA_TEMPLATE = "{instruction}\n\n{context}\n\nQuestion: {question}\nAnswer:"

BLOCK_SEPARATOR = "\n\n"

# Part of every instance id: rewording the prompt must yield new instances, not reuse old rows.
PROMPT_VERSION = hashlib.sha256(
    "\x1f".join([QA_INSTRUCTION, QA_TEMPLATE, BLOCK_SEPARATOR, "Document [{index}] (Title: {title}): {text}"]).encode()
).hexdigest()[:12]


def format_block(index: int, title: str, text: str) -> str:
    """``Document [3] (Title: X): text``; numbered so a model can refer to a document."""
    return f"Document [{index}] (Title: {title}): {text}"


def join_blocks(blocks: Iterable[str]) -> str:
    return BLOCK_SEPARATOR.join(blocks)


def format_context(blocks: Iterable[tuple[str, str]]) -> str:
    """Number (title, text) pairs from 1 in the given order and join them."""
    return join_blocks(format_block(i, title, text) for i, (title, text) in enumerate(blocks, start=1))


def build_prompt(context: str, question: str, instruction: str = QA_INSTRUCTION) -> str:
    return QA_TEMPLATE.format(instruction=instruction, context=context, question=question)
