"""NLI judges for ALCE's citation metrics (spec helmet.md §3: "ask the NLI model ``google/t5_xxl_true_nli_mixture``").

A backend answers "does the premise entail the hypothesis?" for a batch of (premise, hypothesis) pairs with
raw replies, and reads a :class:`~lc_pipeline.score.citations.Verdict` from a reply. Four backends:

* ``hf_classifier`` — a local Hugging Face sequence-classification model (an MNLI-style cross-encoder): the
  premise and hypothesis are encoded as a pair (truncated to the model's window), the reply is the name of
  the argmax label, entailed iff it is the label whose name contains "entail" (and not "not"/"non").
* ``hf_seq2seq`` — a TRUE-style seq2seq model (the spec's ``google/t5_xxl_true_nli_mixture``): input
  ``premise: {p} hypothesis: {h}``, greedy, at most 10 new tokens (as the authors' code); the decoded reply
  "1" is entailed, "0" not, anything else has no verdict (counted, and not entailed, as TRUE's scorer).
* ``judge`` — the configured LLM judge (an OpenAI-compatible server, through resources/judge.py's client)
  asked with :data:`ENTAILMENT_PROMPT` (our wording).
* ``model`` — any model of the pipeline's registry through its own generation backend (e.g. the built-in
  SmolLM2 run in-process by llama.cpp), asked the same prompt.

The judge and model replies are read by :func:`parse_yes_no`: a reply starting with yes/no/1/0 (after
punctuation), else one containing exactly one of the words yes / no; otherwise status ``no_verdict``.

:class:`NLIJudge` puts a backend behind a cache keyed by (backend identity, premise, hypothesis): each pair is
asked once per run, and a persistent store (any ``get_many(keys)`` / ``put(key, model, reply)``, e.g. the
judge's SQLite cache class) keeps replies across runs, so a rerun asks nothing already answered. Every
backend has a stable ``description`` written on each row (paths, model names, server host: never a key).
Pure: no Dagster; torch / transformers are imported only when an hf backend loads its model.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from lc_pipeline.score.citations import NO_VERDICT, OK, Verdict

BACKENDS = ("hf_classifier", "hf_seq2seq", "judge", "model")
TRUE_MAX_NEW_TOKENS = 10  # the authors' _run_nli_autoais
REPLY_MAX_NEW_TOKENS = 16  # judge / model backends: a yes or no, with room for a short preamble
PROMPT_VERSION = "nli-v1"

ENTAILMENT_PROMPT = """Decide whether a claim is supported by the evidence below.

Evidence:
{premise}

Claim: {hypothesis}

