"""The oriented 3D box of a mask (``fit_box``: the dominant plane, the footprint rectangle on it,
the visible thickness along its normal; ROS-free)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics, ideal_pixels
from sam3_agent_ros.geometry.locate import (
    GAP_FRACTION,
    INLIER_BAND_SIGMAS,
    MAX_STATISTIC_SAMPLES,
    MIN_GAP_M,
    MaskDepth,
    sample_mask_depth,
    strided,
)
from sam3_agent_ros.geometry.plane import fit_plane
from sam3_agent_ros.geometry.rotations import cross, matrix_to_quaternion, quaternion_to_matrix

QUATERNION_DECIMALS = 6
PLANE_POINTS = 4096  # the plane is fitted on at most this many seed points (evenly strided)
# Rays within MIN_RAY_COSINE of the plane meet it too far away to be used.
MIN_RAY_COSINE = 0.05
# The minimum-area rectangle replaces the principal axes when its area is this much smaller.
RECTANGLE_ADVANTAGE = 0.05
# Thickness: points along the normal further apart than the min_cluster gap (or
# THICKNESS_GAP_SIGMAS times the noise) are not connected (background behind a mask edge; a
# steep side wall steps ~1 cm a pixel at 1 m); the extremes are the THICKNESS_PERCENTILE-th
# percentiles (single stray points do not count).
THICKNESS_GAP_SIGMAS = 4.0
# Points further than this many pixel footprints (plus the noise band) outside the face's
# rectangle, along the plane, are not the object's (background seen past its edge).
FOOTPRINT_SLACK_PIXELS = 2.0
THICKNESS_PERCENTILE = 2.0
SIGN_EPSILON = 1e-9


@dataclass(frozen=True)
class Box3D:
    """An oriented box in the colour camera's optical frame, in metres.

    ``size`` = (x, y, z) extents along the box's own axes, longest first; ``orientation`` =
    (x, y, z, w), the unit quaternion of the rotation that turns the camera axes onto the box
    axes (box x along the longest extent). Sign conventions (a box has no front): box z points
    away from the camera, box x to the image's right (down when exactly vertical), y = z x x.
    """

    center: tuple[float, float, float]
    size: tuple[float, float, float]
    orientation: tuple[float, float, float, float]

    @property
    def rotation(self) -> np.ndarray:
        """The 3x3 rotation matrix: its columns are the box's x, y, z axes in the camera frame."""
        return quaternion_to_matrix(self.orientation)

    def to_json(self, decimals: int = 5) -> dict[str, dict[str, float]]:
        """``{"center", "size", "orientation"}`` as in the result JSON (interface §6)."""
        def named(values, keys, places):  # + 0.0: no "-0.0" in the JSON
            return {key: round(float(value), places) + 0.0 for key, value in zip(keys, values)}

        return {"center": named(self.center, "xyz", decimals),
                "size": named(self.size, "xyz", decimals),
                "orientation": named(self.orientation, "xyzw", QUATERNION_DECIMALS)}


@dataclass(frozen=True)
class Boxed:
    """The outcome of ``fit_box``: a box, or None with the reason in ``error``."""

    box: Box3D | None
    error: str | None
    points: int = 0  # depth points on the box's dominant face


def fit_box(mask: np.ndarray, depth_m: np.ndarray, k: Intrinsics | Sequence[float] | np.ndarray,
            erode_px: int = 3, min_m: float = 0.1, max_m: float = 10.0,
            min_valid_pixels: int = 20, statistic: str = "median") -> Boxed:
    """The oriented 3D box of one mask from registered depth in metres (arguments as for
    ``locate.locate_mask``).

    1. Seed: the depths the statistic used (eroded mask: no edge pixels), kept to the depth
       cluster around the statistic's depth (gaps split off background and flying pixels).
    2. Dominant plane: RANSAC on the seed points, refitted by least squares in inverse depth on
       the points within a robust band (``fit_plane``).
    3. Footprint: every valid pixel of the whole mask within that band of the plane (mask edges
       that fall on the background are off the plane), intersected with the plane along its
       ray; a minimum-area rectangle (or the principal axes, when they bound the points as
       tightly: ellipses) gives the two in-plane axes and extents, plus one pixel's footprint
       (pixel centres span one pixel less than the surface they sample).
    4. Thickness: the extent along the plane's normal of the mask's points over the face's
       rectangle and connected to the plane (a visible side wall; a gap splits off the
       background), trimmed, less the noise on either side.
    The axes are sorted by extent (``Box3D``). Invalid arguments raise ValueError; a mask without
    enough valid depth, or whose points do not span a plane, gives ``Boxed(None, reason)``.
    """
    intr = as_intrinsics(k)
    sampled, reason, count = sample_mask_depth(mask, depth_m, erode_px, min_m, max_m,
                                               min_valid_pixels, statistic)
    if sampled is None:
        return Boxed(None, reason)
    return fit_sampled_box(sampled, intr, min_valid_pixels)


