"""Rendering and fitting prompts the same way for every backend.

Chat models get their *own* chat template (from the tokenizer or the GGUF metadata), or the Jinja file of
their registry entry's ``chat_template_file`` instead (recorded as ``chat_template_source`` "file:<name>"). The
template writes every special token itself (``<|im_start|>``, a BOS where the model wants
one), so the rendered text is tokenized *without* adding special tokens: no double BOS.
Base models (``chat_template: false``) get the plain prompt, tokenized with the special
tokens the vocabulary asks for (typically a BOS). Generation stops on the model's EOS ids.

Tokenizer adapters wrap Hugging Face tokenizers, llama.cpp vocabularies and tiktoken behind
one small interface; model libraries are imported only when an adapter is built.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lc_pipeline.construct.truncation import (
    FittedPrompt,
    PromptDoesNotFitError,
    cut_prompt_middle,
    fit_prompt,
    prompt_budget,
    prompt_budget_name,
)
from lc_pipeline.generate.base import GenerationRequest, GenerationResult, ids_hash
from lc_pipeline.generate.registry import ModelSpec, resolve_model_path
from lc_pipeline.settings import env


class PromptTokenizer(Protocol):
    name: str
    eos_ids: list[int]
    bos_id: int | None  # the vocabulary's BOS id; None when it has none

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` with special-token strings parsed but none added."""
        ...

    def encode_plain_prompt(self, text: str) -> list[int]:
        """Ids of a raw (base-model) prompt, with the special tokens the vocabulary adds (BOS)."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def decode_text(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` without special tokens, as Hugging Face's ``decode(ids, skip_special_tokens=True)``
        gives it (the ``prompt_middle`` cut decodes each half so, as LongBench's ``pred.py`` does)."""
        ...

    def chat_text(self, messages: list[dict[str, str]], template: str | None = None) -> str | None:
        """The chat template applied (with the assistant turn opened): ``template`` if given, else the active one
        (the registry's ``chat_template_file`` or the model's own); None if there is none."""
        ...


class HFTokenizer:
    """A Hugging Face tokenizer (also what transformers builds from a GGUF).

    ``chat_template``: a template (a registry entry's ``chat_template_file``) used instead of the tokenizer's
    own, which stays in ``own_chat_template``; the wrapped tokenizer is not changed (it may be shared).
    """

    def __init__(self, tok: Any, name: str, chat_template: str | None = None) -> None:
        self.tok, self.name = tok, name
        eos = tok.eos_token_id
        self.eos_ids = [eos] if eos is not None else []
        self.bos_id: int | None = tok.bos_token_id
        self.own_chat_template: str | None = tok.chat_template or None
        self.chat_template: str | None = chat_template if chat_template is not None else self.own_chat_template

    def encode(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False).input_ids

    def encode_plain_prompt(self, text: str) -> list[int]:
        return self.tok(text).input_ids

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def decode_text(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)  # the tokenizer's own clean-up setting

    def chat_text(self, messages: list[dict[str, str]], template: str | None = None) -> str | None:
        template = template or self.chat_template
        if not template:
            return None
        return self.tok.apply_chat_template(messages, chat_template=template, add_generation_prompt=True,
                                            tokenize=False)


