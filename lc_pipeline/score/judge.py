"""LLM-judge machinery: rubrics, parsing, and the judged rows.

Pure logic (no Dagster, no network): :func:`plan_judgments` turns generations into judge
prompts, something else (``resources.judge.JudgeClient``) gets the replies, and
:func:`judge_frame` parses them into JUDGE_SCORES rows. Parsing never raises: a reply that
cannot be read gets a ``parse_status`` other than ``"ok"`` and a null score, and is counted.

Rubrics (:class:`Rubric`; each has a version that is part of every cache key and row) belong to the benchmarks that
define them: each package registers its own by name (``lc_pipeline/benchmarks/<benchmark>/rubrics.py``, our wording
of the papers' scales), looked up through ``tasks.registry.RUBRICS``. Which rubric a task gets is declared in its
task file (``rubric:``; a task may have none); the judge resource's ``rubric_overrides`` (``benchmark/task`` or
``benchmark/*`` -> name or ``none``) win. This module holds what rubrics share: the reply parsers, the generic
summary prompts (fluency, sentence precision) and the judged rows.

Protocols (issue 30). ``protocol: ours`` (the default) asks the rubrics above with the judge resource's
settings and :data:`SYSTEM_PROMPT`. ``protocol: official`` asks each rubric as its benchmark's authors do: their
prompt(s), read from their files, filled as their scripts fill them, with their call settings
(:class:`JudgeSettings`: temperature, top_p, max_tokens, seed, system turn or none, tries, and the score of a
verdict that cannot be read) and their parse rules. Those rubrics are declared by the benchmark packages, in
``lc_pipeline/benchmarks/<benchmark>/judging.py`` (``official_rubric(name, *, settings)``: the :class:`Rubric`),
registered by name in ``tasks.registry.OFFICIAL_RUBRICS`` and found by :func:`official_rubric`; this module names
no benchmark. An official rubric's ``version`` names the protocol and the authors' commit
(``official@<commit>/v<n>``), so its rows and cache keys are never those of ours, nor of another commit.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.fingerprints import short_id
from lc_pipeline.tasks.catalog import TaskCatalog, load_catalog
from lc_pipeline.tasks.registry import OFFICIAL_RUBRICS, RUBRICS

OK = "ok"
NO_SCORE = "no_score"  # nothing parseable in the reply
MISSING_FIELD = "missing_field"  # a JSON object without a required field
OUT_OF_RANGE = "out_of_range"  # a value outside the rubric's scale
PARSE_STATUSES = (OK, NO_SCORE, MISSING_FIELD, OUT_OF_RANGE)
_SEVERITY = {OK: 0, OUT_OF_RANGE: 1, MISSING_FIELD: 2, NO_SCORE: 3}

SYSTEM_PROMPT = "You are a careful, impartial grader."

OURS = "ours"
OFFICIAL = "official"
PROTOCOLS = (OFFICIAL, OURS)

# --------------------------------------------------------------------------- summary prompts (our wording), shared by rubrics

SUMM_FLUENCY_PROMPT = """You are grading the fluency of a text. It should be coherent, not repetitive, fluent and grammatical.

- 0: incoherent, repetitive (even in different words), incomplete, or gibberish. For example "Summary:" alone is incomplete; "the the the able the" is incoherent; the same sentence written four times is repetitive.
- 1: coherent, not repetitive, fluent and grammatical. A fluent text whose last sentence is cut off still gets 1.

Reply with the grade as JSON, like {{"fluency": 1}}.

Text: "{summary}\""""

SUMM_PRECISION_PROMPT = """You are checking each sentence of a summary against an expert summary. A sentence is supported when its main facts agree with the expert summary; small details (dates, names, places) may be missing from the expert summary. A sentence whose main facts are missing from or contradicted by the expert summary is not supported.

Think step by step about each sentence first. Then end with JSON giving how many sentences are supported and how many sentences the summary has, like {{"precision": 3, "sentence_count": 5}}.

Expert summary: "{reference}"

Summary: "{summary}\""""

# --------------------------------------------------------------------------- parsing

_JSON_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)
_DOUBLE = re.compile(r"\[\[([0-9]*\.?[0-9]+)\]\]")
_SINGLE = re.compile(r"\[([0-9]*\.?[0-9]+)\]")


def last_json_object(text: str) -> dict | None:
    """The last ``{...}`` in the reply that parses as a JSON object (HELMET's rule), else a
    fenced ```json block, else None."""
    for candidates in (_JSON_OBJECT.findall(text or ""), _FENCED.findall(text or "")):
        for blob in reversed(candidates):
            try:
                obj = json.loads(blob)
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


