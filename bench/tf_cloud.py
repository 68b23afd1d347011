"""What the robot frame and the target's point cloud add to an answer, at 1920x1080 with two
masks, beside the camera-frame path.

Side by side, through the node's own functions: the camera-frame path
(``pipeline.measurement.measure_answer`` with depth, ``target_frame`` unset, and the answer's 3D
messages, ``ros.messages.robot_frame.answer_robot_messages``) and the robot-frame path (the same
with ``target_frame`` = odom and the target's points asked for). The difference is what the
robot frame and the cloud add. Per step, beside it: the TF lookup at the frame's stamp (a static
mount base_link -> camera_link -> optical frame and a moving odom -> base_link at 30 Hz over the
10 s cache: interpolated), the position and box of each mask moved into ``target_frame``
(``frames.targets.target_entry``), the cloud of the two masks' valid depth points (at most
20000, ``target_points``, transformed; the masks' pixel boxes given, as ``core.types.Mask``
carries them) and its ``sensor_msgs/PointCloud2``
(``ros.messages.vision.point_cloud``). The masks are the benchmarks' elliptical blobs
(bench/common.blob_masks: ~0.2 Mpx each at 1080p), on a tilted plane ~1 m away with 2 mm noise.

Wall time (median of ``--repeat`` runs) and process CPU time (mean), OpenCV and BLAS held to one
thread. Target: the additions cost at most 2 ms per answer.

    python bench/tf_cloud.py [--repeat 30]
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from std_msgs.msg import Header  # noqa: E402

from bench.common import blob_masks, command_line, write_result  # noqa: E402
from sam3_agent_ros.config import Config  # noqa: E402
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result  # noqa: E402
from sam3_agent_ros.frames import TfBuffer  # noqa: E402
from sam3_agent_ros.frames.targets import target_entry  # noqa: E402
from sam3_agent_ros.geometry.measure import measure_mask  # noqa: E402
from sam3_agent_ros.geometry.target_points import target_points  # noqa: E402
from sam3_agent_ros.masks import pixel_box  # noqa: E402
from sam3_agent_ros.pipeline.measurement import StillDepth, measure_answer  # noqa: E402
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest  # noqa: E402
from sam3_agent_ros.ros.messages.robot_frame import answer_robot_messages  # noqa: E402
from sam3_agent_ros.ros.messages.vision import point_cloud  # noqa: E402

WIDTH, HEIGHT = 1920, 1080
K = (900.0, 900.0, 959.5, 539.5)
MAX_POINTS = 20000
TARGET_MS = 2.0
S = 1_000_000_000


def scene(seed: int = 0):
    rng = np.random.default_rng(seed)
    masks, _, _ = blob_masks(WIDTH, HEIGHT, 2, seed)
    v, u = np.mgrid[0:HEIGHT, 0:WIDTH]
    depth = (1.0 + 0.0002 * (v - HEIGHT / 2) + rng.normal(0, 0.002, (HEIGHT, WIDTH)))
    rgb = rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    return list(masks), depth.astype(np.float32), rgb


def tf_buffer() -> tuple[TfBuffer, int]:
    """The mount (static) and a base driving for 10 s at 30 Hz; the lookup stamp in between."""
    buffer = TfBuffer(cache_s=10.0)
    buffer.set_transform("base_link", "camera_link", 0, (0.2, 0.0, 0.4),
                         (0.0, math.sin(0.2), 0.0, math.cos(0.2)), static=True)
    buffer.set_transform("camera_link", "camera_color_optical_frame", 0, (0.0, 0.0, 0.0),
                         (-0.5, 0.5, -0.5, 0.5), static=True)
    for i in range(300):
        yaw = 0.01 * i
        buffer.set_transform("odom", "base_link", i * S // 30, (0.01 * i, 0.0, 0.0),
                             (0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)))
    return buffer, 150 * S // 30 + S // 60  # between two samples


class BufferTransforms:
    """The node's Transforms port over a ``TfBuffer`` (no waiting: every transform is there)."""

    def __init__(self, buffer: TfBuffer):
        self.buffer = buffer

    def lookup(self, target: str, source: str, stamp_ns: int, timeout_s: float):
        return self.buffer.lookup(target, source, stamp_ns), ""


def timed(function, repeat: int) -> tuple[float, float, object]:
    """(median wall ms, mean CPU ms, last value) of ``function()``."""
    walls, cpus, value = [], [], None
    function()  # warm-up
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        value = function()
        walls.append((time.perf_counter() - wall) * 1e3)
        cpus.append((time.process_time() - cpu) * 1e3)
    return round(statistics.median(walls), 3), round(statistics.fmean(cpus), 3), value


