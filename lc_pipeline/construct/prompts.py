"""Our QA prompt (our own wording), the document block format, and a task's own prompt (QAPrompt).

The prompt is the whole user message: instruction, the documents, then the question. It
ends with "Answer:" so that base models in completion mode continue with the answer, and
chat models see the expected format. A task may declare its own template (tasks/: the
TaskSpec's prompt template and max_new_tokens); the QA-suite builders then take each item's
prompt from its task as a :class:`QAPrompt` (``prompt_for``), the default being this one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

QA_INSTRUCTION = (
    "Read the documents below and answer the question that follows them. "
    "Base your answer only on the documents. Reply with the answer alone, "
    "as a short phrase, without explanation."
)

QA_TEMPLATE = "{instruction}\n\n{context}\n\nQuestion: {question}\nAnswer:"

BLOCK_SEPARATOR = "\n\n"

# The prior-knowledge probe (config ``prior_knowledge``; 100-LongBench's `qa_old`, in our words): the question
# alone, no context.
NO_CONTEXT_PROMPT = (
    "Answer the question as briefly as you can, in one phrase or sentence if possible. If it cannot be "
    'answered, write "unanswerable". Give no explanation.\nQuestion: {input}\nReply with the answer only. Answer:\n'
)


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


_CONTEXT, _QUESTION = "{context}", "{question}"


@dataclass(frozen=True)
class QAPrompt:
    """One item's prompt for the QA-suite builders: its task's template and generation length.

    ``template`` is the whole user message with ``{context}`` and ``{question}`` each exactly
    once, in either order; :meth:`render` puts the two in literally, so the context's own
    braces and any other ``{...}`` in the template (``{{`` too) stay as they are written.
    ``id_salt`` "" keeps the instance ids of the default prompt (PROMPT_VERSION is already in
    every id); a task with its own template names a salt, which is then mixed into its ids.
    """

    template: str
    max_new_tokens: int
    id_salt: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.template, str):
            raise ValueError(f"QAPrompt: template must be a string, got {type(self.template).__name__}")
        for placeholder in (_CONTEXT, _QUESTION):
            n = self.template.count(placeholder)
            if n != 1:
                raise ValueError(f"QAPrompt: template must contain {placeholder} exactly once, found {n} "
                                 f"in {self.template[:120]!r}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens < 1:
            raise ValueError(f"QAPrompt: max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if not isinstance(self.id_salt, str):
            raise ValueError(f"QAPrompt: id_salt must be a string, got {self.id_salt!r}")

    @classmethod
    def default(cls, max_new_tokens: int) -> QAPrompt:
        """Our QA prompt (QA_TEMPLATE with QA_INSTRUCTION): renders exactly as :func:`build_prompt`."""
        return cls(QA_TEMPLATE.replace("{instruction}", QA_INSTRUCTION), max_new_tokens)

    def around(self, question: str) -> tuple[str, str]:
        """(text before the context, text after it) with ``question`` in its place."""
        t = self.template
        c, q = t.index(_CONTEXT), t.index(_QUESTION)
        if q < c:
            return t[:q] + question + t[q + len(_QUESTION) : c], t[c + len(_CONTEXT) :]
        return t[:c], t[c + len(_CONTEXT) : q] + question + t[q + len(_QUESTION) :]

    def render(self, context: str, question: str) -> str:
        """The prompt: the template with ``context`` and ``question`` in their places, verbatim."""
        before, after = self.around(question)
        return before + context + after


PromptFor = Callable[[dict], QAPrompt]


def prompt_for_items(prompt_for: PromptFor | None, max_new_tokens: int) -> PromptFor:
    """``prompt_for`` (an item row -> its :class:`QAPrompt`) checked, or, when None, the default prompt
    with ``max_new_tokens`` for every item."""
    if prompt_for is None:
        default = QAPrompt.default(max_new_tokens)
        return lambda item: default

    def checked(item: dict) -> QAPrompt:
        prompt = prompt_for(item)
        if not isinstance(prompt, QAPrompt):
            raise TypeError(f"item {item.get('item_id')!r} (task {item.get('task')!r}): prompt_for returned "
                            f"{type(prompt).__name__}, not a QAPrompt")
        return prompt

    return checked
