"""HELMET under `protocol: official` (issue 30; fidelity review HE11, HE8): with LCP_OFFICIAL=../shared/official and
H5's fixtures in HELMET's released layout (tests/fixtures/helmet_released, our own text), every instance prompt of
a released HELMET config is the authors' data.py template filled as data.py fills the record. The test reads data.py
itself (``ast``: the loaders' literal assignments in source order, picked by branch position here, never imported)
and fills the templates from the fixture files: Synthetic recall (JSON KV, RULER MK / MV), RAG (NQ, PopQA),
Re-rank (MS MARCO), Cite (ASQA, QAMPARI, chat mode: no answer prefix in the user turn) and ICL (TREC coarse), at 8k
and 16k. Each row says HELMET's budget, the level L - max_new_tokens; `protocol: ours` builds the very rows it built
before the protocol existed (digest of the rows taken with the previous builder)."""

from __future__ import annotations

import ast
import hashlib
import json
import random
from pathlib import Path

import built_lakes
import polars as pl
import pytest
import yaml
from shared_files import OFFICIAL, official_offline, skip_unless

from lc_pipeline.config import ConfigError, level_tokens, load_config
from lc_pipeline.tasks.catalog import catalog_for, load_catalog

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DATA = FIXTURES / "helmet_released" / "data"
PROMPTS = FIXTURES / "helmet_released" / "prompts"
HELMET = OFFICIAL / "princeton-nlp+HELMET"
pytestmark = skip_unless(HELMET / "data.py", "HELMET's data.py")

RELEASED = ("nq", "popqa", "msmarco", "json_kv", "ruler_mk_needle", "ruler_mv")
ALCE = ("asqa", "qampari")
LEVELS = ("8k", "16k")
ALCE_PASSAGES = {"8k": 6, "16k": 12}  # scaled down from HELMET's 30 / 75 for the fixtures
ICL_SHOTS = {"8k": 40, "16k": 80}
# The digest of the `protocol: ours` rows of this config (instance_id, prompt, record_fields, input_tokens), taken
# with the builder as it was before protocol.py (commit 70011e3).
OURS_DIGEST = "abf9189b42e9a81c6f5dd18ab11579aa4d6f4c80169a93adec31963b90340734"


# --------------------------------------------------------------------------- data.py, read by the test itself


def assignments(function: str) -> dict[str, list[str]]:
    """name -> the string literals assigned to it in ``function`` of data.py (its own statements and ``if``
    branches, not nested functions), in source order."""
    tree = ast.parse((HELMET / "data.py").read_text(encoding="utf-8"))
    [fn] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    out: dict[str, list[str]] = {}

    def walk(body):
        for st in body:
            if (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name)
                    and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)):
                out.setdefault(st.targets[0].id, []).append(st.value.value)
            elif isinstance(st, ast.If):
                walk(st.body)
                walk(st.orelse)

    walk(fn.body)
    return out


def templates(function: str, branch: int = -1, sep: str = "\n") -> tuple[str, str]:
    """(user template, completion template) of a loader: the ``branch``-th user / system template assigned
    (data.py sets a default first, then one per branch), the completion one being user + ``sep`` + system."""
    a = assignments(function)
    user, system = a["user_template"][branch], a["system_template"][branch]
    return user, user + sep + system


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --------------------------------------------------------------------------- the config and its build


