"""Fitting a prompt into a model's window: four truncation policies, chosen per task (or per model).

A benchmark prompt is instruction + context + question. When the rendered prompt (chat
template included) plus the tokens to generate does not fit the model's window, one of:

- ``middle`` (LongBench, LV-Eval; lveval.md §8.3): keep the first and last halves of the
  whole user prompt's tokens, so the leading instruction and the trailing question survive.
- ``end_of_context`` (HELMET; helmet.md §5.2): cut the *context* from its end, never the
  instruction, demos or question.
- ``drop_documents`` (Loong; loong.md §6.3): walk the documents in order and keep each one
  that still fits, skipping (not cutting) the rest; a later, shorter document may still fit.
- ``skip`` (ours; issue 21 "Numbers users can trust"): a prompt that does not fit is not cut and not
  sent. :func:`fit_prompt` returns it with ``skipped=True`` and no ids, its exact length in
  ``original_tokens``; the backends record the row as ``status: skipped`` (nothing generated, nothing
  scored, counted beside the scores) instead of scoring an answer to a prompt the model never saw whole.
- ``prompt_middle:<budget>`` (a benchmark's official protocol, e.g. LongBench's ``pred.py``): the *user
  prompt alone*, before any chat template, is cut in the middle to a fixed number of the model's tokens
  (:class:`PromptBudget`, registered under ``<budget>`` by the benchmark's protocol), each half decoded on
  its own and the two joined (LongBench v1), or the kept ids decoded as one sequence (LongBench v2's
  ``pred.py``: ``PromptBudget.decode``); the template is applied to the result and nothing is cut further
  (:func:`cut_prompt_middle`, used by ``generate/prompting.fit_request``). Not chosen by task files: a
  config's ``protocol: official`` sets it (config.py ``OfficialProtocol``).

Which policy a task uses is declared in its task file (``truncation:``; lc_pipeline/benchmarks/*/task_files/),
and a test holds the packaged ones against the papers (tests/unit/test_truncation_policies.py). A model
may set one for all its tasks (models.yaml ``truncation:``), and a run's ``truncation_overrides`` win over
both: run override > model > task file (generate/partition.py ``plan_partition``).
Token counts are the evaluated model's own (``encode``/``render`` come from the backend).
Nothing here imports a model library.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from lc_pipeline.tasks.registry import DOCUMENT_SPLITTERS

MIDDLE = "middle"
END_OF_CONTEXT = "end_of_context"
DROP_DOCUMENTS = "drop_documents"
SKIP = "skip"
POLICIES = (MIDDLE, END_OF_CONTEXT, DROP_DOCUMENTS, SKIP)

# Our documents are "Document [i] (Title: ...): text" blocks joined by a blank line
# (construct/prompts.py); a block may itself contain blank lines, so split on the header.
_DOCUMENT_START = re.compile(r"\n\n(?=Document \[\d+\] \(Title: )")
DOCUMENT_SEPARATOR = "\n\n"


PROMPT_MIDDLE = "prompt_middle"
# How a prompt_middle cut decodes the ids it keeps (PromptBudget.decode).
MIDDLE_DECODINGS = ("halves", "one_sequence")
_BUDGET_NAME = re.compile(r"^[a-z0-9_]+$")


def validate_policy(policy: str, where: str = "truncation policy") -> str:
    if policy in POLICIES:
        return policy
    name = prompt_budget_name(policy)
    if name is None:
        raise ValueError(f"{where}: unknown truncation policy {policy!r}; expected one of {list(POLICIES)} or "
                         f"'{PROMPT_MIDDLE}:<budget>' (a protocol's prompt budget)")
    return policy


def prompt_budget_name(policy: str) -> str | None:
    """The budget name of a ``prompt_middle:<budget>`` policy; None for any other policy."""
    head, sep, name = policy.partition(":")
    return name if head == PROMPT_MIDDLE and sep and _BUDGET_NAME.match(name) else None


@dataclass(frozen=True)
class PromptBudget:
    """How many of the model's tokens the user prompt may keep before the chat template (policy
    ``prompt_middle``): ``by_model[slug]`` when the model's registry name is listed there (exact match, e.g.
    LongBench's ``model2maxlen.json``), else ``fixed`` when set, else the window minus ``window_reserve``; with
    both set, the smaller of ``fixed`` and the window minus ``window_reserve`` (LongBench v2: 120,000, less for a
    model whose window is smaller than the authors' models').

    ``source`` says where the numbers come from (recorded nowhere else: the protocol's commit is in the
    instances' ``protocol`` column). The prompt's tokens are counted as the plain prompt is encoded (the special
    tokens the vocabulary adds, a BOS, included), and decoded without special tokens, as LongBench's
    ``pred.py`` does (``tokenizer(prompt)``, ``decode(..., skip_special_tokens=True)``).

    ``decode`` says how the kept ids become text (:func:`cut_prompt_middle`): ``halves`` (LongBench v1's
    ``pred.py``: the first and the last ``budget // 2`` ids, each half decoded on its own, the texts joined) or
    ``one_sequence`` (LongBench v2's ``pred.py``: ``ids[:budget//2] + ids[-budget//2:]`` decoded at once).
    """

    by_model: Mapping[str, int] = field(default_factory=dict)
    fixed: int | None = None
    window_reserve: int | None = None
    source: str = ""
    decode: str = "halves"

    def __post_init__(self) -> None:
        if self.fixed is None and self.window_reserve is None:
            raise ValueError(f"prompt budget {self.source!r}: give fixed or window_reserve (the rule for a model "
                             "not listed in by_model)")
        if self.decode not in MIDDLE_DECODINGS:
            raise ValueError(f"prompt budget {self.source!r}: decode {self.decode!r} is not one of "
                             f"{list(MIDDLE_DECODINGS)}")

    def tokens(self, model: str, window: int) -> int:
        """The budget for the model registered as ``model`` with a ``window``-token context."""
        if model in self.by_model:
            return int(self.by_model[model])
        if self.fixed is not None and self.window_reserve is not None:
            return min(self.fixed, window - int(self.window_reserve))
        if self.fixed is not None:
            return self.fixed
        return window - int(self.window_reserve or 0)


# Budgets by name (the ``<budget>`` of ``prompt_middle:<budget>``). A benchmark's protocol module,
# lc_pipeline/benchmarks/<budget>/protocol.py, registers its own on import; :func:`prompt_budget` imports it
# when the name is not registered yet (the core names no benchmark).
PROMPT_BUDGETS: dict[str, Callable[[], PromptBudget]] = {}


def register_prompt_budget(name: str, budget: Callable[[], PromptBudget]) -> None:
    """Register ``budget`` (a function returning the :class:`PromptBudget`, called when a prompt is fitted, so
    the authors' files are read only then) as ``prompt_middle:<name>``."""
    if not _BUDGET_NAME.match(name):
        raise ValueError(f"prompt budget name {name!r}: lowercase letters, digits and '_' only")
    PROMPT_BUDGETS[name] = budget


def prompt_budget(policy: str, key: str = "?") -> PromptBudget:
    """The :class:`PromptBudget` of a ``prompt_middle:<budget>`` policy (the protocol module imported if need be)."""
    name = prompt_budget_name(policy)
    if name is None:
        raise ValueError(f"request {key!r}: policy {policy!r} is not '{PROMPT_MIDDLE}:<budget>'")
    if name not in PROMPT_BUDGETS:
        module = f"lc_pipeline.benchmarks.{name}.protocol"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not exc.name or not module.startswith(exc.name):  # a module the protocol imports is missing
                raise
    if name not in PROMPT_BUDGETS:
        raise ValueError(f"request {key!r}: no prompt budget {name!r} is registered (its protocol module "
                         f"lc_pipeline/benchmarks/{name}/protocol.py registers it)")
    return PROMPT_BUDGETS[name]()


def cut_prompt_middle(
    prompt: str,
    budget: int,
    *,
    encode: Callable[[str], list[int]],
    decode: Callable[[Sequence[int]], str],
    key: str = "?",
    decoding: str = "halves",
) -> tuple[str, bool]:
    """``(text, cut)``: ``prompt`` itself when ``encode(prompt)`` has at most ``budget`` ids, else, with
    ``decoding`` ``halves``, the first and the last ``budget // 2`` ids each decoded on its own and the two texts
    joined (LongBench's ``pred.py``: ``half = int(max_length/2)``; ``decode(ids[:half]) + decode(ids[-half:])``);
    with ``one_sequence``, ``ids[:budget // 2] + ids[-budget // 2:]`` (Python's floor division: the tail keeps
    the odd id) decoded at once (LongBench v2's ``pred.py``), so a character split between the two halves' ids
    is not decoded twice. The caller renders the text (chat template, special tokens) and cuts nothing further.

    >>> cut_prompt_middle("abcdefg", 4, encode=lambda t: [ord(c) for c in t],
    ...                   decode=lambda ids: "".join(map(chr, ids)))
    ('abfg', True)
    >>> cut_prompt_middle("abcdefg", 5, encode=lambda t: [ord(c) for c in t],
    ...                   decode=lambda ids: "".join(map(chr, ids)), decoding="one_sequence")
    ('abefg', True)
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(f"request {key!r}: budget must be an int, got {budget!r}")
    if budget < 2:  # half 0 would keep ids[-0:], the whole prompt
        raise PromptDoesNotFitError(f"request {key!r}: a prompt budget of {budget} tokens cannot keep a head and a "
                                    "tail")
    if decoding not in MIDDLE_DECODINGS:
        raise ValueError(f"request {key!r}: decoding {decoding!r} is not one of {list(MIDDLE_DECODINGS)}")
    ids = encode(prompt)
    if len(ids) <= budget:
        return prompt, False
    if decoding == "one_sequence":
        return decode(list(ids[:budget // 2]) + list(ids[-budget // 2:])), True
    half = budget // 2
    return decode(ids[:half]) + decode(ids[-half:]), True


def policy_for_task(benchmark: str, task: str, declared: str, overrides: Mapping[str, str] | None = None) -> str:
    """The policy of an instance: an override (key ``benchmark/task``, the bare ``task``, or ``"*"`` for
    every task) wins over the policy its task file declares (``truncation:``, see lc_pipeline/tasks/)."""
    overrides = overrides or {}
    for key, value in overrides.items():
        validate_policy(value, f"truncation override for task {key!r}")
    for key in (f"{benchmark}/{task}", task, "*"):
        if key in overrides:
            return overrides[key]
    return validate_policy(declared, f"task {benchmark}/{task}")


def split_documents(context: str) -> list[str]:
    """The context's document blocks, in order; joined with :data:`DOCUMENT_SEPARATOR` they
    give the context back. Our "Document [i] (Title: ...)" blocks; else a released benchmark's own ones (the
    first splitter of ``tasks.registry.DOCUMENT_SPLITTERS`` that finds more than one); else the context whole."""
    if not context:
        return []
    if context.startswith("Document ["):
        return _DOCUMENT_START.split(context)
    for name in DOCUMENT_SPLITTERS.names():
        blocks = DOCUMENT_SPLITTERS.get(name)(context)
        if len(blocks) > 1:
            return blocks
    return [context]


def middle_truncate(ids: Sequence[int], budget: int) -> tuple[list[int], bool]:
    """Keep the first ``budget // 2`` and the last ``budget - budget // 2`` tokens.

    Returns ``(ids, truncated)``; ``ids`` is returned whole (as a new list) when it fits.

    >>> middle_truncate([1, 2, 3, 4, 5, 6, 7], 5)
    ([1, 2, 5, 6, 7], True)
    >>> middle_truncate([1, 2, 3], 5)
    ([1, 2, 3], False)
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(f"budget must be an int, got {budget!r}")
    # A budget of 1 cannot keep both a head and a tail, so the question or the
    # instruction would silently disappear.
    if budget < 2:
        raise ValueError(f"middle truncation needs a budget of at least 2 tokens, got {budget}")
    ids = list(ids)
    if len(ids) <= budget:
        return ids, False
    head = budget // 2
    tail = budget - head
    return ids[:head] + ids[len(ids) - tail :], True


def drop_documents(doc_tokens: Sequence[int], fixed_tokens: int, budget: int) -> list[int]:
    """Indices of the documents kept (Loong's rule): in order, each one that still fits.

    >>> drop_documents([5, 9, 3, 2], fixed_tokens=4, budget=15)
    [0, 2, 3]
    """
    kept, used = [], fixed_tokens
    for i, n in enumerate(doc_tokens):
        if used + n > budget:
            continue  # skip it, keep scanning: a later, shorter document may still fit
        kept.append(i)
        used += n
    return kept


@dataclass(frozen=True)
class FittedPrompt:
    ids: list[int]  # the full model input (chat template included), within the budget; [] when skipped
    text: str  # the user prompt actually used (after truncation, before the template); "" when skipped
    original_tokens: int  # len of the full model input before truncation (exact, also when skipped)
    truncated: bool
    policy: str
    dropped_documents: int = 0
    # Policy ``skip`` and the prompt does not fit: nothing is to be sent (``ids`` is empty, ``truncated`` False).
    skipped: bool = False


class PromptDoesNotFitError(ValueError):
    """Even the parts a policy never cuts (instruction, question, template) exceed the budget."""


_MAX_ROUNDS = 12


def fit_prompt(
    prompt: str,
    budget: int,
    *,
    render: Callable[[str], list[int]],
    encode: Callable[[str], list[int]],
    decode: Callable[[Sequence[int]], str],
    policy: str = MIDDLE,
    context: str | None = None,
    key: str = "?",
) -> FittedPrompt:
    """Truncate ``prompt`` with ``policy`` until ``render(user_text)`` has at most ``budget`` ids.

    ``render`` maps a user prompt to the full model input (chat template, special tokens);
    ``encode``/``decode`` are the model's tokenizer on plain text. ``context`` is the part of
    ``prompt`` that ``end_of_context`` and ``drop_documents`` may cut; it must occur in it.
    Decoding and re-encoding can merge tokens differently at a cut, so the result is
    re-rendered and cut further until it fits. Policy ``skip`` cuts nothing: a prompt over the budget
    comes back with ``skipped=True``, no ids and its exact rendered length in ``original_tokens``.
    """
    validate_policy(policy, f"request {key!r}")
    if prompt_budget_name(policy) is not None:
        raise ValueError(f"request {key!r}: policy {policy!r} cuts the prompt before the chat template to the model's "
                         "prompt budget: it needs the model's tokenizer and registry name "
                         "(generate/prompting.fit_request); this path renders through a server's chat template")
    if budget < 2:
        raise PromptDoesNotFitError(f"request {key!r}: a budget of {budget} tokens leaves no room for a prompt")
    ids = render(prompt)
    original = len(ids)
    if original <= budget:
        return FittedPrompt(ids, prompt, original, False, policy)
    if policy == SKIP:
        return FittedPrompt([], "", original, False, policy, skipped=True)

    if policy == MIDDLE:
        user_ids = encode(prompt)
        overhead = original - len(user_ids)  # template and special tokens around the user text
        target = budget - overhead
        for _ in range(_MAX_ROUNDS):
            if target < 2:
                raise PromptDoesNotFitError(
                    f"request {key!r}: the chat template alone needs {overhead} tokens of the {budget} available"
                )
            kept, _ = middle_truncate(user_ids, target)
            text = decode(kept)
            ids = render(text)
            if len(ids) <= budget:
                return FittedPrompt(ids, text, original, True, policy)
            target -= len(ids) - budget
        raise PromptDoesNotFitError(f"request {key!r}: middle truncation did not converge to {budget} tokens")

    if not context:
        raise ValueError(f"request {key!r}: truncation policy {policy!r} needs the instance's context; it is empty")
    at = prompt.find(context)
    if at < 0:
        raise ValueError(f"request {key!r}: the instance's context does not occur in its prompt ({policy!r} cuts it)")
    prefix, suffix = prompt[:at], prompt[at + len(context) :]
    fixed = original - len(encode(context))  # everything the policy keeps whole
    if fixed > budget:
        raise PromptDoesNotFitError(
            f"request {key!r}: instruction, question and template need {fixed} tokens, more than the budget {budget}"
        )

    if policy == END_OF_CONTEXT:
        ctx_ids = encode(context)
        keep = budget - fixed
        for _ in range(_MAX_ROUNDS):
            text = prefix + decode(ctx_ids[: max(keep, 0)]) + suffix
            ids = render(text)
            if len(ids) <= budget:
                return FittedPrompt(ids, text, original, True, policy)
            if keep <= 0:
                break
            keep -= len(ids) - budget
        raise PromptDoesNotFitError(f"request {key!r}: end-of-context truncation did not converge to {budget} tokens")

    # DROP_DOCUMENTS: each document costs its tokens plus a separator.
    docs = split_documents(context)
    costs = [len(encode(d + DOCUMENT_SEPARATOR)) for d in docs]
    target = budget
    for _ in range(_MAX_ROUNDS):
        kept = drop_documents(costs, fixed, target)
        text = prefix + DOCUMENT_SEPARATOR.join(docs[i] for i in kept) + suffix
        ids = render(text)
        if len(ids) <= budget:
            return FittedPrompt(ids, text, original, True, policy, dropped_documents=len(docs) - len(kept))
        if not kept:
            break
        target -= len(ids) - budget
    raise PromptDoesNotFitError(f"request {key!r}: dropping documents did not bring the prompt to {budget} tokens")
