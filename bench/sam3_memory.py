"""SAM 3 model memory by dtype, measured on the CPU: a lower bound for a Jetson (docs/jetson.md).

Builds the image model once through our backend (random weights, float32: the only CPU dtype
the backend accepts), then casts it in place to float16 and to bfloat16. For each dtype: the bytes
of the parameters and buffers, the process RSS after freeing (gc + malloc_trim), and the peak RSS
so far. No inference runs (bf16 inference does not finish on these CPUs): this is the memory of
the weights, not of activations. On a Jetson the GPU shares the same physical memory, so a model
held in fp16/bf16 needs at least the fp16 figure below, plus activations (see the H200 "peak
CUDA memory" in docs/benchmarks.md), plus the CUDA context and the rest of the process.

    .venv/bin/python bench/sam3_memory.py          # ~5 GiB peak, ~1 min of CPU; prints JSON
"""

from __future__ import annotations

import ctypes
import gc
import json
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from sam3_agent_ros.config import SegmenterConfig  # noqa: E402
from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter  # noqa: E402

GIB = 2**30


def _release_freed_memory() -> None:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc
        pass


def _tensor_bytes(model) -> dict[str, float]:
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    return {"parameters_gib": params / GIB, "buffers_gib": buffers / GIB}


def _process_memory() -> dict[str, float]:
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"rss_gib": psutil.Process().memory_info().rss / GIB, "peak_rss_gib": peak_kib / 2**20}


def main() -> None:
    import torch

    _release_freed_memory()
    report: dict = {"torch": torch.__version__, "python": platform.python_version(),
                    "machine": platform.processor() or platform.machine(),
                    "before_build": _process_memory()}
    started = time.perf_counter()
    segmenter = Sam3Segmenter(SegmenterConfig(backend="sam3", device="cpu", random_weights=True),
                              warmup=False)
    report["build_s"] = time.perf_counter() - started
    model = segmenter._model
    report["parameters"] = sum(p.numel() for p in model.parameters())
    report["submodules_fp32_gib"] = {
        name: sum(p.numel() * p.element_size() for p in child.parameters()) / GIB
        for name, child in model.named_children()}
    _release_freed_memory()
    report["float32"] = {**_tensor_bytes(model), **_process_memory()}
    for dtype in ("float16", "bfloat16"):
        model.to(getattr(torch, dtype))  # in place; the float32 tensors are freed
        _release_freed_memory()
        report[dtype] = {**_tensor_bytes(model), **_process_memory()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
