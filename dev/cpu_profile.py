"""A pytest plugin for profiling the suite: per test, the wall seconds of setup + call + teardown and the CPU
seconds spent on them by the worker process and by the child processes it has waited for (servers stopped in a
fixture's teardown count at that test; a child never waited for is not counted). One line per test is appended to
the file named by $LCP_CPU_PROFILE (tab-separated: worker, wall, own CPU, children's CPU, node id); unset, the
plugin records nothing.

    PYTHONPATH=dev LCP_CPU_PROFILE=/tmp/cpu.tsv .venv/bin/python -m pytest -n 2 --dist loadscope \\
        --no-loadscope-reorder -p cpu_profile
    python dev/cpu_profile.py /tmp/cpu.tsv        # per module: wall, CPU and their difference (waiting)

Waiting (wall minus CPU) is time a worker holds a core's share without using it: daemons' sleeps, server starts,
timeouts. CPU is the work itself. Which of the two a change removes decides whether it shortens `make test`.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict

import pytest

ENV = "LCP_CPU_PROFILE"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get(ENV)
    t0, c0 = time.monotonic(), os.times()
    yield
    if not path:
        return
    t1, c1 = time.monotonic(), os.times()
    own = (c1.user - c0.user) + (c1.system - c0.system)
    children = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(path, "a") as out:
        out.write(f"{worker}\t{t1 - t0:.2f}\t{own:.2f}\t{children:.2f}\t{item.nodeid}\n")


def summary(path: str, top: int = 40) -> str:
    """Per test module: wall, CPU and wall - CPU seconds, the longest first, and the totals."""
    wall, cpu = defaultdict(float), defaultdict(float)
    with open(path) as lines:
        for line in lines:
            _, w, own, children, node = line.rstrip("\n").split("\t")
            module = node.split("::", 1)[0]
            wall[module] += float(w)
            cpu[module] += float(own) + float(children)
    rows = sorted(wall, key=wall.get, reverse=True)
    out = [f"{'wall s':>8} {'cpu s':>8} {'waiting':>8}  module"]
    out += [f"{wall[m]:8.1f} {cpu[m]:8.1f} {wall[m] - cpu[m]:8.1f}  {m}" for m in rows[:top]]
    out.append(f"{sum(wall.values()):8.1f} {sum(cpu.values()):8.1f} "
               f"{sum(wall.values()) - sum(cpu.values()):8.1f}  all {len(rows)} modules")
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(sys.argv[1]))
