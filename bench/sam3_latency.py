"""SAM 3 latency through our backend: image backbone, per prompt, and what feature reuse saves.

For each iteration a NEW frame is segmented with k prompts. The first call on a frame is a full
pass (image backbone + text + grounding head); the next k-1 reuse the frame's features. Reported:
  - backbone ms, first-prompt ms, later-prompt ms (medians),
  - k prompts with reuse (measured) vs k full passes (k x the measured full pass): the ratio is
    the speed-up of feature reuse for a query that tries k phrases.
Runs on whatever device is present (``--device``). Without ``--checkpoint`` it uses random
weights (latency does not depend on the weights; results are marked untrained).

    python bench/sam3_latency.py                       # CPU here: k=2, 1 iteration (~5 min)
    python bench/sam3_latency.py --device cuda --iterations 20 --prompts 4
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sam3_agent_ros.config import SegmenterConfig  # noqa: E402
from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter  # noqa: E402

PROMPTS = ("red cup", "blue box", "the leftmost bottle", "person", "green apple", "chair",
           "white plate", "black cable")


def make_frame(width: int, height: int, seed: int) -> np.ndarray:
    """The repository's tabletop frame when available (bench/common.py), else a synthetic one."""
    try:
        from bench.common import bench_frame

        return bench_frame(width, height, seed=seed)
    except Exception:  # noqa: BLE001 - cv2 or the example image missing: any frame will do
        rng = np.random.default_rng(seed)
        frame = np.full((height, width, 3), 180, np.uint8)
        for _ in range(6):
            x, y = rng.integers(0, width - width // 6), rng.integers(0, height - height // 6)
            frame[y:y + height // 6, x:x + width // 6] = rng.integers(0, 255, 3)
        return frame


def median_ms(values: list[float]) -> float | None:
    return round(statistics.median(values) * 1000, 1) if values else None


def run(args: argparse.Namespace) -> dict:
    import torch

    cfg = dataclasses.replace(SegmenterConfig(), backend="sam3", device=args.device,
                              dtype=args.dtype, checkpoint=args.checkpoint,
                              random_weights=not args.checkpoint, bpe_path=args.bpe_path,
                              confidence_threshold=args.confidence_threshold)
    started = time.perf_counter()
    segmenter = Sam3Segmenter(cfg)
    load_s = time.perf_counter() - started
    on_cuda = segmenter.device.startswith("cuda")
    if on_cuda:
        torch.cuda.reset_peak_memory_stats(segmenter.device)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.prompts)]
    backbone, first_prompt, later_prompt, full_pass, reuse_total, post, detections = \
        [], [], [], [], [], [], []
    for iteration in range(args.iterations):
        frame = make_frame(args.width, args.height, seed=iteration)
        frame_started = time.perf_counter()
        for index, prompt in enumerate(prompts):
            call_started = time.perf_counter()
            result = segmenter.segment(frame, prompt)
            call_s = time.perf_counter() - call_started
            timings = segmenter.last_timings
            post.append(timings["postprocess_s"])
            detections.append(len(result.scores))
            if index == 0:
                backbone.append(timings["backbone_s"])
                first_prompt.append(timings["prompt_s"])
                full_pass.append(call_s)
            else:
                later_prompt.append(call_s)
        reuse_total.append(time.perf_counter() - frame_started)
        print(f"iteration {iteration + 1}/{args.iterations}: backbone "
              f"{backbone[-1] * 1000:.1f} ms, frame total {reuse_total[-1] * 1000:.1f} ms",
              file=sys.stderr, flush=True)
    k = args.prompts
    full_pass_ms = median_ms(full_pass)
    reuse_ms = median_ms(reuse_total)
    report = {
        "device": segmenter.device,
        "device_name": (torch.cuda.get_device_name(segmenter.device) if on_cuda
                        else platform.processor() or "CPU"),
        "dtype": segmenter.dtype, "resolution": 1008, "frame": f"{args.width}x{args.height}",
        "weights": "checkpoint" if args.checkpoint else "random (untrained)",
        "torch": torch.__version__, "iterations": args.iterations, "prompts_per_frame": k,
        "cpu_threads": torch.get_num_threads(),
        "load_s": round(load_s, 2),
        "load_timings_s": {key: round(v, 2) for key, v in segmenter.load_timings.items()},
        "backbone_ms": median_ms(backbone),
        "first_prompt_ms": median_ms(first_prompt),
        "later_prompt_ms": median_ms(later_prompt),
        "full_pass_ms": full_pass_ms,
        "postprocess_ms": median_ms(post),
        f"k{k}_with_reuse_ms": reuse_ms,
        f"k{k}_full_passes_ms": round(k * full_pass_ms, 1),
        "reuse_speedup": round(k * full_pass_ms / reuse_ms, 2),
        "backbone_calls": segmenter.backbone_calls,
        "median_masks_kept": statistics.median(detections),
    }
    if on_cuda:
        report["peak_cuda_allocated_gib"] = round(
            torch.cuda.max_memory_allocated(segmenter.device) / 2**30, 2)
    try:
        import psutil

        report["rss_gib"] = round(psutil.Process().memory_info().rss / 2**30, 2)
    except ImportError:
        pass
    segmenter.close()
    return report


