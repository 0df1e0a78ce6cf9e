"""Loong run as released (builder loong.released, benchmarks/loong/released_build.py): the shared 1,600 items with
invented documents in the release's folder layout (tests/fixtures/loong_docs: financial/*.txt, paper/*.md,
legal/legal.json) for seven of them. Each item with all its documents is one instance whose context is every
document it names, each under its header, and nothing else; whose prompt is the item's own template around
its own instruction and question; in the set its prompt's cl100k_base token count falls in. Items whose
documents are missing are rejected records naming the file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from lc_pipeline import schemas
from lc_pipeline.benchmarks.loong.released_build import (
    document_order,
    fill_template,
    judge_question,
)
from lc_pipeline.config import load_config
from lc_pipeline.construct.builders import BuildError, LevelInputs, level_batches
from lc_pipeline.construct.released import in_bounds
from lc_pipeline.construct.tokens import TokenCounter
from lc_pipeline.construct.truncation import DROP_DOCUMENTS, fit_prompt, split_documents
from lc_pipeline.sources.loader import load_source
from lc_pipeline.tasks import catalog_for

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LCP_SHARED_DATA") or ROOT.parent / "shared" / "data")
LOONG = SHARED / "loong" / "loong.jsonl"
FIXTURE_DOCS = ROOT / "tests" / "fixtures" / "loong_docs"
needs_shared = pytest.mark.skipif(not LOONG.is_file(), reason=f"no Loong items at {LOONG} (set LCP_SHARED_DATA)")
COUNTER = TokenCounter.load("cl100k_base")
# Small sets so that the tiny invented documents spread over all four (the packaged config: 10K-200K+).
BOUNDS = {"set1": [0, 300], "set2": [300, 450], "set3": [450, 1000], "set4": [1000, None]}
WITH_DOCUMENTS = {  # the items whose every document is in the fixture folder
    "ff3aa0ab-8dff-4115-8365-0b734655b779": "spotlight_locating",  # financial, en
    "6cd1f216-8ef9-486f-8755-08531eb907dc": "chain_of_reasoning",  # financial temporal analysis, zh
    "c9495554-23fd-4667-a519-7e9139b5d17c": "chain_of_reasoning",
    "f4876639-ba90-49d4-b177-5a4bab701e3e": "clustering",  # legal case classification
    "a3a1029d-23d6-4614-9886-cb20d43319c2": "chain_of_reasoning",  # legal link the links
    "13a4a371-6339-4c9d-82cf-fc9ab2bb017d": "clustering",  # paper citation & reference
    "cd618a43-7176-432d-b21e-432e5c2ca4a7": "chain_of_reasoning",  # paper citation chain (no question)
}


def raw_items() -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, LOONG.read_text(encoding="utf-8").splitlines())}


def release_folder(root: Path) -> Path:
    """$LCP_DATA/loong as the release lays it out: loong.jsonl and doc/."""
    folder = root / "loong"
    folder.mkdir(parents=True)
    (folder / "loong.jsonl").symlink_to(LOONG)
    shutil.copytree(FIXTURE_DOCS, folder / "doc")
    return folder


def loong_config(tmp_path: Path, bounds=None, **over) -> Path:
    bounds = bounds or BOUNDS
    body = {"name": "loong", "sources": [{"name": "loong", "kind": "loong", "path": "$LCP_DATA/loong",
                                          "on_error": "reject"}],
            "released": {"benchmark": "loong", "builder": "loong.released", "level_by": "prompt_tokens",
                         "bounds": bounds},
            "lengths": list(bounds), **over}
    path = tmp_path / "loong.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False, allow_unicode=True))
    return path


def build(config_path: Path, levels=None, meta: dict | None = None) -> pl.DataFrame:
    config = load_config(config_path)
    loaded = load_source(config.sources[0])
    frames = []
    for level in levels or config.lengths:
        e = schemas.empty
        inputs = LevelInputs(loaded.items, loaded.documents, e("passages"), e("hard_negatives"), e("confusing_facts"),
                             e("replacement_rules"), level, config, COUNTER, catalog_for(config))
        frames += [f.with_columns(level=pl.lit(level)) for f in level_batches(inputs)]
        if meta is not None:
            meta[level] = dict(inputs.meta)
    return pl.concat(frames)


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    release_folder(tmp_path / "data")
    return tmp_path


def fixture_text(*parts: str) -> str:
    return FIXTURE_DOCS.joinpath(*parts).read_text(encoding="utf-8").strip()


def legal(name: str) -> dict:
    return json.loads((FIXTURE_DOCS / "legal" / "legal.json").read_text(encoding="utf-8"))[name]


def expected_blocks(item: dict) -> list[str]:
    """Each document of the item, by hand: its header line, its text, a blank line (spec §4.1)."""
    blocks = []
    for i, name in enumerate(item["doc"], 1):
        if item["type"] == "financial":
            [path] = [p for p in (FIXTURE_DOCS / "financial").glob("*.txt")
                      if (name if item["level"] == 4 else f"2024-{name}") in p.stem]
            blocks.append(f"《{path.stem.split('-')[-1]}》\n{path.read_text(encoding='utf-8').strip()}\n\n")
        elif item["type"] == "paper":
            text = fixture_text("paper", name)
            blocks.append(f"{text.splitlines()[0].lstrip('# ')}\n{text}\n\n")
        else:
            doc = legal(name)
            text = doc["content"] if "判决结果" in item["question"] else f"{doc['content']}\n\n{doc['result']}"
            blocks.append(f"《判决文书{i}》\n{text}\n\n")
    return blocks


@needs_shared
def test_each_item_with_its_documents_is_one_instance_holding_them_all_and_nothing_else(data):
    rows = build(loong_config(data))
    items = raw_items()
    assert dict(zip(rows["record_id"], rows["task"], strict=True)) == WITH_DOCUMENTS
    assert set(rows["suite"]) == {"released"} and set(rows["benchmark"]) == {"loong"}
    for row in rows.iter_rows(named=True):
        item = items[row["record_id"]]
        blocks = expected_blocks(item)
        context = row["context"]
        # every document, each once, and no other text: the context is exactly the blocks, in the item's order
        order = document_order(len(blocks), item["shuffle_doc"], item["id"])
        assert sorted(order) == list(range(len(blocks))) and (order == sorted(order) or item["shuffle_doc"])
        assert context == "".join(blocks[i] for i in order) and len(split_documents(context)) == len(blocks)
        assert row["context_doc_ids"] == [json.loads(row["record_fields"])["doc_ids"][i] for i in order]
        # the item's own template, instruction and question (plain substitution, braces as released)
        assert row["prompt"] == fill_template(item["prompt_template"], item["instruction"], item["question"], context)
        assert item["instruction"] in row["prompt"] and item["question"] in row["prompt"]
        assert row["question"] == judge_question(item["prompt_template"], item["instruction"], item["question"])
        assert context not in row["question"] and item["instruction"] in row["question"]
        # the set by the prompt's cl100k_base tokens
        assert row["input_tokens"] == COUNTER.count(row["prompt"]) and row["tokenizer"] == "cl100k_base"
        assert row["level"] == in_bounds(row["input_tokens"], {k: tuple(v) for k, v in BOUNDS.items()})
        fields = json.loads(row["record_fields"])
        assert {"instruction", "prompt_template", "set", "length", "type", "level", "shuffle_doc", "doc"} <= set(fields)
        assert fields["doc"] == item["doc"] and fields["set"] == item["set"] and fields["length"] == item["length"]
    assert set(rows["level"]) == set(BOUNDS)  # the small bounds spread the tiny items over all four sets


@needs_shared
def test_documents_follow_the_items_order_rules(data):
    rows = {r["record_id"]: r for r in build(loong_config(data)).iter_rows(named=True)}
    items = raw_items()
    # judgments are never shuffled and are titled by their position; Link the Links shows the facts only
    ltl = rows["a3a1029d-23d6-4614-9886-cb20d43319c2"]
    names = items[ltl["record_id"]]["doc"]
    assert [b.split("\n", 1)[0] for b in split_documents(ltl["context"])] == [f"《判决文书{i}》" for i in (1, 2, 3, 4)]
    assert all(legal(n)["content"] in ltl["context"] and legal(n)["result"] not in ltl["context"] for n in names)
    classification = rows["f4876639-ba90-49d4-b177-5a4bab701e3e"]["context"]
    assert all(legal(n)["result"] in classification for n in items["f4876639-ba90-49d4-b177-5a4bab701e3e"]["doc"])
    # the 2024 report of a company, as the authors' *2024-<name>*.txt finds it, not the older one beside it
    spotlight = rows["ff3aa0ab-8dff-4115-8365-0b734655b779"]["context"]
    assert "-$0.04" in spotlight and "-$0.11" not in spotlight and spotlight.count("《j》\n") == 2
    # Citation Chain: the instruction before the papers, no question
    chain = rows["cd618a43-7176-432d-b21e-432e5c2ca4a7"]
    assert chain["prompt"].startswith(items[chain["record_id"]]["instruction"] + "\n\n#Papers Provided:\n")
    assert chain["prompt"].endswith(chain["context"])
    # paper instructions keep their doubled braces, as the authors' str.replace leaves them
    assert '{{"Reference":' in rows["13a4a371-6339-4c9d-82cf-fc9ab2bb017d"]["prompt"]
    # a shuffled item's order is fixed by its id: the same on every build
    again = {r["record_id"]: r["context"] for r in build(loong_config(data)).iter_rows(named=True)}
    assert again == {k: r["context"] for k, r in rows.items()}


@needs_shared
def test_items_outside_every_set_are_counted_and_items_without_documents_are_rejected_naming_the_file(data):
    meta: dict = {}
    rows = build(loong_config(data, bounds={"set2": [300, 450], "set3": [450, 1000]}), meta=meta)
    assert rows.height == 5 and meta["set2"]["records_outside_levels"] == 2  # set1's and set4's item
    loaded = load_source(load_config(data / "loong.yaml").sources[0])
    [report] = loaded.reports
    assert report.records == 1600 and report.accepted == 7 and len(report.rejected) == 1593
    first = report.rejected[0]
    assert first.field == "doc" and first.record_id and "not found under" in first.reason
    fin = next(r for r in report.rejected if "/financial/" in r.reason)
    assert "expected " in fin.reason and "*2024-" in fin.reason and fin.reason.endswith(".txt")


@needs_shared
def test_the_packaged_config_reads_the_release_folder_under_lcp_data_with_the_papers_sets(data):
    config = load_config(ROOT / "lc_pipeline" / "configs" / "loong.yaml")
    assert config.released.builder == "loong.released" and config.released.level_by == "prompt_tokens"
    assert config.lengths == ("set1", "set2", "set3", "set4")
    assert config.released.bounds == {"set1": (10_000, 50_000), "set2": (50_000, 100_000),
                                      "set3": (100_000, 200_000), "set4": (200_000, None)}
    assert config.tokenizer == "cl100k_base"
    loaded = load_source(config.sources[0])
    assert sorted(loaded.items["record_id"]) == sorted(WITH_DOCUMENTS)
    meta: dict = {}
    rows = build(ROOT / "lc_pipeline" / "configs" / "loong.yaml", meta=meta)
    assert rows.is_empty() and meta["set1"]["records_outside_levels"] == 7  # tiny documents: below 10K tokens


@needs_shared
def test_a_prompt_too_long_for_the_window_loses_whole_documents(data):
    row = build(loong_config(data)).filter(pl.col("record_id") == "f4876639-ba90-49d4-b177-5a4bab701e3e").row(
        0, named=True)
    encode, decode = COUNTER.encoding.encode_ordinary, COUNTER.encoding.decode
    blocks = split_documents(row["context"])
    assert len(blocks) == 4 and "\n\n".join(blocks) == row["context"]
    budget = COUNTER.count(row["prompt"]) - 20  # one judgment must go
    fitted = fit_prompt(row["prompt"], budget, render=encode, encode=encode, decode=decode, policy=DROP_DOCUMENTS,
                        context=row["context"])
    assert fitted.truncated and fitted.dropped_documents == 1 and len(fitted.ids) <= budget
    kept = [b for b in blocks if b.strip() in fitted.text]  # whole judgments kept, in their order, one left out
    assert len(kept) == 3 and fitted.text.startswith(kept[0].split("\n", 1)[0])
    assert fitted.text.endswith(row["prompt"][len(row["context"]):])  # instruction and question untouched


def test_items_loaded_without_their_documents_cannot_run_as_released(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "loong"
    folder.mkdir(parents=True)
    item = {"id": "x1", "type": "financial", "level": 1, "set": 1, "length": 20000, "language": "en",
            "question": "Q?", "instruction": "Read.", "prompt_template": "{docs}\n\n{instruction}\n\n{question}",
            "doc": ["ACME INC"], "answer": "A", "shuffle_doc": True}
    (folder / "loong.jsonl").write_text(json.dumps(item) + "\n")
    monkeypatch.setenv("LCP_DATA", str(tmp_path / "data"))
    with pytest.raises(BuildError, match=r"'loong-x1'.*documents were not loaded.*documents_dir"):
        build(loong_config(tmp_path), levels=["set1"])
