"""What the grasp scene adds to an answer at 1920x1080, beside the camera-frame 3D step: every
mask's support fit and reaching box, the labelled scene cloud around the target and its grasps
(``geometry.grasp_scene``, CONTRACTS §12).

Scene: the block tabletop of the grasp tests (``sam3_agent_demo.block_scene.close_pair``: a
10 cm target 1.5 cm from a segmented neighbour and from one nobody segmented, and a flat box),
seen obliquely from ~0.8 m by a 1920x1080 camera of f = 1380 px (a RealSense D435's colour
stream), depth in millimetres with 2 mm noise; three masks (target, neighbour, flat box), the
target selected; the cloud at most ``depth.cloud_max_points`` (20000) points.

The figure: the camera-frame 3D step (``geometry.measure.measure_masks``: the masks' positions
and boxes, what the node and ``sam3-agent run --depth`` run) and the same followed by the grasp
scene, in turn (ABBA, so neither always goes first); the added cost is the median of the
per-pair differences (a shared machine's drift cancels in each pair), the ratio the two paths'
medians. Beside it, each step of the grasp scene alone, right after a 3D step (warm images, as
on the node): the three support fits, the cloud, the grasps. Wall time (median) and the
thread's CPU time (mean), OpenCV and BLAS held to one thread. Target: at most 5 ms added.

    python bench/grasp_scene.py [--repeat 30]
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
for _path in (ROOT, ROOT / "demo"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench.common import command_line, write_result  # noqa: E402
from sam3_agent_demo.block_scene import close_pair  # noqa: E402
from sam3_agent_ros.config import Config  # noqa: E402
from sam3_agent_ros.geometry.box import Box3D  # noqa: E402
from sam3_agent_ros.geometry.camera_model import Intrinsics  # noqa: E402
from sam3_agent_ros.geometry.grasp_scene import grasp_scene  # noqa: E402
from sam3_agent_ros.geometry.grasps import plan_grasps  # noqa: E402
from sam3_agent_ros.geometry.measure import measure_masks  # noqa: E402
from sam3_agent_ros.geometry.scene_cloud import crop_of, scene_points  # noqa: E402
from sam3_agent_ros.geometry.support import reach_support  # noqa: E402
from sam3_agent_ros.masks import pixel_box  # noqa: E402

WIDTH, HEIGHT = 1920, 1080
K = Intrinsics(fx=1380.0, fy=1380.0, cx=959.5, cy=539.5)
NAMES = ("target", "neighbour", "flat")
MASK_IDS = (1, 2, 3)
TARGET_MS = 5.0


def scene(seed: int = 0):
    depth, masks = close_pair().render(K, WIDTH, HEIGHT)
    rng = np.random.default_rng(seed)
    noisy = np.round((depth + rng.normal(0.0, 0.002, depth.shape)) * 1000.0) / 1000.0
    noisy = np.where(depth > 0, noisy, 0.0).astype(np.float32)
    rgb = rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    return [masks[name] for name in NAMES], noisy, rgb


def box_of(fields: dict) -> Box3D | None:
    box = fields.get("box")
    if not box:
        return None
    return Box3D(tuple(box["center"][a] for a in "xyz"), tuple(box["size"][a] for a in "xyz"),
                 tuple(box["orientation"][a] for a in "xyzw"))


def after(before, function, repeat: int) -> tuple[float, float]:
    """(median wall ms, mean CPU ms) of ``function()``, each run right after ``before()``."""
    walls, cpus = [], []
    before(), function()  # warm-up
    for _ in range(repeat):
        before()
        wall, cpu = time.perf_counter(), time.thread_time()
        function()
        walls.append((time.perf_counter() - wall) * 1e3)
        cpus.append((time.thread_time() - cpu) * 1e3)
    return round(statistics.median(walls), 3), round(statistics.fmean(cpus), 3)


def paired(first, second, repeat: int) -> dict:
    """``first`` and ``second`` in turn, ABBA: their medians and the median difference."""
    first(), second()  # warm-up
    rows = []
    for index in range(repeat):
        cost = {}
        for function in (first, second) if index % 2 == 0 else (second, first):
            wall, cpu = time.perf_counter(), time.thread_time()
            function()
            cost[function] = ((time.perf_counter() - wall) * 1e3,
                              (time.thread_time() - cpu) * 1e3)
        rows.append((*cost[first], *cost[second]))
    return {"camera_frame_ms": round(statistics.median(r[0] for r in rows), 3),
            "with_grasp_scene_ms": round(statistics.median(r[2] for r in rows), 3),
            "added_ms": round(statistics.median(r[2] - r[0] for r in rows), 3),
            "added_cpu_ms": round(statistics.median(r[3] - r[1] for r in rows), 3)}


def grasp_scene_cost(repeat: int = 30) -> dict:
    """The figures (see the module doc), as a JSON-able dict."""
    cv2.setNumThreads(1)
    masks, depth, rgb = scene()
    cfg = Config().depth
    max_points = cfg.cloud_max_points
    pixel_boxes = [pixel_box(mask) for mask in masks]  # the answer's masks carry them

    def camera_frame():
        return measure_masks(masks, depth, K, cfg)

    def whole(fields=None):
        fields = fields if fields is not None else camera_frame()
        return grasp_scene(masks, [box_of(f) for f in fields], depth, K, selected=[0],
                           mask_ids=MASK_IDS, rgb=rgb, max_points=max_points, min_m=cfg.min_m,
                           max_m=cfg.max_m, pixel_boxes=pixel_boxes)

    figures = paired(camera_frame, whole, repeat)
    fields = camera_frame()
    boxes = [box_of(f) for f in fields]
    found = whole(fields)
    assert found.error is None and found.grasps is not None and found.cloud is not None
    reaching = found.reaching
    target = reaching[0]
    crop = crop_of(target.box)
    def support_fits():  # as grasp_scene does: the target's plane tried first for the others
        first = reach_support(masks, 0, depth, K, boxes[0], pixel_box_of=pixel_boxes[0])
        return [first, *(reach_support(masks, i, depth, K, boxes[i], known=first.support,
                                       pixel_box_of=pixel_boxes[i]) for i in (1, 2))]

    steps = {
        "support_fits": support_fits,
        "scene_cloud": lambda: scene_points(depth, K, crop, [(MASK_IDS[0], masks[0])], rgb,
                                            max_points=max_points),
        "grasps": lambda: plan_grasps(target.box, target.support,
                                      obstacles=[r.box for r in reaching[1:]],
                                      points=found.cloud.points, labels=found.cloud.labels,
                                      target_label=MASK_IDS[0]),
    }
    for name, function in steps.items():
        wall, cpu = after(camera_frame, function, repeat)
        figures[name] = {"ms": wall, "cpu_ms": cpu}
    truth = close_pair().blocks
    return {"resolution": f"{WIDTH}x{HEIGHT}", "masks": len(masks),
            "mask_pixels": [int(m.sum()) for m in masks], "cloud_points": len(found.cloud),
            "cloud_step": found.cloud.step, "max_points": max_points,
            "candidates": found.grasps.candidates, "grasps": len(found.grasps.grasps),
            "height_errors_mm": {name: round((r.box.size[2] - truth[name].height) * 1e3, 2)
                                 for name, r in zip(NAMES, reaching)},
            "steps": figures, "ratio": round(figures["with_grasp_scene_ms"]
                                             / figures["camera_frame_ms"], 3),
            "target_ms": TARGET_MS, "repeat": repeat}


def report(result: dict) -> None:
    steps = result["steps"]
    print(f"{result['resolution']}, {result['masks']} masks of {result['mask_pixels']} px; "
          f"{result['cloud_points']} scene points (grid step {result['cloud_step']}), "
          f"{result['grasps']} of {result['candidates']} grasp candidates clear; box height "
          f"errors {result['height_errors_mm']} mm")
    print(f"  camera-frame 3D step {steps['camera_frame_ms']:.3f} ms, with the grasp scene "
          f"{steps['with_grasp_scene_ms']:.3f} ms (x{result['ratio']:.3f})")
    for name in ("support_fits", "scene_cloud", "grasps"):
        row = steps[name]
        print(f"  {name:13s} {row['ms']:8.3f} ms  (CPU {row['cpu_ms']:.3f} ms), alone after a "
              "3D step")
    met = steps["added_ms"] <= result["target_ms"]
    print(f"  added by the grasp scene (median of the pairs' differences): "
          f"+{steps['added_ms']:.3f} ms (CPU +{steps['added_cpu_ms']:.3f} ms), target <= "
          f"{result['target_ms']:g} ms: {'met' if met else 'MISSED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="pairs, and runs of each step")
    args = parser.parse_args(argv)
    result = {"command": command_line(), **grasp_scene_cost(args.repeat)}
    report(result)
    write_result("grasp_scene", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