def print_table(report: dict) -> None:
    k = report["prompts_per_frame"]
    rows = [
        ("device", f"{report['device_name']} ({report['device']}, {report['dtype']})"),
        ("load (build + weights + warm-up)", f"{report['load_s']} s"),
        ("image backbone", f"{report['backbone_ms']} ms"),
        ("first prompt on a frame", f"{report['first_prompt_ms']} ms"),
        ("later prompt (reuses features)", f"{report['later_prompt_ms']} ms"),
        ("full pass (backbone + prompt + post)", f"{report['full_pass_ms']} ms"),
        (f"{k} prompts with reuse", f"{report[f'k{k}_with_reuse_ms']} ms"),
        (f"{k} full passes", f"{report[f'k{k}_full_passes_ms']} ms"),
        ("reuse speed-up", f"{report['reuse_speedup']}x"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"SAM 3 latency, {report['iterations']} iteration(s), medians, "
          f"{report['weights']} weights, frame {report['frame']}")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="", help="'' (cuda if available), cuda, cuda:N, cpu")
    parser.add_argument("--dtype", default="", help="'' (bf16 on CUDA, fp32 on CPU)")
    parser.add_argument("--checkpoint", default="", help="sam3.pt; empty: random weights")
    parser.add_argument("--bpe-path", default="")
    parser.add_argument("--iterations", type=int, default=None,
                        help="frames (default 20 on CUDA, 1 on CPU)")
    parser.add_argument("--prompts", type=int, default=None,
                        help="prompts per frame k (default 4 on CUDA, 2 on CPU)")
    parser.add_argument("--width", type=int, default=1008)
    parser.add_argument("--height", type=int, default=1008)
    parser.add_argument("--confidence-threshold", type=float, default=0.5)
    parser.add_argument("--json", default="", help="also write the report here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    import torch

    cuda = torch.cuda.is_available() and not args.device.startswith("cpu")
    if args.iterations is None:
        args.iterations = 20 if cuda else 1
    if args.prompts is None:
        args.prompts = 4 if cuda else 2
    if args.prompts < 2 or args.iterations < 1:
        parser.error("--prompts must be >= 2 and --iterations >= 1")
    report = run(args)
    report["command"] = " ".join([".venv/bin/python bench/sam3_latency.py",
                                  *(argv if argv is not None else sys.argv[1:])]).strip()
    print_table(report)
    print(json.dumps(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    try:
        from bench.common import write_result

        write_result("sam3_latency", report)
    except Exception:  # noqa: BLE001 - results dir is a convenience, the table is printed
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
