"""Loong's official protocol: how the authors' ``src/step1_load_data.py`` (``utils/prompt.py``) assembles an item's
prompt, and how their judge scores it (issue 30; fidelity audit LO2..LO6).

Read from their files at the pinned commit (official_files.py), never copied here; the item's own template,
instruction, question and answer come from the release (``loong.jsonl``), its documents from the release's
``doc/`` folder, read as ``get_content`` reads them (sources.py ``LoongDocuments.as_released``: whole
files, nothing stripped; a legal judgment's ``result`` directly after its ``content``, withheld only where
``get_content``'s own condition holds, read from their file by :func:`legal_result_rule`; on the released data
it never does, since the words it looks for sit in the question, not the instruction).

- **prompt** (``get_generate_prompt``): the item's ``prompt_template`` with ``{question}`` then
  ``{instruction}`` replaced (``str.replace``), then ``{docs}`` replaced by the kept documents joined with nothing
  between (each ends in a blank line);
- **documents kept** (``get_doc_str``, LO5): walked in order, a document skipped (and the walk going on) when
  the template's tokens (``token_length(template) - token_length("{docs}")``) plus the documents kept so far
  plus this one exceed :data:`MAX_LENGTH`, each counted on its own in cl100k_base (``tiktoken`` for
  gpt-3.5-turbo, special tokens as text): no room is reserved for the answer. The order walked: as listed,
  except a financial item with ``shuffle_doc`` (absent: true), whose documents are shuffled first; then, any item
  with ``shuffle_doc`` has its kept documents shuffled. The authors draw both shuffles from one generator seeded
  with :data:`SEED` for the whole file (so an item's order depends on every item before it); here each item has
  its own generator, seeded with ``"<SEED>:<item id>"``, drawn in the same sequence (first shuffle, then second);
- **set** (``step4_cal_metric``, LO4): the item's released ``set`` field (``set<n>``), not our prompt's
  token count;
- **answer length** (LO6): the authors send no ``max_tokens`` (the API's default) to any model, their
  vLLM-served open ones included, at temperature 0 (``config/models/*.yaml`` ``run_args``): :data:`API_DECODING`,
  applied to requests of the ``openai`` backend (no ``max_tokens`` in the body; generate/partition.py). A local
  engine needs a cap: the config's ``max_new_tokens`` (the packaged loong config: 1,024) stays that cap (the row
  says so), and generation cuts the prompt further (whole documents, ``drop_documents``, the model's window - that
  cap, for API models too) only where the model's window is below the authors' 128,000 cl100k tokens plus the
  answer: :data:`MAX_NEW_TOKENS` is empty;
- **chat**: one user turn (every task through the chat template), as their ``generate.py`` sends it;
- **judge** (LO2, LO3): their prompt and settings (benchmarks/loong/judging.py), switched on with this protocol
  (score/judge.py ``official_rubric``), the gold answer as Python's ``str()`` of the released answer, read
  from ``loong.jsonl`` with ``json.loads`` (keys in the file's order) and kept in the official instances'
  ``record_fields.answer`` (the source keeps no such field: ``ours`` rows are unchanged).

:data:`MAX_LENGTH` is ``--max_length`` of the authors' ``run.sh``, which they set to the evaluated model's
window: 128,000 for the 128K models of the paper (audit LO5). It is a number of the run, not of a file: change it
here for a model of another window.
"""

from __future__ import annotations

import ast
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from lc_pipeline.benchmarks.loong import official_files
from lc_pipeline.benchmarks.loong.sources import LoongDocuments, documents_folder
from lc_pipeline.config import OfficialProtocol, files_found_here
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.construct.truncation import DROP_DOCUMENTS, drop_documents
from lc_pipeline.generate.base import ApiDecoding
from lc_pipeline.official import OfficialFileError, read_official_text
from lc_pipeline.settings import Settings

