"""The target's point cloud, ROS-free: the selected masks' valid depth points with their colours.

``target_points(masks, depth_m, k, rgb)`` back-projects every pixel of the union of the masks
whose depth is valid (finite, within ``[min_m, max_m]``) through the colour camera's intrinsics,
keeps at most ``max_points`` of them (a regular pixel grid, then evenly along the list:
deterministic, the same frame gives the same cloud, spread over the whole target), and moves
them into another frame when given a transform (anything with ``apply_points``, e.g.
``frames.Transform``). ``write_ply`` saves them for
``sam3-agent run --depth ... --out DIR`` (``DIR/points.ply``; binary little-endian or ASCII,
``x y z`` float32 + ``red green blue`` uchar, which MeshLab, Open3D and CloudCompare read).

Depth must already be in metres at the colour image's resolution (depth_image.depth_for_colour).
Work is confined to each mask's pixel box, in OpenCV passes, which keeps 1080p cheap (~1 ms
for two 0.2 Mpx masks, bench/tf_cloud.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np

from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics
from sam3_agent_ros.masks import PixelBox, pixel_box

DEFAULT_MAX_POINTS = 20000


class PointTransform(Protocol):
    def apply_points(self, points: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class TargetPoints:
    """``points`` (N, 3) float32 metres, ``colours`` (N, 3) uint8 RGB; ``valid`` = how many
    valid depth pixels the masks held before subsampling to at most ``max_points``."""

    points: np.ndarray
    colours: np.ndarray
    valid: int

    def __len__(self) -> int:
        return int(self.points.shape[0])


def _empty(valid: int = 0) -> TargetPoints:
    return TargetPoints(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.uint8), valid)


def evenly(total: int, limit: int) -> np.ndarray | None:
    """Indices of ``limit`` of ``total`` items spread evenly (None: keep all)."""
    if total <= limit:
        return None
    return (np.arange(limit, dtype=np.int64) * total) // limit


def grid_step(valid: int, max_points: int) -> int:
    """The pixel step of the sampling grid: 1 when every valid point fits, else the smallest
    step whose grid holds at most about ``max_points`` of the ``valid`` points."""
    if valid <= max_points:
        return 1
    return int(math.ceil(math.sqrt(valid / max_points)))


def target_points(masks: Sequence[np.ndarray], depth_m: np.ndarray,
                  k: Intrinsics | Sequence[float] | np.ndarray, rgb: np.ndarray | None = None,
                  *, max_points: int = DEFAULT_MAX_POINTS, min_m: float = 0.1,
                  max_m: float = 10.0, erode_px: int = 0,
                  transform: PointTransform | None = None,
                  boxes: Sequence[PixelBox | None] | None = None) -> TargetPoints:
    """The union of ``masks`` ((H, W) bool each) -> its valid depth points (see module doc).

    ``rgb`` (H, W, 3) uint8 gives the colours (grey 128 without it); ``erode_px`` shrinks each
    mask first (edge pixels often carry the background's depth); ``boxes``: the masks' pixel
    boxes when known (core.types.Mask.pixel_box), else computed. Subsampling: the valid pixels
    on a regular image grid (step ``grid_step``, aligned to the image, so the same for every
    mask), then, if still more than ``max_points``, evenly along that list."""
    if max_points < 1:
        raise ValueError("max_points must be >= 1")
    depth = np.asarray(depth_m, dtype=np.float32)
    if depth.ndim != 2:
        raise ValueError(f"depth must be (H, W) metres, got shape {depth.shape}")
    height, width = depth.shape
    if rgb is not None and rgb.shape[:2] != (height, width):
        raise ValueError(f"rgb {rgb.shape[:2]} and depth {(height, width)} differ in size")
    intr = as_intrinsics(k)
    if boxes is None:
        boxes = [None] * len(masks)
    kernel = np.ones((2 * erode_px + 1,) * 2, np.uint8) if erode_px > 0 else None
    crops: list[tuple[PixelBox, np.ndarray]] = []  # per mask: its box, its valid pixels (0/1)
    valid = 0
    for mask, box in zip(masks, boxes):
        if mask.shape != (height, width):
            raise ValueError(f"mask {mask.shape} and depth {(height, width)} differ in size")
        box = box if box is not None else pixel_box(mask)
        if box is None:
            continue
        x0, y0, x1, y1 = box
        inside: np.ndarray = np.ascontiguousarray(mask[y0:y1, x0:x1], dtype=bool).view(np.uint8)
        if kernel is not None:
            inside = cv2.erode(inside, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=0)
        # In range: NaN and infinities fail both comparisons.
        ok = cv2.inRange(depth[y0:y1, x0:x1], float(min_m), float(max_m))
        cv2.bitwise_and(ok, inside, dst=ok)
        for (ex0, ey0, ex1, ey1), earlier in crops:  # a pixel of two masks counts once
            ox0, oy0, ox1, oy1 = max(x0, ex0), max(y0, ey0), min(x1, ex1), min(y1, ey1)
            if ox0 < ox1 and oy0 < oy1:
                seen = earlier[oy0 - ey0:oy1 - ey0, ox0 - ex0:ox1 - ex0]
                ok[oy0 - y0:oy1 - y0, ox0 - x0:ox1 - x0][seen > 0] = 0
        valid += cv2.countNonZero(ok)
        crops.append((box, ok))
    if valid == 0:
        return _empty()
    step = grid_step(valid, max_points)
    us, vs = [], []
    for (x0, y0, _, _), ok in crops:
        sx, sy = (-x0) % step, (-y0) % step  # grid lines at multiples of step in the image
        rows, cols = np.divmod(np.flatnonzero(ok[sy::step, sx::step]),
                               len(range(sx, ok.shape[1], step)))
        us.append(cols * step + sx + x0)
        vs.append(rows * step + sy + y0)
    u, v = np.concatenate(us), np.concatenate(vs)
    keep = evenly(len(u), max_points)
    if keep is not None:
        u, v = u[keep], v[keep]
    zs = depth[v, u].astype(np.float64)
    points = np.empty((len(u), 3), np.float64)
    points[:, 0] = (u - intr.cx) * zs / intr.fx
    points[:, 1] = (v - intr.cy) * zs / intr.fy
    points[:, 2] = zs
    if transform is not None:
        points = transform.apply_points(points)
    if rgb is None:
        colours = np.full((len(u), 3), 128, np.uint8)
    else:
        colours = np.ascontiguousarray(rgb[v, u, :3], dtype=np.uint8)
    return TargetPoints(points.astype(np.float32), colours, valid)


_PLY_VERTEX = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                        ("red", "u1"), ("green", "u1"), ("blue", "u1")])


def ply_bytes(points: np.ndarray, colours: np.ndarray, binary: bool = True) -> bytes:
    """A PLY file of the points (x y z float32) with their colours (red green blue uchar)."""
    points = np.asarray(points, np.float32).reshape(-1, 3)
    colours = np.asarray(colours, np.uint8).reshape(-1, 3)
    if len(points) != len(colours):
        raise ValueError(f"{len(points)} points but {len(colours)} colours")
    header = ("ply\n"
              f"format {'binary_little_endian' if binary else 'ascii'} 1.0\n"
              "comment sam3_agent_ros target points (metres)\n"
              f"element vertex {len(points)}\n"
              "property float x\nproperty float y\nproperty float z\n"
              "property uchar red\nproperty uchar green\nproperty uchar blue\n"
              "end_header\n").encode("ascii")
    if binary:
        vertices = np.empty(len(points), _PLY_VERTEX)
        vertices["x"], vertices["y"], vertices["z"] = points.T
        vertices["red"], vertices["green"], vertices["blue"] = colours.T
        return header + vertices.tobytes()
    lines = [f"{x:.7g} {y:.7g} {z:.7g} {r} {g} {b}\n"
             for (x, y, z), (r, g, b) in zip(points.tolist(), colours.tolist())]
    return header + "".join(lines).encode("ascii")


def write_ply(path: str | Path, points: np.ndarray, colours: np.ndarray,
              binary: bool = True) -> Path:
    """Write ``ply_bytes`` to ``path`` (via a temporary file: never a half-written file)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(ply_bytes(points, colours, binary))
    partial.replace(path)
    return path
