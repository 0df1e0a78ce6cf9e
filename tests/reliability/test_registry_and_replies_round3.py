"""Issue 31, the registry's writers and the model server's replies (probe 2026-11-27, D4 D6 D7 D8 D21 D23 D24):

* D4: writers of ``models.yaml`` hold its lock across check, re-read and replace: two processes adding models at
  once lose none (real processes, each adding many models while the other does).
* D6: an import under a name whose lake generations belong to another backend is refused, naming the model, the
  backend and the file; the lake and the registry are byte-identical afterwards.
* D7: ``request_timeout_s`` is a wall-clock deadline per request: a server that trickles its reply a byte at a time
  (fault_server "drip") is cut off at the deadline, and the request is reported once (a timeout is not resent).
* D8: a 200 reply is checked: a content that is no string, a choice without a message, no choices or an answer far
  past max_tokens is "not a completion" (retried, then a clear error); token counts that are not counts are
  replaced by ours, with a warning; an odd finish reason is "stop".
* D21: an openai model's fingerprint covers its server (scheme, host, port, path), not the credentials in the URL.
* D23: a bad ``base_url`` is refused when the model is defined; a refused connection names the model, the server
  (redacted) and the cause.
* D24: NaN and infinity are refused in every number field of a model.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from conftest import released_longbench_project
from fault_server import FaultyOpenAIServer, reply_for
from lake_world import served_model

from lc_pipeline.cli import main
from lc_pipeline.dagster_instance import open_instance
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import GenerationRequest
from lc_pipeline.generate.checkpoint import GenerationCheckpoint
from lc_pipeline.generate.partition import (
    chunk_size,
    generate_partition,
    plan_partition,
)
from lc_pipeline.generate.registry import ModelRegistry, ModelSpec, ModelSpecError

REPO = Path(__file__).resolve().parents[2]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` and its bytes (lock files aside: a lock is not data)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


# ---------------------------------------------------------------------------------------------- D4: lost entries


WRITER = textwrap.dedent("""
    import sys
    from lc_pipeline.generate.registry import ModelRegistry, ModelSpec
    path, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(n):
        ModelRegistry(path).add(ModelSpec(slug=f"{prefix}{i}", backend="transformers", model_id="gpt2",
                                          gguf_file=None, max_model_len=1024))
