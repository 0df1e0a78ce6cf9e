"""HELMET's official protocol: how the authors' ``data.py`` and ``model_utils.py`` prompt, cut and decode.

Read from their files at the pinned commit (official_files.py), never copied here. ``data.py`` is parsed as data
(:mod:`ast`), never imported or run:

- **templates**: each loader of ``data.py`` (``load_qa``, ``load_json_kv``, ``load_ruler``, ...) sets
  ``user_template`` and ``system_template`` as string literals, per branch on the dataset's name
  (``if "niah_mv" in dataset ...``), and ``prompt_template = user_template + <sep> + system_template``.
  :func:`loader_templates` follows those branches for HELMET's dataset name of each task (:data:`DATASETS`):
  a straight-line reading of the function's own statements that evaluates string literals, names already read
  and ``+`` of them, and ``if`` tests of the forms ``"<s>" in dataset`` (also ``dataset.lower()``), ``and`` /
  ``or`` / ``not``; nothing else is evaluated, and a template assigned under a test it cannot read is an error
  naming the file and line. So ``prompt_template`` (``\\n`` or ``\\n\\n`` before the answer prefix, per loader)
  comes out of their file, not ours.
- **fill**: ``user_template.format(**sample)`` (chat mode) or ``prompt_template.format(**sample)``
  (completion mode), ``sample`` holding the fields ``data.py`` gives a record (:func:`sample_of`):

  * RAG (``load_qa``): ``context`` (the released passages, ``passage_template`` joined by a blank line: the
    source keeps them so), ``question``, ``demos``: each demonstration ``demo_template.format(documents=<its
    passages>, question=..., answer=<its first answer>)``, joined by a blank line, then a blank line;
  * Re-rank (``load_msmarco_rerank``): ``demos`` is built by code in its nested ``update`` (``demo_text +=
    <passages> + f"...{d['query']}...{ranking}" + "\\n\\n"``): :func:`msmarco_demo_template` reads that
    expression from the file and turns it into a template (the f-string's literal parts kept, its two values
    and the joined passages as fields), so the wording is still theirs;
  * JSON KV (``load_json_kv``): ``demo_template.format(key=k, value=" " + v)`` joined by a blank line, then a
    blank line; ``question`` the released key as released (quoted);
  * RULER (``load_ruler``): ``context``, ``query``, ``type_needle_v`` (``numbers`` / ``uuids`` as released),
    ``question`` = the query, ``example`` "" (the niah datasets have none);
  * ALCE (``load_alce``): ``instruction``, ``demo_prompt``, ``doc_prompt`` of HELMET's
    ``prompts/<asqa|qampari>_revised.json`` (official_files.alce_demos); ``context`` the level's first n
    passages ``doc_prompt.format(**doc, ID=i)``; ``demo_text`` the drawn demonstrations ``demo_prompt`` filled
    with the instruction and all their passages, joined by ``demo_sep`` and followed by it;
  * ICL (``load_icl``): ``context`` the demonstrations (released_icl.py writes each as ``item_template`` reads:
    the text, a newline, the answer prefix, a space, the label's integer), ``question`` the test text;
  * LongQA / Summ (``load_narrativeqa``, ``load_infbench``, ``load_multi_lexsum``): ``context`` (the document
    as benchmarks/helmet/construction cut it, in the config's tokenizer (HE2), ending with data.py's ``truncate_llama2``
    postfix instead of ours: :func:`with_helmet_postfix`), ``question``, ``demo`` "" and for ∞Bench MC
    ``options`` (:func:`options_template`: the string data.py's ``load_infbench`` formats with ``*options``):
    HELMET's 0-shot prompt; its demonstrations for these datasets ("[story text]" examples, built by f-strings
    at run time) are not reproduced (rows say ``protocol_note``).

  Chat mode (the task file's ``chat_template: true``): the user turn is ``user_template`` alone, the answer
  prefix (``system_template``) is not in it (fidelity review HE11); ``model_utils.tokenize`` does not continue
  an assistant turn unless asked. Completion mode: ``prompt_template``, the prefix last.
- **answer length, chat / completion split**: HELMET's configs (not in the files read here); the task files
  carry them (the audit found them faithful): :data:`OfficialProtocol.max_new_tokens` is empty and
  ``plain_prompt_tasks`` are the packaged task files' ``chat_template: false`` tasks.
- **truncation** (HE8): ``model_utils.tokenize`` cuts the *context's tail* when the rendered input (template
  included) is longer than ``max_length - generation_max_length``, ``max_length`` being ``--input_max_length``:
  the **level** L (8k ... 128k), whatever the model's window: HELMET runs models past their windows. The policy
  here is ``end_of_context`` (the same cut: context tail, everything else kept, counted on the rendered input in
  the model's tokens). Each instance carries ``record_fields.protocol_budget`` (L - max_new_tokens, the authors'
  budget) and ``record_fields.protocol_note``; generation (generate/partition.py) gives the budget to the request
  (``GenerationRequest.input_budget``), so a model whose window is L or longer is cut at L - max_new as HELMET cuts
  it. A model with a shorter window is cut at its window - max_new: the engine here does not run a model past its
  window as HELMET does, and the generations row says so (``protocol_note`` in its ``sampling_params``). Nothing is
  cut at build time.
- **judges**: HELMET's own (judging.py) switch on with this protocol (``JudgeResource.resolved_protocol``).
- **scoring**: rows carry ``record_fields.protocol`` (the label); the ICL metric reads it and scores as ``load_icl``'s
  post-process does (metrics.icl_label, HE9), and ALCE's STR-EM / QAMPARI rec-5 read the output as
  HELMET's eval.py hands it to eval_alce.py: the answer prefix prepended in completion mode and never stripped
  (score/alce_correctness.official_preprocess, HE10).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from lc_pipeline.benchmarks.helmet import official_files
from lc_pipeline.config import OfficialProtocol, files_found_here, level_tokens
from lc_pipeline.construct.truncation import END_OF_CONTEXT
from lc_pipeline.official import OfficialFileError, read_official_text
from lc_pipeline.text import TemplateError, fill_template

BENCHMARK = "helmet"
TRUNCATION = END_OF_CONTEXT
# HELMET's dataset name of each task (its configs' ``datasets:``): data.py's loaders branch on substrings of it.
DATASETS: dict[str, tuple[str, str, str]] = {  # task -> (loader, HELMET's dataset name, kind)
    "nq": ("load_qa", "kilt_nq", "rag"),
    "triviaqa": ("load_qa", "kilt_triviaqa", "rag"),
    "hotpotqa": ("load_qa", "kilt_hotpotqa", "rag"),
    "popqa": ("load_qa", "kilt_popqa_3", "rag"),
    "msmarco": ("load_msmarco_rerank", "msmarco_rerank_psg", "rerank"),
    "json_kv": ("load_json_kv", "json_kv", "json_kv"),
    "ruler_mk_needle": ("load_ruler", "ruler_niah_mk_2", "ruler"),
    "ruler_mk_uuid": ("load_ruler", "ruler_niah_mk_3", "ruler"),
    "ruler_mv": ("load_ruler", "ruler_niah_mv", "ruler"),
    "asqa": ("load_alce", "alce_asqa", "alce"),
    "qampari": ("load_alce", "alce_qampari", "alce"),
    "trec_coarse": ("load_icl", "icl_trec_coarse_balance", "icl"),
    "trec_fine": ("load_icl", "icl_trec_fine_balance", "icl"),
    "nlu": ("load_icl", "icl_nlu_balance", "icl"),
    "banking77": ("load_icl", "icl_banking77_balance", "icl"),
    "clinc150": ("load_icl", "icl_clinic150_balance", "icl"),
    "narrativeqa": ("load_narrativeqa", "narrativeqa", "longdoc"),
    "infbench_qa": ("load_infbench", "infbench_qa_eng", "longdoc"),
    "infbench_mc": ("load_infbench", "infbench_choice_eng", "longdoc"),
    "infbench_sum": ("load_infbench", "infbench_sum_eng", "longdoc"),
    "multi_lexsum": ("load_multi_lexsum", "multi_lexsum", "longdoc"),
}
ALCE_PROMPT_FILES = {"asqa": "asqa_revised", "qampari": "qampari_revised"}  # HELMET's cite configs' demo files
MSMARCO_DEMO = ("load_msmarco_rerank", "update", "demo_text")  # where the re-rank demonstration is built
# The values of the re-rank demonstration expression, by their source text, as the fields of our template.
_MSMARCO_PIECES = {"d['query']": "question", "ranking": "answer"}
READS = (official_files.DATA, official_files.MODEL_UTILS, official_files.EVAL_GPT4_LONGQA,
         official_files.EVAL_GPT4_SUMM, *(official_files.ALCE_DEMOS[n] for n in ALCE_PROMPT_FILES.values()))
NOT_REPRODUCED = {"longdoc": "HELMET's demonstrations for this dataset (data.py builds them at run time with "
                             "f-strings from other records) are not given: the prompt is HELMET's 0-shot one"}
TEMPLATE_NAMES = ("user_template", "system_template", "prompt_template", "demo_template", "passage_template",
                  "item_template")


# ---------------------------------------------------------------------------------------------- reading data.py


def _tree() -> ast.Module:
    file = official_files.DATA
    try:
        return ast.parse(read_official_text(file), filename=str(file))
    except SyntaxError as exc:
        raise OfficialFileError(f"{file}: not Python ({exc})") from exc


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise OfficialFileError(f"{official_files.DATA}: no function {name!r} at the top level")


def _test(node: ast.expr, dataset: str) -> bool | None:
    """An ``if`` test of data.py evaluated for ``dataset``; None when it is not one of the forms read."""
    if isinstance(node, ast.BoolOp):
        values = [_test(v, dataset) for v in node.values]
        if any(v is None for v in values):
            return None
        return any(values) if isinstance(node.op, ast.Or) else all(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = _test(node.operand, dataset)
        return None if value is None else not value
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn)
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
        right = node.comparators[0]
        if isinstance(right, ast.Name) and right.id == "dataset":
            found = node.left.value in dataset
        elif (isinstance(right, ast.Call) and not right.args and isinstance(right.func, ast.Attribute)
              and right.func.attr == "lower" and isinstance(right.func.value, ast.Name)
              and right.func.value.id == "dataset"):
            found = node.left.value in dataset.lower()
        else:
            return None
        return found if isinstance(node.ops[0], ast.In) else not found
    return None


def _value(node: ast.expr, env: Mapping[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _value(node.left, env), _value(node.right, env)
        return None if left is None or right is None else left + right
    return None


def _walk(body: list[ast.stmt], dataset: str, env: dict[str, str], function: str) -> None:
    for st in body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            value = _value(st.value, env)
            if value is not None:
                env[st.targets[0].id] = value
            elif st.targets[0].id in env:
                del env[st.targets[0].id]  # reassigned with something not read: not known any more
        elif isinstance(st, ast.If):
            taken = _test(st.test, dataset)
            if taken is None:
                for branch in (st.body, st.orelse):
                    inner: dict[str, str] = {}
                    _walk(branch, dataset, inner, function)
                    named = sorted(n for n in inner if n in TEMPLATE_NAMES)
                    if named:
                        raise OfficialFileError(f"{official_files.DATA}: {function} line {st.lineno}: "
                                                f"{', '.join(named)} set under a test not read here "
                                                f"({ast.unparse(st.test)})")
            else:
                _walk(st.body if taken else st.orelse, dataset, env, function)


@cache
def loader_templates(function: str, dataset: str) -> dict[str, str]:
    """The string variables ``function`` of data.py holds for HELMET's ``dataset`` after its own statements
    (module docstring): ``user_template``, ``system_template``, ``prompt_template`` and the demo templates."""
    env: dict[str, str] = {}
    _walk(_function(_tree(), function).body, dataset, env, function)
    missing = [n for n in ("user_template", "system_template", "prompt_template") if n not in env]
    if missing:
        raise OfficialFileError(f"{official_files.DATA}: {function} for dataset {dataset!r}: "
                                f"{', '.join(missing)} not read")
    return env


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@cache
def msmarco_demo_template() -> str:
    """The re-rank demonstration as a template with fields ``passages``, ``question``, ``answer`` (the ranking):
    data.py's ``demo_text += <joined passages> + f"..." + "..."`` in ``load_msmarco_rerank``'s nested
    ``update``, its literal parts kept."""
    loader, nested, target = MSMARCO_DEMO
    function = _function(_tree(), loader)
    for node in ast.walk(function):
        if isinstance(node, ast.FunctionDef) and node.name == nested:
            for st in ast.walk(node):
                if (isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add) and isinstance(st.target, ast.Name)
                        and st.target.id == target):
                    return _demo_pieces(st.value, st.lineno)
    raise OfficialFileError(f"{official_files.DATA}: {loader}.{nested}: no `{target} += ...` (the re-rank "
                            "demonstration)")


def _demo_pieces(node: ast.expr, line: int) -> str:
    where = f"{official_files.DATA}: {MSMARCO_DEMO[0]} line {line}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _demo_pieces(node.left, line) + _demo_pieces(node.right, line)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _escape(node.value)
    if isinstance(node, ast.JoinedStr):
        out = ""
        for part in node.values:
            if isinstance(part, ast.Constant):
                out += _escape(part.value)
            elif isinstance(part, ast.FormattedValue) and ast.unparse(part.value) in _MSMARCO_PIECES:
                out += "{" + _MSMARCO_PIECES[ast.unparse(part.value)] + "}"
            else:
                raise OfficialFileError(f"{where}: an f-string value {ast.unparse(part)!r} not read here")
        return out
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and "passage_template" in ast.unparse(node)):
        return "{passages}"  # the demonstration's passages, joined as the test record's
    raise OfficialFileError(f"{where}: a piece {ast.unparse(node)!r} not read here")


@cache
def omitted_postfix() -> str:
    """The text data.py's ``truncate_llama2`` puts after a cut document (its ``postfix_text`` default)."""
    function = _function(_tree(), "truncate_llama2")
    args = function.args
    names = [a.arg for a in args.args][-len(args.defaults):] if args.defaults else []
    for name, default in zip(names, args.defaults, strict=True):
        if name == "postfix_text" and isinstance(default, ast.Constant) and isinstance(default.value, str):
            return default.value
    raise OfficialFileError(f"{official_files.DATA}: truncate_llama2 has no string default for postfix_text")


