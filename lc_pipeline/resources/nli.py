"""The NLI judge of ALCE's citation metrics (score/nli.py, score/citations.py): which backend, which model.

``backend`` (else ``$LCP_NLI_BACKEND``): ``hf_classifier`` | ``hf_seq2seq`` (``model``: the path of a local
Hugging Face model, e.g. TRUE, spec helmet.md §3) | ``judge`` (the configured LLM judge: the ``judge``
resource's server, key variable, concurrency, retries and reply cache; ``model`` here, if set, replaces the
judge's model name) | ``model`` (``model``: a slug of the model registry, run through its own generation
backend, e.g. the built-in ``smollm2-135m``). ``model`` else ``$LCP_NLI_MODEL``. Empty: no NLI judge is
configured, and scoring a task with citation metrics fails saying so.

``cache_path``: a SQLite file of every reply by (backend identity, premise, hypothesis), written as batches come
back: a rerun, or a run after a crash, asks the backend nothing it has answered. No key is ever a field.
"""

from __future__ import annotations

import dagster as dg

from lc_pipeline.resources.generator import ModelsResource
from lc_pipeline.resources.judge import JudgeCache, JudgeResource
from lc_pipeline.score.nli import (
    BACKENDS,
    REPLY_MAX_NEW_TOKENS,
    TRUE_MAX_NEW_TOKENS,
    GeneratorNLI,
    HFClassifierNLI,
    HFSeq2SeqNLI,
    JudgeNLI,
    NLIJudge,
)
from lc_pipeline.settings import env

BACKEND_ENV = "LCP_NLI_BACKEND"
MODEL_ENV = "LCP_NLI_MODEL"


class NLIResource(dg.ConfigurableResource):
    """NLI backend settings (module docstring)."""

    backend: str = ""  # hf_classifier | hf_seq2seq | judge | model; else $LCP_NLI_BACKEND; "" = none
    model: str = ""  # hf_*: model path; model: registry slug; judge: judge model override; else $LCP_NLI_MODEL
    batch_size: int = 8  # questions per model batch (hf_*, model) or per stored chunk of judge calls
    max_new_tokens: int | None = None  # None: 10 for hf_seq2seq (TRUE), 16 for judge / model replies
    device: str = "auto"  # hf_*: auto (cuda when available) | cpu | cuda | cuda:1 ...
    dtype: str = "auto"  # hf_*: auto (bfloat16 on GPU, float32 on CPU) | float32 | bfloat16 | float16
    cache_path: str = ""  # SQLite reply cache; "" = none (answers are still reused within a run)

    def resolved_backend(self) -> str:
        return self.backend or env(BACKEND_ENV) or ""

    def resolved_model(self) -> str:
        return self.model or env(MODEL_ENV) or ""

    def nli_judge(self, judge: JudgeResource, models: ModelsResource, default: tuple[str, str] = ("", "")) -> NLIJudge:
        """The configured NLI judge; a ValueError saying what to set when none is configured or it is invalid.

        ``default``: (backend, model) of the benchmark config's ``nli:``, used only when the resource and the
        environment name no backend (helmet-demo's offline SmolLM2)."""
        backend, model = self.resolved_backend(), self.resolved_model()
        if not backend:
            backend, model = default[0], model or default[1]
        if not backend:
            raise ValueError(f"no NLI backend is configured: set the nli resource's backend ({' | '.join(BACKENDS)}) "
                             f"and model, or ${BACKEND_ENV} / ${MODEL_ENV}")
        if backend not in BACKENDS:
            raise ValueError(f"NLI backend {backend!r}: expected one of {list(BACKENDS)}")
        if backend == "hf_classifier":
            impl = HFClassifierNLI(model, self.batch_size, self.device, self.dtype)
        elif backend == "hf_seq2seq":
            impl = HFSeq2SeqNLI(model, self.batch_size, self.device, self.dtype,
                                self.max_new_tokens or TRUE_MAX_NEW_TOKENS)
        elif backend == "judge":
            client = judge.client()
            if model:
                client.model = model
            client.max_tokens = self.max_new_tokens or REPLY_MAX_NEW_TOKENS
            impl = JudgeNLI(client.ask, client.model, client.server(), client.decoding)
        else:
            if not model:
                raise ValueError(f"NLI backend 'model' needs model: a slug of the model registry ({models.registry_path})")
            impl = GeneratorNLI(models.generator(model), model, models.spec(model).fingerprint(),
                                self.max_new_tokens or REPLY_MAX_NEW_TOKENS)
        store = JudgeCache(self.cache_path) if self.cache_path else None
        return NLIJudge(impl, store, self.batch_size)
