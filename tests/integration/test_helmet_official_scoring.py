"""HELMET's Cite scored as HELMET scores it under `protocol: official` (fidelity review HE10, HE6), on rows built from
the released-layout fixtures (tests/fixtures/helmet_released: HELMET's ALCE file layout, our own text) with
LCP_OFFICIAL=../shared/official.

- HE10: in completion mode HELMET's eval.py prepends the answer prefix to the output and eval_alce.py never strips
  it, so QAMPARI's first comma piece is "answer <item>"; under `ours` the prefix is stripped.
- HE6: ASQA's STR-EM is averaged over every example, its citation recall / precision over the examples with a
  sentence (eval_alce.py skips the others), and the task's score is the mean of the three.
"""

from __future__ import annotations

import json
from pathlib import Path

import built_lakes
import polars as pl
import pytest
import yaml
from shared_files import OFFICIAL, official_offline, skip_unless

from lc_pipeline.config import load_config
from lc_pipeline.score.benchmark_scores import benchmark_table, with_citation_scores
from lc_pipeline.score.citations import Verdict, citation_frame, plan_citations, score_outputs
from lc_pipeline.score.metric_scores import score_frame
from lc_pipeline.tasks.catalog import catalog_for, load_catalog

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = FIXTURES / "helmet_released" / "data"
PROMPTS = FIXTURES / "helmet_released" / "prompts"
HELMET = OFFICIAL / "princeton-nlp+HELMET"
pytestmark = skip_unless(HELMET / "data.py", "HELMET's data.py")
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
    with official_offline(tmp / "cache"):
        configs = {p: load_config(config_file(tmp, p)) for p in ("official", "ours")}
        rows = {p: built_lakes.build_instances(c, [LEVEL])[LEVEL] for p, c in configs.items()}
        return {**rows, "config": configs["official"]}


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


def words(text: str) -> set[str]:
    return {w.strip(".,;:!?()[]\"'").lower() for w in text.split()} - {""}


def contained(pairs):
    """A real, deterministic entailment rule: the hypothesis is entailed when every word of it is in the premise."""
    return [Verdict(ok, "ok", "1" if ok else "0") for ok in (words(h) <= words(p) for p, h in pairs)]


def test_asqa_without_a_sentence_keeps_its_str_em_and_skips_citations(built):
    catalog = catalog_for(built["config"])
    rows = built["official"].filter(pl.col("task") == "asqa").sort("instance_id").with_columns(length=pl.lit(LEVEL))
    assert rows.height == 3
    first, second, third = (rows.row(i, named=True) for i in range(3))
    fields = json.loads(first["record_fields"])
    passage = fields["passages"][0]["text"].split(". ")[0].rstrip(".")
    pairs = fields["qa_pairs"]
    # the first answers with one cited sentence copied from passage 1 and names one short answer; the second
    # writes nothing ALCE counts as a sentence ("Ok." is under 5 characters), the third nothing at all: STR-EM 0,
    # no citation scores
    outputs = {first["instance_id"]: f"{passage} [1]. It is {pairs[0][0]} [1].", second["instance_id"]: "Ok.",
               third["instance_id"]: ""}
    gens = pl.DataFrame({"generation_id": ["g0", "g1", "g2"], "instance_id": list(outputs),
                         "output": list(outputs.values()), "status": ["answered", "answered", "empty"],
                         "chat_template_source": ["model"] * 3})
    metric = score_frame(gens, rows, catalog)
    items = plan_citations(gens, rows, catalog)
    citations = citation_frame(items, score_outputs([i.input for i in items], contained), "rule")
    by = {(r["instance_id"], r["metric"]): r["score"] for r in citations.iter_rows(named=True)}
    for empty in (second, third):
        assert by[(empty["instance_id"], "citation_rec")] is None and by[(empty["instance_id"], "citation_prec")] is None
    rec, prec = by[(first["instance_id"], "citation_rec")], by[(first["instance_id"], "citation_prec")]
    assert rec is not None and prec is not None
    str_em = dict(zip(metric["instance_id"], metric["score"]))
    assert str_em[second["instance_id"]] == str_em[third["instance_id"]] == 0.0 and str_em[first["instance_id"]] > 0

    scores = with_citation_scores(metric.with_columns(length=pl.lit(LEVEL)), citations)
    result = benchmark_table(scores, rows, catalog, "m")
    table = result.table
    [task] = table.filter((pl.col("level") == "task") & (pl.col("task") == "asqa")).iter_rows(named=True)
    helmet = 100 * (str_em[first["instance_id"]] / 3 + rec + prec) / 3  # STR-EM over 3, citations over 1
    assert task["score"] == pytest.approx(helmet) and task["n"] == 3
    assert result.unscored == {}
    components = {r["metric"]: (r["score"], r["n"]) for r in
                  table.filter((pl.col("level") == "component") & (pl.col("task") == "asqa")).iter_rows(named=True)}
    assert components["str_em"] == (pytest.approx(100 * str_em[first["instance_id"]] / 3), 3)
    assert components["citation_rec"] == (pytest.approx(100 * rec), 1)
    assert components["citation_prec"] == (pytest.approx(100 * prec), 1)


def test_citation_sentences_carry_the_prefix_in_completion_mode_under_official(built):
    """HE10 for the NLI metrics: eval_alce.py's compute_autoais reads the same prefixed output, so QAMPARI's first
    item (the question, a space, the item) holds "Answer:" in completion mode under official, not under ours."""
    catalog = catalog_for(built["config"])
    for protocol in ("official", "ours"):
        row = built[protocol].filter(pl.col("task") == "qampari").row(0, named=True)
        for fed in ("none", "model"):
            gens = pl.DataFrame({"generation_id": ["g"], "instance_id": [row["instance_id"]],
                                 "output": [" Paris [1], Lyon [2]."], "chat_template_source": [fed]})
            [item] = plan_citations(gens, built[protocol], catalog)
            [result] = score_outputs([item.input], contained)
            first = result.checks[0].hypothesis
            prefixed = protocol == "official" and fed == "none"
            assert first == f"{item.input.question} " + ("Answer: Paris" if prefixed else "Paris"), (protocol, fed)