@cache
def options_template() -> str:
    """The string ``load_infbench`` formats with the record's ``*options`` (∞Bench MC's lettered options)."""
    for node in ast.walk(_function(_tree(), "load_infbench")):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)
                and any(isinstance(a, ast.Starred) and "options" in ast.unparse(a) for a in node.args)):
            return node.func.value.value
    raise OfficialFileError(f"{official_files.DATA}: load_infbench formats no string with *options")


def with_helmet_postfix(context: str, ours: str) -> str:
    """A constructed document cut here (ending with our ``ours`` postfix) ending with HELMET's postfix instead."""
    return context[: -len(ours)] + omitted_postfix() if ours and context.endswith(ours) else context


# ---------------------------------------------------------------------------------------------- filling


def _fields(item: Mapping[str, Any]) -> dict[str, Any]:
    raw = item.get("record_fields")
    return json.loads(raw) if isinstance(raw, str) and raw else dict(raw or {})


def _need(task: str, item: Mapping[str, Any], record: Mapping[str, Any], key: str) -> Any:
    if key not in record:
        raise ValueError(f"task {task}, item {item.get('item_id')!r}: field {key!r} is missing from the record "
                         f"(HELMET's data.py fills its prompt with it)")
    return record[key]


def alce_passages(style: str, docs: list[Mapping[str, Any]]) -> str:
    """``doc_prompt.format(**doc, ID=i)`` (i from 1) of HELMET's ALCE prompt file, joined by a blank line."""
    doc_prompt = official_files.alce_demos(ALCE_PROMPT_FILES[style])["doc_prompt"]
    return "\n\n".join(fill_template(doc_prompt, {**d, "ID": i}) for i, d in enumerate(docs, 1))


