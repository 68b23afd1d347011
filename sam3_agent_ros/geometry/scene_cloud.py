"""The scene around the target as a labelled point cloud (ROS-free): what grasp detectors and
collision checks take (GPD: a cloud and the target's indices; AnyGrasp: target, objects and
background; a planner: the obstacles nobody segmented).

``crop_of(box, scale, min_m)``: a cube centred on the target's box, along its axes, of side
``scale`` times the box's longest side (at least ``min_m``; CONTRACTS §12 ``scene.crop_scale``,
``scene.crop_min_m``). ``scene_points`` takes every valid depth pixel whose point lies in the
cube: only the image window the cube projects to is read, on a pixel grid whose step keeps it to
about ``WINDOW_SAMPLES_PER_POINT`` times ``max_points`` cells, then evenly along the list down to
``max_points`` (deterministic: the same frame gives the same cloud). Each point keeps its colour
and a ``label``: the id of the selected mask it lies in (the ids of ``~/labels``; the first
mask wins where two overlap), 0 for background.

The points' layout is ``sensor_msgs/PointCloud2``'s: ``x y z rgb`` float32 (the colour packed
as PCL does: ``target_points``) and ``label`` uint32, 20 bytes, little endian (``SCENE_FIELDS``).
``write_scene_ply`` saves them (``sam3-agent run --depth --out DIR``: ``DIR/scene.ply``; x y z
float, red green blue uchar, label uint).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics, ideal_pixels
from sam3_agent_ros.geometry.depth_image import resize_depth_to
from sam3_agent_ros.geometry.target_points import (
    PointTransform,
    evenly,
    grid_step,
    write_ply,
)

SCENE_POINT_STEP = 20
FLOAT32, UINT32 = 7, 6  # sensor_msgs/PointField datatypes
SCENE_FIELDS = (("x", 0, FLOAT32), ("y", 4, FLOAT32), ("z", 8, FLOAT32), ("rgb", 12, FLOAT32),
                ("label", 16, UINT32))
WINDOW_SAMPLES_PER_POINT = 1.5  # the window's grid holds at most about this times max_points
DEFAULT_MAX_POINTS = 20000
GREY = 128


@dataclass(frozen=True)
class SceneCrop:
    """A cube: ``centre`` (3,), ``axes`` (3x3, columns: its axes), ``half`` its half side (m)."""

    centre: np.ndarray
    axes: np.ndarray
    half: float

    def contains(self, points: np.ndarray) -> np.ndarray:
        """Which of the (N, 3) points lie in the cube."""
        points = np.asarray(points).reshape(-1, 3)
        local = points @ self.axes.astype(points.dtype)
        local -= (self.centre @ self.axes).astype(points.dtype)
        np.abs(local, out=local)
        return (local[:, 0] <= self.half) & (local[:, 1] <= self.half) & (
            local[:, 2] <= self.half)

    def corners(self) -> np.ndarray:
        signs = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)],
                         np.float64)
        return self.centre + (signs * self.half) @ self.axes.T


def crop_of(box: Box3D, scale: float = 2.0, min_m: float = 0.3) -> SceneCrop:
    """The crop around the target's ``box`` (module doc)."""
    if not (math.isfinite(scale) and scale > 0 and math.isfinite(min_m) and min_m >= 0):
        raise ValueError(f"the crop's scale must be > 0 and its minimum >= 0, got {scale}, "
                         f"{min_m}")
    side = max(scale * max(box.size), min_m)
    return SceneCrop(np.asarray(box.center, np.float64), box.rotation, 0.5 * side)


@dataclass(frozen=True)
class ScenePoints:
    """The crop's points in ``SCENE_FIELDS``' layout (``data``: the bytes a PointCloud2
    carries); ``points`` (N, 3) float32 m, ``colours`` (N, 3) uint8 RGB and ``labels`` (N,)
    uint32 are views of them. ``step``: the pixel step of the grid they were read on."""

    data: bytearray
    step: int = 1

    def __len__(self) -> int:
        return len(self.data) // SCENE_POINT_STEP

    @property
    def _packed(self) -> np.ndarray:
        return np.frombuffer(self.data, np.uint8).reshape(len(self), SCENE_POINT_STEP)

    @property
    def points(self) -> np.ndarray:
        return self._packed[:, :12].view("<f4")

    @property
    def colours(self) -> np.ndarray:
        return self._packed[:, 14:11:-1]  # bytes red, green, blue

    @property
    def labels(self) -> np.ndarray:
        return self._packed[:, 16:20].view("<u4")[:, 0]


