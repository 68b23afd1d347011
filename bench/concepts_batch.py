"""Standing concepts: k concepts in ONE pass per frame vs k separate passes, k = 1, 2, 4.

One pass (what the node's concepts thread does): ``segment_prompts(segmenter, frame, prompts)``,
i.e. the backend's ``segment_many`` on the frame: the colour segmenter computes its per-image
analysis (HSV, background model) once; SAM 3 runs its image backbone once, its text encoder once
and one grounding pass batched over the k prompts. k separate passes: each prompt on its own copy
of the frame (as k independent single-concept segmenters would see it): the per-frame work k
times. Every measurement starts from a fresh frame object, so no cache from an earlier one helps.

- colour segmenter: the tabletop sample's frame (640x480) and the same scene at 1920x1080,
  ``--iterations`` frames per k, medians of wall time, mean process CPU time;
- ``--sam3``: SAM 3 on the CPU with random weights (``segmenter.random_weights``; latency does not
  depend on the weights), 640x480, ONE frame per measurement: the four single-prompt passes
  first (k = 1 is both: one pass of one prompt; being the model's first, it includes a one-time
  warm-up), then a one-pass run for k = 2 and 4; k separate passes is the sum of the first k
  single-prompt passes. ~6 image-backbone passes: 3-10 min on 2 cores, ~5 GB. Without it,
  the SAM 3 figures of an earlier ``--sam3`` run are kept in the result file.

    .venv/bin/python bench/concepts_batch.py [--iterations 30] [--sam3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RESULTS_DIR, command_line, quiet, write_result  # noqa: E402
from sam3_agent_demo import sample  # noqa: E402
from sam3_agent_ros.core.ports import segment_prompts  # noqa: E402
from sam3_agent_ros.segmenters.color import ColorSegmenter  # noqa: E402

PROMPTS = ("blue object", "red object", "green object", "yellow object")
KS = (1, 2, 4)
RESOLUTIONS = {"640x480": (640, 480), "1920x1080": (1920, 1080)}


def frame_at(width: int, height: int) -> np.ndarray:
    rgb = sample.render_frame(0.0).rgb
    if rgb.shape[:2] != (height, width):
        rgb = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_LINEAR)
    return rgb


def timed(call, *args) -> tuple[float, float, object]:
    """(wall ms, process CPU ms, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = call(*args)
    return (time.perf_counter() - wall) * 1000.0, (time.process_time() - cpu) * 1000.0, out


def one_pass(segmenter, base: np.ndarray, prompts: list[str]) -> list:
    """Every prompt in one pass on a new frame object."""
    return segment_prompts(segmenter, base.copy(), prompts)


def separate_passes(segmenter, base: np.ndarray, prompts: list[str]) -> list:
    """Each prompt alone on its own new frame object."""
    return [segmenter.segment(base.copy(), prompt) for prompt in prompts]


def colour_rows(iterations: int) -> dict:
    segmenter = ColorSegmenter()
    results = {}
    for resolution, (width, height) in RESOLUTIONS.items():
        base = frame_at(width, height)
        rows = []
        for k in KS:
            prompts = list(PROMPTS[:k])
            one, one_cpu, separate, separate_cpu = [], [], [], []
            counts = None
            for _ in range(iterations):
                wall, cpu, found = timed(one_pass, segmenter, base, prompts)
                one.append(wall)
                one_cpu.append(cpu)
                counts = [len(d.scores) for d in found]
                wall, cpu, _ = timed(separate_passes, segmenter, base, prompts)
                separate.append(wall)
                separate_cpu.append(cpu)
            row = {"k": k, "one_pass_ms": round(statistics.median(one), 2),
                   "separate_ms": round(statistics.median(separate), 2),
                   "one_pass_cpu_ms": round(statistics.fmean(one_cpu), 2),
                   "separate_cpu_ms": round(statistics.fmean(separate_cpu), 2),
                   "detections": counts}
            row["ratio"] = round(row["separate_ms"] / row["one_pass_ms"], 2)
            rows.append(row)
            print(f"colour {resolution} k={k}: one pass {row['one_pass_ms']} ms, {k} passes "
                  f"{row['separate_ms']} ms ({row['ratio']}x); detections {counts}", flush=True)
        results[resolution] = rows
    return results


def sam3_rows() -> dict:
    import dataclasses

    import torch

    from sam3_agent_ros.config import SegmenterConfig
    from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter

    cfg = dataclasses.replace(SegmenterConfig(), backend="sam3", random_weights=True,
                              device="cpu")
    started = time.perf_counter()
    with quiet():
        segmenter = Sam3Segmenter(cfg)
    load_s = time.perf_counter() - started
    base = frame_at(640, 480)
    try:
        singles = []  # full passes of one prompt each (k = 1 is the first)
        for prompt in PROMPTS:
            wall, _, _ = timed(separate_passes, segmenter, base, [prompt])
            singles.append(wall)
            print(f"SAM 3 CPU, one full pass of {prompt!r}: {wall / 1000:.1f} s "
                  f"(backbone {segmenter.last_timings['backbone_s']:.1f} s, prompt "
                  f"{segmenter.last_timings['prompt_s']:.1f} s)", flush=True)
        rows = [{"k": 1, "one_pass_ms": round(singles[0]), "separate_ms": round(singles[0]),
                 "ratio": 1.0}]
        for k in KS[1:]:
            calls = segmenter.backbone_calls
            wall, _, _ = timed(one_pass, segmenter, base, list(PROMPTS[:k]))
            assert segmenter.backbone_calls == calls + 1
            row = {"k": k, "one_pass_ms": round(wall), "separate_ms": round(sum(singles[:k])),
                   "backbone_ms": round(segmenter.last_timings["backbone_s"] * 1000),
                   "prompts_ms": round(segmenter.last_timings["prompt_s"] * 1000)}
            row["ratio"] = round(row["separate_ms"] / row["one_pass_ms"], 2)
            rows.append(row)
            print(f"SAM 3 CPU k={k}: one pass {wall / 1000:.1f} s vs {k} passes "
                  f"{row['separate_ms'] / 1000:.1f} s ({row['ratio']}x)", flush=True)
    finally:
        segmenter.close()
    return {"rows": rows, "load_s": round(load_s, 1), "torch_threads": torch.get_num_threads(),
            "frame": "640x480", "weights": "random",
            "measured": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--sam3", action="store_true", help="also SAM 3 on the CPU (minutes)")
    args = parser.parse_args()
    data = {"command": command_line(), "prompts": list(PROMPTS), "iterations": args.iterations,
            "colour": colour_rows(args.iterations)}
    if args.sam3:
        data["sam3_cpu"] = sam3_rows()
    else:
        previous = RESULTS_DIR / "concepts_batch.json"
        if previous.exists():
            kept = json.loads(previous.read_text(encoding="utf-8")).get("sam3_cpu")
            if kept:
                data["sam3_cpu"] = kept
    print(f"wrote {write_result('concepts_batch', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