def sample_of(task: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields data.py gives the record of ``item`` (a ``source_items`` row, or an instance row whose
    ``context`` is the level's) for ``task`` (module docstring)."""
    if task not in DATASETS:
        raise ValueError(f"task {task!r}: not a HELMET dataset of the official protocol (known: {sorted(DATASETS)})")
    loader, dataset, kind = DATASETS[task]
    t = loader_templates(loader, dataset)
    fields = _fields(item)
    demos = fields.get("demos") or []
    sample: dict[str, Any] = {"context": item["context"], "question": item["question"]}
    if kind == "rag":
        text = "\n\n".join(t["demo_template"].format(documents=d["passages"], question=d["question"],
                                                     answer=d["answer"]) for d in demos)
        sample["demos"] = text + "\n\n" if demos else ""
    elif kind == "rerank":
        template = msmarco_demo_template()
        sample["demos"] = "".join(template.format(passages=d["passages"], question=d["question"],
                                                  answer=d["answer"]) for d in demos)
    elif kind == "json_kv":
        text = "\n\n".join(t["demo_template"].format(key=d["key"], value=" " + d["value"]) for d in demos)
        sample["demos"] = text + "\n\n" if demos else ""
    elif kind == "ruler":
        query = _need(task, item, fields, "query")
        sample.update(query=query, question=query, example="",
                      type_needle_v=_need(task, item, fields, "type_needle_v"))
    elif kind == "alce":
        style = _need(task, item, fields, "style")
        prompt_file = official_files.alce_demos(ALCE_PROMPT_FILES[style])
        sep = prompt_file["demo_sep"]
        text = sep.join(fill_template(prompt_file["demo_prompt"], {**d, "instruction": prompt_file["instruction"],
                                                                   "context": alce_passages(style, d["docs"])})
                        for d in demos)
        sample.update(demo_text=text + sep if demos else "", instruction=prompt_file["instruction"])
        if "passages" in fields:  # an instance: the level's passages
            sample["context"] = alce_passages(style, fields["passages"])
    elif kind == "longdoc":
        sample["demo"] = ""
        if "options" in fields:
            template = options_template()
            if template.count("{}") != len(fields["options"]):
                raise ValueError(f"task {task}, item {item.get('item_id')!r}: {len(fields['options'])} options; "
                                 f"HELMET's data.py writes {template.count('{}')}")
            sample["options"] = template.format(*fields["options"])
    return sample


def official_prompt(task: str, item: Mapping[str, Any], *, chat: bool) -> str:
    """HELMET's prompt for ``item``: ``user_template`` (chat) or ``prompt_template`` (completion) of the task's
    loader, ``.format(**sample)``. A field the template names that the record lacks is an error naming it."""
    sample = sample_of(task, item)  # checks the task first
    loader, dataset, _ = DATASETS[task]
    template = loader_templates(loader, dataset)["user_template" if chat else "prompt_template"]
    try:
        return fill_template(template, sample)
    except TemplateError as exc:
        raise ValueError(f"{official_files.DATA} {loader} ({dataset}): the prompt template: {exc}") from None
    except KeyError as exc:
        raise ValueError(f"{official_files.DATA} {loader} ({dataset}): the prompt names field {exc.args[0]!r}, which "
                         f"the record of item {item.get('item_id')!r} does not give (it gives {sorted(sample)})") from None


def budget_fields(task: str, level: str, max_new_tokens: int) -> dict[str, Any]:
    """What an instance says about HELMET's budget (HE8): ``protocol_budget`` = L - max_new_tokens (the level's
    tokens, in the evaluated model's tokens, as ``model_utils.tokenize`` counts the rendered input) and
    ``protocol_note`` (how generation here differs; module docstring), with what is not reproduced for the
    task's kind."""
    budget = level_tokens(level) - max_new_tokens
    note = (f"HELMET cuts the context's tail when the rendered input exceeds {budget} tokens (the level {level} - "
            f"{max_new_tokens} new tokens, model_utils.tokenize), whatever the model's window; generation here cuts "
            f"the same way (end_of_context) at {budget} tokens for a model whose window is {level} or longer, and a "
            "shorter window is not run past as HELMET runs it: cut at the window, the generation row's "
            "sampling_params say so (protocol_note)")
    kind = DATASETS.get(task, (None, None, None))[2]
    if kind in NOT_REPRODUCED:
        note += f"; {NOT_REPRODUCED[kind]}"
    return {"protocol_budget": budget, "protocol_note": note}


# ---------------------------------------------------------------------------------------------- the protocol


@cache
def plain_prompt_tasks() -> frozenset[str]:
    """HELMET's completion-mode tasks: the packaged HELMET task files' ``chat_template: false``."""
    from lc_pipeline.tasks.catalog import load_catalog

    catalog = load_catalog()
    return frozenset(s.name for s in catalog.tasks(BENCHMARK) if not s.chat_template)


def official_protocol(fetch: bool) -> OfficialProtocol | None:
    """HELMET's :class:`OfficialProtocol` from the authors' files. ``fetch``: find them as lc_pipeline/official.py
    does (fetching when online; missing is an error naming what to provide); otherwise None when they are not on
    this machine (config.files_found_here)."""
    if not fetch and not files_found_here(READS):
        return None
    for reader in (loader_templates, msmarco_demo_template, omitted_postfix, options_template):
        reader.cache_clear()  # read from where the files are now (LCP_OFFICIAL may have changed)
    for loader, dataset, _ in set(DATASETS.values()):  # read (and verify) every template now: fail before a run
        loader_templates(loader, dataset)
    msmarco_demo_template()
    omitted_postfix()
    options_template()
    for name in ALCE_PROMPT_FILES.values():
        official_files.alce_demos(name)
    plain = plain_prompt_tasks()
    return OfficialProtocol(
        benchmark=BENCHMARK, commit=official_files.COMMIT,
        prompt=lambda task, item: official_prompt(task, item, chat=task not in plain),
        max_new_tokens={}, truncation=TRUNCATION, plain_prompt_tasks=plain,
    )