def pack_scene(points: np.ndarray, colours: np.ndarray, labels: np.ndarray) -> bytearray:
    """(N, 3) points, (N, 3) uint8 RGB and (N,) labels -> their bytes in ``SCENE_FIELDS``."""
    points = np.asarray(points, np.float32).reshape(-1, 3)
    colours = np.asarray(colours, np.uint8).reshape(-1, 3)
    labels = np.asarray(labels, np.uint32).reshape(-1)
    if not len(points) == len(colours) == len(labels):
        raise ValueError(f"{len(points)} points, {len(colours)} colours, {len(labels)} labels")
    data = bytearray(SCENE_POINT_STEP * len(points))  # zeroed: byte 15 stays 0
    packed = np.frombuffer(data, np.uint8).reshape(len(points), SCENE_POINT_STEP)
    packed[:, :12].view("<f4")[:] = points
    packed[:, 12:15] = colours[:, ::-1]
    packed[:, 16:20].view("<u4")[:, 0] = labels
    return data


def scene_points(depth_m: np.ndarray, k: Intrinsics | Sequence[float] | np.ndarray,
                 crop: SceneCrop, labelled: Sequence[tuple[int, np.ndarray]] = (),
                 rgb: np.ndarray | None = None, *, max_points: int = DEFAULT_MAX_POINTS,
                 min_m: float = 0.1, max_m: float = 10.0,
                 transform: PointTransform | None = None) -> ScenePoints:
    """The valid depth points (metres in ``[min_m, max_m]``) of the colour camera's frame that
    lie in ``crop`` (module doc), labelled by ``labelled`` (mask id, (H, W) bool mask at the
    colour image's size), coloured from ``rgb`` (H, W, 3) uint8 (grey without it), moved by
    ``transform`` (None: the camera frame)."""
    if max_points < 1:
        raise ValueError("max_points must be >= 1")
    intr = as_intrinsics(k)
    height, width = (labelled[0][1].shape if labelled else
                     (rgb.shape[:2] if rgb is not None else np.shape(depth_m)))
    depth_m = resize_depth_to(np.asarray(depth_m, np.float32), height, width)
    if rgb is not None and rgb.shape[:2] != (height, width):
        raise ValueError(f"rgb {rgb.shape[:2]} and the masks {(height, width)} differ in size")
    x0, y0, x1, y1 = _window(crop, intr, width, height)
    if x1 <= x0 or y1 <= y0:
        return ScenePoints(bytearray(), 1)
    step = grid_step((x1 - x0) * (y1 - y0), math.ceil(WINDOW_SAMPLES_PER_POINT * max_points))
    rows_px, cols_px = np.arange(y0, y1, step), np.arange(x0, x1, step)
    depth = np.ascontiguousarray(depth_m[y0:y1:step, x0:x1:step])
    ray_x, ray_y = _rays(intr, rows_px, cols_px)
    # Which grid cells hold a point of the cube, tested on the grid before any point is built.
    cells = np.flatnonzero(_in_cube(crop, ray_x, ray_y, depth, min_m, max_m))
    keep = evenly(len(cells), max_points)
    if keep is not None:
        cells = cells[keep]
    rows, cols = np.divmod(cells, depth.shape[1])
    flat = rows_px[rows] * width + cols_px[cols]  # each point's pixel in the flat images
    z = depth_m.reshape(-1)[flat]
    # The points go straight into the cloud's bytes (x y z float32: the cloud's precision).
    data = bytearray(SCENE_POINT_STEP * len(cells))  # zeroed: byte 15 stays 0
    packed = np.frombuffer(data, np.uint8).reshape(len(cells), SCENE_POINT_STEP)
    xyz = packed[:, :12].view("<f4")
    if intr.lens is None:  # a row and a column of rays
        ray_x, ray_y = ray_x[0, cols], ray_y[rows, 0]
    else:
        ray_x, ray_y = ray_x[rows, cols], ray_y[rows, cols]
    np.multiply(ray_x, z, out=xyz[:, 0])
    np.multiply(ray_y, z, out=xyz[:, 1])
    xyz[:, 2] = z
    if transform is not None:
        matrix = transform.matrix()
        xyz[:] = xyz.astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]
    labels = np.zeros(len(cells), np.uint32)
    for mask_id, mask in reversed(labelled):  # the first mask wins where two overlap
        if mask.shape != (height, width):
            raise ValueError(f"mask {mask.shape} and the image {(height, width)} differ in size")
        labels[np.ascontiguousarray(mask).reshape(-1)[flat]] = mask_id
    packed[:, 16:20].view("<u4")[:, 0] = labels
    if rgb is None:
        packed[:, 12:15] = GREY
    else:
        pixels = np.ascontiguousarray(rgb[:, :, :3]).reshape(-1).view(np.dtype((np.void, 3)))
        colours = pixels[flat].view(np.uint8).reshape(-1, 3)  # one 3-byte gather per point
        packed[:, 12:15] = colours[:, ::-1]  # PCL's packing: blue, green, red
    return ScenePoints(data, step)


