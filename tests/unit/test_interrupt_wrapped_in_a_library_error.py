"""A step the interrupt stopped is reported as the interrupt (`lcp` exits 130 / 143 with its one line) also when the
code the signal landed in caught it and failed with an error of its own. Seen in CI (test_interrupts' real-model
SIGINT): the signal landed while pydantic-core called a serializer, and the step failed with "PydanticSerializationError:
Error calling function `<lambda>`: DagsterExecutionInterruptedError", which `lcp` printed as a failed step, exit 1.

Run in a fresh interpreter: the signal goes to that process (SIGINT to pytest's worker would stop the suite), and
runner.watching_signals installs its handlers in the main thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time, types
    from pathlib import Path
    from typing import Annotated

    import dagster as dg
    from dagster._core.errors import DagsterExecutionInterruptedError
    from pydantic import BaseModel, PlainSerializer

    from lc_pipeline.runner import Interrupted, Runner, StepFailed, watching_signals

    def serializer_the_signal_landed_in(value):
        raise DagsterExecutionInterruptedError()

    class Row(BaseModel):
        text: Annotated[str, PlainSerializer(serializer_the_signal_landed_in)]

    @dg.asset
    def pydantic_wraps_the_interrupt():
        Row(text="an answer").model_dump()

    @dg.asset
    def a_library_catches_the_interrupt():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        except BaseException as exc:
            raise ValueError(f"connection lost ({type(exc).__name__})") from None

    @dg.asset
    def disk_full():
        raise OSError("disk full")

    assets = [pydantic_wraps_the_interrupt, a_library_catches_the_interrupt, disk_full]
    home = Path(sys.argv[1])
    instance = dg.DagsterInstance.local_temp(str(home))
    pipeline = types.SimpleNamespace(assets=assets, unpooled_assets=None, resources={}, config=None,
                                     defs=dg.Definitions(assets=assets),
                                     settings=types.SimpleNamespace(lake_dir=home / "lake"))
    for name in ["disk_full", "pydantic_wraps_the_interrupt", "a_library_catches_the_interrupt"]:
        with watching_signals():
            try:
                Runner(pipeline, instance, echo=lambda m: None).step(name, [name])
            except Interrupted as exc:
                print(f"RESULT {name}: interrupted: {exc}")
            except StepFailed as exc:
                print(f"RESULT {name}: failed: {str(exc).splitlines()[0]}")
""")


def test_a_step_whose_interrupt_a_library_wrapped_in_its_own_error_is_the_interrupt_not_a_failure(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "home")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(line.removeprefix("RESULT ").split(": ", 1) for line in proc.stdout.splitlines()
                   if line.startswith("RESULT "))
    # An error of the step's own, without a signal, stays a failed step naming its cause.
    assert results["disk_full"] == "failed: step disk_full failed: OSError: disk full"
    # pydantic-core's error names the interrupt only in its message; the step is the interrupt.
    assert results["pydantic_wraps_the_interrupt"] == \
        "interrupted: 0 step(s) finished and saved; stopped in pydantic_wraps_the_interrupt"
    # An error that does not name it at all, raised after SIGINT came: the recorded signal makes it the interrupt.
    assert results["a_library_catches_the_interrupt"] == \
        "interrupted: 0 step(s) finished and saved; stopped in a_library_catches_the_interrupt"