def config_file(tmp_path: Path, protocol: str | None) -> Path:
    sources = [{"name": d, "kind": "helmet_released", "dataset": d, "data": str(DATA), "levels": list(LEVELS)}
               for d in RELEASED]
    sources += [{"name": d, "kind": "helmet_released", "dataset": d, "data": str(DATA),
                 "prompt_file": str(PROMPTS / f"{d}_revised.json")} for d in ALCE]
    sources.append({"name": "trec_coarse", "kind": "icl", "path": str(FIXTURES / "helmet" / "icl" / "trec"),
                    "label": "coarse_label"})
    catalog = load_catalog()
    scaled = [{"name": n, "builder": {"name": "helmet", "options": {**catalog.get(f"helmet/{n}").builder.options,
                                                                    "per_level": per_level}}}
              for n, per_level in (*((t, ALCE_PASSAGES) for t in ALCE), ("trec_coarse", ICL_SHOTS))]
    (tmp_path / "scaled.yaml").write_text(yaml.safe_dump({"benchmark": "helmet", "tasks": scaled}))
    body = {"name": "hr", "sources": sources, "task_files": [str(tmp_path / "scaled.yaml")],
            "released": {"benchmark": "helmet", "builder": "helmet.released", "level_by": "record_level",
                         "tasks": [s["name"] for s in sources]},
            "lengths": list(LEVELS), "helmet": {"n_per_task": 2, "shots": 2}}
    if protocol:
        body["protocol"] = protocol
    path = tmp_path / f"hr-{protocol}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def build(config) -> dict[str, pl.DataFrame]:
    return built_lakes.build_instances(config, LEVELS)


@pytest.fixture
def official_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_OFFICIAL", str(OFFICIAL))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The fixture config's rows under official and under ours."""
    tmp = tmp_path_factory.mktemp("helmet_official")
    with official_offline(tmp / "cache"):
        official = load_config(config_file(tmp, "official"))
        ours = load_config(config_file(tmp, "ours"))
        return {"official": build(official), "ours": build(ours), "config": official}


# --------------------------------------------------------------------------- prompts


def expected_prompt(task: str, row: dict, level: str) -> str:
    """The test's own fill of HELMET's template for one row (completion mode unless the task is ALCE)."""
    fields = json.loads(row["record_fields"])
    if task in ("nq", "popqa"):
        a = assignments("load_qa")
        rec = lines(DATA / fields["file"])[fields["index"]]
        context = "\n\n".join(a["passage_template"][0].format(**c) for c in rec["ctxs"])
        demos = "\n\n".join(a["demo_template"][0].format(documents=d["passages"], question=d["question"],
                                                         answer=d["answer"]) for d in fields["demos"]) + "\n\n"
        return templates("load_qa")[1].format(demos=demos, context=context, question=rec["question"])
    if task == "json_kv":
        a = assignments("load_json_kv")
        rec = lines(DATA / fields["file"])[fields["index"]]
        demos = "\n\n".join(a["demo_template"][0].format(key=k, value=" " + v) for k, v in rec["demos"][:2]) + "\n\n"
        return templates("load_json_kv")[1].format(context=rec["context"], demos=demos, question=rec["question"])
    if task.startswith("ruler"):
        rec = lines(DATA / "ruler" / fields["file"])[fields["index"]]
        branch = 1 if task == "ruler_mv" else 2  # data.py: the default, then niah_mv / niah_mq, then niah
        return templates("load_ruler", branch)[1].format(context=rec["context"], query=rec["query"],
                                                         type_needle_v=rec["type_needle_v"])
    if task == "msmarco":
        # data.py builds a demonstration in code: the joined passages, then an f-string, then a blank line; the
        # f-string's literal parts read here, its two values the demo's query and ranking.
        tree = ast.parse((HELMET / "data.py").read_text(encoding="utf-8"))
        [fstring] = [n for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
                     and any(isinstance(v, ast.FormattedValue) and ast.unparse(v.value) == "ranking"
                             for v in n.values)]
        parts = [v.value for v in fstring.values if isinstance(v, ast.Constant)]
        assert len(parts) == 2, parts  # "<query label>", "<ranking label>" around the query

        def demo(d):
            return d["passages"] + parts[0] + d["question"] + parts[1] + d["answer"] + "\n\n"

        demos = "".join(demo(d) for d in fields["demos"])
        return templates("load_msmarco_rerank")[1].format(demos=demos, context=row["context"],
                                                          question=row["question"])
    if task in ALCE:
        official = json.loads((HELMET / "prompts" / f"{task}_revised.json").read_text(encoding="utf-8"))
        recs = json.loads((DATA / "alce" / f"{task}_eval_gtr_top2000.json").read_text(encoding="utf-8"))
        demos = json.loads((PROMPTS / f"{task}_revised.json").read_text(encoding="utf-8"))["demos"]
        draw = random.Random(42)  # HELMET's random.sample of 2 demonstrations per record, in file order
        drawn = [draw.sample(demos, 2) for _ in recs][fields["index"]]

        def docs(ds):
            return "\n\n".join(official["doc_prompt"].format(**d, ID=i + 1) for i, d in enumerate(ds))

        demo_text = "\n\n\n".join(official["demo_prompt"].format(**d, instruction=official["instruction"],
                                                                 context=docs(d["docs"])) for d in drawn) + "\n\n\n"
        rec = recs[fields["index"]]
        user, _ = templates("load_alce", sep="\n\n")  # chat mode: the user turn alone
        return user.format(demo_text=demo_text, instruction=official["instruction"], question=rec["question"],
                           context=docs(rec["docs"][:ALCE_PASSAGES[level]]))
    if task == "trec_coarse":
        a = assignments("load_icl")
        demos = row["context"].split("\n\n")
        assert len(demos) == ICL_SHOTS[level]
        for d in demos:  # each demonstration is data.py's item_template filled with a text and its integer label
            text, label = d.rsplit("\n", 1)
            assert a["item_template"][0].format(text=text, label=label.split(" ", 1)[1]) == d
        return templates("load_icl")[1].format(context=row["context"], question=row["question"])
    raise AssertionError(task)


