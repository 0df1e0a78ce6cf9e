"""100-LongBench's judges as its authors run them (``protocol: official``; fidelity audit LB100-3, LB100-4, LB100-9).

Prompts are theirs, read from ``utils/metrics.py`` of uservan/100-LongBench (:data:`METRICS`, pinned; parsed as
data, never imported): ``judge_prompt`` (QA: HELMET's LongQA prompt with a 0-2 fluency scale), ``fluency_prompt``
and ``precision_prompt`` (Summ: HELMET's Multi-LexSum prompts, the civil-lawsuit precision prompt with its worked
examples, used for every summary). Filled as ``eval_trec.py`` and ``utils/metrics.py`` fill them:

- the prediction is the output's first line (``output.lstrip('\\n').split('\\n')[0]``); an empty one scores 0 and
  asks nothing;
- ``lb100_qa``: per gold answer (all of them), ``judge_prompt.format(question=..., correct_answers=<that gold>,
  parsed_output=<prediction>)``; the last ``{...}`` parsed as JSON, value fluency x correctness (a null field counts
  0), score value / 6, the best over the golds; a reply without a verdict scores 0 (``qa_model_score``);
- ``lb100_summ``: per gold, ``fluency_prompt.format(text=<prediction stripped>)`` and
  ``precision_prompt.format(expert_summary=<gold>, summary=<prediction stripped>)``; each asked again once when its
  reply has no verdict (2 tries: ``get_score``); either still unread scores 0; score fluency x supported /
  sentences (0 when there is no sentence), the best over the golds.

The call (``utils/model_utils.OpenAIModel.generate``, judge gpt-4o-mini-2024-07-18, ``load_model(..., temperature
=0.1)``): system "You are a helpful assistant" then the prompt as the user turn, temperature 0.1, top_p 0.9,
``max_tokens`` 1024, no seed; a failed request is retried 5 times.
"""

from __future__ import annotations

from lc_pipeline.official import OfficialFile, OfficialFileError, read_python_literal
from lc_pipeline.score.judge import (
    MISSING_FIELD,
    NO_SCORE,
    OK,
    JudgeInput,
    JudgeSettings,
    Rubric,
    last_braces_json,
    last_braces_or_fenced_json,
)
from lc_pipeline.settings import Settings

REPO = "uservan/100-LongBench"
COMMIT = "1254aae707c99f5420b172627be48192113356d4"
METRICS = OfficialFile(REPO, COMMIT, "utils/metrics.py",
                       "14abc4997b820e9b1adae48d37a2a970345a9e32e05f0e6272827b85f12a0657")
FILES = (METRICS,)
PROMPTS = ("judge_prompt", "fluency_prompt", "precision_prompt")

OFFICIAL_RUBRICS = ("lb100_qa", "lb100_summ")
LABEL = f"official@{COMMIT[:7]}"
VERSION = f"{LABEL}/v1"  # v<n>: our filling of their prompts; bumped when that code changes

_CALL = {"temperature": 0.1, "top_p": 0.9, "max_tokens": 1024, "system": "You are a helpful assistant",
         "api_retries": 5, "model": "gpt-4o-mini-2024-07-18", "unparsed_score": 0.0}
QA_SETTINGS = JudgeSettings(tries=1, **_CALL)
SUMM_SETTINGS = JudgeSettings(tries=2, **_CALL)


def judge_prompts(*, settings: Settings | None = None) -> dict[str, str]:
    """The three judge prompts of ``utils/metrics.py`` by the authors' variable names (:data:`PROMPTS`)."""
    out = {}
    for name in PROMPTS:
        value = read_python_literal(METRICS, name, settings=settings)
        if not isinstance(value, str):
            raise OfficialFileError(f"{METRICS}: {name} is a {type(value).__name__}, not a string")
        out[name] = value
    return out


def prediction(output: str) -> str:
    """What the authors score: the output's first line after leading newlines."""
    return output.lstrip("\n").split("\n")[0]


def qa_verdict(reply: str):
    """``parse_qa_json``: the last ``{...}`` as JSON, else None (score.judge.last_braces_json)."""
    return last_braces_json(reply)


def summ_verdict(reply: str):
    """``parse_sum_json``: the last ``{...}`` as JSON; if that is not JSON, the last fenced json block; else None
    (score.judge.last_braces_or_fenced_json)."""
    return last_braces_or_fenced_json(reply)


