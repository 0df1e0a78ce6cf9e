"""The generation interface every backend implements.

A backend takes user prompts (the ``prompt`` column of the instances table), renders them
the way the model expects (its own chat template, or the plain prompt for base models),
fits them to the model's window with the request's truncation policy, decodes greedily (or samples at the
request's ``temperature`` with its ``seed``, where a benchmark's official protocol asks for it) and reports what
it actually fed the model, so every backend fills the same generations row.

Backends: ``transformers`` (CPU or one GPU, left-padded batches), ``llamacpp``
(in-process llama-cpp-python), ``openai`` (any OpenAI-compatible server, concurrent async
requests), ``vllm`` (offline engine, a whole partition submitted at once). They are
registered by name in generate/backends.py, whose ``make_generator`` builds one for a
``ModelSpec``; this module imports none of them.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from lc_pipeline.construct.truncation import MIDDLE, validate_policy
from lc_pipeline.generate.registry import ModelSpec

SERVER_DEFAULT = "server default"  # what a row records for a field left to the API server (ApiDecoding)


@dataclass(frozen=True)
class ApiDecoding:
    """How an official protocol's requests go to an API server (the ``openai`` backend), where the authors' API
    script differs from what we send by default (``max_tokens`` = the request's ``max_new_tokens``, temperature 0,
    the model's own system prompt): declared by a benchmark's protocol module (``official_api_decoding(task)``,
    generate/partition.py), never by a branch on its name.

    ``send_max_tokens`` False: no ``max_tokens`` (the server's default: it may answer up to the window);
    ``send_temperature`` False: no ``temperature`` (the server's default, 1.0 on OpenAI's API) instead of 0, so the
    server samples; ``system``: a system turn before the prompt, in place of the model's ``system_prompt`` (None:
    the model's; a request without the chat template sends its plain prompt, with no turn). ``source``: where the
    authors do so (repository, file, commit), recorded in the row.
    ``read_system``: reads the system turn from the authors' file when it is needed (:meth:`resolved`: only for a
    request that goes to a server), so a run on a local engine does not need that file.

    Local engines (transformers, llama.cpp, vLLM) leave it aside: they need a cap, and decode greedily up to
    ``max_new_tokens`` as the authors' local scripts do; generate/partition.py notes that in their rows."""

    send_max_tokens: bool = True
    send_temperature: bool = True
    system: str | None = None
    source: str = ""
    read_system: Callable[[], str] | None = field(default=None, compare=False, repr=False)

    @property
    def changes(self) -> bool:
        """Whether it changes anything we send (else a request carries none)."""
        return not (self.send_max_tokens and self.send_temperature and self.system is None
                    and self.read_system is None)

    def resolved(self) -> ApiDecoding:
        """This decoding with its system turn read (``read_system``), ready to go into requests."""
        if self.read_system is None:
            return self
        system = self.read_system()
        if not isinstance(system, str):
            raise ValueError(f"API decoding of {self.source or 'an official protocol'}: the system turn read is a "
                             f"{type(system).__name__}, not a string")
        return replace(self, system=system, read_system=None)

    def params(self) -> dict:
        """What it adds to a row's sampling params (and through them to the cache key): the fields left to the
        server as :data:`SERVER_DEFAULT`, the system turn and the source; {} when it changes nothing."""
        if not self.changes:
            return {}
        if self.read_system is not None:
            raise ValueError(f"API decoding of {self.source or 'an official protocol'}: its system turn is not read "
                             "yet (ApiDecoding.resolved)")
        out: dict = {"api_decoding": self.source or "official protocol"}
        if not self.send_max_tokens:
            out["max_tokens"] = SERVER_DEFAULT
        if not self.send_temperature:
            out.update(decoding=SERVER_DEFAULT, temperature=SERVER_DEFAULT)
        if self.system is not None:
            out["system_prompt"] = self.system
        return out


@dataclass
class GenerationRequest:
    key: str  # e.g. the cache key or instance_id; echoed back in the result
    prompt: str  # the user message, before any chat template
    max_new_tokens: int
    truncation: str = MIDDLE  # the task's truncation policy (construct/truncation.py)
    context: str | None = None  # the part of ``prompt`` that end_of_context / drop_documents may cut
    # The task's switch (its task file's ``chat_template``): False feeds the plain prompt even to a chat model
    # (HELMET runs RAG, recall and re-rank as completions; LongBench its few-shot and code tasks).
    chat_template: bool = True
    stop: tuple[str, ...] = ()  # the task's stop sequences: the output is cut before the first one
    # Run as released: the source record's own id (instances' ``record_id``; "" otherwise). The ``imported``
    # backend answers by it; model backends ignore it.
    record_id: str = ""
    # The prompt's exact token count as the instances recorded it (``input_tokens``) and the tokenizer that
    # counted it (``instances.tokenizer``, e.g. "cl100k_base"); a backend counting with the same one may use it
    # instead of counting again (the ``imported`` backend). None / "": not known.
    counted_tokens: int | None = None
    counted_with: str = ""
    # Sampling, where a benchmark's official protocol asks for it (LongBench v2's ``pred.py``: temperature 0.1):
    # None decodes greedily (every other request); set, the backend samples at this temperature with top_p 1 and
    # no top-k, seeded with ``seed`` (:func:`sampling_seed`: from the instance id, so a rerun draws the same).
    temperature: float | None = None
    seed: int = 0
    # The authors' budget for the rendered input when it is below the window's (HELMET: the level L -
    # max_new_tokens, official protocol, fidelity review HE8): the fit cuts to min(it, window - max_new_tokens).
    # None: the window's budget.
    input_budget: int | None = None
    # An official protocol's API decoding (:class:`ApiDecoding`: no max_tokens, the server's temperature, a system
    # turn), set only for a generator that honours it (``honours_api_decoding``: the openai backend); local engines
    # get None and cap the answer at ``max_new_tokens``, which every request keeps.
    api: ApiDecoding | None = None

    def __post_init__(self) -> None:
        validate_policy(self.truncation, f"request {self.key!r}")
        if self.max_new_tokens < 1:
            raise ValueError(f"request {self.key!r}: max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature is not None and not (math.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"request {self.key!r}: temperature must be a finite number > 0 (None: greedy), "
                             f"got {self.temperature}")
        if not 0 <= self.seed < 2**31:
            raise ValueError(f"request {self.key!r}: seed must be in [0, 2^31), got {self.seed}")
        if self.input_budget is not None and self.input_budget < 2:
            raise ValueError(f"request {self.key!r}: input_budget must be >= 2 tokens, got {self.input_budget}")
        if self.api is not None and self.temperature is not None and not self.api.send_temperature:
            raise ValueError(f"request {self.key!r}: a sampling temperature ({self.temperature}) and the API "
                             f"decoding's server-default temperature ({self.api.source}) contradict each other")

    @property
    def sampled(self) -> bool:
        """Whether the request samples (``temperature`` set) rather than decoding greedily."""
        return self.temperature is not None

    @property
    def system(self) -> str | None:
        """The protocol's system turn (:class:`ApiDecoding`), None: the model's own."""
        return self.api.system if self.api is not None else None


@dataclass
class GenerationResult:
    key: str
    output: str
    prompt_tokens: int  # tokens fed to the model, chat template included, after truncation
    original_prompt_tokens: int  # the same count before truncation
    truncated: bool
    completion_tokens: int  # generated tokens, without padding and the stop token
    finish_reason: str  # "stop" (a stop token or sequence ended it) | "length" (max_new_tokens reached)
    latency_s: float  # the request's own wall time, or its batch's divided by the batch size
    truncation_policy: str = MIDDLE  # the policy in force for the request (applied iff ``truncated``)
    # What was fed (prompting.fed_prompt_fields; the prompt-format guard reads them): sha256 of the token ids,
    # the BOS ids among them, where the chat template came from. "" / None where a server renders the prompt.
    prompt_ids_hash: str = ""
    bos_tokens: int | None = None
    chat_template_source: str = ""
    # "" (derived from the output and finish_reason when the row is written: answered / empty / cut), or a
    # status the backend decided: "skipped" (policy skip, nothing sent), "invalid" (thinking ran out).
    status: str = ""
    thinking: str = ""  # a reasoning model's thoughts, when the server returns them apart from the answer


FINISH_REASONS = ("stop", "length")


def ids_hash(ids: Sequence[int]) -> str:
    """sha256 (16 hex) of a token-id sequence: two rows fed the same ids have the same hash."""
    return hashlib.sha256(json.dumps(list(map(int, ids))).encode()).hexdigest()[:16]


@runtime_checkable
class Generator(Protocol):
    backend: str
    model_id: str

    def sampling_params(self) -> dict:
        """Decoding settings, recorded (as JSON) with every generation."""
        ...

    def generate(
        self,
        requests: Sequence[GenerationRequest],
        progress: Callable[[int], None] | None = None,
    ) -> list[GenerationResult]:
        """One result per request, in request order. As requests finish, ``progress(n)`` gets
        the number just finished (an increment: ``tqdm.update`` fits)."""
        ...


def stream_results(
    generator: Generator,
    requests: Sequence[GenerationRequest],
    progress: Callable[[int], None] | None,
    on_result: Callable[[GenerationResult], None],
) -> list[GenerationResult]:
    """``generator.generate(requests, progress)``, each result also handed to ``on_result``: as soon as it
    exists for a generator that says it can (``streams_results``: its ``generate`` takes ``on_result``, e.g.
    the openai backend, which stores every answer as it arrives), else once the call has returned them all."""
    if getattr(generator, "streams_results", False):
        return generator.generate(requests, progress=progress, on_result=on_result)  # type: ignore[call-arg]
    results = generator.generate(requests, progress=progress)
    for result in results:
        on_result(result)
    return results


def greedy_params(spec: ModelSpec, **extra) -> dict:
    """The decoding settings every backend records: greedy, the window, the chat settings,
    plus the backend's own (``extra``)."""
    return {
        "decoding": "greedy",
        "max_model_len": spec.max_model_len,
        "chat_template": spec.chat_template,
        "system_prompt": spec.system_prompt,
        **extra,
    }


def sampling_seed(instance_id: str) -> int:
    """The seed of a sampled request: sha256 of the instance id, 31 bits (every engine takes it: torch, vLLM,
    llama.cpp, an OpenAI-compatible server's ``seed``). Fixed per instance, whatever the batch or the order."""
    return int(hashlib.sha256(instance_id.encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def request_decoding(request: GenerationRequest) -> dict:
    """What a request adds to the generator's ``sampling_params`` (its row records them, its cache key hashes
    them): a sampled one ``decoding`` "sample", ``temperature``, ``top_p`` 1.0, ``top_k`` 0 (none) and ``seed``;
    an API decoding's fields (:meth:`ApiDecoding.params`); {} for a greedy request without one."""
    out = request.api.params() if request.api is not None else {}
    if request.temperature is not None:
        out.update(decoding="sample", temperature=request.temperature, top_p=1.0, top_k=0, seed=request.seed)
    return out


def sampling_params_json(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def sampling_params_hash(params: dict) -> str:
    return hashlib.sha256(sampling_params_json(params).encode()).hexdigest()[:16]


def cache_key(prompt: str, max_new_tokens: int, truncation: str, model_fingerprint: str, sampling_hash: str,
              plain_prompt: bool = False, stop: Sequence[str] = (), record_id: str = "",
              input_budget: int | None = None) -> str:
    """What a generation depends on: the prompt, the model's settings and the decoding.

    An unchanged rerun finds every key in the generation store and costs nothing; a change
    to any of these produces new keys, never a stale reuse. ``plain_prompt`` (a chat model fed the
    raw prompt, as its task asks) and ``stop`` enter the key only when set, so keys of requests
    without them are what they always were. ``record_id`` is set only for a generator whose output depends
    on the record rather than the prompt (the ``imported`` backend: two records with the same prompt may
    carry different predictions, so they must not share a key). ``input_budget`` (a protocol's budget below the
    window's, :class:`GenerationRequest`) enters only when set. A sampled request's temperature and seed enter
    through ``sampling_hash`` (the generator's params with :func:`request_decoding`'s).
    """
    parts: list = [hashlib.sha256(prompt.encode()).hexdigest(), max_new_tokens, truncation, model_fingerprint,
                   sampling_hash]
    if plain_prompt:
        parts.append("plain-prompt")
    if stop:
        parts.append(["stop", *stop])
    if record_id:
        parts.append(["record", record_id])
    if input_budget is not None:
        parts.append(["input-budget", input_budget])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def cut_at_stop(output: str, stop: Sequence[str]) -> tuple[str, bool]:
    """(``output`` before the first of the ``stop`` sequences, whether one was found)."""
    ends = [i for i in (output.find(s) for s in stop if s) if i >= 0]
    return (output[: min(ends)], True) if ends else (output, False)
