"""The target's point cloud, ROS-free: the selected masks' valid depth points with their colours.

``points_of(pixels, k, rgb)`` back-projects the union of the masks' pixels with valid depth
(``locate.MaskPixels``: the pixels the 3D step measured the masks from, eroded as it erodes
them) through the colour camera's intrinsics, keeps at most ``max_points`` of them (a regular
pixel grid, then evenly along the list: deterministic, the same frame gives the same cloud,
spread over the whole target), and moves them into another frame when given a transform
(anything with a 4x4 ``matrix()``, e.g. ``frames.Transform``). It is two steps:
``sample_grid`` reads the images (only on the sampling grid), ``GridSamples.place`` is
arithmetic on what it read. ``target_points(masks, depth_m, k, rgb)`` does the same from masks
and a depth image. ``write_ply`` saves them for ``sam3-agent run --depth ... --out DIR``
(``DIR/points.ply``; binary little-endian or ASCII, ``x y z`` float32 + ``red green blue``
uchar, which MeshLab, Open3D and CloudCompare read).

Cost: an answer samples its cloud inside its 3D step, after every mask's sampling and before
the box fits, while the pixels are still in the caches (``geometry.measure.PixelSink``), and
places it after the TF lookup. At 1080p with two 0.2 Mpx masks (16 405 points) about 0.4-0.5 ms
to sample and 0.3-0.4 ms to place on the node's path (bench/tf_cloud.py).
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
from sam3_agent_ros.geometry.lens import PixelMap
from sam3_agent_ros.geometry.locate import mask_pixels

DEFAULT_MAX_POINTS = 20000


class PointTransform(Protocol):
    def matrix(self) -> np.ndarray: ...  # 4x4 homogeneous (frames.Transform)


# One point as PCL and sensor_msgs/PointCloud2 lay it out (little endian): x, y, z float32 and
# the colour packed as the uint32 0x00RRGGBB (bytes blue, green, red, 0), read as a float32.
POINT_STEP = 16
POINT_FIELDS = (("x", 0), ("y", 4), ("z", 8), ("rgb", 12))


def pack_points(points: np.ndarray, colours: np.ndarray) -> bytearray:
    """(N, 3) points + (N, 3) uint8 RGB -> their bytes in the layout above."""
    points = np.asarray(points, np.float32).reshape(-1, 3)
    colours = np.asarray(colours, np.uint8).reshape(-1, 3)
    if len(colours) != len(points):
        raise ValueError(f"{len(points)} points but {len(colours)} colours")
    data = bytearray(POINT_STEP * len(points))  # zeroed: byte 15 of each colour stays 0
    packed = np.frombuffer(data, np.uint8).reshape(len(points), POINT_STEP)
    packed[:, :12].view("<f4")[:] = points
    packed[:, 12:15] = colours[:, ::-1]
    return data


@dataclass(frozen=True)
class TargetPoints:
    """The points in the layout above (``data``: the bytes a PointCloud2 carries, no second
    packing); ``points`` (N, 3) float32 metres and ``colours`` (N, 3) uint8 RGB are views of
    them. ``step``: the pixel step of the sampling grid they were taken on (1: every valid
    depth pixel of the masks)."""

    data: bytearray
    step: int = 1

    def __len__(self) -> int:
        return len(self.data) // POINT_STEP

    @property
    def _packed(self) -> np.ndarray:
        return np.frombuffer(self.data, np.uint8).reshape(len(self), POINT_STEP)

    @property
    def points(self) -> np.ndarray:
        return self._packed[:, :12].view("<f4")

    @property
    def colours(self) -> np.ndarray:
        return self._packed[:, 14:11:-1]  # bytes red, green, blue


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


class PixelSet(Protocol):
    """A mask's pixels with valid depth in its crop at ``x0``, ``y0`` (``locate.MaskPixels``)."""

    @property
    def x0(self) -> int: ...
    @property
    def y0(self) -> int: ...
    @property
    def depth(self) -> np.ndarray: ...
    @property
    def used(self) -> np.ndarray: ...
    @property
    def count(self) -> int: ...


