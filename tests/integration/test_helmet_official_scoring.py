"""HELMET's Cite scored as HELMET scores it under `protocol: official` (fidelity review HE10, HE6), on rows built from
the released-layout fixtures (tests/fixtures/helmet_released: HELMET's ALCE file layout, our own text) with
LCP_OFFICIAL=../shared/official.

- HE10: in completion mode HELMET's eval.py prepends the answer prefix to the output and eval_alce.py never strips
  it, so QAMPARI's first comma piece is "answer <item>"; under `ours` the prefix is stripped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import built_lakes
import polars as pl
import pytest
import yaml

from lc_pipeline.config import load_config
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.tasks.catalog import catalog_for, load_catalog

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = FIXTURES / "helmet_released" / "data"
PROMPTS = FIXTURES / "helmet_released" / "prompts"
SHARED = Path(os.environ.get("LCP_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
OFFICIAL = SHARED.parent / "official"
HELMET = OFFICIAL / "princeton-nlp+HELMET"
pytestmark = pytest.mark.skipif(not (HELMET / "data.py").is_file(), reason=f"HELMET's data.py not found under "
                                f"{HELMET} (set LCP_SHARED_DATA to the shared/data directory, beside shared/official)")
ALCE = ("asqa", "qampari")
LEVEL = "8k"


def config_file(tmp_path: Path, protocol: str) -> Path:
    sources = [{"name": d, "kind": "helmet_released", "dataset": d, "data": str(DATA),
                "prompt_file": str(PROMPTS / f"{d}_revised.json")} for d in ALCE]
    catalog = load_catalog()
    scaled = [{"name": n, "builder": {"name": "helmet", "options": {**catalog.get(f"helmet/{n}").builder.options,
                                                                    "per_level": {LEVEL: 6}}}} for n in ALCE]
    (tmp_path / "scaled.yaml").write_text(yaml.safe_dump({"benchmark": "helmet", "tasks": scaled}))
    body = {"name": "alce", "sources": sources, "task_files": [str(tmp_path / "scaled.yaml")], "protocol": protocol,
            "released": {"benchmark": "helmet", "builder": "helmet.released", "level_by": "record_level",
                         "tasks": list(ALCE)},
            "lengths": [LEVEL], "helmet": {"n_per_task": 2, "shots": 2}}
    path = tmp_path / f"alce-{protocol}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The ALCE rows at 8k under official and under ours, and the official config."""
    tmp = tmp_path_factory.mktemp("helmet_alce")
    mp = pytest.MonkeyPatch()
    mp.setenv("LCP_OFFICIAL", str(OFFICIAL))
    mp.setenv("LCP_LOCAL_CACHE", str(tmp / "cache"))
    mp.setenv("LCP_OFFLINE", "1")
    try:
        configs = {p: load_config(config_file(tmp, p)) for p in ("official", "ours")}
        rows = {p: built_lakes.build_instances(c, [LEVEL])[LEVEL] for p, c in configs.items()}
        return {**rows, "config": configs["official"]}
    finally:
        mp.undo()


def scores(rows: pl.DataFrame, outputs: dict[str, str], fed: str, catalog) -> dict[str, float]:
    """{instance_id: rec-5 / STR-EM} of ``outputs`` (instance_id -> output) fed as ``fed`` (chat_template_source)."""
    gens = pl.DataFrame({"generation_id": [f"g{i}" for i in range(len(outputs))], "instance_id": list(outputs),
                         "output": list(outputs.values()), "status": ["answered"] * len(outputs),
                         "chat_template_source": [fed] * len(outputs)})
    frame = score_frame(gens, rows.filter(pl.col("instance_id").is_in(list(outputs))), catalog)
    return dict(zip(frame["instance_id"], frame["score"]))


def test_qampari_completion_mode_keeps_the_prefix_in_the_first_piece_under_official(built):
    catalog = catalog_for(built["config"])
    for protocol in ("official", "ours"):
        row = built[protocol].filter(pl.col("task") == "qampari").row(0, named=True)
        clusters = json.loads(row["record_fields"])["answer_clusters"]
        assert len(clusters) >= 2
        n = min(5, len(clusters))
        listed = {row["instance_id"]: " " + ", ".join(f"{c[0]} [{i + 1}]" for i, c in enumerate(clusters[:5])) + "."}
        completion = scores(built[protocol], listed, "none", catalog)[row["instance_id"]]
        chat = scores(built[protocol], listed, "model", catalog)[row["instance_id"]]
        repeated = {k: "Answer:" + v for k, v in listed.items()}
        chat_repeated = scores(built[protocol], repeated, "model", catalog)[row["instance_id"]]
        if protocol == "official":  # "Answer:" + output: the first piece is "answer <item>" and matches nothing
            assert (completion, chat, chat_repeated) == ((n - 1) / n, 1.0, (n - 1) / n)
        else:  # ours: the prefix is never added, and stripped when the model repeats it
            assert (completion, chat, chat_repeated) == (1.0, 1.0, 1.0)


def test_asqa_str_em_is_the_same_with_the_prefix(built):
    """STR-EM looks for each short answer as a substring: the prefix HELMET prepends changes nothing."""
    catalog = catalog_for(built["config"])
    row = built["official"].filter(pl.col("task") == "asqa").row(0, named=True)
    pairs = json.loads(row["record_fields"])["qa_pairs"]
    output = {row["instance_id"]: " " + " ".join(f"It is {p[0]} [1]." for p in pairs)}
    assert scores(built["official"], output, "none", catalog) == scores(built["official"], output, "model", catalog)
    assert scores(built["official"], output, "none", catalog)[row["instance_id"]] == 1.0
