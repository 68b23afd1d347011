"""Follow mode cost per frame: ``flow`` vs ``redetect`` at 640x480 and 1920x1080, on ONE core.

Frames: the first ``--frames`` of the moving tabletop sequence
(demo/sam3_agent_demo/moving_scene.py), while both followed objects are in view, rendered at each
resolution beforehand (rendering is not timed). Following the two blue objects (prompt "blue")
from frame 0 with the color segmenter, every later frame goes through ``FollowSession.update``;
its wall time and process CPU time are measured per frame. Variants, side by side:
  - ``flow only``: optical flow, no re-detection (``follow.redetect_every: 0``, no segmenter);
  - ``flow``: the default (re-detect every ``follow.redetect_every`` = 10 frames);
  - ``redetect``: the segmenter on every frame + association.
An object out of view makes ``flow`` re-detect on every frame (to find it again), i.e. cost what
``redetect`` costs; these frames keep both objects in view.
Reported: median, p90 and mean ms per frame (wall), mean process CPU ms per frame, the frame
rate the mean wall time sustains and the one the CPU time allows (equal on an idle core; on a
shared machine wall time includes waiting for the CPU), the ratio to ``flow`` and the mean IoU
against the truth (a sanity check that the timed work is the real one).
OpenCV, numpy/BLAS and torch are held to one thread (``cv2.setNumThreads(1)``, ``*_NUM_THREADS``).

``--sam3``: additionally time ONE redetect update with SAM 3 on the CPU with random weights
(``segmenter.random_weights``; latency does not depend on the weights; ~2-4 min, ~5 GB).
Without it, the SAM 3 figure of an earlier ``--sam3`` run is kept in the result file.

    .venv/bin/python bench/follow_cost.py [--frames 60] [--sam3]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RESULTS_DIR, write_result  # noqa: E402
from sam3_agent_demo.moving_scene import MovingSequence, intrinsics_for  # noqa: E402
from sam3_agent_ros.config import Config  # noqa: E402
from sam3_agent_ros.follow import FollowSession  # noqa: E402
from sam3_agent_ros.segmenters.color import ColorSegmenter  # noqa: E402

RESOLUTIONS = {"640x480": (640, 480), "1920x1080": (1920, 1080)}
NAMES = ("blue_box", "blue_cylinder")
PROMPT = "blue"
VARIANTS = {  # name: (follow.* overrides, uses the segmenter)
    "flow only": ({"mode": "flow", "redetect_every": 0, "redetect_on_drop": 0.0}, False),
    "flow": ({"mode": "flow"}, True),
    "redetect": ({"mode": "redetect"}, True),
}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def follow_run(frames, overrides: dict, segmenter) -> dict:
    config = Config.from_params({f"follow.{k}": v for k, v in overrides.items()}).follow
    first = frames[0]
    session = FollowSession(config, segmenter, first.rgb, [first.masks[n] for n in NAMES],
                            PROMPT, first.t_s)
    wall, cpu, ious = [], [], []
    for frame in frames[1:]:
        w0, c0 = time.perf_counter(), time.process_time()
        update = session.update(frame.rgb, frame.t_s)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        by_index = {obj.index: obj.mask for obj in update.objects}
        for index, name in enumerate(NAMES):
            truth = frame.masks[name]
            if truth.any():
                got = by_index.get(index)
                inter = int((got & truth).sum()) if got is not None else 0
                union = int((got | truth).sum()) if got is not None else int(truth.sum())
                ious.append(inter / union)
    mean_s = statistics.fmean(wall)
    return {"frames": len(wall), "median_ms": round(statistics.median(wall) * 1000, 2),
            "p90_ms": round(percentile(wall, 90) * 1000, 2),
            "mean_ms": round(mean_s * 1000, 2),
            "cpu_mean_ms": round(statistics.fmean(cpu) * 1000, 2),
            "sustained_fps": round(1.0 / mean_s, 1),
            "cpu_bound_fps": round(1.0 / statistics.fmean(cpu), 1),
            "mean_iou": round(statistics.fmean(ious), 4)}


def sam3_redetect_once(frames) -> dict:
    """One ``redetect`` update with SAM 3 (random weights) on CPU: a full pass per frame."""
    import torch

    from sam3_agent_ros.config import SegmenterConfig
    from sam3_agent_ros.segmenters.sam3 import Sam3Segmenter

    torch.set_num_threads(1)
    cfg = dataclasses.replace(SegmenterConfig(), backend="sam3", device="cpu", dtype="float32",
                              random_weights=True)
    started = time.perf_counter()
    segmenter = Sam3Segmenter(cfg)
    load_s = time.perf_counter() - started
    config = Config.from_params({"follow.mode": "redetect"}).follow
    first = frames[0]
    session = FollowSession(config, segmenter, first.rgb, [first.masks[n] for n in NAMES],
                            PROMPT, first.t_s)
    started = time.perf_counter()
    update = session.update(frames[1].rgb, frames[1].t_s)
    update_s = time.perf_counter() - started
    segmenter.close()
    return {"weights": "random (untrained)", "torch_threads": 1, "load_s": round(load_s, 1),
            "redetect_update_s": round(update_s, 1), "state": update.state,
            "error": update.error, "frame": f"{first.rgb.shape[1]}x{first.rgb.shape[0]}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=60,
                        help="frames per run, from the start of the sequence (2..63)")
    parser.add_argument("--sam3", action="store_true", help="also time one SAM 3 CPU redetect")
    args = parser.parse_args(argv)
    in_view = MovingSequence().first_index_without(NAMES[0])
    if not 2 <= args.frames <= in_view:
        parser.error(f"--frames must be in 2..{in_view} (both objects in view)")
    cv2.setNumThreads(1)
    results: dict[str, dict] = {}
    for label, (width, height) in RESOLUTIONS.items():
        sequence = MovingSequence(intrinsics=intrinsics_for(width, height))
        frames = [sequence.frame(i) for i in range(args.frames)]
        results[label] = {}
        for variant, (overrides, uses_segmenter) in VARIANTS.items():
            segmenter = ColorSegmenter() if uses_segmenter else None
            results[label][variant] = follow_run(frames, overrides, segmenter)
        flow_ms = results[label]["flow"]["mean_ms"]
        for row in results[label].values():
            row["ratio_to_flow"] = round(row["mean_ms"] / flow_ms, 2)
    print(f"follow cost per frame, one core (cv2 threads {cv2.getNumThreads()}), "
          f"{args.frames - 1} frames, objects {', '.join(NAMES)}")
    print(f"{'frame':>10} {'variant':>10} {'median ms':>10} {'p90 ms':>8} {'mean ms':>8} "
          f"{'CPU ms':>7} {'fps':>7} {'CPU fps':>8} {'x flow':>7} {'IoU':>6}")
    for label, rows in results.items():
        for variant, row in rows.items():
            print(f"{label:>10} {variant:>10} {row['median_ms']:>10.2f} {row['p90_ms']:>8.2f} "
                  f"{row['mean_ms']:>8.2f} {row['cpu_mean_ms']:>7.2f} {row['sustained_fps']:>7.1f} "
                  f"{row['cpu_bound_fps']:>8.1f} {row['ratio_to_flow']:>7.2f} "
                  f"{row['mean_iou']:>6.3f}")
    data = {"command": "python bench/follow_cost.py" + (" --sam3" if args.sam3 else ""),
            "frames": args.frames, "threads": 1, "results": results,
            "target": "flow <= 10 ms per 640x480 frame on one core"}
    if args.sam3:
        frames = list(MovingSequence(n_frames=2))
        data["sam3_cpu"] = sam3_redetect_once(frames)
        data["sam3_cpu"]["measured"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    else:  # keep the figure of an earlier --sam3 run (it takes minutes)
        previous = RESULTS_DIR / "follow_cost.json"
        with contextlib.suppress(OSError, ValueError, KeyError):
            data["sam3_cpu"] = json.loads(previous.read_text(encoding="utf-8"))["sam3_cpu"]
    if "sam3_cpu" in data:
        print(f"SAM 3 CPU redetect (random weights, 1 thread): {data['sam3_cpu']}")
    path = write_result("follow_cost", data)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