""")


def test_d4_two_processes_adding_models_at_once_lose_none(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("# my models\nkept:\n  backend: transformers\n  model_id: gpt2\n  max_model_len: 512\n")
    # Without the lock, 4 rounds of 15 adds each kept 63 of the 120 models (measured once with locked() a no-op).
    rounds, per_writer = 4, 15
    for r in range(rounds):
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"r{r}-{w}-", str(per_writer)],
                                  cwd=REPO, stderr=subprocess.PIPE, text=True) for w in "ab"]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
    names = set(ModelRegistry(path).names())
    expected = {f"r{r}-{w}-{i}" for r in range(rounds) for w in "ab" for i in range(per_writer)}
    assert expected - names == set()  # 120 models from 8 processes, two at a time: none lost
    assert path.read_text().startswith("# my models\nkept:\n")  # the user's lines kept


def test_d4_two_lcp_add_model_at_once_keep_both(tmp_path):
    """The probe's command: two ``lcp add-model`` processes started together (one round: each costs a Dagster
    import)."""
    env = {**os.environ, "LCP_MODELS": str(tmp_path / "models.yaml"), "DAGSTER_HOME": str(tmp_path / ".dagster"),
           "LCP_PROJECT_DIR": str(tmp_path)}
    (tmp_path / ".dagster").mkdir()
    procs = [subprocess.Popen([str(Path(sys.executable).parent / "lcp"), "models", "add", name, "--backend",
                               "transformers", "--model-id", "gpt2", "--gguf-file", "none", "--max-model-len", "1024"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for name in ("race-a", "race-b")]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert {"race-a", "race-b"} <= set(ModelRegistry(tmp_path / "models.yaml").names())


def _open_instance_at_the_barrier(home: str, barrier, results) -> None:
    os.environ["DAGSTER_HOME"] = home
    barrier.wait()
    try:
        open_instance().dispose()
        results.put("opened")
    except Exception as exc:  # the race's errors: OperationalError, IntegrityError, alembic's CommandError
        results.put(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def test_d4_lcp_commands_started_together_on_a_new_dagster_home_all_open_its_instance(tmp_path):
    """The CI failure behind the test above (one ``lcp models add`` of two ended "table alembic_version already
    exists"): Dagster's SQLite run storage creates its tables without a retry. Four processes forked from this one
    (Dagster already imported, so they reach the storage within microseconds of each other) open the instance of a
    new DAGSTER_HOME at a barrier, in two rounds. With plain ``DagsterInstance.get()`` a round failed here in 16 of
    17 tries on 2 cores (so this test fails without the lock about 99 times in 100); through ``open_instance``
    every process opens it."""
    fork = multiprocessing.get_context("fork")
    for round_ in range(2):
        home = tmp_path / f"dagster-home-{round_}"
        home.mkdir()
        barrier, results = fork.Barrier(4), fork.Queue()
        procs = [fork.Process(target=_open_instance_at_the_barrier, args=(str(home), barrier, results))
                 for _ in range(4)]
        for proc in procs:
            proc.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for proc in procs:
            proc.join(timeout=60)
        assert outcomes == ["opened"] * 4, f"round {round_}"
        assert [proc.exitcode for proc in procs] == [0] * 4, f"round {round_}"


# ---------------------------------------------------------------------------------------------- D6: replaced rows


def test_d6_import_under_a_name_with_another_backends_rows_is_refused(tmp_path, monkeypatch):
    project = released_longbench_project(tmp_path, monkeypatch, [
        {"dataset": "qasper", "_id": rid, "language": "en", "context": "The paper studies parsing.",
         "input": "What is studied?", "answers": ["parsing"], "all_classes": None} for rid in ("q-1", "q-2")])
    # api1's rows from its openai server (a registry that lacks it: another LCP_MODELS, or the entry deleted).
    part = project / "lake" / "generations" / "length=all" / "model=api1" / "data.parquet"
    part.parent.mkdir(parents=True)
    pl.DataFrame({"cache_key": ["k1", "k2"], "backend": ["openai", "openai"], "model_id": ["srv", "srv"],
                  "output": ["Paris", "Rome"]}).write_parquet(part)
    (project / "models.yaml").write_text("other:\n  backend: transformers\n  model_id: gpt2\n  max_model_len: 512\n")
    preds = project / "good.jsonl"
    preds.write_text("".join(json.dumps({"_id": r, "prediction": "parsing"}) + "\n" for r in ("q-1", "q-2")))
    before = snapshot(project / "lake"), (project / "models.yaml").read_bytes()

    result = CliRunner().invoke(main, ["models", "import", str(preds), "--model", "api1", "--config",
                                       str(project / "lb.yaml")])
    assert result.exit_code == 1, result.output
    assert "model 'api1' already has generations of backend 'openai' in the lake" in result.output
    assert str(part) in result.output and "Traceback" not in result.output
    assert (snapshot(project / "lake"), (project / "models.yaml").read_bytes()) == before  # nothing written

    # The same file under a name of its own is imported.
    ok = CliRunner().invoke(main, ["models", "import", str(preds), "--model", "api1-imported", "--config",
                                   str(project / "lb.yaml")])
    assert ok.exit_code == 0, ok.output
    assert part.read_bytes() == before[0]["generations/length=all/model=api1/data.parquet"]


# ---------------------------------------------------------------------------------------------- D7, D8: the server


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-round3-0123456789abcdef")
    with FaultyOpenAIServer(drip_s=0.5, long_words=200, huge_chars=400_000) as s:
        yield s


def ask(url: str, prompt: str = "Which river?", max_new_tokens: int = 8, **changes):
    gen = make_generator(served_model("served", url, **changes))
    return gen.generate([GenerationRequest("k", prompt, max_new_tokens)])


def test_d7_a_server_trickling_bytes_is_cut_off_at_the_deadline_and_reported_once(server):
    server.always = "drip"  # headers at once, then a byte every 0.5 s: about 2 minutes for the whole body
    deadline = 1.5
    gen = make_generator(served_model("served", server.url, request_timeout_s=deadline, max_retries=2))
    gen.load()  # the tokenizer: not the request's time
    with pytest.raises(RuntimeError) as err:
        gen.generate([GenerationRequest("k", "Which river?", 8)])
    elapsed = time.monotonic() - server.requests()[0].at  # from the request's arrival to the error
    assert deadline - 0.1 < elapsed < deadline + 1.0, elapsed
    message = str(err.value)
    assert message.startswith("model 'served', request 'k': the server call timed out and was not sent again")
    assert f"(no reply within {deadline:g} s)" in message and f"server http://127.0.0.1:{server.port}/v1" in message
    assert len(server.requests()) == 1  # reported once: a timeout is not resent by default


def test_d7_the_judge_is_bounded_too_a_trickling_judge_server_ends_at_its_deadline(server, tmp_path):
    from lc_pipeline.resources.judge import JudgeCache, JudgeClient
    from lc_pipeline.score.judge import JudgeCall

    server.always = "drip"  # a reply of ~100 bytes at a byte every 0.5 s: ~50 s if nothing bounds the call
    client = JudgeClient("judge", server.url, cache=JudgeCache(tmp_path / "judge.sqlite"), max_concurrency=1,
                         max_retries=0, timeout_s=1.5)
    assert client.deadline_s(0) == 1.5
    started = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        client.ask([JudgeCall("call-00", "Grade this answer: Ada.")])
    assert time.monotonic() - started < 1.5 + 2.0
    assert str(err.value).startswith("judge 'judge' at ") and "sk-planted" not in str(err.value)
    assert len(server.requests()) == 1


def test_d7_with_retry_timeouts_each_attempt_has_its_own_deadline(server):
    server.always = "drip"
    gen = make_generator(served_model("served", server.url, request_timeout_s=1.0, max_retries=1, retry_timeouts=True))
    gen.load()
    with pytest.raises(RuntimeError, match=r"failed after 1 retries: APITimeoutError"):
        gen.generate([GenerationRequest("k", "Which river?", 8)])
    assert time.monotonic() - server.requests()[0].at < 2 * 1.0 + 0.5 + 1.0  # two deadlines, one backoff, slack
    assert len(server.requests()) == 2


NOT_A_COMPLETION = {
    "empty_choices": "the reply has no choices",
    "no_message": "the reply's choice has no message",
    "content_int": "the reply's message.content is int 42, not a string",
    "content_list": "the reply's message.content is list ['a', 'b'], not a string",
    "content_obj": "the reply's message.content is dict {'answer': 'Paris'}, not a string",
    "long": "the reply has 200 tokens, far more than the 8 asked for",
    "huge": "the reply has 400000 characters, far more than the 8 tokens asked for",
}


@pytest.mark.parametrize("fault", list(NOT_A_COMPLETION))
def test_d8_a_reply_that_is_not_a_completion_is_asked_again_then_refused(server, fault):
    server.plan(fault)  # once, then good answers
    [result] = ask(server.url, max_retries=1)
    assert result.output == reply_for("Which river?") and [r.fault for r in server.requests()] == [fault, "ok"]

    server.always = fault
    with pytest.raises(RuntimeError) as err:
        ask(server.url, max_retries=1)
    message = str(err.value)
    assert message.startswith("model 'served', request 'k': the server call got no usable reply after 1 retries: "
                              "MalformedReply: 2 replies in a row were not a completion")
    assert NOT_A_COMPLETION[fault] in message and "Traceback" not in message and len(message) < 700


def test_d8_a_text_completion_without_text_is_an_empty_answer_and_a_list_is_refused(server):
    server.plan("no_message")  # a text choice without "text": an empty answer, as a null content is
    [result] = ask(server.url, api="completions", send_token_ids=False, chat_template=False,
                       max_retries=0)
    assert result.output == ""
    server.always = "content_list"
    with pytest.raises(RuntimeError, match=r"the reply's text is list \['a', 'b'\], not a string"):
        ask(server.url, api="completions", send_token_ids=False, chat_template=False, max_retries=0)


@pytest.mark.parametrize("fault, field", [("usage_str", "prompt_tokens"), ("usage_neg", "prompt_tokens"),
                                          ("usage_huge", "completion_tokens")])
def test_d8_token_counts_that_are_not_counts_are_counted_locally(server, fault, field, caplog):
    [good] = ask(server.url)
    server.always = fault
    with caplog.at_level(logging.WARNING, logger="lc_pipeline.generate.openai_backend"):
        [result] = ask(server.url)
    gen = make_generator(served_model("served", server.url))
    ours = {"prompt_tokens": len(gen.fit(GenerationRequest("k", "Which river?", 8)).ids),
            "completion_tokens": len(gen.prompt_tokenizer.encode(reply_for("Which river?")))}
    assert result.output == good.output
    assert getattr(result, field) == ours[field] and isinstance(getattr(result, field), int)
    other = "completion_tokens" if field == "prompt_tokens" else "prompt_tokens"
    assert getattr(result, other) == getattr(good, other)  # the server's good count is kept
    shown = {"usage_str": repr("lots"), "usage_neg": "-5", "usage_huge": "1e+30"}[fault]
    upper = 8192 if field == "prompt_tokens" else 32
    warned = (f"model 'served', request 'k': the server's usage.{field} {shown} is not a count in [0, {upper}]; "
              f"counted locally: {ours[field]}")
    assert [r.getMessage() for r in caplog.records if f"usage.{field}" in r.getMessage()] == [warned]


def test_d8_an_odd_finish_reason_is_stop(server):
    server.always = "finish_weird"
    [result] = ask(server.url)
    assert result.finish_reason == "stop" and result.output == reply_for("Which river?")


# ---------------------------------------------------------------------------------------------- D21: the server


def test_d21_an_openai_models_fingerprint_covers_its_server_not_its_credentials():
    spec = served_model("api1", "http://127.0.0.1:8000/v1")
    fp = spec.fingerprint()
    assert dataclasses.replace(spec, base_url="http://127.0.0.1:8001/v1").fingerprint() != fp
    assert dataclasses.replace(spec, base_url="http://other-host:8000/v1").fingerprint() != fp
    assert dataclasses.replace(spec, base_url="https://127.0.0.1:8000/v1").fingerprint() != fp
    for same in ("http://127.0.0.1:8000/v1/", "HTTP://127.0.0.1:8000/v1", "http://user:key1@127.0.0.1:8000/v1",
                 "http://127.0.0.1:8000/v1?api_key=rotated"):
        assert dataclasses.replace(spec, base_url=same).fingerprint() == fp, same
    # Speed settings still keep the rows.
    assert dataclasses.replace(spec, request_timeout_s=9, max_concurrency=4, max_retries=0).fingerprint() == fp


def test_d21_lcp_plan_sees_a_changed_server_as_new_rows(tmp_path):
    registry = ModelRegistry(tmp_path / "models.yaml")
    registry.add(served_model("api1", "http://127.0.0.1:8000/v1"))
    old = registry.get("api1").fingerprint()
    registry.add(served_model("api1", "http://127.0.0.1:9000/v1"), overwrite=True)
    assert registry.get("api1").fingerprint() != old


# ---------------------------------------------------------------------------------------------- D23: connections


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:99999/v1", "'http://127.0.0.1:99999/v1' is not a valid URL: Port out of range 0-65535"),
    ("file:///etc/passwd", "'file:///etc/passwd': expected an http:// or https:// URL with a host"),
    ("127.0.0.1:8000/v1", "'127.0.0.1:8000/v1': expected an http:// or https:// URL with a host"),
    ("http://user:SECRET@[::1/v1", "'***' is not a valid URL"),
])
def test_d23_a_bad_base_url_is_refused_where_the_model_is_defined(tmp_path, url, says):
    with pytest.raises(ModelSpecError) as err:
        served_model("api1", url)
    assert str(err.value).startswith("model 'api1', field 'base_url': ") and says in str(err.value)
    assert "SECRET" not in str(err.value)
    path = tmp_path / "models.yaml"
    path.write_text(f"api1:\n  backend: openai\n  model_id: m\n  max_model_len: 512\n  base_url: '{url}'\n")
    with pytest.raises(ModelSpecError, match=rf"model registry {path}: model 'api1', field 'base_url'"):
        ModelRegistry(path).get("api1")


def test_d23_a_refused_connection_names_the_model_the_server_and_the_cause(monkeypatch):
    import socket

    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted-round3-0123456789abcdef")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://user:SECRET@127.0.0.1:{port}/v1"
    with pytest.raises(RuntimeError) as err:
        ask(url, max_retries=0)
    message = str(err.value)
    assert message.startswith("model 'served', request 'k': the server call failed after 0 retries: "
                              "APIConnectionError: Connection error. (ConnectError: ")
    assert "ConnectionRefusedError: [Errno 111]" in message and message.endswith(f"; server http://***@127.0.0.1:{port}/v1")
    assert "SECRET" not in message and "Traceback" not in message and "\n" not in message


# ---------------------------------------------------------------------------------------------- D24: NaN


@pytest.mark.parametrize("field", ["request_timeout_s", "price_per_million_input_tokens",
                                   "price_per_million_output_tokens", "gpu_memory_utilization", "kv_cache_gib"])
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_d24_nan_and_infinity_are_refused_in_a_models_numbers(tmp_path, field, value):
    path = tmp_path / "models.yaml"
    path.write_text(f"api1:\n  backend: openai\n  model_id: m\n  max_model_len: 512\n  {field}: {value}\n")
    before = path.read_bytes()
    with pytest.raises(ModelSpecError, match=rf"model 'api1', field '{field}': expected a finite number, got "):
        ModelRegistry(path).get("api1")
    result = CliRunner().invoke(main, ["models", "list"],
                                env={"LCP_MODELS": str(path), "LCP_PROJECT_DIR": str(tmp_path)})
    assert result.exit_code == 1 and f"field '{field}': expected a finite number" in result.output
    assert "Traceback" not in result.output and path.read_bytes() == before
    with pytest.raises(ModelSpecError, match="expected a finite number"):
        ModelSpec(slug="api1", backend="openai", model_id="m", gguf_file=None, max_model_len=512,
                  **{field: float(value.replace(".", ""))})


# ---------------------------------------------------------------------------------------------- D9, D19: task files


@pytest.mark.parametrize("entry, field", [
    ("aggregation: {group: x, weight: .inf}", "field 'aggregation.weight': Input should be a finite number"),
    ("aggregation: {group: x, weight: .nan}", "field 'aggregation.weight': Input should be a finite number"),
    ("max_new_tokens: 1000000000000", "field 'max_new_tokens': Input should be less than or equal to 2147483647"),
])
def test_d9_d19_a_task_files_numbers_must_be_finite_and_fit_the_tables(tmp_path, entry, field):
    from lc_pipeline.tasks.catalog import TaskFileError, load_catalog

    path = tmp_path / "mine.yaml"
    path.write_text(f"benchmark: longbench\ntasks:\n  - name: hotpotqa\n    {entry}\n")
    before = path.read_bytes()
    with pytest.raises(TaskFileError) as err:
        load_catalog([path])
    message = str(err.value)
    assert str(path) in message and "hotpotqa" in message and field in message, message
    assert "Traceback" not in message and path.read_bytes() == before


@pytest.mark.parametrize("scale, says", [(".inf", "a finite number"), (".nan", "a finite number"),
                                         ("-1", "greater than 0"), ("0", "greater than 0")])
def test_d9_a_headline_scale_must_be_finite_and_positive(tmp_path, scale, says):
    from lc_pipeline.tasks.catalog import TaskFileError, load_catalog

    path = tmp_path / "mine.yaml"
    path.write_text(f"benchmark: mine\nheadline: {{scale: {scale}}}\ntasks: []\n")
    with pytest.raises(TaskFileError) as err:
        load_catalog([path])
    assert str(err.value) == f"{path}: field 'headline': field 'scale': Input should be {says}"


def test_d22_a_prompt_without_context_is_refused_naming_the_task_and_the_field(tmp_path):
    from lc_pipeline.construct.spec_checks import check_prompt
    from lc_pipeline.tasks.catalog import load_catalog

    path = tmp_path / "mine.yaml"
    path.write_text('benchmark: helmet\ntasks:\n  - name: json_kv\n    prompt: "just {question}{demos}"\n')
    spec = load_catalog([path]).get("helmet/json_kv")
    with pytest.raises(ValueError) as err:
        check_prompt(spec, {"context", "question", "demos"})
    assert str(err.value) == (f"task 'helmet/json_kv' (declared in {path}): field 'prompt': has no {{context}}: this "
                              "builder puts the long input there, and without it the model would never see it; add "
                              "{context} where the input goes")
    packaged = load_catalog().get("helmet/json_kv")  # the packaged prompt has it
    assert check_prompt(packaged, {"context", "question", "demos"}) == packaged.prompt


def test_d23_a_bad_openai_base_url_variable_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:SECRET@127.0.0.1:99999/v1")
    gen = make_generator(served_model("api1", None, max_retries=0))
    with pytest.raises(ModelSpecError) as err:
        gen.generate([GenerationRequest("k", "Which river?", 8)])
    # A URL that cannot be parsed and has an "@" is shown as *** whole (redact_url): it may hold a key.
    assert str(err.value) == ("model 'api1', field 'base_url': '***' is not a valid URL: Port out of range 0-65535 "
                              "(from $OPENAI_BASE_URL: the model's base_url is not set)")


def test_d23_a_task_group_error_is_described_by_the_error_inside_it():
    from lc_pipeline.generate.openai_backend import describe_failure

    group = ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionRefusedError(111, "Connection refused")])
    assert describe_failure(group, 2, None, retried=0) == (
        "failed after 0 retries: ConnectionRefusedError: [Errno 111] Connection refused")


def test_d8_a_bad_reply_is_never_stored_and_the_answers_before_it_are_kept(server, tmp_path):
    prompts = [f"Name a river that flows through city number {i}." for i in range(4)]
    frame = pl.DataFrame({"instance_id": [f"inst-{i}" for i in range(4)], "benchmark": ["qa"] * 4,
                          "task": ["single_hop_qa"] * 4, "prompt": prompts, "context": prompts,
                          "max_new_tokens": [8] * 4})
    gen = make_generator(served_model("served", server.url, max_retries=1))
    plan = plan_partition(frame, gen.spec, gen)
    store = GenerationCheckpoint(tmp_path / "store")
    server.plan("ok", "ok")
    server.always = "huge"  # every later reply: 400,000 characters for 8 tokens
    with pytest.raises(RuntimeError, match=r"the reply has 400000 characters, far more than the 8 tokens asked for"):
        generate_partition(plan, gen, store, chunk_size(gen.spec))
    kept = store.load()
    assert kept.height == 2 and kept["output"].str.len_chars().max() < 40
    files = snapshot(tmp_path / "store")

    server.always = "usage_neg"  # the server recovers, but miscounts: our count is stored instead
    outcome = generate_partition(plan, gen, store, chunk_size(gen.spec))
    assert (outcome.reused, outcome.generated) == (2, 2)
    assert outcome.rows["output"].to_list() == [reply_for(p) for p in prompts]
    assert (outcome.rows["prompt_tokens"] >= 0).all()
    assert all(snapshot(tmp_path / "store").get(name) == data for name, data in files.items()
               if name.endswith(".parquet"))  # the parts written before are untouched