Is every part of the claim stated in the evidence or a direct consequence of it? Use only the evidence, not what you know otherwise. Reply with a single word: yes or no."""


class NLIBackend(Protocol):
    description: str  # written on every row: which judge, never a key
    identity: str  # part of every cache key (the description plus what changes verdicts, e.g. settings)

    def replies(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """One raw reply per (premise, hypothesis), in order."""
        ...

    def parse(self, raw: str) -> Verdict:
        ...


def _require(backend: str, *modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(f"NLI backend {backend!r} needs {', '.join(missing)}: pip install torch transformers")


def _torch_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _torch_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"NLI dtype {dtype!r}: expected auto, float32, bfloat16 or float16")
    return getattr(torch, dtype)


def entailment_label(id2label: Mapping[int, str], where: str) -> str:
    """The label of ``id2label`` that means entailment: its name contains "entail" and neither "not" nor "non"."""
    names = [str(n) for n in id2label.values()]
    hits = [n for n in names if "entail" in n.lower() and not re.search(r"not|non", n.lower())]
    if len(hits) != 1:
        raise ValueError(f"{where}: expected exactly one entailment label (a name containing 'entail', not "
                         f"'not'/'non') among the model's labels {names}; set id2label in its config.json")
    return hits[0]


class HFClassifierNLI:
    """A local sequence-classification NLI model (module docstring)."""

    def __init__(self, path: str, batch_size: int = 8, device: str = "auto", dtype: str = "auto") -> None:
        if not path:
            raise ValueError("NLI backend 'hf_classifier' needs model: the path of a sequence-classification model")
        self.path, self.batch_size, self.device_name, self.dtype_name = path, max(1, batch_size), device, dtype
        self.description = f"hf_classifier:{path}"
        self.identity = self.description
        self._model: Any = None
        self._tok: Any = None
        self.entail_label = ""

    def load(self) -> None:
        if self._model is not None:
            return
        _require("hf_classifier", "torch", "transformers")
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        device = _torch_device(self.device_name)
        self._tok = AutoTokenizer.from_pretrained(self.path)
        self._model = AutoModelForSequenceClassification.from_pretrained(
            self.path, dtype=_torch_dtype(self.dtype_name, device)).to(device).eval()
        self.entail_label = entailment_label(self._model.config.id2label, f"NLI model {self.path}")

    def replies(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        import torch

        self.load()
        out: list[str] = []
        labels = self._model.config.id2label
        limit = min(getattr(self._tok, "model_max_length", 512) or 512, 4096)
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start:start + self.batch_size]
            enc = self._tok([p for p, _ in chunk], [h for _, h in chunk], padding=True, truncation=True,
                            max_length=limit, return_tensors="pt").to(self._model.device)
            with torch.inference_mode():
                logits = self._model(**enc).logits
            out += [str(labels[int(i)]) for i in logits.argmax(dim=-1).tolist()]
        return out

    def parse(self, raw: str) -> Verdict:
        self.load()
        return Verdict(raw == self.entail_label, OK, raw)


class HFSeq2SeqNLI:
    """A TRUE-style seq2seq NLI model (module docstring)."""

    def __init__(self, path: str, batch_size: int = 8, device: str = "auto", dtype: str = "auto",
                 max_new_tokens: int = TRUE_MAX_NEW_TOKENS) -> None:
        if not path:
            raise ValueError("NLI backend 'hf_seq2seq' needs model: the path of a seq2seq NLI model (TRUE)")
        self.path, self.batch_size, self.device_name, self.dtype_name = path, max(1, batch_size), device, dtype
        self.max_new_tokens = max_new_tokens
        self.description = f"hf_seq2seq:{path}"
        self.identity = f"{self.description}#max_new_tokens={max_new_tokens}"
        self._model: Any = None
        self._tok: Any = None

    @staticmethod
    def prompt(premise: str, hypothesis: str) -> str:
        return f"premise: {premise} hypothesis: {hypothesis}"

    def load(self) -> None:
        if self._model is not None:
            return
        _require("hf_seq2seq", "torch", "transformers")
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        device = _torch_device(self.device_name)
        self._tok = AutoTokenizer.from_pretrained(self.path)
        self._model = AutoModelForSeq2SeqLM.from_pretrained(
            self.path, dtype=_torch_dtype(self.dtype_name, device)).to(device).eval()

    def replies(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        import torch

        self.load()
        out: list[str] = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start:start + self.batch_size]
            enc = self._tok([self.prompt(p, h) for p, h in chunk], padding=True,
                            return_tensors="pt").to(self._model.device)
            with torch.inference_mode():
                ids = self._model.generate(**enc, max_new_tokens=self.max_new_tokens, do_sample=False, num_beams=1)
            out += self._tok.batch_decode(ids, skip_special_tokens=True)
        return out

    def parse(self, raw: str) -> Verdict:
        text = raw.strip()
        if text in ("0", "1"):
            return Verdict(text == "1", OK, raw)
        return Verdict(None, NO_VERDICT, raw)


_LEAD = re.compile(r"^[\W_]*(yes|no|1|0)\b", re.IGNORECASE)
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_yes_no(raw: str) -> Verdict:
    """A yes/no (or 1/0) reply: its first word, else the only one of yes / no it contains; else no verdict."""
    lead = _LEAD.match(raw.strip())
    if lead:
        return Verdict(lead.group(1).lower() in ("yes", "1"), OK, raw)
    words = {w.lower() for w in _YES_NO.findall(raw)}
    if len(words) == 1:
        return Verdict(words == {"yes"}, OK, raw)
    return Verdict(None, NO_VERDICT, raw)


def entailment_prompt(premise: str, hypothesis: str) -> str:
    return ENTAILMENT_PROMPT.format(premise=premise, hypothesis=hypothesis)


class JudgeNLI:
    """The configured LLM judge asked :data:`ENTAILMENT_PROMPT` through ``ask`` (resources/judge.py's
    ``JudgeClient.ask``: calls with a key and a prompt -> replies by key)."""

    def __init__(self, ask: Callable[[Sequence[Any]], Mapping[str, str]], model: str, server: str,
                 decoding: Mapping[str, Any]) -> None:
        self.ask = ask
        self.description = f"judge:{model}@{server}"
        self.identity = json.dumps([self.description, PROMPT_VERSION, dict(sorted(decoding.items()))])

    def replies(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        from lc_pipeline.score.judge import JudgeCall

        calls = [JudgeCall(_key(self.identity, p, h), entailment_prompt(p, h)) for p, h in pairs]
        answers = self.ask(calls)
        return [answers[c.key] for c in calls]

    def parse(self, raw: str) -> Verdict:
        return parse_yes_no(raw)


class GeneratorNLI:
    """A model of the registry asked :data:`ENTAILMENT_PROMPT` through its generator (generate/base.py)."""

    def __init__(self, generator: Any, slug: str, fingerprint: str = "",
                 max_new_tokens: int = REPLY_MAX_NEW_TOKENS) -> None:
        self.generator = generator
        self.max_new_tokens = max_new_tokens
        self.description = f"model:{slug}"
        self.identity = json.dumps([self.description, fingerprint, PROMPT_VERSION, max_new_tokens])

    def replies(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        from lc_pipeline.generate.base import GenerationRequest

        requests = [GenerationRequest(key=_key(self.identity, p, h), prompt=entailment_prompt(p, h),
                                      max_new_tokens=self.max_new_tokens) for p, h in pairs]
        results = self.generator.generate(requests)
        by_key = {r.key: r.output for r in results}
        return [by_key[r.key] for r in requests]

    def parse(self, raw: str) -> Verdict:
        return parse_yes_no(raw)


def _key(identity: str, premise: str, hypothesis: str) -> str:
    return hashlib.sha256(json.dumps([identity, premise, hypothesis], ensure_ascii=False).encode()).hexdigest()


class ReplyStore(Protocol):
    def get_many(self, keys: Sequence[str]) -> dict[str, str]: ...

    def put(self, key: str, judge_model: str, reply: str) -> None: ...


class NLIJudge:
    """A backend behind a verdict cache: (backend identity, premise, hypothesis) -> raw reply, in memory for the
    run and in ``store`` (when given) across runs. ``calls`` counts the questions the backend was asked,
    ``cache_hits`` the answers found; replies are stored per batch of ``batch_size`` as they come back."""

    def __init__(self, backend: NLIBackend, store: ReplyStore | None = None, batch_size: int = 16) -> None:
        self.backend = backend
        self.store = store
        self.batch_size = max(1, batch_size)
        self.calls = 0
        self.cache_hits = 0
        self._memory: dict[str, str] = {}

    @property
    def description(self) -> str:
        return self.backend.description

    def key(self, premise: str, hypothesis: str) -> str:
        return _key(self.backend.identity, premise, hypothesis)

    def entails_many(self, pairs: Sequence[tuple[str, str]],
                     progress: Callable[[int], None] | None = None) -> list[Verdict]:
        keys = [self.key(p, h) for p, h in pairs]
        unique = list(dict.fromkeys(keys))
        todo_keys = [k for k in unique if k not in self._memory]
        self.cache_hits += len(unique) - len(todo_keys)
        if self.store is not None and todo_keys:
            found = self.store.get_many(todo_keys)
            self._memory.update(found)
            self.cache_hits += len(found)
        answered = sum(1 for k in unique if k in self._memory)
        if progress is not None and answered:
            progress(answered)
        todo = {k: pair for k, pair in zip(keys, pairs) if k not in self._memory}
        items = list(todo.items())
        for start in range(0, len(items), self.batch_size):
            chunk = items[start:start + self.batch_size]
            replies = self.backend.replies([pair for _, pair in chunk])
            if len(replies) != len(chunk):
                raise ValueError(f"NLI backend {self.description}: {len(replies)} replies for {len(chunk)} questions")
            for (k, _), reply in zip(chunk, replies):
                self._memory[k] = reply
                if self.store is not None:
                    self.store.put(k, self.description, reply)
            self.calls += len(chunk)
            if progress is not None:
                progress(len(chunk))
        return [self.backend.parse(self._memory[k]) for k in keys]

    def entails(self, premise: str, hypothesis: str) -> Verdict:
        return self.entails_many([(premise, hypothesis)])[0]