def paired(first, second, repeat: int) -> tuple[dict, dict, dict]:
    """``first`` and ``second`` run alternately; their figures and the median of the per-pair
    differences (a shared machine's drift cancels in each pair, unlike in two medians)."""
    first(), second()  # warm-up
    rows: list[tuple[float, float, float, float]] = []
    for _ in range(repeat):
        row = []
        for function in (first, second):
            wall, cpu = time.perf_counter(), time.process_time()
            function()
            row += [(time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3]
        rows.append(tuple(row))

    def figure(wall_index: int) -> dict:
        return {"ms": round(statistics.median(r[wall_index] for r in rows), 3),
                "cpu_ms": round(statistics.fmean(r[wall_index + 1] for r in rows), 3)}

    added = {"ms": round(statistics.median(r[2] - r[0] for r in rows), 3),
             "cpu_ms": round(statistics.median(r[3] - r[1] for r in rows), 3)}
    return figure(0), figure(2), added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed runs of each step")
    args = parser.parse_args(argv)
    cv2.setNumThreads(1)
    masks, depth, rgb = scene()
    depth_cfg = Config().depth
    buffer, stamp = tf_buffer()
    header = Header(frame_id="odom")

    def camera_frame_path():
        return [measure_mask(mask, depth, K, depth_cfg) for mask in masks]

    entries = camera_frame_path()
    boxes = [pixel_box(mask) for mask in masks]  # what core.types.Mask carries already
    transform = buffer.lookup("odom", "camera_color_optical_frame", stamp)
    steps = {
        "camera_frame_path": camera_frame_path,
        "tf_lookup": lambda: buffer.lookup("odom", "camera_color_optical_frame", stamp),
        "targets": lambda: [target_entry(e, transform, "odom") for e in entries],
        "cloud": lambda: target_points(masks, depth, K, rgb, max_points=MAX_POINTS,
                                       min_m=depth_cfg.min_m, max_m=depth_cfg.max_m,
                                       transform=transform, boxes=boxes),
    }
    frame = Frame(rgb, stamp_sec=stamp // S, stamp_nanosec=stamp % S,
                  frame_id="camera_color_optical_frame")
    answer = Result("bench", "two blobs", QueryStatus.SUCCEEDED, frame=frame,
                    masks=[Mask.from_array(m, 0.9, b) for m, b in zip(masks, boxes)],
                    text_prompts=["blob"])
    still = StillDepth(depth, K, None, depth_cfg)
    request = TargetFrameRequest("odom", BufferTransforms(buffer))

    def node_camera_frame():
        return answer_robot_messages(measure_answer(answer, still))

    def node_robot_frame():
        return answer_robot_messages(measure_answer(answer, still, target_frame=request,
                                                    cloud_max_points=MAX_POINTS))

    figures = {}
    pair = paired(node_camera_frame, node_robot_frame, args.repeat)
    figures["node_camera_frame"], figures["node_robot_frame"], node_added = pair
    for name, function in steps.items():
        wall, cpu, _ = timed(function, args.repeat)
        figures[name] = {"ms": wall, "cpu_ms": cpu}
    cloud = target_points(masks, depth, K, rgb, max_points=MAX_POINTS, transform=transform,
                          boxes=boxes)
    wall, cpu, _ = timed(lambda: point_cloud(header, cloud.points, cloud.colours), args.repeat)
    figures["point_cloud2"] = {"ms": wall, "cpu_ms": cpu}
    added = ["tf_lookup", "targets", "cloud", "point_cloud2"]
    added_ms = round(sum(figures[n]["ms"] for n in added), 3)
    added_cpu_ms = round(sum(figures[n]["cpu_ms"] for n in added), 3)
    base = figures["camera_frame_path"]
    node_added_ms, node_added_cpu_ms = node_added["ms"], node_added["cpu_ms"]
    result = {"command": command_line(), "resolution": f"{WIDTH}x{HEIGHT}", "masks": len(masks),
              "mask_pixels": [int(m.sum()) for m in masks], "valid_points": cloud.valid,
              "cloud_points": len(cloud), "max_points": MAX_POINTS, "steps": figures,
              "added_ms": added_ms, "added_cpu_ms": added_cpu_ms,
              "node_added_ms": node_added_ms, "node_added_cpu_ms": node_added_cpu_ms,
              "ratio": round((base["ms"] + added_ms) / base["ms"], 3),
              "target_ms": TARGET_MS, "repeat": args.repeat}
    print(f"{WIDTH}x{HEIGHT}, {len(masks)} masks of {result['mask_pixels']} px, "
          f"{cloud.valid} valid depth points -> {len(cloud)} in the cloud")
    for name, row in figures.items():
        print(f"  {name:18s} {row['ms']:8.3f} ms  (CPU {row['cpu_ms']:.3f} ms)")
    print(f"  added by the robot frame + cloud: {added_ms:.3f} ms (CPU {added_cpu_ms:.3f} ms), "
          f"target <= {TARGET_MS:g} ms: {'met' if added_ms <= TARGET_MS else 'MISSED'}; "
          f"answer with depth x{result['ratio']:.3f} of the camera-frame path "
          f"({base['ms']:.3f} ms)")
    print(f"  the node's path: camera frame {figures['node_camera_frame']['ms']:.3f} ms, robot "
          f"frame + cloud {figures['node_robot_frame']['ms']:.3f} ms: +{node_added_ms:.3f} ms "
          f"(CPU +{node_added_cpu_ms:.3f} ms), target <= {TARGET_MS:g} ms: "
          f"{'met' if node_added_ms <= TARGET_MS else 'MISSED'}")
    write_result("tf_cloud", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