def fit_sampled_box(sampled: MaskDepth, intr: Intrinsics, min_valid_pixels: int) -> Boxed:
    """``fit_box`` on a mask's sampled depth (``locate.sample_mask_depth``)."""
    depth = sampled.depth
    lo, hi = _cluster_around(depth[sampled.used], sampled.z, min_valid_pixels)
    seed = _RayPixels.of(sampled.used & (depth >= lo) & (depth <= hi), sampled, intr,
                         PLANE_POINTS)
    plane = fit_plane(seed.points(), sampled.z, min_valid_pixels)
    if isinstance(plane, str):
        return Boxed(None, plane)
    origin, normal, band, noise = plane

    # Every valid pixel of the whole mask, by its signed distance from the plane.
    every = _RayPixels.of(sampled.crop & sampled.valid, sampled, intr)
    residuals = every.along(normal, origin)
    face = every.subset(np.abs(residuals) <= band)
    facing = face.dot(normal)
    steep = np.abs(facing) > MIN_RAY_COSINE * face.ray_lengths()
    face, facing = face.subset(steep), facing[steep]
    if len(face) < min_valid_pixels:
        return Boxed(None, f"too few depth points on the object's dominant face "
                           f"({len(face)} < {min_valid_pixels})")
    # Pixel rays meet the plane (the face's points without the depth noise), in the plane's
    # own coordinates: a ray r meets it at r (o.n) / (r.n).
    to_plane = (origin @ normal) / facing
    axis_u = _perpendicular(normal)
    axis_v = cross(normal, axis_u)
    flat = [to_plane * face.dot(axis) - origin @ axis for axis in (axis_u, axis_v)]
    (dir_a, extent_a, mid_a), (dir_b, extent_b, mid_b) = _footprint(flat, face.row_ends())
    in_plane = [dir_a[0] * axis_u + dir_a[1] * axis_v, dir_b[0] * axis_u + dir_b[1] * axis_v]
    pitch = _pixel_footprint(origin + mid_a * in_plane[0] + mid_b * in_plane[1], normal, intr)
    extents = [extent_a + pitch(in_plane[0]), extent_b + pitch(in_plane[1])]

    # Thickness: the points over the face's rectangle (a side wall lies along its edge; the
    # background a mask spills onto lies beyond it), connected to the plane along its normal,
    # less the noise on either side.
    # Depth noise moves a point along its ray: sideways by the noise times the ray's slope.
    face_centre = origin + mid_a * in_plane[0] + mid_b * in_plane[1]
    slope = math.hypot(face_centre[0], face_centre[1]) / face_centre[2]
    slack = FOOTPRINT_SLACK_PIXELS * max(pitch(in_plane[0]), pitch(in_plane[1])) \
        + INLIER_BAND_SIGMAS * noise * slope
    over = np.ones(len(every), bool)
    for axis, extent, middle in ((in_plane[0], extent_a, mid_a), (in_plane[1], extent_b, mid_b)):
        offset = every.along(axis, origin)
        offset -= middle
        over &= np.abs(offset, out=offset) <= extent / 2.0 + slack
    near, far = _cluster_around(residuals[over].astype(np.float32), 0.0, 1,
                                max(MIN_GAP_M, GAP_FRACTION * float(origin[2]),
                                    THICKNESS_GAP_SIGMAS * noise))
    attached = residuals[over & (residuals >= near) & (residuals <= far)]
    low, high = np.percentile(attached, (THICKNESS_PERCENTILE, 100.0 - THICKNESS_PERCENTILE))
    margin = INLIER_BAND_SIGMAS * noise
    low, high = min(0.0, float(low) + margin), max(0.0, float(high) - margin)
    centre = (origin + mid_a * in_plane[0] + mid_b * in_plane[1]
              + 0.5 * (low + high) * normal)
    axes = [*in_plane, normal]
    extents.append(high - low)
    order = sorted(range(3), key=lambda i: -extents[i])
    rotation = box_axes(axes[order[0]], axes[order[2]], centre)
    cx, cy, cz = (float(c) for c in centre)
    sx, sy, sz = (float(extents[i]) for i in order)
    box = Box3D(center=(cx, cy, cz), size=(sx, sy, sz),
                orientation=matrix_to_quaternion(rotation))
    return Boxed(box, None, points=len(face))