def test_every_category_prompt_is_the_authors_template_filled_from_the_record(built):
    catalog = catalog_for(built["config"])
    tasks = {*RELEASED, *ALCE, "trec_coarse"}
    for level, rows in built["official"].items():
        assert set(rows["task"]) == tasks
        assert set(rows["protocol"]) == {"official@4526dfb"}
        for row in rows.iter_rows(named=True):
            assert row["prompt"] == expected_prompt(row["task"], row, level), (row["task"], level)
            spec = catalog.get(f"helmet/{row['task']}")
            prefix = spec.answer_prefix
            if spec.chat_template:  # HE11: the answer prefix is not in the user turn
                assert row["task"] in ALCE and not row["prompt"].rstrip().endswith(prefix)


def test_each_row_says_helmets_budget_the_level_minus_the_answer_and_what_generation_does(built):
    catalog = catalog_for(built["config"])
    packaged = load_catalog()
    for level, rows in built["official"].items():
        for row in rows.iter_rows(named=True):
            fields = json.loads(row["record_fields"])
            assert fields["protocol_budget"] == level_tokens(level) - row["max_new_tokens"]
            assert f"exceeds {fields['protocol_budget']} tokens" in fields["protocol_note"]
            spec = catalog.get(f"helmet/{row['task']}")
            # HELMET's cut (model_utils.tokenize): the context's tail; the chat / completion split as packaged
            assert spec.truncation == "end_of_context"
            assert spec.chat_template == packaged.get(f"helmet/{row['task']}").chat_template
            assert row["max_new_tokens"] == packaged.get(f"helmet/{row['task']}").max_new_tokens


def digest(rows: dict[str, pl.DataFrame]) -> str:
    table = sorted(r for frame in rows.values()
                   for r in frame.select("instance_id", "prompt", "record_fields", "input_tokens").rows())
    return hashlib.sha256(json.dumps(table, ensure_ascii=False).encode()).hexdigest()


def test_protocol_ours_builds_the_rows_it_built_before(built):
    assert digest(built["ours"]) == OURS_DIGEST
    for level in LEVELS:
        ours, official = built["ours"][level], built["official"][level]
        assert set(ours["protocol"]) == {"ours"}
        assert not set(ours["instance_id"]) & set(official["instance_id"])  # never the same row
        assert ours.height == official.height


def test_protocol_official_without_the_authors_files_names_what_to_provide(monkeypatch, tmp_path):
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "empty"))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    config = load_config(config_file(tmp_path, "official"))
    with pytest.raises(ConfigError, match=r"princeton-nlp/HELMET.*data\.py"):
        config.official_protocol()
    unset = load_config(config_file(tmp_path, None))
    assert unset.protocol_label() == "ours"  # unset and not found: ours, said in the rows