MAX_LENGTH = 128_000  # run.sh --max_length for a 128K model (module docstring)
TOKENIZER = "cl100k_base"  # token_length.py: tiktoken.encoding_for_model("gpt-3.5-turbo")
SEED = 1000000007  # args.py --seed
TRUNCATION = DROP_DOCUMENTS  # generation, only where a model's window is below the authors' prompt
MAX_NEW_TOKENS: dict[str, int] = {}  # the authors send no max_tokens: the config's cap applies
# How src/utils/generate.py calls an OpenAI-compatible server (type openai or vllm, LO6): messages, model and
# temperature (0.0 in every config/models/*.yaml), no max_tokens: the server's default.
API_DECODING = ApiDecoding(send_max_tokens=False, source=f"{official_files.REPO} "
                           f"{official_files.GENERATE.path}@{official_files.COMMIT[:7]}")
READS = (official_files.PROMPT,)  # the judge prompt and get_content's rule
CONTENT_FUNCTION = "get_content"


class LoongProtocolError(ValueError):
    """An item that cannot be assembled as the authors assemble it; the message names the item and the field."""


@dataclass(frozen=True)
class LegalResultRule:
    """``get_content``'s condition for withholding a judgment's ``result``: the item's ``level`` equals
    ``level`` and ``marker`` occurs in the item's ``field``."""

    level: int
    marker: str
    field: str

    def withholds(self, fields: Mapping[str, Any]) -> bool:
        return fields.get("level") == self.level and self.marker in str(fields.get(self.field) or "")


def legal_result_rule(*, settings: Settings | None = None) -> LegalResultRule:
    """The rule read from ``get_content()`` of ``src/utils/prompt.py`` (parsed with ``ast``, never run): the one
    ``<name> == <int> and '<text>' in item['<field>']`` test in it."""
    file = official_files.PROMPT
    tree = ast.parse(read_official_text(file, settings=settings), filename=str(file))
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == CONTENT_FUNCTION]
    if len(funcs) != 1:
        raise OfficialFileError(f"{file}: expected one function {CONTENT_FUNCTION}(), found {len(funcs)}")
    rules = []
    for node in ast.walk(funcs[0]):
        if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And) and len(node.values) == 2):
            continue
        level_test, marker_test = node.values
        if not (isinstance(level_test, ast.Compare) and isinstance(level_test.ops[0], ast.Eq)
                and isinstance(level_test.comparators[0], ast.Constant)
                and isinstance(level_test.comparators[0].value, int)):
            continue
        if not (isinstance(marker_test, ast.Compare) and isinstance(marker_test.ops[0], ast.In)
                and isinstance(marker_test.left, ast.Constant) and isinstance(marker_test.left.value, str)
                and isinstance(marker_test.comparators[0], ast.Subscript)
                and isinstance(marker_test.comparators[0].slice, ast.Constant)):
            continue
        rules.append(LegalResultRule(level_test.comparators[0].value, marker_test.left.value,
                                     str(marker_test.comparators[0].slice.value)))
    if len(rules) != 1:
        raise OfficialFileError(f"{file}: expected one `<level> == <n> and '<text>' in item['<field>']` test in "
                                f"{CONTENT_FUNCTION}() (when a judgment's result is withheld), found {len(rules)}")
    return rules[0]


@cache
def counter() -> TokenCounter:
    """The authors' token_length: cl100k_base, special tokens counted as text (TokenCounter encodes ordinary)."""
    return TokenCounter.load(TOKENIZER)


def fill_question(template: str, question: str, instruction: str) -> str:
    """``get_generate_prompt``'s first step: ``{question}``, then ``{instruction}``, replaced."""
    return template.replace("{question}", question).replace("{instruction}", instruction)


@dataclass(frozen=True)
class Assembled:
    prompt: str
    context: str  # the kept documents, joined as they are shown
    shown: list[int]  # positions (in the item's ``doc``) of the kept documents, in the order shown
    dropped: int  # documents left out to keep the prompt within MAX_LENGTH


class Release(NamedTuple):
    documents: LoongDocuments
    answers: dict[str, str]  # item id -> str() of its released answer (the authors' judge shows it, LO3)


