"""Reasoning models: their thoughts apart from their answer (issue 21 "Invalid vs wrong").

A model registered with ``thinking`` (generate/registry.py ``ModelSpec.thinking``; ``spec.thinking_settings``
fills the defaults) thinks before it answers. Its thoughts are kept in the generations row's ``thinking`` column
and never scored: ``output`` holds only the answer, so an answered row is scored exactly as the same answer
without thoughts would be. Where the thoughts are (``location``):

- ``"text"``: in the reply, between ``open`` and ``close`` (``<think>`` / ``</think>``). :func:`split_reply`
  reads every block; a reply may start inside the thoughts (the chat template itself opened the block, as
  DeepSeek-R1's and QwQ's do), so text before a close tag that has no open tag is thought too. The answer is
  the text outside the blocks, whitespace around it removed.
- ``"field"``: the server returned them apart (``reasoning_content`` / ``reasoning`` of a chat completion; the
  openai backend puts it in ``GenerationResult.thinking``); the reply's text is the answer.

A reply whose thinking ran out before an answer is ``invalid`` (schemas.NOT_SCORED: counted beside the score,
not scored as wrong):

- no answer and the reply stopped at ``max_new_tokens`` (finish_reason ``length``) with thoughts written: the
  budget was spent thinking (also when the close tag was the very last thing written);
- text location, thoughts never closed (no close tag at all, or a last block left open) and no answer, even when
  the model stopped by itself (finish ``stop``): nothing lies outside the thoughts, and scoring thoughts as an
  answer would let a substring metric find the answer the model was still weighing.

Otherwise the usual statuses follow (generate/partition.py ``row_status``): an answer cut at ``max_new_tokens``
after the thoughts closed is ``cut`` (an answer exists), a closed block followed by nothing at finish ``stop`` is
``empty`` (the model chose to say nothing), an empty reply with no thoughts at all is ``empty``. In the field
location the server, not us, decides where thoughts end, so an empty answer with thoughts at finish ``stop`` is
``empty`` there (we cannot tell a block left open from one closed and followed by nothing).

The budget: a reasoning model's request asks for the task's answer tokens plus ``budget_tokens``
(:func:`with_budget`, generate/partition.py ``plan_partition``), and the window fitting reserves all of it.
:class:`ThinkingGenerator` applies :func:`split_result` to every result of the model's generator, below the
chain-of-thought followup (a second call is given the first call's answer, not its thoughts) and before the
task's stop sequences cut the answer (a stop sequence inside the thoughts must not end the reply). Pure: no Dagster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lc_pipeline.generate.backends import capabilities, server_chat_backends
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, Generator, stream_results

__all__ = ["Reply", "ThinkingGenerator", "check_location", "split_field", "split_reply", "split_result", "with_budget"]

# Between two thought blocks in the ``thinking`` column.
BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Reply:
    """One reply of a reasoning model, split: ``answer`` is what metrics score; ``invalid`` when the thinking ran
    out before an answer (the row's status is then "invalid" and its output "")."""

    thoughts: str
    answer: str
    invalid: bool


def _blocks(text: str, open_tag: str, close_tag: str) -> tuple[list[str], list[str], bool]:
    """(thought blocks, answer pieces, whether the last block was left open), scanning ``text`` once."""
    thoughts: list[str] = []
    answer: list[str] = []
    pos, inside = 0, False
    while pos <= len(text):
        if inside:
            end = text.find(close_tag, pos)
            if end < 0:
                thoughts.append(text[pos:])
                return thoughts, answer, True
            thoughts.append(text[pos:end])
            pos, inside = end + len(close_tag), False
            continue
        start, stray = text.find(open_tag, pos), text.find(close_tag, pos)
        if stray >= 0 and (start < 0 or stray < start):
            # A close tag with no open tag before it: the template opened the block (or the model dropped the tag).
            thoughts.append(text[pos:stray])
            pos = stray + len(close_tag)
            continue
        if start < 0:
            answer.append(text[pos:])
            break
        answer.append(text[pos:start])
        pos, inside = start + len(open_tag), True
    return thoughts, answer, False


def split_reply(text: str, finish_reason: str, open_tag: str = "<think>", close_tag: str = "</think>") -> Reply:
    """``text`` (a reply with its thoughts written in it, location "text") as thoughts and answer.

    Every block between ``open_tag`` and ``close_tag`` is thought, and so is the text before a close tag that no
    open tag precedes (the chat template opened the block). A reply without any close tag is all thought (the
    model never closed its thinking). The answer is the text outside the blocks, each piece stripped, pieces
    joined by a newline. Invalid: see the module docstring.
    """
    if close_tag not in text:
        body = text.split(open_tag, 1)[1] if open_tag in text else text
        thoughts, answer, unclosed = [body], [], True
    else:
        thoughts, answer, unclosed = _blocks(text, open_tag, close_tag)
    thought = BLOCK_SEPARATOR.join(t.strip() for t in thoughts if t.strip())
    said = "\n".join(a.strip() for a in answer if a.strip())
    invalid = not said and bool(thought) and (finish_reason == "length" or unclosed)
    return Reply(thought, said, invalid)


def split_field(answer: str, reasoning: str, finish_reason: str) -> Reply:
    """A reply whose thoughts the server returned apart (location "field"): invalid when it wrote thoughts, no
    answer, and stopped at max_new_tokens."""
    said, thought = answer.strip(), reasoning.strip()
    return Reply(thought, said, not said and bool(thought) and finish_reason == "length")


def split_result(result: GenerationResult, settings: Mapping) -> GenerationResult:
    """``result`` with its thoughts moved from ``output`` (location "text") into ``thinking`` and status
    "invalid" when they ran out before an answer. ``settings``: ``ModelSpec.thinking_settings``. A result the
    backend already gave a status (e.g. "skipped": nothing was sent) is returned unchanged."""
    if result.status:
        return result
    if settings["location"] == "field":
        reply = split_field(result.output, result.thinking, result.finish_reason)
    else:
        reply = split_reply(result.output, result.finish_reason, settings["open"], settings["close"])
        if result.thinking.strip():  # a backend that found thoughts itself: keep them first
            reply = dataclasses.replace(reply, thoughts=BLOCK_SEPARATOR.join(
                t for t in (result.thinking.strip(), reply.thoughts) if t))
    return dataclasses.replace(result, output="" if reply.invalid else reply.answer, thinking=reply.thoughts,
                               status="invalid" if reply.invalid else "")


def check_location(slug: str, settings: Mapping | None, backend: str, api: str) -> None:
    """A ``field`` location needs a server that returns the thoughts apart: the openai backend's chat api (a
    text completion or an in-process backend has no reasoning field, so nothing would ever be stripped)."""
    if settings and settings["location"] == "field" and not capabilities(backend).server_renders_chat(api):
        raise ValueError(f"model {slug!r}, field 'thinking': location 'field' (the server's reasoning field) needs "
                         f"{server_chat_backends()}, not backend {backend!r} api {api!r}; use location "
                         "'text' for thoughts written in the reply")


def with_budget(max_new_tokens: int, settings: Mapping | None) -> int:
    """New tokens a request asks for: the task's answer tokens, plus the thinking budget of a reasoning model."""
    return max_new_tokens + (int(settings["budget_tokens"]) if settings else 0)


class ThinkingGenerator:
    """A :class:`~lc_pipeline.generate.base.Generator` whose results come split (:func:`split_result`): the
    model's generator of a reasoning model, wrapped once per partition (generate/partition.py)."""

    def __init__(self, inner: Generator, settings: Mapping) -> None:
        self.inner, self.settings = inner, dict(settings)
        self.backend, self.model_id = inner.backend, inner.model_id
        self.streams_results = bool(getattr(inner, "streams_results", False))

    def sampling_params(self) -> dict:
        return self.inner.sampling_params()

    def generate(self, requests: Sequence[GenerationRequest], progress: Callable[[int], None] | None = None,
                 on_result: Callable[[GenerationResult], None] | None = None) -> list[GenerationResult]:
        """The inner generator's results, split; each also to ``on_result`` as soon as the inner one has it."""
        split: dict[str, GenerationResult] = {}

        def each(result: GenerationResult) -> None:
            split[result.key] = split_result(result, self.settings)
            if on_result is not None:
                on_result(split[result.key])

        return [split[r.key] for r in stream_results(self.inner, requests, progress, each)]
