"""Backend ``imported``: predictions made elsewhere, answered by record id; no model is called.

A published benchmark run as released (config ``released:``) has one instance per released record, and
each instance keeps the record's own id (``record_id``: LongBench's ``_id``). Predictions that some other
harness produced (the benchmark's own ``pred.py``, a provider's batch API, a paper's released outputs) can
then be scored by this pipeline exactly as its own generations are: ``lcp models import FILE --model
NAME --config CONFIG`` (lc_pipeline/commands/imports.py) checks a JSONL file of

    {"_id": "<the record's id>", "prediction": "<the model's answer>"}

against the config's records, stores a normalised copy in the lake (``imports/<model>/<sha16>/``, named by
the sha256 of its content, so a changed file is a new model fingerprint and re-generates, and the user's
path may move) and registers NAME with ``backend: imported`` and ``model_id`` = that copy. ``lcp backfill
--model NAME`` then writes NAME's generations, metric_scores and benchmark_scores like any model's.

What the generations rows say (spec released_benchmarks.md: the generations table records what was fed):

- ``output``: the stored prediction verbatim (the task's stop sequences still cut it, as for any backend);
- ``prompt_tokens`` = ``original_prompt_tokens``: the prompt as the model spec's ``tokenizer`` counts it
  (the import sets the config's tokenizer, ``tiktoken:cl100k_base`` by default): the instances' exact count
  (``input_tokens``) when they were counted with that same encoding (their ``tokenizer`` column; the same
  ``encode_ordinary`` count), else counted here. The other harness's own
  prompt and its truncation are unknown here, so ``truncated`` is False: nothing was cut *by us*, and
  nothing is skipped (policy ``skip`` needs a window; an imported model has none). What was fed is
  unknown too: ``prompt_ids_hash`` "", ``bos_tokens`` null, ``chat_template_source`` "";
- ``completion_tokens``: the prediction counted by the same tokenizer;
- ``finish_reason`` "stop", ``latency_s`` 0, ``backend`` "imported", ``sampling_params``
  ``{"backend": "imported", "predictions_sha256": ...}``.

A request whose record has no prediction is an error naming the record, the stored file, and whether the
import reported it missing (``--on-error reject``): a record is never answered with an invented "" that
would score as a wrong answer. Narrow the config (``released.tasks``) or complete the file instead.

The cache key of an imported model includes the record id (``keyed_by_record``): two records with the same
prompt may carry different predictions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lc_pipeline import json_files
from lc_pipeline.generate.base import GenerationRequest, GenerationResult
from lc_pipeline.generate.registry import ModelSpec
from lc_pipeline.json_files import jsonl_lines

BACKEND = "imported"
ID_FIELD = "_id"
PREDICTION_FIELD = "prediction"
PREDICTIONS_FILE = "predictions.jsonl"  # the normalised copy: one {"_id", "prediction"} per line, input order
MANIFEST_FILE = "manifest.json"  # what the import saw: source file, counts, rejected lines, missing records
REJECTED_FILE = "rejected.jsonl"  # each rejected line: {line, field, error, text}
# An imported model has no window: nothing is cut at generation (the field must be an int >= 2).
NO_WINDOW = 1_000_000_000


class PredictionsError(ValueError):
    """A predictions file that cannot be imported; the message names the file, the line and the field."""


@dataclass(frozen=True)
class Rejection:
    line: int  # 1-based line number in the user's file
    field: str  # "_id", "prediction", or "json" for a line that is not a JSON object
    error: str
    text: str  # the line as written (for the rejected-lines file)

    def message(self, path: str) -> str:
        return f"{path}, line {self.line}, field {self.field!r}: {self.error}"

    def to_dict(self) -> dict:
        return {"line": self.line, "field": self.field, "error": self.error, "text": self.text}


@dataclass
class ParsedPredictions:
    """The accepted predictions (record id -> text, in file order), what was rejected, what is missing."""

    path: str
    predictions: dict[str, str] = field(default_factory=dict)
    rejected: list[Rejection] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # records of the config without a prediction, sorted

    def normalised(self) -> bytes:
        """The stored copy: one ``{"_id", "prediction"}`` per line, in file order, UTF-8."""
        return "".join(json.dumps({ID_FIELD: rid, PREDICTION_FIELD: text}, ensure_ascii=False) + "\n"
                       for rid, text in self.predictions.items()).encode()

    def sha256(self) -> str:
        return hashlib.sha256(self.normalised()).hexdigest()


def parse_predictions(text: str, path: str, known_ids: Iterable[str], on_error: str = "fail",
                      max_rejected: int | None = None) -> ParsedPredictions:
    """Check a predictions file (its ``text``, read from ``path``) against the config's record ids.

    Each non-blank line must be a JSON object with a string ``_id`` that names a record of the config, not
    seen on an earlier line, and a string ``prediction`` (other fields are ignored). With ``on_error="fail"``
    the first bad line raises :class:`PredictionsError` naming the file, the line and the field, and so do
    records of the config left without a prediction (how many, the first ids). With ``"reject"`` every bad
    line is kept as a :class:`Rejection` and the records without a prediction are listed in ``missing``:
    nothing is dropped silently; more than ``max_rejected`` (when given) rejected lines stop the import
    (PredictionsError).

    Lines are split on ``\n`` only; a line nested deeper than :data:`lc_pipeline.json_files.MAX_DEPTH`, with
    a key given twice, or with a lone surrogate (``"\\ud800"``) is a bad line naming the field
    (lc_pipeline/json_files.py).
    """
    if on_error not in ("fail", "reject"):
        raise ValueError(f"on_error {on_error!r}: expected 'fail' or 'reject'")
    known = set(known_ids)
    out = ParsedPredictions(path)
    first_line: dict[str, int] = {}
    for number, raw in jsonl_lines(text):  # \n only: U+2028 and the like are data inside a JSON string (D10)
        if not raw.strip():
            continue
        bad = _check_line(raw, number, known, first_line)
        if isinstance(bad, Rejection):
            if on_error == "fail":
                raise PredictionsError(bad.message(path))
            out.rejected.append(bad)
            if max_rejected is not None and len(out.rejected) > max_rejected:
                raise PredictionsError(f"{path}: more than {max_rejected} lines rejected (line {number} is the "
                                       f"{len(out.rejected)}th; the first: {out.rejected[0].message(path)}); is it "
                                       "the predictions file of this config? Nothing was imported (--max-rejected "
                                       "raises the bound)")
            continue
        rid, prediction = bad
        first_line[rid] = number
        out.predictions[rid] = prediction
    if not out.predictions and not out.rejected:
        raise PredictionsError(f"{path}: no predictions (the file is empty)")
    out.missing = sorted(known - set(out.predictions))
    if out.missing and on_error == "fail":
        raise PredictionsError(f"{path}: {len(out.missing)} record(s) of the config have no prediction, e.g. "
                               f"{out.missing[:5]}; complete the file, narrow the config (released.tasks), or "
                               "import with --on-error reject to list them (they then cannot be generated)")
    return out


def _check_line(raw: str, number: int, known: set[str], first_line: Mapping[str, int]) -> Rejection | tuple[str, str]:
    def reject(field_name: str, error: str) -> Rejection:
        return Rejection(number, field_name, error, raw)

    try:  # nesting bounded before parsing (D11), a key given twice (D25) and lone surrogates (D20) refused
        record = json_files.parse(raw)
    except json_files.JsonProblem as exc:
        return reject(exc.field or "json", str(exc))
    if not isinstance(record, dict):
        return reject("json", f"expected a JSON object, got {type(record).__name__}")
    rid = record.get(ID_FIELD)
    if not isinstance(rid, str) or not rid:
        return reject(ID_FIELD, f"missing or not a non-empty string (got {rid!r})")
    if rid in first_line:
        return reject(ID_FIELD, f"duplicate id {rid!r} (first on line {first_line[rid]})")
    if rid not in known:
        return reject(ID_FIELD, f"unknown id {rid!r}: no record of the config has it")
    prediction = record.get(PREDICTION_FIELD)
    if not isinstance(prediction, str):
        return reject(PREDICTION_FIELD, f"missing or not a string (got {type(prediction).__name__})")
    return rid, prediction


def read_stored(data: bytes, where: str) -> dict[str, str]:
    """The stored copy (:meth:`ParsedPredictions.normalised`) -> record id -> prediction."""
    out: dict[str, str] = {}
    for number, line in jsonl_lines(data.decode()):
        if not line:
            continue  # the end of the last line
        try:
            record = json_files.parse(line)
            out[record[ID_FIELD]] = record[PREDICTION_FIELD]
        except (json_files.JsonProblem, KeyError, TypeError) as exc:
            raise PredictionsError(f"{where}, line {number}: not a stored prediction ({exc}); re-run "
                                   "`lcp models import`") from None
    return out


class ImportedGenerator:
    """The ``imported`` backend (module docstring): looks each request up by its ``record_id``."""

    backend = BACKEND
    keyed_by_record = True  # generate.partition: the record id enters the cache key

    def __init__(self, spec: ModelSpec) -> None:
        if spec.backend != BACKEND:
            raise ValueError(f"model {spec.slug!r}: ImportedGenerator cannot run backend {spec.backend!r}")
        self.spec = spec
        self.model_id = spec.model_id  # the stored copy's location
        self._predictions: dict[str, str] | None = None
        self._sha256 = ""
        self._missing: set[str] = set()
        self._counter = None

    def load(self) -> None:
        if self._predictions is not None:
            return
        from lc_pipeline import storage

        where = self.spec.model_id
        path = storage.lake_path(where)
        try:
            data = storage.read_bytes(path)
        except FileNotFoundError:
            raise PredictionsError(f"model {self.spec.slug!r}: its imported predictions {where} are gone (a moved or "
                                   "cleaned lake?); run `lcp models import` again") from None
        sha = hashlib.sha256(data).hexdigest()
        if path.parent.name != sha[:16]:
            raise PredictionsError(f"model {self.spec.slug!r}: {where} was changed after its import (its sha256 "
                                   f"starts {sha[:16]}, its folder says {path.parent.name}); import the file again")
        manifest = path.parent / MANIFEST_FILE
        if manifest.exists():
            self._missing = set(json.loads(storage.read_bytes(manifest)).get("missing", []))
        self._predictions, self._sha256 = read_stored(data, where), sha

    def counter(self):
        if self._counter is None:
            from lc_pipeline.construct.tokens import TokenCounter

            name = self.spec.tokenizer or "tiktoken:cl100k_base"
            self._counter = TokenCounter.load(name.removeprefix("tiktoken:"))
        return self._counter

    def sampling_params(self) -> dict:
        self.load()
        return {"backend": BACKEND, "predictions_sha256": self._sha256}

    def generate(self, requests: Sequence[GenerationRequest],
                 progress: Callable[[int], None] | None = None) -> list[GenerationResult]:
        self.load()
        assert self._predictions is not None
        predictions = [self._prediction(r) for r in requests]
        counter = self.counter()
        # The instances' own count when they were counted with our encoding (the same encode_ordinary count);
        # the others (and every prediction) counted here in one batch.
        known = [r.counted_tokens if r.counted_tokens is not None and r.counted_with == counter.name else None
                 for r in requests]
        recount = [i for i, k in enumerate(known) if k is None]
        for i, n in zip(recount, counter.count_many([requests[i].prompt for i in recount]), strict=True):
            known[i] = n
        completion = counter.count_many(predictions)
        results = [
            GenerationResult(
                key=r.key, output=prediction, prompt_tokens=prompt_tokens, original_prompt_tokens=prompt_tokens,
                truncated=False, completion_tokens=done, finish_reason="stop", latency_s=0.0,
                truncation_policy=r.truncation,
            )
            for r, prediction, prompt_tokens, done in zip(requests, predictions, known, completion, strict=True)
        ]
        if progress is not None and results:
            progress(len(results))
        return results

    def _prediction(self, request: GenerationRequest) -> str:
        rid = request.record_id
        if not rid:
            raise PredictionsError(f"model {self.spec.slug!r} (imported predictions): request {request.key!r} names no "
                                   "record (instances' record_id is empty): imported predictions answer only a "
                                   "benchmark run as released (a config with `released:`)")
        prediction = self._predictions.get(rid) if self._predictions is not None else None
        if prediction is None:
            why = ("the import reported it missing (--on-error reject)" if rid in self._missing
                   else "the import did not know this record (was the config changed after the import?)")
            raise PredictionsError(f"model {self.spec.slug!r}: record {rid!r} has no prediction in {self.model_id}: "
                                   f"{why}; complete the file and import it again, or narrow the config's "
                                   "released.tasks")
        return prediction