@dataclass(frozen=True)
class LoongProtocol(OfficialProtocol):
    """:class:`OfficialProtocol` with what builder loong.released needs to assemble an item as the authors do:
    Loong ships no contexts, so ``prompt(task, item)`` (a released context's prompt) does not apply."""

    legal_rule: LegalResultRule | None = None
    max_length: int = MAX_LENGTH

    def release(self, source) -> Release:
        """What the authors read of a ``kind: loong`` source (config.SourceConfig, ``$LCP_DATA`` expanded): its
        documents folder (``documents_dir``, else ``doc/`` beside ``loong.jsonl``) and each item's answer as
        ``str()`` renders it, read from ``loong.jsonl`` as their scripts read it (``json.loads`` per line)."""
        from lc_pipeline.sources.loader import expand_data_dir

        options = {k: expand_data_dir(v) for k, v in source.options.items()}
        path = options.get("path") or options.get("paths")
        if isinstance(path, list | tuple):
            path = path[0] if len(path) == 1 else None
        where = f"source {source.name!r}: protocol {self.label} reads the release as the authors do"
        folder = documents_folder(path, options.get("documents_dir")) if path else options.get("documents_dir")
        if folder is None or not Path(folder).is_dir():
            raise LoongProtocolError(f"{where}, each item's documents from its doc/ folder: give the source "
                                     "documents_dir, or path: the folder holding loong.jsonl and doc/")
        items = Path(path) / "loong.jsonl" if path and Path(path).is_dir() else Path(path) if path else None
        if items is None or not items.is_file():
            raise LoongProtocolError(f"{where}, each item's answer from loong.jsonl: give the source path: that file "
                                     "or the folder holding it")
        answers = {}
        with items.open(encoding="utf-8") as lines:
            for n, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        record = json.loads(line)
                        answers[str(record["id"])] = str(record["answer"])
                    except (json.JSONDecodeError, KeyError, TypeError) as exc:
                        raise LoongProtocolError(f"{items} line {n}: field 'answer' (or 'id') not readable: "
                                                 f"{exc}") from None
        return Release(LoongDocuments(folder), answers)

    def assemble(self, item: Mapping[str, Any], fields: Mapping[str, Any], documents: LoongDocuments) -> Assembled:
        """The item's prompt as ``get_generate_prompt`` builds it (module docstring)."""
        where = f"item {item['item_id']!r} (record {item.get('record_id')!r})"
        names, type_, level = list(fields["doc"]), fields["type"], fields["level"]
        with_result = not (type_ == "legal" and self.legal_rule is not None and self.legal_rule.withholds(fields))
        blocks = []
        for i, name in enumerate(names):
            block = documents.as_released(type_, name, level, i + 1, with_result=with_result)
            if block is None:
                raise LoongProtocolError(f"{where}: field 'doc': document {name!r} ({type_}) not found: expected "
                                         f"{documents.expected(type_, name, level)}")
            blocks.append(block)
        template = fill_question(fields["prompt_template"], fields.get("question") or "",
                                 fields.get("instruction") or "")
        count = counter().count
        fixed = count(template) - count("{docs}")
        shuffle = fields.get("shuffle_doc", True) is not False
        rng = random.Random(f"{SEED}:{item.get('record_id') or item['item_id']}")
        order = list(range(len(blocks)))
        if shuffle and type_ == "financial":
            rng.shuffle(order)
        kept = [order[k] for k in drop_documents([count(blocks[i]) for i in order], fixed, self.max_length)]
        if shuffle:
            rng.shuffle(kept)
        context = "".join(blocks[i] for i in kept)
        return Assembled(template.replace("{docs}", context), context, kept, len(blocks) - len(kept))


def official_api_decoding(task: str) -> ApiDecoding:
    """How the authors send every task's request to an API server (:data:`API_DECODING`; generate/partition.py)."""
    return API_DECODING


def _no_released_context(task: str, item: Mapping[str, Any]) -> str:
    raise ValueError(f"Loong item {item.get('item_id')!r} ({task}): Loong ships no contexts; its prompt is assembled "
                     "from its documents by builder loong.released")


def official_protocol(fetch: bool) -> OfficialProtocol | None:
    """Loong's :class:`LoongProtocol` from the authors' files. ``fetch``: find them as lc_pipeline/official.py
    does (fetching when online; missing is an error naming what to provide); otherwise None when they are not on
    this machine (config.files_found_here)."""
    if not fetch and not files_found_here(READS):
        return None
    official_files.judge_prompt()  # read (and verify) now: a run whose judge cannot start fails before it starts
    return LoongProtocol(benchmark="loong", commit=official_files.COMMIT, prompt=_no_released_context,
                         max_new_tokens=MAX_NEW_TOKENS, truncation=TRUNCATION, legal_rule=legal_result_rule())
