"""Citation recall and precision judged by a real NLI judge: llama-cpp-python's server on 127.0.0.1 serves
SmolLM2-135M-Instruct as the configured LLM judge (NLI backend ``judge``), and the citation_scores asset scores
three fixed Cite outputs (two ASQA, one QAMPARI; written to the lake as generations of hand-made instances).
Every row records its NLI backend, each sentence / citation check with the judge's raw reply and verdict, and its
parse status; a rerun asks the server nothing (verdict cache). The same questions then go to the built-in SmolLM2
run in-process by llama.cpp (NLI backend ``model``, what the offline helmet-demo uses).

A 135M model is a weak entailment judge: the test asserts what is recorded, not that the verdicts are right;
the parse rates are printed."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest
import yaml
from conftest import settings_for
from servers import llama_server, needs_llama_server, smollm2_gguf

from lc_pipeline import schemas
from lc_pipeline.definitions import build_pipeline
from lc_pipeline.partitions import MODEL_DIM, length_model_key
from lc_pipeline.resources.judge import JudgeResource
from lc_pipeline.resources.nli import NLIResource
from lc_pipeline.resources.parquet_io import partition_path, write_parquet_atomic
from lc_pipeline.score.citations import VERDICT_STATUSES, score_outputs

pytestmark = [*needs_llama_server, pytest.mark.slow]

SLUG = "smollm2-135m"
LEVEL = "1k"
CONFIG = {
    "name": "cite-nli-it",
    "sources": [{"name": "demo", "kind": "demo_corpus", "n_entities": 10, "seed": 3}],
    "lengths": [LEVEL], "base_lengths": [LEVEL], "long_lengths": [LEVEL],
    "items_per_length": 1,  # nothing is built here: the instances are written to the lake below
    "task_files": ["cite.yaml"],
}
TASK_FILE = {
    "benchmark": "citeit",
    "defaults": {"language": "en", "truncation": "end_of_context", "max_new_tokens": 300,
                 "prompt": "{context}\n\nQuestion: {question}", "builder": {"name": "helmet", "options": {"kind": "rag"}},
                 "category": "Cite", "aggregation": {"group": "Cite"}},
    "tasks": [{"name": style, "metrics": [{"name": "alce.citation_recall", "options": {"style": style}},
                                          {"name": "alce.citation_precision", "options": {"style": style}}]}
              for style in ("asqa", "qampari")],
}
PASSAGES = [{"title": "Eiffel Tower", "text": "The Eiffel Tower is a wrought-iron tower in Paris, France."},
            {"title": "Louvre", "text": "The Louvre is an art museum in Paris."},
            {"title": "Rome", "text": "Rome is the capital of Italy."}]
CASES = [  # instance, task, question, fixed output
    ("i1", "asqa", "What is in Paris?", "The Eiffel Tower is in Paris [1]. The Louvre is an art museum [2][3]."),
    ("i2", "asqa", "What is Rome?", "Rome is the capital of Italy [3]. The Eiffel Tower is in Rome."),
    ("i3", "qampari", "Which landmarks are in Paris?", "Eiffel Tower [1], Louvre [2], Colosseum [3]."),
]


def _defaults(schema: pl.Schema, n: int, values: dict) -> pl.DataFrame:
    def default(dtype):
        if isinstance(dtype, pl.List):
            return []
        return {pl.String: "", pl.Boolean: False}.get(dtype, 0)

    cols = {c: values.get(c, [default(t)] * n) for c, t in schema.items()}
    return pl.DataFrame(cols, schema=schema)


@pytest.fixture(scope="module")
def server_url():
    with llama_server(smollm2_gguf(), alias="smollm2", n_ctx=2048) as url:
        yield url


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("cite")
    (root / "cite.yaml").write_text(yaml.safe_dump(TASK_FILE))
    (root / "c.yaml").write_text(yaml.safe_dump({**CONFIG, "task_files": [str(root / "cite.yaml")]}))
    settings = settings_for(root, root / "c.yaml", lake="data_lake")
    n = len(CASES)
    fields = [json.dumps({"passages": PASSAGES, "style": task, "question": q}) for _, task, q, _ in CASES]
    instances = _defaults(schemas.INSTANCES, n, {
        "instance_id": [c[0] for c in CASES], "item_id": [f"item-{c[0]}" for c in CASES],
        "benchmark": ["citeit"] * n, "task": [c[1] for c in CASES], "category": ["Cite"] * n,
        "question": [c[2] for c in CASES], "record_fields": fields, "depth": [0.0] * n})
    generations = _defaults(schemas.GENERATIONS, n, {
        "generation_id": [f"g-{c[0]}" for c in CASES], "instance_id": [c[0] for c in CASES],
        "output": [c[3] for c in CASES]})
    lake = settings.lake_dir
    write_parquet_atomic(instances, partition_path(lake, "instances", {"length": LEVEL}))
    write_parquet_atomic(generations, partition_path(lake, "generations", {"length": LEVEL, MODEL_DIM: SLUG}))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODEL_DIM, [SLUG])
        yield settings, build_pipeline(settings), instance


def score(world, nli: NLIResource, judge: JudgeResource):
    settings, pipeline, instance = world
    result = dg.materialize(pipeline.assets, selection=["citation_scores"], partition_key=length_model_key(LEVEL, SLUG),
                            resources={**pipeline.resources, "judge": judge, "nli": nli}, instance=instance)
    assert result.success
    [mat] = [m for m in result.get_asset_materialization_events() if m.asset_key == dg.AssetKey("citation_scores")]
    meta = {k: v.value for k, v in mat.materialization.metadata.items()}
    frame = pl.read_parquet(partition_path(settings.lake_dir, "citation_scores", {"length": LEVEL, MODEL_DIM: SLUG}))
    return meta, frame


def assert_recorded(rows: pl.DataFrame) -> None:
    """Every row: its verdicts and parse status, consistent with its counts."""
    for row in rows.iter_rows(named=True):
        checks = json.loads(row["checks"])
        asked = [c for c in checks if c["status"] in VERDICT_STATUSES]
        assert row["n_checks"] == len(asked) and row["n_unparsed"] == sum(c["status"] != "ok" for c in asked)
        assert all(c["raw"] for c in asked)  # the judge's reply, kept
        assert all((c["entailed"] is None) == (c["status"] != "ok") for c in asked)
        assert row["parse_status"] == ("ok" if row["n_unparsed"] == 0 else "no_verdict")
        assert 0.0 <= row["score"] <= 1.0


def test_the_served_judge_scores_citations_and_every_row_records_its_verdicts(world, server_url, capfd):
    settings, _, _ = world
    nli = NLIResource(backend="judge", cache_path=str(settings.lake_dir / "_cache" / "nli.sqlite"))
    judge = JudgeResource(base_url=server_url, model="smollm2", max_concurrency=2)
    meta, rows = score(world, nli, judge)
    assert rows.height == 2 * len(CASES) and set(rows["metric"]) == {"citation_rec", "citation_prec"}
    assert set(rows["nli_backend"]) == {f"judge:smollm2@{server_url.removesuffix('/v1')}"}
    assert_recorded(rows)
    rec = {r["instance_id"]: r for r in rows.filter(pl.col("metric") == "citation_rec").iter_rows(named=True)}
    assert rec["i2"]["n_sentences"] == 2 and rec["i3"]["n_sentences"] == 3
    # i2's second sentence cites nothing: recorded, scored 0, no question asked.
    assert [c["status"] for c in json.loads(rec["i2"]["checks"])][1] == "no_citation"
    assert json.loads(rec["i3"]["checks"])[0]["hypothesis"] == "Which landmarks are in Paris? Eiffel Tower"
    assert meta["nli_calls"] > 0 and meta["cache_hits"] == 0

    # A rerun asks the server nothing: the verdicts come from the cache, the rows are the same.
    meta2, again = score(world, nli, judge)
    assert meta2["nli_calls"] == 0 and again.equals(rows)
    asked = sum(len(json.loads(c)) for c in rows.filter(pl.col("metric") == "citation_prec")["checks"])
    with capfd.disabled():
        print(f"\nNLI judge smollm2 (served): {meta['nli_calls']} questions in rounds {meta['rounds']}, "
              f"{meta['unparsed_verdicts']} unparsed of {asked} checks; statuses {meta['parse_statuses']}; "
              f"means {meta['mean_scores']}")


def test_a_task_with_citation_metrics_and_no_nli_backend_fails_saying_what_to_set(world, monkeypatch):
    settings, pipeline, instance = world
    monkeypatch.delenv("LCP_NLI_BACKEND", raising=False)
    with pytest.raises(dg.Failure, match=r"declare citation metrics: no NLI backend is configured.*LCP_NLI_BACKEND"):
        dg.materialize(pipeline.assets, selection=["citation_scores"], partition_key=length_model_key(LEVEL, SLUG),
                       resources={**pipeline.resources, "nli": NLIResource()}, instance=instance)


def test_the_built_in_smollm2_in_process_judges_the_same_questions(world):
    settings, pipeline, _ = world
    from lc_pipeline.score.citations import plan_citations
    from lc_pipeline.tasks.catalog import catalog_for

    instances = pl.read_parquet(partition_path(settings.lake_dir, "instances", {"length": LEVEL}))
    generations = pl.read_parquet(partition_path(settings.lake_dir, "generations", {"length": LEVEL, MODEL_DIM: SLUG}))
    items = plan_citations(generations, instances, catalog_for(pipeline.config))
    nli = NLIResource(backend="model", model=SLUG, batch_size=4).nli_judge(
        pipeline.resources["judge"], pipeline.resources["models"])
    results = score_outputs([i.input for i in items], nli.entails_many)
    assert nli.description == f"model:{SLUG}" and nli.calls > 0
    for result in results:
        asked = [c for c in result.checks if c.asked]
        assert asked and all(c.raw and c.status in VERDICT_STATUSES for c in asked)
        assert 0.0 <= result.recall <= 1.0 and 0.0 <= result.precision <= 1.0
