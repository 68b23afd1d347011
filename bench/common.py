"""Shared helpers of the benchmarks: machine description, test frames and masks, result files.

Every benchmark writes one JSON file into ``build/bench/`` (``write_result``); ``bench/report.py``
turns those files into the table printed by ``bench/run_all.sh`` and into docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# `python bench/x.py` puts bench/, not the repository, on sys.path; the editable install appends
# the repository at the end, after the standard library's own `test` package: put it first.
if sys.path[0] != str(ROOT):
    sys.path.insert(0, str(ROOT))
if str(ROOT / "demo") not in sys.path:  # the demo package (sam3_agent_demo) of this checkout
    sys.path.insert(1, str(ROOT / "demo"))

RESULTS_DIR = ROOT / "build" / "bench"
EXAMPLE_IMAGE = ROOT / "data" / "example_tabletop.png"
RESOLUTIONS = {"1080p": (1920, 1080), "480p": (640, 480)}


def machine() -> dict:
    """CPU model, core count and Python version, reported with every absolute time."""
    model = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        for line in subprocess.run(["lscpu"], capture_output=True, text=True,
                                   timeout=10).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu": model, "cores": os.cpu_count(), "python": platform.python_version(),
            "load_avg_1min": round(os.getloadavg()[0], 2)}


def write_result(name: str, data: dict) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    data = {"benchmark": name, "machine": machine(),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"), **data}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def bench_frame(width: int, height: int, seed: int = 0) -> np.ndarray:
    """The example tabletop scene resized to ``width`` x ``height`` with mild sensor-like noise
    (sigma 3), so image encoders see a camera-like, not a perfectly flat, picture."""
    bgr = cv2.imread(str(EXAMPLE_IMAGE), cv2.IMREAD_COLOR)
    if bgr is None:
        raise FileNotFoundError(f"cannot read {EXAMPLE_IMAGE}")
    rgb = cv2.cvtColor(cv2.resize(bgr, (width, height), interpolation=cv2.INTER_LINEAR),
                       cv2.COLOR_BGR2RGB)
    noise = np.random.default_rng(seed).normal(0.0, 3.0, rgb.shape)
    return np.clip(rgb + noise, 0, 255).astype(np.uint8)


def blob_masks(width: int, height: int, count: int, seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``count`` non-overlapping elliptical object masks on a grid: (masks (N, H, W) bool,
    scores (N,) distinct, boxes (N, 4) x0 y0 x1 y1). Sizes scale with the frame."""
    rng = np.random.default_rng(seed)
    columns = int(np.ceil(np.sqrt(count * width / height)))
    rows = int(np.ceil(count / columns))
    cell_w, cell_h = width / columns, height / rows
    masks = np.zeros((count, height, width), bool)
    boxes = np.zeros((count, 4))
    for k in range(count):
        row, column = divmod(k, columns)
        cx = (column + 0.5 + rng.uniform(-0.1, 0.1)) * cell_w
        cy = (row + 0.5 + rng.uniform(-0.1, 0.1)) * cell_h
        ax, ay = cell_w * rng.uniform(0.2, 0.35), cell_h * rng.uniform(0.2, 0.35)
        canvas = np.zeros((height, width), np.uint8)
        cv2.ellipse(canvas, (int(cx), int(cy)), (int(ax), int(ay)), float(rng.uniform(0, 180)),
                    0, 360, 1, -1)
        masks[k] = canvas.astype(bool)
        ys, xs = np.nonzero(masks[k])
        boxes[k] = (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
    scores = np.linspace(0.95, 0.55, count) + rng.uniform(-0.01, 0.01, count)
    return masks, scores, boxes


@contextlib.contextmanager
def quiet():
    """Send stdout (upstream prints a lot) to /dev/null for the duration."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def rss_mb() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def command_line() -> str:
    """How to reproduce this benchmark's figures alone (recorded next to them), written as the
    docs write commands: from the repository root with the venv active."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), ROOT)
    return " ".join(["python", script, *sys.argv[1:]])


def process_cpu_s(process) -> float:
    """CPU seconds of a psutil.Process and its children (the ROS wheels may re-execute
    Python)."""
    total = 0.0
    for proc in [process, *process.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except Exception:  # psutil.Error: the process ended meanwhile
            pass
    return total


def wait_for(condition, timeout: float, what: str) -> None:
    """Poll ``condition`` every 50 ms; ``RuntimeError`` naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)