def _rays(intr: Intrinsics, rows: np.ndarray, cols: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
    """The grid's rays (x/z, y/z) as float32: a row (1, W) and a column (H, 1) for a rectified
    image, (H, W) each for a raw one (its undistorted pixels)."""
    if intr.lens is None:
        ray_x = (cols - intr.cx).astype(np.float32) * np.float32(1.0 / intr.fx)
        ray_y = (rows - intr.cy).astype(np.float32) * np.float32(1.0 / intr.fy)
        return ray_x[None, :], ray_y[:, None]
    u, v = ideal_pixels(intr, rows[:, None], cols[None, :])
    return (((u - intr.cx) / intr.fx).astype(np.float32),
            ((v - intr.cy) / intr.fy).astype(np.float32))


def _in_cube(crop: SceneCrop, ray_x: np.ndarray, ray_y: np.ndarray, depth: np.ndarray,
             min_m: float, max_m: float) -> np.ndarray:
    """(H, W) bool: the cells whose depth is valid (in ``[min_m, max_m]``, and only the depths
    the cube's corners span) and whose point ``(ray_x z, ray_y z, z)`` lies in the cube. Along
    each cube axis ``a`` the point's coordinate is ``z (a . ray) - a . centre``: one product
    per axis over the grid."""
    corners_z = crop.corners()[:, 2]
    inside = (depth >= max(min_m, float(corners_z.min()))) & (
        depth <= min(max_m, float(corners_z.max())))  # NaN fails both
    if min_m <= 0:
        inside &= depth > 0
    offsets = crop.centre @ crop.axes
    half = np.float32(crop.half)
    for axis in range(3):
        ax, ay, az = (np.float32(c) for c in crop.axes[:, axis])
        along = ray_x * ax + ray_y * ay
        along += az
        along *= depth
        along -= np.float32(offsets[axis])
        np.abs(along, out=along)
        inside &= along <= half
    return inside


def _window(crop: SceneCrop, intr: Intrinsics, width: int, height: int
            ) -> tuple[int, int, int, int]:
    """The image rectangle (x0, y0, x1, y1; exclusive) the cube projects into: its corners'
    pixels (the cube is convex: its image lies within theirs); the whole image when a corner
    lies at or behind the camera, or for a raw stream."""
    corners = crop.corners()
    if corners[:, 2].max() <= 0:
        return 0, 0, 0, 0  # wholly behind the camera
    if corners[:, 2].min() <= 1e-6 or intr.lens is not None:  # a raw lens: not a pinhole's
        return 0, 0, width, height
    u = intr.fx * corners[:, 0] / corners[:, 2] + intr.cx
    v = intr.fy * corners[:, 1] / corners[:, 2] + intr.cy
    x0 = max(0, math.floor(u.min()) - 1)
    y0 = max(0, math.floor(v.min()) - 1)
    x1 = min(width, math.ceil(u.max()) + 2)
    y1 = min(height, math.ceil(v.max()) + 2)
    return x0, y0, x1, y1


def write_scene_ply(path: str | Path, scene: ScenePoints, binary: bool = True) -> Path:
    """``DIR/scene.ply``: x y z float, red green blue uchar, label uint (``target_points``'
    writer)."""
    return write_ply(path, scene.points, scene.colours, binary, labels=scene.labels)