def test_icl_rows_under_official_are_scored_as_helmet_scores_them(built):
    """HE9: HELMET prepends the prefix (completion mode), parses the rest of the line and compares it to the label
    after normalization; ours reads the first integer. On the built ICL rows, through the task's metric."""
    from lc_pipeline.score.metric_scores import score_instance
    from lc_pipeline.tasks.registry import METRICS

    spec = catalog_for(built["config"]).get("helmet/trec_coarse")
    [label] = [METRICS.get(m.name).label for m in spec.metrics]
    official = built["official"]["8k"].filter(pl.col("task") == "trec_coarse").row(0, named=True)
    ours = built["ours"]["8k"].filter(pl.col("task") == "trec_coarse").row(0, named=True)
    gold = official["answers"][0]
    assert json.loads(official["record_fields"])["protocol"] == official["protocol"]
    cases = {f" {gold}": (1.0, 1.0), f" {gold}\nnext text\nlabel: 0": (1.0, 1.0), f" {gold} (refund)": (0.0, 1.0),
             f"label: {gold}.": (1.0, 1.0), " none": (0.0, 0.0)}
    for output, (helmet, first_integer) in cases.items():
        assert score_instance(spec, official, output)[label] == helmet, output
        assert score_instance(spec, ours, output)[label] == first_integer, output


def test_longqa_and_summ_rows_take_helmets_zero_shot_templates_and_its_judges(official_env, tmp_path):
    """The categories HELMET builds at run time (here ∞Bench MC and Sum, constructed from the fixture books at
    16k): the chat-mode user template of load_infbench with the row's document, question and options, no
    demonstration, the cut document ending with truncate_llama2's postfix; HELMET's judges switch on with it."""
    from lc_pipeline.resources.judge import JudgeResource

    books = FIXTURES / "helmet" / "infbench"
    body = {"name": "ld", "lengths": ["16k"], "helmet": {"n_per_task": 2, "shots": 2}, "protocol": "official",
            "sources": [{"name": "infbench_mc", "kind": "infbench", "paths": str(books / "longbook_choice_eng.jsonl"),
                         "min_document_tokens": 16384},
                        {"name": "infbench_sum", "kind": "infbench", "paths": str(books / "longbook_sum_eng.jsonl"),
                         "keypoints": str(books / "longbook_sum_eng_keypoints.jsonl"),
                         "min_document_tokens": 16384}],
            "released": {"benchmark": "helmet", "builder": "helmet.released", "level_by": "record_level",
                         "tasks": ["infbench_mc", "infbench_sum"]}}
    (tmp_path / "ld.yaml").write_text(yaml.safe_dump(body))
    config = load_config(tmp_path / "ld.yaml")
    rows = built_lakes.build_instances(config, ["16k"])["16k"]
    tree = ast.parse((HELMET / "data.py").read_text(encoding="utf-8"))
    [truncate] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "truncate_llama2"]
    postfix = truncate.args.defaults[-1].value
    [options] = [n.func.value.value for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "format"
                 and isinstance(n.func.value, ast.Constant) and any(isinstance(a, ast.Starred) for a in n.args)]
    user = assignments("load_infbench")["user_template"]  # branches: qa_eng, choice_eng, sum_eng
    assert set(rows["task"]) == {"infbench_mc", "infbench_sum"} and set(rows["protocol"]) == {"official@4526dfb"}
    for row in rows.iter_rows(named=True):
        fields = json.loads(row["record_fields"])
        assert row["context"].endswith(postfix)
        if row["task"] == "infbench_mc":
            expected = user[1].format(demo="", context=row["context"], question=row["question"],
                                      options=options.format(*fields["options"]))
        else:
            expected = user[2].format(demo="", context=row["context"], question=row["question"])
        assert row["prompt"] == expected
        assert fields["protocol_budget"] == 16384 - row["max_new_tokens"]
        assert "the prompt is HELMET's 0-shot one" in fields["protocol_note"]  # its demonstrations are not given
    assert JudgeResource().resolved_protocol(config) == "official"
