"""The gpu pool is sized from the GPUs CUDA would show, counted without importing torch (issue 29)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lc_pipeline.gpus import count_cuda_visible_devices, count_nvidia_smi_gpus, count_proc_gpus, visible_gpus

H100_X2 = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-8c1e3b0f-5a31-7a4c-2f8e-0d7f6b1c9a42)\n"
           "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77a2d9e4-1c0b-4e6f-9a3d-5b8c2e1f0a93)\n")
A100_MIG = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d0e9f2a-3b4c-4d5e-8f6a-7b8c9d0e1f2a)\n"
            "  MIG 3g.20gb     Device  0: (UUID: MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d)\n"
            "  MIG 3g.20gb     Device  1: (UUID: MIG-6e7f8a9b-0c1d-5e2f-9a3b-4c5d6e7f8a9b)\n")


@pytest.mark.parametrize("value, expected", [
    ("0", 1), ("0,1", 2), ("3,1,2", 3), (" 0 , 1 ", 2),
    ("GPU-8c1e3b0f-5a31-7a4c-2f8e-0d7f6b1c9a42,GPU-77a2d9e4-1c0b-4e6f-9a3d-5b8c2e1f0a93", 2),
    ("MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d", 1),
    ("0,-1,2", 1),  # CUDA stops at the first invalid entry
    ("", 0), ("-1", 0), ("NoDevFiles", 0), ("none", 0),
])
def test_cuda_visible_devices_is_read_as_cuda_reads_it(value: str, expected: int):
    assert count_cuda_visible_devices(value) == expected


def test_nvidia_smi_listing_counts_gpus_not_mig_devices():
    assert count_nvidia_smi_gpus(H100_X2) == 2
    assert count_nvidia_smi_gpus(A100_MIG) == 1
    assert count_nvidia_smi_gpus("No devices were found\n") == 0


def _driver_folder(tmp_path: Path, gpus: int) -> Path:
    proc = tmp_path / "gpus"
    for i in range(gpus):
        (proc / f"0000:{i + 0x17:02x}:00.0").mkdir(parents=True)
    proc.mkdir(exist_ok=True)
    return proc


def test_the_drivers_proc_folders_count_the_machines_gpus(tmp_path: Path):
    assert count_proc_gpus(_driver_folder(tmp_path, 4)) == 4
    assert count_proc_gpus(tmp_path / "no-driver") is None


def test_cuda_visible_devices_wins_but_never_exceeds_the_machine(tmp_path: Path):
    proc = _driver_folder(tmp_path, 4)
    assert visible_gpus({}, proc) == 4
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}, proc) == 2
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, proc) == 0
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5"}, proc) == 4


def _gpu_pool_slots_in_fresh_process(**env: str) -> tuple[str, str]:
    """gpu_pool_slots() in a new interpreter with ``env`` over the environment (minus the two variables it
    reads), and whether torch got imported."""
    code = "import sys; from lc_pipeline.runner import gpu_pool_slots; print(gpu_pool_slots(), 'torch' in sys.modules)"
    base = {k: v for k, v in os.environ.items() if k not in ("LCP_GPU_POOL_SLOTS", "CUDA_VISIBLE_DEVICES")}
    done = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True)
    slots, torch_loaded = done.stdout.split()
    return slots, torch_loaded


def test_gpu_pool_slots_import_no_torch():
    """$LCP_GPU_POOL_SLOTS wins; without it the count comes from the machine (1 at least), and torch stays out."""
    assert _gpu_pool_slots_in_fresh_process(LCP_GPU_POOL_SLOTS="3") == ("3", "False")
    assert _gpu_pool_slots_in_fresh_process(CUDA_VISIBLE_DEVICES="") == ("1", "False")  # no GPU visible: as on a CPU