@dataclass(frozen=True)
class _RayPixels:
    """Pixels of a mask's crop as their rays (x/z, y/z, 1) and depths, one float64 vector per
    component (never an (N, 3) array: at 1080p a mask has ~10^5-10^6 pixels, and the box fit
    keeps its working set to a few vectors). ``rows``: each pixel's crop row, in raster order."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    rows: np.ndarray

    @staticmethod
    def of(selected: np.ndarray, sampled: MaskDepth, intr: Intrinsics,
           limit: int | None = None) -> _RayPixels:
        """The ``selected`` pixels of the crop (at most ``limit``, evenly strided)."""
        rows, cols = np.nonzero(selected)
        if limit is not None:
            rows, cols = strided(rows, limit), strided(cols, limit)
        depth = sampled.depth[rows, cols].astype(np.float64)
        if intr.lens is not None:  # a raw stream: the pixels' undistorted places
            u, v = ideal_pixels(intr, rows + sampled.y0, cols + sampled.x0)
            return _RayPixels((u - intr.cx) / intr.fx, (v - intr.cy) / intr.fy, depth, rows)
        return _RayPixels((cols + (sampled.x0 - intr.cx)) / intr.fx,
                          (rows + (sampled.y0 - intr.cy)) / intr.fy, depth, rows)

    def __len__(self) -> int:
        return len(self.z)

    def subset(self, keep: np.ndarray) -> _RayPixels:
        return _RayPixels(self.x[keep], self.y[keep], self.z[keep], self.rows[keep])

    def dot(self, vector: np.ndarray) -> np.ndarray:
        """Each ray's dot product with ``vector``."""
        out = self.x * vector[0]
        out += self.y * vector[1]
        out += vector[2]
        return out

    def along(self, vector: np.ndarray, origin: np.ndarray) -> np.ndarray:
        """Each point's (ray times depth) offset from ``origin`` along ``vector``."""
        out = self.dot(vector)
        out *= self.z
        out -= origin @ vector
        return out

    def ray_lengths(self) -> np.ndarray:
        return np.sqrt(self.x * self.x + self.y * self.y + 1.0)

    def points(self) -> np.ndarray:
        """(N, 3) points (ray times depth): for few pixels (the plane's seed)."""
        return np.stack([self.x * self.z, self.y * self.z, self.z], axis=1)

    def row_ends(self) -> np.ndarray:
        """Indices of the first and last pixel of each row: every pixel of the convex hull is
        among them (a hull vertex is extreme in its row)."""
        if len(self.rows) == 0:
            return np.zeros(0, np.int64)
        change = np.flatnonzero(self.rows[1:] != self.rows[:-1])
        return np.unique(np.concatenate(([0], change, change + 1, [len(self.rows) - 1])))


def _cluster_around(values: np.ndarray, centre: float, min_count: int,
                    gap: float | None = None) -> tuple[float, float]:
    """(lowest, highest) of the run of sorted ``values`` nearest ``centre`` without a gap wider
    than ``gap`` (default: the depth tolerance of ``min_cluster``)."""
    ordered = np.sort(strided(values, 4 * MAX_STATISTIC_SAMPLES))
    tolerance: np.ndarray | float
    if gap is None:
        tolerance = np.maximum(MIN_GAP_M, GAP_FRACTION * ordered[:-1])
    else:
        tolerance = gap
    starts = np.concatenate(([0], np.nonzero(np.diff(ordered) > tolerance)[0] + 1,
                             [len(ordered)]))
    best, best_distance = (float(ordered[0]), float(ordered[-1])), math.inf
    for begin, end in itertools.pairwise(starts):
        if end - begin < min(min_count, len(ordered)):
            continue
        low, high = float(ordered[begin]), float(ordered[end - 1])
        distance = max(low - centre, centre - high, 0.0)
        if distance < best_distance:
            best, best_distance = (low, high), distance
    return best


