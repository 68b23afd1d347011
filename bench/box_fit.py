"""The oriented 3D box (geometry.box.fit_box): accuracy against depth noise, and its cost beside the
position's (locate_mask), at 640x480 and 1920x1080.

Scenes: the sample bag's tabletop and the rotated scene (turned and leaning top faces) of
demo/sam3_agent_demo/scene.py, camera 0.85-1 m above the faces, f = 600 px at 640x480 (900 px at
1920x1080: the same field of view). Depth as a camera sends it: 16-bit millimetres, plus
Gaussian noise of sigma 0, 2, 5 and 10 mm, 10 % holes, 1 % flying pixels (uniform 0.2-0.8 m);
the masks exact, then spilling 2 px onto the table around the objects
(``SceneFrame.spilled_mask``); 3 noise seeds per level. Each object is
compared with its true box (scene.box_errors): centre distance, the two largest sizes, the
in-plane angle of the long axis, against the targets (1 cm, 10 %, 10 degrees). Objects whose
box is undefined (the triangle) and faces within 5 cm of the table (a spilled mask joins them
to it, docs/pick.md) are left out.

Cost: wall time (median) and process CPU time (mean) per mask of ``locate_mask`` (the position
alone) and of ``measure_mask`` (the position and the box: what the node and ``sam3-agent run
--depth`` run), over every object of both scenes, repeated; OpenCV held to one thread (numpy's
BLAS too: ``OMP_NUM_THREADS=1``). On a shared machine the CPU time is the steadier figure.

    python bench/box_fit.py [--repeat 5]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import command_line, write_result  # noqa: E402
from sam3_agent_demo.scene import (  # noqa: E402
    CameraIntrinsics,
    box_errors,
    default_scene,
    render_scene,
    rotated_scene,
)
from sam3_agent_ros.config import Config  # noqa: E402
from sam3_agent_ros.geometry.box import fit_box  # noqa: E402
from sam3_agent_ros.geometry.depth_image import depth_to_metres  # noqa: E402
from sam3_agent_ros.geometry.locate import locate_mask  # noqa: E402
from sam3_agent_ros.geometry.measure import measure_mask  # noqa: E402

NOISE_MM = (0.0, 2.0, 5.0, 10.0)
SEEDS = (0, 1, 2)
HOLES, FLYING = 0.10, 0.01
SPILLS_PX = (0, 2)
MIN_HEIGHT_M = 0.05
RESOLUTIONS = {"640x480": CameraIntrinsics(),
               "1920x1080": CameraIntrinsics(fx=900.0, fy=900.0, cx=959.5, cy=539.5, width=1920,
                                             height=1080)}


def scenes(intrinsics: CameraIntrinsics) -> dict:
    return {"tabletop": render_scene(default_scene(intrinsics)),
            "rotated": render_scene(rotated_scene(intrinsics))}


def spoiled(frame, noise_m: float, seed: int, spill_px: int):
    """Millimetre depth with noise, holes, flying pixels; masks spilling onto the table."""
    rng = np.random.default_rng(seed)
    depth = depth_to_metres(frame.depth_mm(), "16UC1")
    if noise_m:
        depth = depth + rng.normal(0.0, noise_m, depth.shape).astype(np.float32)
    depth[rng.random(depth.shape) < HOLES] = 0.0
    flying = rng.random(depth.shape) < FLYING
    depth[flying] = rng.uniform(0.2, 0.8, int(flying.sum()))
    masks = {name: frame.spilled_mask(name, spill_px) if spill_px else frame.masks[name]
             for name in frame.masks}
    return depth, masks


def accuracy(frames: dict, spill_px: int) -> list[dict]:
    rows = []
    for noise_mm in NOISE_MM:
        centre, size, angle, on_target, total = [], [], [], 0, 0
        for seed in SEEDS:
            for frame in frames.values():
                depth, masks = spoiled(frame, noise_mm / 1000.0, seed, spill_px)
                for obj in frame.scene.objects:
                    truth = frame.true_box(obj.name)
                    if truth.ambiguous or obj.height < MIN_HEIGHT_M:
                        continue
                    box = fit_box(masks[obj.name], depth, frame.intrinsics.K).box
                    total += 1
                    if box is None:
                        continue
                    errors = box_errors(truth, box.center, box.size, box.rotation)
                    centre.append(errors.center_cm)
                    size.append(max(abs(v) for v in errors.size_pct))
                    if errors.angle_deg is not None:
                        angle.append(errors.angle_deg)
                    on_target += errors.within()
        rows.append({"spill_px": spill_px, "noise_mm": noise_mm, "boxes": total,
                     "on_target": on_target,
                     "centre_cm_median": round(statistics.median(centre), 2),
                     "centre_cm_max": round(max(centre), 2),
                     "size_pct_median": round(statistics.median(size), 1),
                     "size_pct_max": round(max(size), 1),
                     "angle_deg_median": round(statistics.median(angle), 1),
                     "angle_deg_max": round(max(angle), 1)})
    return rows


def cost(frames: dict, repeat: int) -> dict:
    cfg = Config().depth
    timings: dict[str, list[float]] = {"position": [], "position_and_box": []}
    cpu: dict[str, float] = {"position": 0.0, "position_and_box": 0.0}
    pixels = []
    for frame in frames.values():
        depth = depth_to_metres(frame.depth_mm(), "16UC1")
        k = frame.intrinsics.K
        for mask in frame.masks.values():
            pixels.append(int(mask.sum()))
            for _ in range(repeat):
                for name, measure, arguments in (
                        ("position", locate_mask, (mask, depth, k)),
                        ("position_and_box", measure_mask, (mask, depth, k, cfg))):
                    wall, process = time.perf_counter(), time.process_time()
                    measure(*arguments)
                    cpu[name] += time.process_time() - process
                    timings[name].append((time.perf_counter() - wall) * 1000.0)
    runs = len(pixels) * repeat
    return {"masks": len(pixels), "mask_pixels_median": int(statistics.median(pixels)),
            **{f"{name}_ms": round(statistics.median(values), 2)
               for name, values in timings.items()},
            **{f"{name}_cpu_ms": round(total * 1000.0 / runs, 2) for name, total in cpu.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per mask")
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)
    rendered = {name: scenes(k) for name, k in RESOLUTIONS.items()}
    rows = [row for spill in SPILLS_PX for row in accuracy(rendered["640x480"], spill)]
    print("accuracy at 640x480 (mm depth, 10 % holes, 1 % flying pixels; masks exact or "
          "spilling onto the table):")
    print(" spill | noise | on target | centre cm med/max | sizes % med/max | angle deg med/max")
    for row in rows:
        print(f" {row['spill_px']} px | {row['noise_mm']:4.0f} mm | "
              f"{row['on_target']:2d}/{row['boxes']:2d} | "
              f"{row['centre_cm_median']:.2f} / {row['centre_cm_max']:.2f} | "
              f"{row['size_pct_median']:.1f} / {row['size_pct_max']:.1f} | "
              f"{row['angle_deg_median']:.1f} / {row['angle_deg_max']:.1f}")
    costs = {name: cost(frames, args.repeat) for name, frames in rendered.items()}
    print("cost per mask (median, one OpenCV thread):")
    for name, row in costs.items():
        print(f" {name}: {row['masks']} masks of ~{row['mask_pixels_median']} px: position "
              f"{row['position_ms']} ms (CPU {row['position_cpu_ms']} ms), position + box "
              f"{row['position_and_box_ms']} ms (CPU {row['position_and_box_cpu_ms']} ms)")
    write_result("box_fit", {"command": command_line(), "accuracy": rows, "cost": costs,
                             "noise": {"holes": HOLES, "flying": FLYING, "seeds": len(SEEDS)}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