def _grid_part(pixels: PixelSet, step: int, rgb: np.ndarray | None,
               taken: list[tuple[int, int, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """One set's grid points (multiples of ``step`` in the image among its used pixels, less
    those of the ``taken`` sets before it, to which it adds its own): per point (u z, v z, z)
    of its pixel (u, v), (n, 1, 3) float32, and its RGB, (n, 1, 3) uint8. Only the grid is
    read from the depth and colour images."""
    x0, y0 = pixels.x0, pixels.y0
    gx, gy = -(-x0 // step), -(-y0 // step)  # the first grid column and row in the crop
    sx, sy = gx * step - x0, gy * step - y0
    ok = np.ascontiguousarray(pixels.used[sy::step, sx::step])
    for ex, ey, earlier in taken:
        ox0, oy0 = max(gx, ex), max(gy, ey)
        ox1 = min(gx + ok.shape[1], ex + earlier.shape[1])
        oy1 = min(gy + ok.shape[0], ey + earlier.shape[0])
        if ox0 < ox1 and oy0 < oy1:
            ok[oy0 - gy:oy1 - gy, ox0 - gx:ox1 - gx] &= \
                ~earlier[oy0 - ey:oy1 - ey, ox0 - ex:ox1 - ex]
    taken.append((gx, gy, ok))
    cells = np.flatnonzero(ok).astype(np.int32)  # raster order
    rows, cols = np.divmod(cells, np.int32(ok.shape[1]))  # in the grid
    z = pixels.depth[sy::step, sx::step][ok]
    scaled = np.empty((len(z), 1, 3), np.float32)
    for axis, (cell, first) in enumerate(((cols, gx), (rows, gy))):  # u, v: the image pixel
        pixel = cell.astype(np.float32)
        pixel += first
        pixel *= step
        np.multiply(pixel, z, out=scaled[:, 0, axis])
    scaled[:, 0, 2] = z
    if rgb is None:
        return scaled, np.full((len(z), 1, 3), 128, np.uint8)
    pixels_flat = rgb.reshape(-1).view(np.dtype((np.void, 3)))  # a pixel per item: one gather
    width = rgb.shape[1]
    if rgb.shape[0] * width > np.iinfo(np.int32).max:  # the flat index needs 64 bits
        rows, cols = rows.astype(np.int64), cols.astype(np.int64)
    rows *= step * width
    cols *= step
    rows += cols
    rows += gy * step * width + gx * step
    return scaled, np.take(pixels_flat, rows).view(np.uint8).reshape(-1, 1, 3)


# mixChannels' pairs: bytes 0-11 the point, 12-14 blue, green, red (the colours' bytes 2, 1, 0)
_PACKING = [*(c for channel in range(12) for c in (channel, channel)), 12, 14, 13, 13, 14, 12]


@dataclass(frozen=True)
class GridSamples:
    """What a cloud reads from the images (``sample_grid``): per point on the sampling grid
    (pixel step ``step``) its (u z, v z, z), (n, 1, 3) float32, and its RGB, (n, 1, 3) uint8.
    ``place`` makes them a ``TargetPoints``: one affine map and one packing of these two
    arrays, so an answer samples while its 3D step has the pixels in the caches and places
    once its transform is known. ``sets``: how many masks had pixels with valid depth."""

    step: int
    scaled: np.ndarray
    colours: np.ndarray
    sets: int

    def __len__(self) -> int:
        return len(self.scaled)

    def place(self, k: Intrinsics | Sequence[float] | np.ndarray,
              transform: PointTransform | None = None) -> TargetPoints:
        """The points back-projected with the colour intrinsics ``k`` and moved by
        ``transform`` (None: the camera frame), in the layout above."""
        total = len(self)
        data = bytearray(POINT_STEP * total)  # zeroed: byte 15 of each colour stays 0
        if total == 0:
            return TargetPoints(data, self.step)
        # Back-projection and the transform in one affine map: p = R K^-1 (u z, v z, z) + t.
        intr = as_intrinsics(k)
        scaled = self.scaled if intr.lens is None else _undistorted(self.scaled, intr.lens)
        to_rays = np.array([[1.0 / intr.fx, 0.0, -intr.cx / intr.fx],
                            [0.0, 1.0 / intr.fy, -intr.cy / intr.fy], [0.0, 0.0, 1.0]])
        moved = transform.matrix() if transform is not None else np.eye(4)
        points = cv2.transform(scaled, np.hstack([moved[:3, :3] @ to_rays, moved[:3, 3:]]))
        packed = np.frombuffer(data, np.uint8).reshape(total, 1, POINT_STEP)
        cv2.mixChannels([points.view(np.uint8), self.colours], [packed], _PACKING)
        return TargetPoints(data, self.step)


def _undistorted(scaled: np.ndarray, lens: PixelMap) -> np.ndarray:
    """(u z, v z, z) of raw pixels -> (u' z, v' z, z) of their undistorted places (a raw
    stream, ``geometry.lens``). u and v are whole pixels: recovered exactly by rounding."""
    z = scaled[:, 0, 2]
    cols = np.rint(scaled[:, 0, 0] / z).astype(np.intp)
    rows = np.rint(scaled[:, 0, 1] / z).astype(np.intp)
    out = scaled.copy()
    out[:, 0, 0] = lens.u[rows, cols] * z
    out[:, 0, 1] = lens.v[rows, cols] * z
    return out


def sample_grid(pixels: Sequence[PixelSet | None], rgb: np.ndarray | None = None, *,
                max_points: int = DEFAULT_MAX_POINTS) -> GridSamples:
    """The union of the masks' pixels with valid depth (None: a mask without), subsampled:
    a regular image grid (the same for every mask; a point of two masks counts once) whose
    step keeps the valid pixels to about ``max_points``; then, if still more, evenly along the
    list. ``rgb`` (H, W, 3) uint8 gives the colours (grey 128 without it)."""
    if max_points < 1:
        raise ValueError("max_points must be >= 1")
    sets = [p for p in pixels if p is not None and p.count > 0]
    if rgb is not None:
        if rgb.ndim != 3 or rgb.shape[2] < 3 or rgb.dtype != np.uint8:
            raise ValueError(f"rgb must be (H, W, 3) uint8, got {rgb.shape} {rgb.dtype}")
        rgb = np.ascontiguousarray(rgb[:, :, :3])
        for p in sets:
            if p.y0 + p.used.shape[0] > rgb.shape[0] or p.x0 + p.used.shape[1] > rgb.shape[1]:
                raise ValueError(f"rgb {rgb.shape[:2]} is smaller than the masks' pixels")
    valid = sum(p.count for p in sets)  # a pixel of two masks twice: the step errs coarse
    step = grid_step(valid, max_points)
    taken: list[tuple[int, int, np.ndarray]] = []
    parts = [_grid_part(p, step, rgb, taken) for p in sets]
    if not parts:
        return GridSamples(step, np.empty((0, 1, 3), np.float32), np.empty((0, 1, 3), np.uint8),
                           0)
    scaled = np.concatenate([part for part, _ in parts]) if len(parts) > 1 else parts[0][0]
    colours = np.concatenate([part for _, part in parts]) if len(parts) > 1 else parts[0][1]
    keep = evenly(len(scaled), max_points)
    if keep is not None:  # the grid still holds too many: evenly along the list
        scaled, colours = scaled[keep], colours[keep]
    return GridSamples(step, scaled, colours, len(sets))


def points_of(pixels: Sequence[PixelSet | None], k: Intrinsics | Sequence[float] | np.ndarray,
              rgb: np.ndarray | None = None, *, max_points: int = DEFAULT_MAX_POINTS,
              transform: PointTransform | None = None) -> TargetPoints:
    """The union of the masks' pixels with valid depth (None: a mask without) -> its points
    (see module doc): ``sample_grid`` then ``GridSamples.place``."""
    return sample_grid(pixels, rgb, max_points=max_points).place(k, transform)


def target_points(masks: Sequence[np.ndarray], depth_m: np.ndarray,
                  k: Intrinsics | Sequence[float] | np.ndarray, rgb: np.ndarray | None = None,
                  *, max_points: int = DEFAULT_MAX_POINTS, min_m: float = 0.1,
                  max_m: float = 10.0, erode_px: int = 0, min_valid_pixels: int = 1,
                  transform: PointTransform | None = None) -> TargetPoints:
    """The union of ``masks`` ((H, W) bool each) -> its valid depth points: each mask's pixels
    as the 3D step takes them (``locate.mask_pixels``: depth in ``[min_m, max_m]``, eroded by
    ``erode_px`` unless that leaves fewer than ``min_valid_pixels``), then ``points_of``. The
    answer's own cloud reuses the pixels its 3D step found (``pipeline.measurement``)."""
    depth = np.asarray(depth_m, dtype=np.float32)
    if depth.ndim != 2:
        raise ValueError(f"depth must be (H, W) metres, got shape {depth.shape}")
    if rgb is not None and rgb.shape[:2] != depth.shape:
        raise ValueError(f"rgb {rgb.shape[:2]} and depth {depth.shape} differ in size")
    pixels = []
    for mask in masks:
        if mask.shape != depth.shape:
            raise ValueError(f"mask {mask.shape} and depth {depth.shape} differ in size")
        pixels.append(mask_pixels(mask, depth, erode_px, min_m, max_m, min_valid_pixels)[0])
    return points_of(pixels, k, rgb, max_points=max_points, transform=transform)


_PLY_COLUMNS = [("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("red", "u1"), ("green", "u1"),
                ("blue", "u1")]
_PLY_TYPES = {"<f4": "float", "u1": "uchar", "<u4": "uint"}


def ply_bytes(points: np.ndarray, colours: np.ndarray, binary: bool = True,
              labels: np.ndarray | None = None) -> bytes:
    """A PLY file of the points (x y z float32) with their colours (red green blue uchar) and,
    when given, their ``labels`` (uint ``label``: the scene cloud's mask ids)."""
    points = np.asarray(points, np.float32).reshape(-1, 3)
    colours = np.asarray(colours, np.uint8).reshape(-1, 3)
    if len(points) != len(colours):
        raise ValueError(f"{len(points)} points but {len(colours)} colours")
    columns = list(_PLY_COLUMNS)
    if labels is not None:
        labels = np.asarray(labels, np.uint32).reshape(-1)
        if len(labels) != len(points):
            raise ValueError(f"{len(points)} points but {len(labels)} labels")
        columns.append(("label", "<u4"))
    what = "scene points" if labels is not None else "target points"
    header = ("ply\n"
              f"format {'binary_little_endian' if binary else 'ascii'} 1.0\n"
              f"comment sam3_agent_ros {what} (metres)\n"
              f"element vertex {len(points)}\n"
              + "".join(f"property {_PLY_TYPES[kind]} {name}\n" for name, kind in columns)
              + "end_header\n").encode("ascii")
    if binary:
        vertices = np.empty(len(points), np.dtype(columns))
        vertices["x"], vertices["y"], vertices["z"] = points.T
        vertices["red"], vertices["green"], vertices["blue"] = colours.T
        if labels is not None:
            vertices["label"] = labels
        return header + vertices.tobytes()
    rows = zip(points.tolist(), colours.tolist(),
               labels.tolist() if labels is not None else [None] * len(points))
    lines = [f"{x:.7g} {y:.7g} {z:.7g} {r} {g} {b}" + ("" if label is None else f" {label}")
             + "\n" for (x, y, z), (r, g, b), label in rows]
    return header + "".join(lines).encode("ascii")


def write_ply(path: str | Path, points: np.ndarray, colours: np.ndarray,
              binary: bool = True, labels: np.ndarray | None = None) -> Path:
    """Write ``ply_bytes`` to ``path`` (via a temporary file: never a half-written file)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(ply_bytes(points, colours, binary, labels))
    partial.replace(path)
    return path