def _field(obj, name: str) -> float | None:
    """A verdict's number (a null counts 0, as ``set_None_0``); None when absent or not a number."""
    if not isinstance(obj, dict) or name not in obj:
        return None
    value = obj[name]
    if value is None:
        return 0.0
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


_EMPTY = (OK, 0.0, 0.0, {"empty_prediction": True}, None)  # an empty first line scores 0, nothing asked


def qa_rubric(template: str, label: str = LABEL, version: str = VERSION) -> Rubric:
    def prompts(inp: JudgeInput) -> dict[str, str]:
        pred = prediction(inp.output)
        if not pred:
            return {}
        return {f"gold{i}": template.format(question=inp.question, correct_answers=gold, parsed_output=pred)
                for i, gold in enumerate(inp.answers)}

    def combine(inp: JudgeInput, replies: dict[str, str]):
        if not replies:
            return _EMPTY
        best, unread = None, []
        for aspect in sorted(replies, key=lambda a: int(a[4:])):
            obj = qa_verdict(replies[aspect])
            fluency, correctness = _field(obj, "fluency"), _field(obj, "correctness")
            if fluency is None or correctness is None:
                unread.append(aspect)  # scores 0 for this gold
                continue
            value = fluency * correctness
            if best is None or value > best[0]:
                best = (value, {"fluency": fluency, "correctness": correctness, "gold": aspect})
        if best is None:
            return NO_SCORE, None, None, {"unread": unread}, None
        value = max(best[0], 0.0)  # the authors' best starts at 0
        return OK, value, value / 6, {**best[1], "unread": unread}, None

    return Rubric("lb100_qa", version, "fluency (0-2) x correctness (0-3) (the authors' rubric), 0-6", prompts,
                  combine, protocol=label, settings=QA_SETTINGS)


def summ_rubric(templates: dict[str, str], label: str = LABEL, version: str = VERSION) -> Rubric:
    def prompts(inp: JudgeInput) -> dict[str, str]:
        pred = prediction(inp.output)
        if not pred:
            return {}
        out = {"fluency": templates["fluency_prompt"].format(text=pred.strip())}
        for i, gold in enumerate(inp.answers):
            out[f"precision{i}"] = templates["precision_prompt"].format(expert_summary=gold, summary=pred.strip())
        return out

    def combine(inp: JudgeInput, replies: dict[str, str]):
        if not replies:
            return _EMPTY
        flu = summ_verdict(replies["fluency"])
        fluency = _field(flu, "fluency")
        if fluency is None:
            return (NO_SCORE if flu is None else MISSING_FIELD), None, None, {"unread": ["fluency"]}, None
        best, unread = None, []
        for aspect in sorted((a for a in replies if a != "fluency"), key=lambda a: int(a[9:])):
            obj = summ_verdict(replies[aspect])
            supported, sentences = _field(obj, "precision"), _field(obj, "sentence_count")
            if supported is None or sentences is None:
                unread.append(aspect)  # scores 0 for this gold
                continue
            value = fluency * (supported / sentences if sentences > 0 else 0)
            if best is None or value > best[0]:
                best = (value, {"fluency": fluency, "precision": supported, "sentence_count": sentences,
                                "gold": aspect})
        if best is None:
            return NO_SCORE, None, None, {"fluency": fluency, "unread": unread}, None
        value = max(best[0], 0.0)  # the authors' best starts at 0
        return OK, value, value, {**best[1], "unread": unread}, None

    def accept(aspect: str, reply: str) -> bool:  # get_score: asked again while the reply has no verdict
        return summ_verdict(reply) is not None

    return Rubric("lb100_summ", version, "fluency (0/1) x supported / sentences (the authors' rubric), 0-1",
                  prompts, combine, protocol=label, settings=SUMM_SETTINGS, accept=accept)


def official_rubric(name: str, *, settings: Settings | None = None) -> Rubric:
    if name == "lb100_qa":
        return qa_rubric(judge_prompts(settings=settings)["judge_prompt"])
    if name == "lb100_summ":
        return summ_rubric(judge_prompts(settings=settings))
    raise ValueError(f"100-LongBench declares no official rubric {name!r} (only {', '.join(OFFICIAL_RUBRICS)})")
