"""`lcp ui` (i.e. `dagster dev`: a webserver, a daemon, a code server and its gRPC child) as a child process of a
test: started in a process group of its own, polled until its GraphQL serves the asset graph, and stopped by SIGTERM
to the whole group.

Dagster's processes take SIGTERM as they take SIGINT (dagster/_utils/interrupts.py gives SIGTERM SIGINT's
disposition). A shell running a command in the background without job control (``lcp ui &`` in a script, or
``pytest ... &``) starts it with SIGINT ignored, and an ignored signal stays ignored across exec: `dagster dev` and
all its children then ignored SIGTERM too (the UI tests waited out their stop timeout, 30 s, then killed the group).
`lcp ui` puts SIGINT back to its default before it execs `dagster dev`. The tests start it the way a script's
background job does, SIGINT ignored, so that every stop checks that fix: ``stop_ui`` fails if `dagster dev` is
still running ``STOP_S`` after the SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

START_S = 240  # code server import + webserver + daemon on a busy 2-core machine
POLL_S = 0.25  # between two GraphQL tries while the UI starts
STOP_S = 30  # from the SIGTERM to the group until the group is killed

# For a test instance's dagster.yaml: Dagster's run queue (the default QueuedRunCoordinator) polled every second
# instead of every 5 s, so that a run launched from the UI starts sooner; what runs and how is unchanged.
DEQUEUE_EVERY_SECOND = """
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
"""



def graphql(port: int, query: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def start_ui(lcp_args: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """`lcp` with ``lcp_args`` (`ui --port PORT`) in its own session (process group), its output to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "lc_pipeline.cli", *lcp_args], cwd=cwd, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_ignore_sigint)


def _ignore_sigint() -> None:
    """In the child before exec: SIGINT ignored, as in a script's background job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def serving(port: int, proc: subprocess.Popen, log: Path,
            query: str = "{ assetNodes { id } }", start_s: float = START_S) -> list[dict]:
    """The asset nodes ``query`` returns once the UI serves a non-empty asset graph; fails (with the log's tail) if
    `lcp ui` exits or does not serve within ``start_s``."""
    deadline = time.monotonic() + start_s
    while True:
        try:
            nodes = graphql(port, query)["data"]["assetNodes"]
            if nodes:
                return nodes
        except (OSError, KeyError, TypeError):
            pass
        assert proc.poll() is None, f"lcp ui exited {proc.returncode}: {log.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"lcp ui did not serve within {start_s:.0f}s: {log.read_text()[-3000:]}"
        time.sleep(POLL_S)


def stop_ui(proc: subprocess.Popen) -> None:
    """SIGTERM to the UI's process group: `dagster dev` stops its webserver and daemon and waits for them; the code
    server and its gRPC child stop on their own SIGTERM. Once `dagster dev` has exited (or after ``STOP_S``), SIGKILL
    to what is left of the group (a child still in its interpreter's exit; everything, after the timeout), then
    `dagster dev` is reaped. The group's id is `dagster dev`'s pid (its own session), which stays taken until then.
    Fails when `dagster dev` was still running after ``STOP_S``: SIGTERM did not stop it."""
    _signal_group(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while not (stopped := os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert stopped, f"lcp ui (dagster dev) was still running {STOP_S} s after SIGTERM: killed"


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:  # no member left
        pass