_LAST_FENCED = re.compile(r"(?:```json)(.+)(?:```)", re.DOTALL)


def _json_or_none(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def last_braces_json(reply: str):
    """The authors' stricter rule (HELMET's ``parse_json``, 100-LongBench's ``parse_qa_json``): only the LAST
    ``{...}`` of the reply, parsed as JSON (any JSON value), else None; unlike :func:`last_json_object` no earlier
    candidate is tried."""
    found = _JSON_OBJECT.findall(reply or "")
    return _json_or_none(found[-1]) if found else None


def last_braces_or_fenced_json(reply: str):
    """:func:`last_braces_json`; when the last ``{...}`` is not JSON, the last fenced ```json block (greedy, as the
    authors' summary parsers read it); None when the reply has no ``{...}`` at all."""
    found = _JSON_OBJECT.findall(reply or "")
    if not found:
        return None
    value = _json_or_none(found[-1])
    if value is None:
        fenced = _LAST_FENCED.findall(reply or "")
        value = _json_or_none(fenced[-1]) if fenced else None
    return value


def bracket_score(text: str) -> float | None:
    """Loong's ``extract_number``: the first ``[[n]]``, else the first ``[n]``, as a float."""
    for pattern in (_DOUBLE, _SINGLE):
        m = pattern.search(text or "")
        if m:
            return float(m.group(1))
    return None


@dataclass
class Parsed:
    status: str
    fields: dict = field(default_factory=dict)


def int_fields(obj: dict | None, ranges: dict[str, tuple[int, int | None]]) -> Parsed:
    """Required integer fields within [lo, hi] (hi None: no upper bound)."""
    if obj is None:
        return Parsed(NO_SCORE)
    out = {}
    for name, (lo, hi) in ranges.items():
        if name not in obj:
            return Parsed(MISSING_FIELD, {k: obj[k] for k in ranges if k in obj})
        v = obj[name]
        try:
            num = float(v)
        except (TypeError, ValueError):
            return Parsed(MISSING_FIELD, {name: v})
        if num != int(num) or num < lo or (hi is not None and num > hi):
            return Parsed(OUT_OF_RANGE, {name: v})
        out[name] = int(num)
    return Parsed(OK, out)


def split_sentences(text: str) -> list[str]:
    """Sentences of a gold summary (period / question / exclamation mark + space + capital or digit)."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", " ".join((text or "").split()))
    return [p.strip() for p in parts if len(p.strip()) > 3]


# --------------------------------------------------------------------------- rubrics


@dataclass(frozen=True)
class JudgeInput:
    question: str
    answers: list[str]
    output: str
    # The instance's record_fields (JSON object) where its rubric reads more than the answers (helmet_summ's
    # key_points and reference_summary); {} otherwise.
    record_fields: dict = field(default_factory=dict)
    task: str = ""  # the instance's task (an official rubric may pick the authors' prompt variant by it)


@dataclass(frozen=True)
class JudgeSettings:
    """How a rubric's judge is called under ``protocol: official`` (the authors' settings, declared as data by
    the benchmark's ``judging.py``); ours uses the judge resource's settings instead.

    A field set to None is not sent (the server's default), ``system`` None means no system turn. ``tries``: how
    many times one question is asked until its reply is accepted (the rubric's ``accept``), the last reply
    counting; ``api_retries``: the client's retries on a failed request; ``unparsed_score``: the score (and
    value) of a verdict that cannot be read, None when it is left out (its row keeps its parse status either
    way); ``model``: the judge the authors used, for the record (the resource's model is asked).
    """

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    system: str | None = None
    tries: int = 1
    api_retries: int | None = None
    unparsed_score: float | None = None
    model: str = ""

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ValueError(f"JudgeSettings: tries must be >= 1, got {self.tries}")

    def request(self) -> dict:
        """The decoding arguments of the chat completions call (unset ones left out)."""
        sent = {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                "seed": self.seed}
        return {k: v for k, v in sent.items() if v is not None}

    def messages(self, prompt: str) -> list[dict]:
        system = [] if self.system is None else [{"role": "system", "content": self.system}]
        return [*system, {"role": "user", "content": prompt}]

    def key(self) -> dict:
        """Everything of the settings that changes a reply or a score: part of cache keys and fingerprints."""
        return {**self.request(), "system": self.system, "tries": self.tries,
                "unparsed_score": self.unparsed_score}


@dataclass(frozen=True)
class Rubric:
    """How one kind of output is judged: the prompts it asks, and how the replies combine.

    ``prompts(inp)`` -> {aspect: prompt}; ``combine(inp, {aspect: reply})`` -> (status,
    value on the rubric's own scale, score in [0, 1], parsed fields, perfect or None).
    """

    name: str
    version: str
    scale: str  # what ``value`` means, for readers of the table
    prompts: Callable[[JudgeInput], dict[str, str]]
    combine: Callable[[JudgeInput, dict[str, str]], tuple[str, float | None, float | None, dict, bool | None]]
    json_reply: bool = True  # the verdict is a JSON object (a server may be asked to force JSON)
    # ``ours`` or ``official@<commit>`` (the authors' files it was read from).
    protocol: str = OURS
    # The call's settings under protocol official; None: the judge resource's (ours).
    settings: JudgeSettings | None = None
    # (aspect, reply) -> whether the reply is taken, for ``settings.tries`` > 1; None: every reply is.
    accept: Callable[[str, str], bool] | None = None
    # The prompt templates it fills (ours): hashed by :func:`rubric_fingerprint`, so a reworded prompt re-judges.
    texts: tuple[str, ...] = ()


def worst_status(statuses: Sequence[str]) -> str:
    """The most severe parse status of several replies (no reply: ``no_score``)."""
    return max(statuses, key=_SEVERITY.__getitem__) if statuses else NO_SCORE


NOT_JUDGED = "none"


def rubric_for(benchmark: str, task: str, default: str | None, overrides: dict[str, str] | None = None) -> str | None:
    """The rubric of an instance: an override for ``benchmark/task`` or ``benchmark/*`` wins over its task's
    declared ``default`` (the task file's ``rubric``); ``"none"`` turns judging off for it."""
    overrides = overrides or {}
    name = overrides.get(f"{benchmark}/{task}", overrides.get(f"{benchmark}/*", default))
    if name is None or name == NOT_JUDGED:
        return None
    if name not in RUBRICS:
        raise ValueError(f"rubric {name!r} for {benchmark}/{task}: unknown; known rubrics are {RUBRICS.names()}")
    return name


def official_rubric(name: str, *, settings=None) -> Rubric:
    """The rubric ``name`` under ``protocol: official``: the authors' prompts read from their files (through
    ``settings``: ``$LCP_OFFICIAL``, the cache, or fetched; lc_pipeline/official.py) with their call settings, built
    by the callable its benchmark package registered (``tasks.registry.OFFICIAL_RUBRICS``). A rubric no package
    declares an official version of, or authors' files not found, is an error naming what to provide; there is
    no fallback to ours."""
    if name not in RUBRICS:
        raise ValueError(f"rubric {name!r}: unknown; known rubrics are {RUBRICS.names()}")
    if name not in OFFICIAL_RUBRICS:
        raise ValueError(f"rubric {name!r} has no official version (protocol: official): no benchmark package "
                         "registers one (registries.official_rubrics); use protocol: ours")
    where = OFFICIAL_RUBRICS.target(name) or "its official_rubric"
    rubric = OFFICIAL_RUBRICS.get(name)(name, settings=settings)
    if rubric.name != name or rubric.settings is None or rubric.protocol == OURS:
        raise ValueError(f"{where}({name!r}) returned rubric {rubric.name!r} "
                         f"(protocol {rubric.protocol!r}): not an official version of {name!r}")
    return rubric


def rubric_fingerprint(names: Sequence[str] | None = None) -> str:
    """Hash of the rubrics' names, versions and prompt texts (each rubric's ``texts``, and our system prompt): a
    reworded rubric re-judges. ``names``: those rubrics (default: every registered one)."""
    rubrics = [RUBRICS.get(n) for n in sorted(names or RUBRICS.names())]
    texts = list(dict.fromkeys(text for r in rubrics for text in r.texts))
    return short_id(*[f"{r.name}:{r.version}" for r in rubrics], *texts, SYSTEM_PROMPT)


# --------------------------------------------------------------------------- planning and rows


@dataclass(frozen=True)
class JudgeCall:
    key: str  # cache key: (judge model, rubric, version, aspect, prompt, decoding)
    prompt: str
    json_reply: bool = False  # the rubric wants a JSON object (JSON mode may force it)
    settings: JudgeSettings | None = None  # the call's own settings (protocol official); None: the client's


@dataclass
class Judgment:
    """One generation to judge with one rubric: its calls, then its replies."""

    generation_id: str
    instance: dict
    rubric: Rubric
    inp: JudgeInput
    calls: dict[str, JudgeCall]  # aspect -> call (after :func:`ask_judgments`: its last try)
    retries: int = 0  # calls asked again (``settings.tries``)


def call_key(judge_model: str, rubric: Rubric, aspect: str, prompt: str, decoding: dict) -> str:
    """Cache key of one question. Ours: (judge model, rubric, version, aspect, prompt, our system prompt, the
    resource's decoding), as it always was. Official: the rubric's own settings replace the last two, and its
    version names the authors' commit."""
    if rubric.settings is None:
        blob = json.dumps([judge_model, rubric.name, rubric.version, aspect, prompt, SYSTEM_PROMPT, decoding],
                          sort_keys=True, ensure_ascii=False)
    else:
        blob = json.dumps([judge_model, rubric.name, rubric.version, rubric.protocol, aspect, prompt,
                           rubric.settings.key()], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def retry_key(key: str, attempt: int) -> str:
    """Cache key of try ``attempt`` (1, 2, ...) after the first of the call ``key``: each try is its own reply."""
    return hashlib.sha256(f"{key}#try{attempt + 1}".encode()).hexdigest()


_FIELDS = ("instance_id", "item_id", "suite", "benchmark", "task", "category", "depth", "question", "answers")
_OPTIONAL_FIELDS = ("record_fields",)  # read when the instances have it (INSTANCES does; hand-made frames may not)


def record_fields(instance: dict, generation_id: str = "") -> dict:
    """The instance's ``record_fields`` JSON as a dict ({} when absent or empty); a ValueError names the
    instance and the field when it is not a JSON object."""
    raw = instance.get("record_fields")
    if raw is None or raw == "":
        return {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise ValueError(f"instance {instance.get('instance_id')!r} (generation {generation_id!r}): field "
                         f"record_fields: not JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise ValueError(f"instance {instance.get('instance_id')!r} (generation {generation_id!r}): field "
                         f"record_fields: expected a JSON object, got {type(value).__name__}")
    return value


def plan_judgments(
    generations: pl.DataFrame,
    instances: pl.DataFrame,
    judge_model: str,
    decoding: dict,
    overrides: dict[str, str] | None = None,
    catalog: TaskCatalog | None = None,
    protocol: str = OURS,
    settings=None,
) -> list[Judgment]:
    """One :class:`Judgment` per generation whose instance's task has a rubric (its task file's ``rubric``,
    or an override; see :func:`rubric_for`). ``protocol``: ``ours`` (the registered rubric) or ``official`` (each
    rubric's official version, :func:`official_rubric`, its authors' files found through ``settings``)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"judge protocol {protocol!r}: expected one of {list(PROTOCOLS)}")
    catalog = catalog or load_catalog()
    rubrics: dict[str, Rubric] = {}
    missing = [c for c in _FIELDS if c not in instances.columns]
    if missing:
        raise ValueError(f"instances frame lacks column(s) {missing}")
    columns = [*_FIELDS, *(c for c in _OPTIONAL_FIELDS if c in instances.columns)]
    by_id = {r["instance_id"]: r for r in instances.select(columns).iter_rows(named=True)}
    out = []
    for gid, iid, output in generations.select("generation_id", "instance_id", "output").iter_rows():
        inst = by_id.get(iid)
        if inst is None:
            raise ValueError(f"generation {gid!r}: field instance_id={iid!r} not found in instances")
        spec = catalog.resolve(inst["benchmark"], inst["task"])
        name = rubric_for(inst["benchmark"], inst["task"], spec.rubric, overrides)
        if name is None:
            continue
        if output is None:
            raise ValueError(f"generation {gid!r}: field output is null")
        if not inst["answers"]:
            raise ValueError(f"instance {iid!r}: field answers is empty; the judge needs a reference")
        if name not in rubrics:
            rubrics[name] = official_rubric(name, settings=settings) if protocol == OFFICIAL else RUBRICS.get(name)
        rubric = rubrics[name]
        inp = JudgeInput(inst["question"] or "", list(inst["answers"]), output, record_fields(inst, gid),
                         inst["task"])
        try:
            prompts = rubric.prompts(inp)
        except (KeyError, ValueError) as exc:
            raise ValueError(f"instance {iid!r} (generation {gid!r}), rubric {rubric.name} ({rubric.protocol}): "
                             f"{exc.args[0] if exc.args else exc}") from None
        calls = {a: JudgeCall(call_key(judge_model, rubric, a, p, decoding), p, rubric.json_reply, rubric.settings)
                 for a, p in prompts.items()}
        out.append(Judgment(gid, inst, rubric, inp, calls))
    return out


def ask_judgments(judgments: Sequence[Judgment], ask: Callable[[list[JudgeCall]], dict[str, str]]) -> dict[str, str]:
    """Every judgment's questions asked through ``ask`` (e.g. ``JudgeClient.ask``), then, for rubrics with
    ``settings.tries`` > 1, the questions whose reply the rubric does not ``accept`` asked again (a new cache key
    per try) until accepted or out of tries. Each judgment's ``calls`` then name its last tries, so
    :func:`judge_frame` reads those. Returns the replies by call key."""
    replies = dict(ask([c for j in judgments for c in j.calls.values()]))
    first = [{aspect: call.key for aspect, call in j.calls.items()} for j in judgments]
    for attempt in range(1, max((j.rubric.settings.tries for j in judgments if j.rubric.settings), default=1)):
        again: list[tuple[Judgment, str, JudgeCall]] = []
        for j, keys in zip(judgments, first, strict=True):
            s = j.rubric.settings
            if s is None or j.rubric.accept is None or attempt >= s.tries:
                continue
            for aspect, call in j.calls.items():
                if not j.rubric.accept(aspect, replies[call.key]):
                    again.append((j, aspect, JudgeCall(retry_key(keys[aspect], attempt), call.prompt,
                                                       call.json_reply, call.settings)))
        if not again:
            break
        replies.update(ask([c for _, _, c in again]))
        for j, aspect, call in again:
            j.calls[aspect] = call
            j.retries += 1
    return replies


def judgment_id(generation_id: str, rubric: Rubric, judge_model: str) -> str:
    return short_id(generation_id, rubric.name, rubric.version, judge_model, length=16)


def judge_frame(judgments: Sequence[Judgment], replies: dict[str, str], judge_model: str) -> pl.DataFrame:
    """JUDGE_SCORES rows from the judgments and the replies by call key. Never raises on a
    reply it cannot read: the row gets that parse status and a null score."""
    rows = []
    for j in judgments:
        missing = [c.key for c in j.calls.values() if c.key not in replies]
        if missing:
            raise ValueError(f"generation {j.generation_id!r}: no reply for {len(missing)} judge call(s)")
        raw = {a: replies[c.key] for a, c in j.calls.items()}
        status, value, score, fields, perfect = j.rubric.combine(j.inp, raw)
        unparsed = j.rubric.settings.unparsed_score if j.rubric.settings is not None else None
        if status != OK and score is None and unparsed is not None:  # the authors score it (e.g. 0), not drop it
            value, score, fields = unparsed, unparsed, {**fields, "unparsed_scored": unparsed}
        inst = j.instance
        rows.append({
            "judgment_id": judgment_id(j.generation_id, j.rubric, judge_model),
            "generation_id": j.generation_id,
            "instance_id": inst["instance_id"],
            "item_id": inst["item_id"],
            "suite": inst["suite"],
            "task": inst["task"],
            "category": inst["category"],
            "depth": inst["depth"],
            "rubric": j.rubric.name,
            "rubric_version": j.rubric.version,
            "judge_model": judge_model,
            "raw": next(iter(raw.values())) if len(raw) == 1 else json.dumps(raw, ensure_ascii=False),
            "parsed_fields": json.dumps(fields, sort_keys=True, ensure_ascii=False),
            "value": value,
            "score": score,
            "parse_status": status,
            "perfect": perfect,
            "judge_calls": len(raw) + j.retries,
        })
    return schemas.conform(pl.DataFrame(rows, schema=schemas.JUDGE_SCORES), "judge_scores")


def judge_summary(frame: pl.DataFrame) -> dict:
    """Counts for asset metadata: rows, parse failures, parse rate, mean score (and, for a rubric that marks a top
    score, its perfect rate) per rubric. The means are over the verdicts with a score: parse failures are left out, as in
    both papers, except where the rubric's protocol scores them (100-LongBench official: 0)."""
    out: dict = {"judgments": frame.height, "parse_failures": int((frame["parse_status"] != OK).sum())}
    out["parse_rate"] = (1 - out["parse_failures"] / frame.height) if frame.height else 1.0
    out["parse_statuses"] = dict(sorted(frame.group_by("parse_status").len().iter_rows()))
    for rubric, grp in frame.group_by("rubric"):
        name = rubric[0]
        ok = grp.filter(pl.col("parse_status") == OK)
        scored = grp.filter(pl.col("score").is_not_null())
        out[f"mean_score_{name}"] = float(scored["score"].mean()) if scored.height else None
        if ok.height and ok["perfect"].is_not_null().any():  # the rubric marks a top score (its combine's perfect)
            out[f"perfect_rate_{name}"] = float(ok["perfect"].cast(pl.Float64).mean())
    return out