class LlamaCppTokenizer:
    """The vocabulary and chat template of a GGUF, through llama-cpp-python.

    ``chat_template``: a template (a registry entry's ``chat_template_file``) used instead of the GGUF's own
    (``tokenizer.chat_template`` in its metadata, kept in ``own_chat_template``).
    """

    def __init__(self, llm: Any, name: str, chat_template: str | None = None) -> None:
        self.llm, self.name = llm, name
        self.eos_ids = sorted({llm.token_eos()} | self._eog_ids())
        self.bos_id: int | None = llm.token_bos() if llm.token_bos() >= 0 else None
        self.own_chat_template: str | None = llm.metadata.get("tokenizer.chat_template") or None
        self.chat_template: str | None = chat_template if chat_template is not None else self.own_chat_template
        self._formatters: dict[str, Any] = {}

    def _formatter(self, template: str) -> Any:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if template not in self._formatters:
            llm = self.llm
            bos = llm.detokenize([llm.token_bos()], special=True).decode() if llm.token_bos() >= 0 else ""
            eos = llm.detokenize([llm.token_eos()], special=True).decode() if llm.token_eos() >= 0 else ""
            self._formatters[template] = Jinja2ChatFormatter(template=template, bos_token=bos, eos_token=eos)
        return self._formatters[template]

    def _eog_ids(self) -> set[int]:
        # End-of-generation ids besides EOS (e.g. <|eot_id|>): llama.cpp stops on all of them.
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        return {t for t in range(self.llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)}

    def encode(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def encode_plain_prompt(self, text: str) -> list[int]:
        # add_bos=True adds a BOS only where the vocabulary says the model wants one.
        return self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    def decode(self, ids: Sequence[int]) -> str:
        # A middle cut can split a multi-byte character; drop the fragment rather than fail.
        return self.llm.detokenize(list(ids), special=True).decode("utf-8", errors="ignore")

    def decode_text(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(ids), special=False).decode("utf-8", errors="ignore")

    def chat_text(self, messages: list[dict[str, str]], template: str | None = None) -> str | None:
        template = template or self.chat_template
        if not template:
            return None
        return self._formatter(template)(messages=messages).prompt


class TiktokenTokenizer:
    """OpenAI's encodings, for API models whose tokenizer is not published as a file."""

    # The chat wrapping of one user message costs a few tokens; HELMET reserves a buffer for APIs.
    CHAT_OVERHEAD = 16

    def __init__(self, encoding: str) -> None:
        from lc_pipeline.construct.tokens import TokenCounter

        # The offline copy of the ranks (the pipeline never downloads BPE files).
        self.enc, self.name, self.eos_ids = TokenCounter.load(encoding).encoding, f"tiktoken:{encoding}", []
        self.bos_id: int | None = None

    def encode(self, text: str) -> list[int]:
        return self.enc.encode(text, disallowed_special=())

    encode_plain_prompt = encode

    def decode(self, ids: Sequence[int]) -> str:
        return self.enc.decode(list(ids))

    decode_text = decode  # tiktoken's encodings have no special tokens in ordinary text

    own_chat_template: str | None = None
    chat_template: str | None = None

    def chat_text(self, messages: list[dict[str, str]], template: str | None = None) -> str | None:
        return None  # an API model's template is the server's


EXTRA_BUFTS_ENV = "LCP_LLAMACPP_EXTRA_BUFTS"


def disable_llamacpp_extra_buffer_types() -> None:
    """Load llama.cpp weights into plain CPU buffers, not its repacked "extra buffer types".

    On CPUs with AMX, llama-cpp-python 0.3.36 repacks Q4_1 weights for AMX and then segfaults
    in ``ggml_backend_amx_mul_mat`` on the first decode (seen here with SmolLM2's Q4_1 GGUF).
    ``Llama`` exposes no switch for ``use_extra_bufts``, so the default model parameters are
    wrapped once per process. ``LCP_LLAMACPP_EXTRA_BUFTS=1`` keeps llama.cpp's default.
    """
    if env(EXTRA_BUFTS_ENV) == "1":
        return
    import llama_cpp.llama_cpp as capi

    if getattr(capi.llama_model_default_params, "_lcp_plain_buffers", False):
        return
    original = capi.llama_model_default_params

    def plain_buffer_params():  # noqa: ANN202
        params = original()
        params.use_extra_bufts = False
        return params

    plain_buffer_params._lcp_plain_buffers = True  # type: ignore[attr-defined]
    capi.llama_model_default_params = plain_buffer_params


def load_llamacpp_vocab(gguf_path: str, **kwargs: Any) -> Any:
    """A llama.cpp model handle; ``vocab_only=True`` reads the vocabulary in well under a second."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise ImportError(
            "llama-cpp-python is not installed; install the extra: pip install 'lc_pipeline[llamacpp]'"
        ) from exc
    disable_llamacpp_extra_buffer_types()
    return Llama(model_path=gguf_path, verbose=False, **kwargs)


def load_tokenizer(spec: ModelSpec) -> PromptTokenizer:
    """A tokenizer for ``spec`` without loading weights: ``spec.tokenizer`` if set, else the model's own.

    ``tiktoken:<encoding>`` -> tiktoken; a GGUF -> llama.cpp's vocabulary when llama-cpp-python
    is installed (fast), else transformers' GGUF conversion; otherwise a Hugging Face tokenizer
    from the directory or id. With ``spec.chat_template_file`` the tokenizer renders chats with that file.
    """
    template = spec.chat_template_text()
    source = spec.tokenizer
    if source is not None and source.startswith("tiktoken:"):
        return TiktokenTokenizer(source.removeprefix("tiktoken:"))
    if source is None:
        path = resolve_model_path(spec)
        if spec.gguf_file is not None and os.path.isdir(path):
            gguf = os.path.join(path, spec.gguf_file)
            try:
                return LlamaCppTokenizer(load_llamacpp_vocab(gguf, vocab_only=True), f"gguf:{spec.gguf_file}",
                                         chat_template=template)
            except ImportError:
                return hf_tokenizer(spec, f"gguf:{spec.gguf_file}")
    else:
        path = os.path.expanduser(source)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=os.path.isdir(path))
    return HFTokenizer(tok, path, chat_template=template)


def hf_tokenizer(spec: ModelSpec, name: str) -> HFTokenizer:
    """``spec``'s Hugging Face tokenizer without its weights: converted from its GGUF when it has one (read from
    the cached conversion the transformers backend loads, when there is one), else from its directory (never the
    Hub for a local one) or id; rendering with its ``chat_template_file`` when set."""
    from transformers import AutoTokenizer

    from lc_pipeline.generate.gguf_conversion import cached_conversion

    path = resolve_model_path(spec)
    if spec.gguf_file is not None:
        converted = cached_conversion(path, spec.gguf_file)
        tok = (AutoTokenizer.from_pretrained(converted, local_files_only=True) if converted is not None
               else AutoTokenizer.from_pretrained(path, gguf_file=spec.gguf_file, local_files_only=True))
    else:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=os.path.isdir(path))
    return HFTokenizer(tok, name, chat_template=spec.chat_template_text())


def messages_for(spec: ModelSpec, user_text: str, system: str | None = None) -> list[dict[str, str]]:
    """The chat of one user prompt: a system turn first when there is one (``system``, a request's own from an
    official protocol's API decoding, in place of the model's ``system_prompt``)."""
    messages = []
    system = system if system is not None else spec.system_prompt
    if system is not None:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user_text})
    return messages


def chat_ids(spec: ModelSpec, tok: PromptTokenizer, user_text: str, system: str | None = None) -> list[int] | None:
    """Token ids of one user prompt in the chat template (rendered once), None when the tokenizer has none;
    ``system`` as in :func:`messages_for`."""
    text = tok.chat_text(messages_for(spec, user_text, system))
    return None if text is None else tok.encode(text)  # the template wrote the special tokens: add none


def render_ids(spec: ModelSpec, tok: PromptTokenizer, user_text: str, chat: bool = True,
               system: str | None = None) -> list[int]:
    """Token ids of the full model input for one user prompt; ``chat=False`` (the task's switch) feeds a
    chat model the plain prompt, as a base model gets it; ``system`` as in :func:`messages_for` (chat only)."""
    if not (spec.chat_template and chat):
        return tok.encode_plain_prompt(user_text)
    ids = chat_ids(spec, tok, user_text, system)
    if ids is None:
        raise ValueError(
            f"model {spec.slug!r}: the tokenizer {tok.name!r} has no chat template; set chat_template: false "
            "to feed raw prompts (base models)"
        )
    return ids


def chat_template_source(spec: ModelSpec, chat: bool = True) -> str:
    """Where the template of a request comes from: ``"model"`` (the model's own), ``"file:<file name>"`` (the
    registry entry's ``chat_template_file``), ``"none"`` (the plain prompt: a base model, or a task that asks
    for it)."""
    if not (spec.chat_template and chat):
        return "none"
    if spec.chat_template_file is not None:
        return f"file:{os.path.basename(spec.chat_template_file)}"
    return "model"


def fed_prompt_fields(spec: ModelSpec, tok: PromptTokenizer, ids: Sequence[int], chat: bool = True) -> dict:
    """The GenerationResult fields that say what was fed: ``prompt_ids_hash``, ``bos_tokens`` (the BOS ids
    among ``ids``), ``chat_template_source``."""
    bos = getattr(tok, "bos_id", None)
    return {"prompt_ids_hash": ids_hash(ids), "bos_tokens": sum(1 for i in ids if i == bos) if bos is not None else 0,
            "chat_template_source": chat_template_source(spec, chat)}


def fit_request(spec: ModelSpec, tok: PromptTokenizer, request: GenerationRequest) -> FittedPrompt:
    """``request``'s prompt rendered and truncated so that prompt + max_new_tokens fit the window; under a
    ``prompt_middle:<budget>`` policy (a benchmark's official protocol), the prompt cut to its budget before the
    template instead (:func:`fit_prompt_budget`). A request with an ``input_budget`` (an official protocol's limit
    on the rendered input, HELMET's L - max_new_tokens) is cut to it where it is below the window's budget; never
    past the window (generate/partition.py notes the rows where the authors' harness would go past it)."""
    if prompt_budget_name(request.truncation) is not None:
        return fit_prompt_budget(spec, tok, request)
    budget = spec.max_model_len - request.max_new_tokens
    if budget < 2:
        raise ValueError(
            f"model {spec.slug!r}, request {request.key!r}: max_new_tokens {request.max_new_tokens} leaves no room "
            f"for a prompt in max_model_len {spec.max_model_len}"
        )
    if request.input_budget is not None:
        budget = min(budget, request.input_budget)
    return fit_prompt(
        request.prompt,
        budget,
        render=lambda text: render_ids(spec, tok, text, request.chat_template, request.system),
        encode=tok.encode,
        decode=tok.decode,
        policy=request.truncation,
        context=request.context,
        key=request.key,
    )


def fit_prompt_budget(spec: ModelSpec, tok: PromptTokenizer, request: GenerationRequest,
                      render: Callable[[str, bool], list[int]] | None = None) -> FittedPrompt:
    """Policy ``prompt_middle:<budget>``: the user prompt, counted as the plain prompt is encoded (a BOS the
    vocabulary adds included), is cut in the middle to the budget the protocol gives this model
    (``PromptBudget.tokens(spec.slug, spec.max_model_len)``), decoded without special tokens as the budget says
    (each half on its own and the two joined, or the kept ids at once: ``PromptBudget.decode``); then rendered as any request is (the model's chat template unless the task feeds the plain
    prompt) and cut no further: the authors' budget already leaves the answer its room (LongBench: window - 500).
    Where the template and the answer need more than that room (a 512-token summary after a long chat template),
    the prompt is still fed as the authors' harness feeds it, and the answer may stop at the window (finish_reason
    "length"). A rendered prompt longer than the window itself cannot be fed and is an error naming the request.

    ``render(text, chat)``: the ids the model is fed for a user text (default :func:`render_ids`; the openai
    backend's chat mode gives the ids the server's template should produce)."""
    if render is None:
        def render(text: str, chat: bool) -> list[int]:
            return render_ids(spec, tok, text, chat, request.system)
    rule = prompt_budget(request.truncation, request.key)
    budget = rule.tokens(spec.slug, spec.max_model_len)
    text, cut = cut_prompt_middle(request.prompt, budget, encode=tok.encode_plain_prompt, decode=tok.decode_text,
                                  key=request.key, decoding=rule.decode)
    ids = render(text, request.chat_template)
    original = len(render(request.prompt, request.chat_template)) if cut else len(ids)
    if len(ids) > spec.max_model_len:
        raise PromptDoesNotFitError(
            f"model {spec.slug!r}, request {request.key!r}: the prompt cut to its budget of {budget} tokens "
            f"({rule.source or request.truncation}) renders to {len(ids)} tokens, more than max_model_len "
            f"{spec.max_model_len}")
    return FittedPrompt(ids, text, original, cut, request.truncation)


def skipped_result(request: GenerationRequest, fitted: FittedPrompt, template_source: str) -> GenerationResult:
    """The result of a request not sent: policy ``skip`` and a prompt over the window (``fitted.skipped``).

    Nothing was fed or generated: output "", prompt and completion tokens 0, latency 0, finish_reason "stop"
    (the schema's two reasons; the status says why), ``original_prompt_tokens`` the prompt's exact length in
    the model's tokens, status "skipped" (metric_scores leaves it unscored; the tables count it)."""
    return GenerationResult(
        key=request.key, output="", prompt_tokens=0, original_prompt_tokens=fitted.original_tokens, truncated=False,
        completion_tokens=0, finish_reason="stop", latency_s=0.0, truncation_policy=fitted.policy,
        prompt_ids_hash="", bos_tokens=None, chat_template_source=template_source, status="skipped",
    )


def to_send(fitted: Sequence[FittedPrompt]) -> list[int]:
    """Indices of the fitted prompts that go to the model (every one but those skipped), in order."""
    return [i for i, f in enumerate(fitted) if not f.skipped]
