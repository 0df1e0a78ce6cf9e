"""Loong under ``protocol: official`` (issue 30; fidelity audit LO2..LO6): builder loong.released assembles each
item as the authors' ``src/utils/prompt.py`` does (``get_content``, ``get_doc_str``, ``get_generate_prompt``),
written out here independently: documents read whole under their headers, the greedy drop in cl100k_base against
128,000 tokens with no answer room (on a synthetic item of our own text that overflows it), the walk and shuffle
order, the item in its released ``set``; the judge prompt for such an instance is the authors' template filled by
hand as ``get_evaluate_prompts`` fills it, with the released answer as Python's ``str()``. ``protocol: ours``
builds the same instance rows as before the protocol existed (digests taken from the code before it).

Uses the shared Loong items (../shared/data/loong) with the invented documents of tests/fixtures/loong_docs and
the authors' files in ../shared/official; skipped when either is absent."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import polars as pl
import pytest
import tiktoken
import yaml

from lc_pipeline import schemas
from lc_pipeline.benchmarks.loong import protocol as loong_protocol
from lc_pipeline.benchmarks.loong.official_files import COMMIT
from lc_pipeline.benchmarks.loong.official_files import (
    judge_prompt as authors_judge_prompt,
)
from lc_pipeline.config import PACKAGED_CONFIGS, load_config
from lc_pipeline.construct.builders import LevelInputs, level_batches
from lc_pipeline.construct.instance_checks import evidence_violations
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.construct.truncation import split_documents
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.score import judge
from lc_pipeline.sources.loader import load_source
from lc_pipeline.tasks import catalog_for

ROOT = Path(__file__).resolve().parents[2]
LOONG = ROOT.parent / "shared" / "data" / "loong" / "loong.jsonl"
OFFICIAL = ROOT.parent / "shared" / "official"
FIXTURE_DOCS = ROOT / "tests" / "fixtures" / "loong_docs"
pytestmark = [
    pytest.mark.skipif(not LOONG.is_file(), reason=f"no Loong items at {LOONG} (../shared/data/loong)"),
    pytest.mark.skipif(not (OFFICIAL / "MozerWang+Loong").is_dir(),
                       reason=f"the authors' Loong files are not at {OFFICIAL} (../shared/official)"),
]
LABEL = f"official@{COMMIT[:7]}"
SETS = ["set1", "set2", "set3", "set4"]
# The authors' token_length (src/utils/token_length.py): tiktoken's encoding for gpt-3.5-turbo (cl100k_base; its
# offline copy here), called as they call it, special tokens as text.
assert tiktoken.model.encoding_name_for_model("gpt-3.5-turbo") == "cl100k_base"
ENCODING = TokenCounter.load("cl100k_base").encoding
MAX_LENGTH = 128_000  # run.sh --max_length of a 128K model (audit LO5)
SEED = 1000000007


def token_length(text: str) -> int:
    return len(ENCODING.encode(text, disallowed_special=()))


# --- the authors' assembly, written out -------------------------------------------------------------------------


def authors_document(item: dict, docs: Path, name: str, idx: int, withhold_result: bool) -> str:
    """get_content: the file whole under its header line, then a blank line."""
    if item["type"] == "financial":
        pattern = f"*{name}*.txt" if str(item["level"]).strip() == "4" else f"*2024-{name}*.txt"
        files = sorted((docs / "financial").glob(pattern), key=lambda p: (len(p.stem), p.name))
        return f"《{files[0].stem.split('-')[-1]}》\n" + files[0].read_text(encoding="utf-8") + "\n\n"
    if item["type"] == "paper":
        content = (docs / "paper" / name).read_text(encoding="utf-8")
        return content.split("\n", 1)[0].strip("#").strip() + "\n" + content + "\n\n"
    legal = json.loads((docs / "legal" / "legal.json").read_text(encoding="utf-8"))[name]
    content = legal["content"] if withhold_result else legal["content"] + legal["result"]
    return f"《判决文书{idx + 1}》\n" + content + "\n\n"


def authors_prompt(item: dict, docs: Path, withhold_result: bool = False) -> tuple[str, list[int]]:
    """get_generate_prompt / get_doc_str, each item with its own generator (the authors': one for the file)."""
    template = item["prompt_template"].replace("{question}", item["question"]).replace("{instruction}",
                                                                                        item["instruction"])
    fixed = token_length(template) - token_length("{docs}")
    contents = [(i, authors_document(item, docs, n, i, withhold_result)) for i, n in enumerate(item["doc"])]
    rng = random.Random(f"{SEED}:{item['id']}")
    shuffle = item.get("shuffle_doc", True)
    if shuffle and item["type"] == "financial":
        rng.shuffle(contents)
    kept = []
    for i, content in contents:
        if fixed + sum(token_length(s) for _, s in kept) + token_length(content) > MAX_LENGTH:
            continue
        kept.append((i, content))
    if shuffle:
        rng.shuffle(kept)
    return template.replace("{docs}", "".join(s for _, s in kept)), [i for i, _ in kept]


# --- building -----------------------------------------------------------------------------------------------------


def release(root: Path, items: Path = LOONG, docs: Path = FIXTURE_DOCS) -> Path:
    folder = root / "data" / "loong"
    folder.mkdir(parents=True)
    (folder / "loong.jsonl").symlink_to(items)
    shutil.copytree(docs, folder / "doc")
    return folder


def config_file(root: Path, **over) -> Path:
    body = yaml.safe_load((PACKAGED_CONFIGS / "loong.yaml").read_text(encoding="utf-8"))
    # small sets so that the tiny invented documents spread over them under ours (prompt tokens)
    body["released"]["bounds"] = {"set1": [0, 300], "set2": [300, 450], "set3": [450, 1000], "set4": [1000, None]}
    body.update(over)
    path = root / "loong.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def build(path: Path, meta: dict | None = None) -> pl.DataFrame:
    """The config's instances of every set; each row checked as the instances asset checks it (the evidence it
    names is in its context verbatim)."""
    config = load_config(path)
    loaded = load_source(config.sources[0])
    counter = TokenCounter.load("cl100k_base")
    frames = []
    for level in config.lengths:
        e = schemas.empty
        inputs = LevelInputs(loaded.items, loaded.documents, e("passages"), e("hard_negatives"), e("confusing_facts"),
                             e("replacement_rules"), level, config, counter, catalog_for(config))
        frames += [f.with_columns(level=pl.lit(level)) for f in level_batches(inputs)]
        if meta is not None:
            meta[level] = dict(inputs.meta)
    rows = pl.concat(frames)
    assert evidence_violations(rows, loaded.documents) == []
    return rows


@pytest.fixture
def env(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    return tmp_path


def raw_items(path: Path = LOONG) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


# --- tests --------------------------------------------------------------------------------------------------------


def test_each_prompt_is_the_authors_assembly_in_the_released_set(env):
    release(env)
    rows = build(config_file(env, protocol="official"))
    items = raw_items()
    assert rows.height == 7 and set(rows["protocol"]) == {LABEL}
    rule = loong_protocol.legal_result_rule()
    for row in rows.iter_rows(named=True):
        item = items[row["record_id"]]
        withhold = item["level"] == rule.level and rule.marker in item[rule.field]
        prompt, kept = authors_prompt(item, FIXTURE_DOCS, withhold)
        assert row["prompt"] == prompt, item["id"]
        assert row["level"] == f"set{item['set']}"  # the released set, not our token count (LO4)
        assert row["context_doc_ids"] == [json.loads(row["record_fields"])["doc_ids"][i] for i in kept]
        assert row["input_tokens"] == token_length(prompt)
        # generation can still drop whole documents for a model whose window is shorter (task truncation)
        assert len(split_documents(row["context"])) == len(kept)
    # the sets differ from what our token count gives the same items under ours
    ours = build(config_file(env, protocol="ours"))
    assert dict(zip(ours["record_id"], ours["level"], strict=True)) != dict(
        zip(rows["record_id"], rows["level"], strict=True))


def test_a_judgments_result_is_withheld_only_where_get_content_says(env):
    """get_content withholds a judgment's result when a level-4 item's *instruction* holds the words of the
    Link-the-Links question; in the release those words are in the question, so the authors feed every verdict."""
    rule = loong_protocol.legal_result_rule()
    assert (rule.level, rule.field) == (4, "instruction")
    link = raw_items()["a3a1029d-23d6-4614-9886-cb20d43319c2"]
    assert rule.marker in link["question"] and rule.marker not in link["instruction"]
    release(env)
    rows = build(config_file(env, protocol="official")).filter(pl.col("record_id") == link["id"])
    legal = json.loads((FIXTURE_DOCS / "legal" / "legal.json").read_text(encoding="utf-8"))
    assert all(legal[n]["result"] in rows["prompt"][0] for n in link["doc"])
    # its evidence (the facts-only documents of ours) is held verbatim; a judgment in full (verdict joined to its
    # facts) is not our document (facts, blank line, verdict), so it is not named as evidence held
    assert len(rows["evidence_doc_ids"][0]) == len(link["doc"])
    classification = build(config_file(env, protocol="official")).filter(
        pl.col("record_id") == "f4876639-ba90-49d4-b177-5a4bab701e3e")
    assert classification["evidence_doc_ids"][0].to_list() == []
    ours = build(config_file(env, protocol="ours")).filter(pl.col("record_id") == link["id"])
    assert not any(legal[n]["result"].strip() in ours["prompt"][0] for n in link["doc"])


SIZES = {"Alder Holdings": 60_000, "Birch Freight": 50_000, "Cedar Mills": 30_000, "Dogwood Labs": 10_000}


def synthetic_release(root: Path) -> Path:
    """Two financial items of our own text over four reports of ~60k, 50k, 30k and 10k cl100k tokens: together
    far beyond 128,000."""
    docs = root / "docs"
    (docs / "financial").mkdir(parents=True)
    for i, (name, n) in enumerate(SIZES.items()):
        words = " ".join(f"ledger{(i * 7 + k) % 10}" for k in range(n // 2))
        (docs / "financial" / f"2024-{name}-j.txt").write_text(f"Annual report of {name}.\n{words}\n",
                                                               encoding="utf-8")
    base = {"type": "financial", "level": 2, "length": 150_000, "language": "en", "doc": list(SIZES),
            "question": "Which company reports the most ledger entries?",
            "instruction": "Answer with the company's name only.",
            "prompt_template": "{docs}\n\nInstruction: {instruction}\nQuestion: {question}",
            "answer": "Alder Holdings"}
    items = [{**base, "id": "synthetic-in-order", "set": 3, "shuffle_doc": False},
             {**base, "id": "synthetic-shuffled", "set": 4, "shuffle_doc": True}]
    path = root / "synthetic.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return release(root, path, docs)


def test_documents_over_128000_cl100k_tokens_are_dropped_as_the_authors_drop_them(env):
    synthetic_release(env)
    meta: dict = {}
    rows = build(config_file(env, protocol="official", max_new_tokens=64), meta)
    items = raw_items(env / "synthetic.jsonl")
    assert dict(zip(rows["record_id"], rows["level"], strict=True)) == {"synthetic-in-order": "set3",
                                                                        "synthetic-shuffled": "set4"}
    for row in rows.iter_rows(named=True):
        prompt, kept = authors_prompt(items[row["record_id"]], env / "docs")
        assert row["prompt"] == prompt
        assert row["context_doc_ids"] == [json.loads(row["record_fields"])["doc_ids"][i] for i in kept]
        assert sorted(row["evidence_doc_ids"]) == sorted(row["context_doc_ids"])  # the dropped one is not in it
        # no room reserved for the answer: the prompt may take the whole 128,000
        assert token_length(prompt) <= MAX_LENGTH < token_length(prompt) + 64 + 30_000
    in_order = rows.filter(pl.col("record_id") == "synthetic-in-order").row(0, named=True)
    # by hand: 60k kept, 50k kept (110k), 30k skipped (140k > 128k), the walk goes on, 10k kept (120k)
    names = [d.split("-financial-")[1] for d in in_order["context_doc_ids"]]
    assert names == ["Alder Holdings", "Birch Freight", "Dogwood Labs"]
    assert sum(m.get("documents_dropped", 0) for m in meta.values()) == 2  # one per item


def test_the_judge_prompt_is_the_authors_filled_by_hand(env):
    release(env)
    rows = build(config_file(env, protocol="official"))
    items = raw_items()
    template = authors_judge_prompt()
    rubric = judge.official_rubric("loong")
    assert rubric.protocol == LABEL
    for record_id in ("f4876639-ba90-49d4-b177-5a4bab701e3e", "13a4a371-6339-4c9d-82cf-fc9ab2bb017d"):
        row = rows.filter(pl.col("record_id") == record_id).row(0, named=True)
        item = items[record_id]
        inp = judge.JudgeInput(row["question"], list(row["answers"]), "a reply", json.loads(row["record_fields"]),
                               row["task"])
        question = item["prompt_template"]
        if item["type"] != "paper":
            question = question.replace("{docs}", "")
        question = question.replace("{question}", item["question"]).replace("{instruction}", item["instruction"])
        assert rubric.prompts(inp)["score"] == template.format(question, item["answer"], "a reply")
        assert isinstance(item["answer"], dict)  # str() of a dict: the file's key order, single quotes (LO3)


# Digests of the instance rows `protocol: ours` built before the official protocol existed (commit 43d66ca).
OURS_DIGESTS = {
    "13a4a371-6339-4c9d-82cf-fc9ab2bb017d": "9629a1225be0b33e193aabce16aa600eca33cc5510a187dd2efb79373f5a932d",
    "6cd1f216-8ef9-486f-8755-08531eb907dc": "385045fa17e855ff3bd6476d05ddcd75b83fd496c60c7b471a67f258fef28ac6",
    "a3a1029d-23d6-4614-9886-cb20d43319c2": "8daaa24d9f4a9047a50c02ee0899f149a9241dbd5c74dacb30781ca5663dddaa",
    "c9495554-23fd-4667-a519-7e9139b5d17c": "a9e55fde868292201ed18e1a008e1f3c03ab39c034141adc5c25c6775838b902",
    "cd618a43-7176-432d-b21e-432e5c2ca4a7": "6c004de7351a113a316b981636651d3540d83c7482cf00116f313247c673c7df",
    "f4876639-ba90-49d4-b177-5a4bab701e3e": "0f6c94058c9464ca035c26959f4f0fb93e9fe864e20ca354c6359f6c74dafe5d",
    "ff3aa0ab-8dff-4115-8365-0b734655b779": "b649a76d3b9d2c808d24a97e15529e0d6cea84f5c879058feac06d2388534703",
}
DIGESTED = ("instance_id", "item_id", "task", "level", "question", "answers", "context", "prompt", "context_doc_ids",
            "evidence_doc_ids", "input_tokens", "context_tokens", "max_new_tokens", "record_id", "record_fields",
            "protocol")


def digest(row: dict) -> str:
    return hashlib.sha256(json.dumps({k: row[k] for k in DIGESTED}, ensure_ascii=False, sort_keys=True,
                                     default=str).encode()).hexdigest()


@pytest.mark.parametrize("protocol", ["ours", None])
def test_ours_rows_are_unchanged(env, monkeypatch, protocol):
    """``protocol: ours`` (and unset without the authors' files) builds the rows it built before."""
    release(env)
    if protocol is None:
        monkeypatch.delenv("LCP_OFFICIAL")
    rows = build(config_file(env, **({"protocol": protocol} if protocol else {})))
    assert set(rows["protocol"]) == {"ours"}
    assert {r["record_id"]: digest(r) for r in rows.iter_rows(named=True)} == OURS_DIGESTS
    assert all("answer" not in json.loads(f) for f in rows["record_fields"])


def test_the_packaged_config_runs_official_with_the_authors_files_and_its_judge_follows(env):
    """Unset ``protocol`` (the packaged loong config): official when the authors' files are found; the judge's
    protocol follows the config, and the tasks take the protocol's truncation and no answer length of theirs."""
    config = load_config(PACKAGED_CONFIGS / "loong.yaml")
    assert config.protocol is None and config.protocol_label() == LABEL
    assert JudgeResource().resolved_protocol(config) == "official"
    specs = catalog_for(config).tasks("loong")
    assert {s.truncation for s in specs} == {"drop_documents"} and all(s.chat_template for s in specs)
    assert {s.max_new_tokens for s in specs} <= {None, config.max_new_tokens}  # the authors send no max_tokens