def _perpendicular(normal: np.ndarray) -> np.ndarray:
    """A unit vector in the plane of ``normal``: the camera's x axis projected, else its y."""
    for axis in (np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])):
        projected = axis - (axis @ normal) * normal
        length = np.linalg.norm(projected)
        if length > 0.1:
            return projected / length
    raise AssertionError("unreachable: x and y cannot both be parallel to a unit normal")


def _footprint(flat: Sequence[np.ndarray], hull_candidates: np.ndarray):
    """The two in-plane axes of 2D points (``flat``: their two coordinates):
    ((direction, extent, middle), ...) per axis. ``hull_candidates`` index points among which
    are all the vertices of their convex hull: the rectangle and the extents depend on the hull
    alone (the points are a homography of pixels: the pixels' hull maps onto theirs).

    The minimum-area rectangle bounds any shape tightly but its angle wanders on shapes whose
    rectangles all have nearly the same area (ellipses); the principal axes are exact there.
    The principal axes win unless the rectangle is clearly smaller (squares, rotated or not,
    and partly hidden objects)."""
    first, second = flat
    rim = np.stack([first[hull_candidates], second[hull_candidates]], axis=1)
    rect = cv2.minAreaRect(rim.astype(np.float32))
    corners = cv2.boxPoints(rect).astype(np.float64)
    edge = corners[1] - corners[0]
    if np.linalg.norm(edge) == 0:
        edge = corners[2] - corners[1]
    candidates = [_normalised(edge)]
    du, dv = first - first.mean(), second - second.mean()
    scatter = np.array([[du @ du, du @ dv], [du @ dv, dv @ dv]])
    _, vectors = np.linalg.eigh(scatter)
    candidates.append(vectors[:, 1])
    fits = []
    for direction in candidates:
        across = np.array([-direction[1], direction[0]])
        axes = []
        for axis in (direction, across):
            along = rim @ axis
            low, high = float(along.min()), float(along.max())
            axes.append((axis, high - low, 0.5 * (low + high)))
        fits.append(axes)
    rect_area, pca_area = (fit[0][1] * fit[1][1] for fit in fits)
    return fits[0] if rect_area < (1.0 - RECTANGLE_ADVANTAGE) * pca_area else fits[1]


def _normalised(vector: np.ndarray) -> np.ndarray:
    length = np.linalg.norm(vector)
    return vector / length if length > 0 else np.array([1.0, 0.0])


def _pixel_footprint(point: np.ndarray, normal: np.ndarray, intr: Intrinsics):
    """A function: 3D direction in the plane -> the length one pixel step covers along it at
    ``point`` (the larger of the u and v steps)."""
    def on_plane(u: float, v: float) -> np.ndarray:
        ray = np.array([(u - intr.cx) / intr.fx, (v - intr.cy) / intr.fy, 1.0])
        return ray * (point @ normal) / (ray @ normal)

    u = intr.fx * point[0] / point[2] + intr.cx
    v = intr.fy * point[1] / point[2] + intr.cy
    here = on_plane(u, v)
    step_u, step_v = on_plane(u + 1.0, v) - here, on_plane(u, v + 1.0) - here
    return lambda direction: max(abs(step_u @ direction), abs(step_v @ direction))


def box_axes(x_axis: np.ndarray, z_axis: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """The rotation whose columns are the box axes, with the signs of ``Box3D``."""
    z_axis = z_axis / np.linalg.norm(z_axis)
    if z_axis @ centre < 0:
        z_axis = -z_axis
    x_axis = x_axis - (x_axis @ z_axis) * z_axis
    x_axis = x_axis / np.linalg.norm(x_axis)
    if x_axis[0] < -SIGN_EPSILON or (abs(x_axis[0]) <= SIGN_EPSILON and x_axis[1] < 0):
        x_axis = -x_axis
    return np.stack([x_axis, cross(z_axis, x_axis), z_axis], axis=1)

