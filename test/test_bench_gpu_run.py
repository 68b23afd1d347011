"""bench/gpu_run.sh is ready for a GPU machine: valid bash, and its dry run (on this CPU) goes
through every step, each bench call accepting its arguments: torch vs onnxruntime with the CUDA
provider and onnxruntime with TensorRT, on an fp16 export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "bench" / "gpu_run.sh"


def test_the_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.torch
def test_the_dry_run_plans_the_torch_cuda_and_tensorrt_runs(tmp_path):
    pytest.importorskip("torch")  # the script's python3 must have torch (the GPU machine's has)
    # The script runs `python3`: this test's interpreter (make test does not activate the venv).
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "GPU_RUN_DRY": "1", "OUT": str(tmp_path),
           "GPU_RUN_ENGINE_DIR": str(tmp_path / "engine")}
    done = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "gpu_run.log").read_text()
    assert "FAILED" not in log and "bad arguments" not in log, log
    assert f"would export onnxruntime parts to {tmp_path / 'engine'}" in log
    plans = [json.loads(line.partition("dry run: ")[2]) for line in log.splitlines()
             if line.startswith("dry run: {")]
    assert [(p["engines"], p["ort_providers"]) for p in plans] == [
        (["torch", "onnxruntime"], "cuda"), (["onnxruntime"], "tensorrt")]
    for plan in plans:
        assert plan["device"] == "cuda" and plan["engine_dir"] == str(tmp_path / "engine")
        assert plan["json"].startswith(str(tmp_path))
    assert "=== done in" in log
