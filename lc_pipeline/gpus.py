"""How many NVIDIA GPUs this process can use, counted without importing torch.

``import torch`` only to call ``torch.cuda.device_count()`` cost every ``lcp`` run that sizes the ``gpu`` pool
~3 s and ~200 MiB (benchmarks review 2026-11-27, issue 29). The same answer comes from what CUDA itself reads:

1. ``CUDA_VISIBLE_DEVICES`` when it is set: its entries up to the first invalid one, as the CUDA runtime
   parses it (an index ``0``, ``1``..., or a ``GPU-``/``MIG-`` UUID; ``""``, ``-1`` or ``NoDevFiles`` hide
   every device), and no more than the machine has when that is known;
2. else the driver's ``/proc/driver/nvidia/gpus/<pci address>`` folders, one per GPU;
3. else the ``GPU n:`` lines of ``nvidia-smi -L`` (a short timeout: a hung driver must not hang ``lcp``);
4. else 0 (no NVIDIA driver: a CPU machine).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

PROC_GPUS = Path("/proc/driver/nvidia/gpus")
NVIDIA_SMI_TIMEOUT_S = 5.0
_INDEX = re.compile(r"\d+")
_UUID = re.compile(r"(GPU|MIG)-[0-9A-Za-z-]+")
_SMI_GPU_LINE = re.compile(r"^GPU \d+: ", re.MULTILINE)


def count_cuda_visible_devices(value: str) -> int:
    """The devices a ``CUDA_VISIBLE_DEVICES`` value lists: ``"0,1"`` -> 2, ``"GPU-8c1e...,GPU-77a2..."`` -> 2,
    ``"0,-1,2"`` -> 1 (CUDA stops at the first invalid entry), ``""`` / ``"-1"`` / ``"NoDevFiles"`` -> 0."""
    count = 0
    for entry in value.split(","):
        entry = entry.strip()
        if not (_INDEX.fullmatch(entry) or _UUID.fullmatch(entry)):
            break
        count += 1
    return count


def count_proc_gpus(proc_dir: Path = PROC_GPUS) -> int | None:
    """One folder per GPU the NVIDIA driver handles; None without the driver (no such folder)."""
    try:
        return sum(1 for entry in proc_dir.iterdir() if entry.is_dir())
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None


def count_nvidia_smi_gpus(listing: str) -> int:
    """The ``GPU n: <name> (UUID: ...)`` lines of ``nvidia-smi -L`` (its indented MIG lines are not GPUs)."""
    return len(_SMI_GPU_LINE.findall(listing))


def _nvidia_smi_gpus() -> int | None:
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return count_nvidia_smi_gpus(done.stdout) if done.returncode == 0 else None


def visible_gpus(environ: Mapping[str, str] = os.environ, proc_dir: Path = PROC_GPUS) -> int:
    """The NVIDIA GPUs this process can use (see the module docstring); 0 on a machine without any."""
    machine = count_proc_gpus(proc_dir)
    if machine is None:
        machine = _nvidia_smi_gpus()
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return machine or 0
    listed = count_cuda_visible_devices(visible)
    return listed if machine is None else min(listed, machine)
