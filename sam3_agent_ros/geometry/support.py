"""Boxes that reach their support (ROS-free): the plane an object stands on, fitted from the
depth ring around its mask, and the object's box extended from its top face down to it.

``fit_support`` looks at the ring around the mask: the mask's bounding rectangle grown by half
its larger side (at least ``RING_MIN_PX``), less every mask of the answer grown by
``MASK_MARGIN_PX`` (the object's own edges and side walls, and the neighbours someone
segmented), with valid depth, read on a pixel grid of at most ``RING_MAX_SAMPLES`` cells. The
plane is ``plane.fit_plane``'s (seeded RANSAC, least-squares refit in inverse depth) with its
hypotheses restricted to planes below the object: the camera and the object on the same side,
the measured box's centre at least ``MIN_HEIGHT_M`` above it (and, when ``up`` is known, the
normal within ``MAX_TILT_DEG`` of it). A neighbour nobody segmented is then outvoted by the
table around it. It is refused with a reason when fewer than ``MIN_INLIERS`` points (or
``MIN_INLIER_SHARE`` of the ring) lie on it. A plane already found under another object of the
answer (``known``) is taken as it is when as many of this ring's points lie on it: neighbours on
one table cost one fit.

``Support``: the plane ``normal . p + distance = 0``, ``normal`` the unit vector from the
support towards the object (up), ``distance`` the frame origin's height above the plane (the
camera's, in the camera frame); ``moved`` expresses it in another frame (the box's).

``reaching_box``: the upright box over the measured box standing on the plane: its z axis along
the normal (with ``Box3D``'s sign: away from the camera), ``size.z`` the object's height (the
``TOP_PERCENTILE``-th percentile of its mask's points' heights above the plane,
``object_top``), x and y the footprint on the plane of the measured box's corners and of the
mask's points (x the longer). ``reach_support`` does both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from sam3_agent_ros.geometry.box import Box3D, box_axes
from sam3_agent_ros.geometry.camera_model import Intrinsics, as_intrinsics, ideal_pixels
from sam3_agent_ros.geometry.depth_image import resize_depth_to
from sam3_agent_ros.geometry.plane import fit_plane
from sam3_agent_ros.geometry.rotations import cross, matrix_to_quaternion
from sam3_agent_ros.masks import PixelBox, pixel_box

RING_FRACTION = 0.5  # the ring: the mask's rectangle grown by this times its larger side
RING_MIN_PX = 12
RING_MAX_SAMPLES = 1024  # grid cells of the ring read at most (a coarser grid beyond)
MASK_MARGIN_PX = 4  # every mask grown by this before its pixels leave the ring
MIN_INLIERS = 30
MIN_INLIER_SHARE = 0.2
TOP_SAMPLES = 1024  # the object's top: from at most this many of its mask's depth points
TOP_PERCENTILE = 98.0  # the top is this percentile of their heights (stray points do not count)
FOOTPRINT_TRIM = 1.0
MIN_HEIGHT_M = 0.003  # an object's top lies at least this far above its support
MAX_TILT_DEG = 30.0  # the support's normal within this of ``up`` (when given)
DECIMALS = 6


@dataclass(frozen=True)
class Support:
    """The plane ``normal . p + distance = 0`` (module doc), the inlier ``band`` (m) and the
    number of ring ``points`` on it."""

    normal: tuple[float, float, float]
    distance: float
    band: float = 0.0
    points: int = 0

    def heights(self, points: np.ndarray) -> np.ndarray:
        """Signed heights (m) of (N, 3) points above the plane (positive on the object's
        side)."""
        return np.asarray(points, np.float64).reshape(-1, 3) @ np.asarray(self.normal) \
            + self.distance

    def moved(self, matrix: np.ndarray) -> Support:
        """The same plane in another frame, ``matrix`` (4x4) mapping this frame's points to
        that one's."""
        rotation, shift = np.asarray(matrix, np.float64)[:3, :3], np.asarray(matrix)[:3, 3]
        normal = rotation @ np.asarray(self.normal)
        nx, ny, nz = (float(c) for c in normal)
        return Support((nx, ny, nz), float(self.distance - normal @ shift), self.band,
                       self.points)

    def to_json(self) -> dict[str, object]:
        """``{"normal": {x, y, z}, "distance"}`` as in the result JSON (CONTRACTS §12)."""
        return {"normal": {k: round(v, DECIMALS) + 0.0 for k, v in zip("xyz", self.normal)},
                "distance": round(self.distance, DECIMALS) + 0.0}


@dataclass(frozen=True)
class Reaching:
    """The outcome of ``reach_support``: the support and the box reaching it, or None and the
    reason in ``error`` (``box`` is then the measured box, unchanged)."""

    support: Support | None
    box: Box3D
    error: str | None


def fit_support(masks: Sequence[np.ndarray], index: int, depth_m: np.ndarray,
                k: Intrinsics | Sequence[float] | np.ndarray, box: Box3D, *,
                min_m: float = 0.1, max_m: float = 10.0,
                up: Sequence[float] | None = None, known: Support | None = None,
                pixel_box_of: PixelBox | None = None) -> Support | str:
    """The support plane under ``masks[index]`` (module doc), or the reason there is none.
    ``box``: that mask's measured box (its centre is the object); ``up``: the direction
    against gravity in the camera frame when known; ``known``: a plane found under another
    object of the answer, taken as it is when enough of this ring lies on it (a neighbour on
    the same table needs no fit of its own); ``pixel_box_of``: the mask's pixel box when known
    (``masks.pixel_box``)."""
    intr = as_intrinsics(k)
    mask = masks[index]
    height, width = mask.shape
    depth_m = resize_depth_to(depth_m, height, width)
    found = pixel_box_of if pixel_box_of is not None else pixel_box(mask)
    if found is None:
        return "empty mask"
    points, z = _ring(masks, found, depth_m, intr, min_m, max_m)
    if len(points) < MIN_INLIERS:
        return (f"too few depth points around the object to find what it stands on "
                f"({len(points)} < {MIN_INLIERS})")
    needed = max(MIN_INLIERS, math.ceil(MIN_INLIER_SHARE * len(points)))
    top = np.asarray(box.center, np.float64)
    if known is not None and known.band > 0:
        on = int(np.count_nonzero(np.abs(known.heights(points)) <= known.band))
        if on >= needed and known.heights(top)[0] >= MIN_HEIGHT_M:
            return Support(known.normal, known.distance, known.band, on)
    up_hint = None if up is None else np.asarray(up, np.float64) / np.linalg.norm(up)

    def below(normals: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        # n . X = o; the camera (X = 0) is at -o, the object's centre at n . c - o.
        side = np.sign(-offsets)
        lift = (normals @ top - offsets) * side
        ok = (side != 0) & (lift >= MIN_HEIGHT_M)
        if up_hint is not None:
            ok &= np.abs(normals @ up_hint) >= math.cos(math.radians(MAX_TILT_DEG))
        return ok

    plane = fit_plane(points, float(np.median(z)), MIN_INLIERS, accept=below)
    if isinstance(plane, str):
        return f"no support plane below the object: {plane}"
    origin, normal, band, _ = plane
    # fit_plane's normal points away from the camera: the support's points towards it.
    support_normal = -np.asarray(normal, np.float64)
    distance = float(origin @ normal)
    inliers = int(np.count_nonzero(np.abs(points @ support_normal + distance) <= band))
    if inliers < needed:
        return (f"too few depth points on the support plane around the object ({inliers} of "
                f"{len(points)}; at least {needed})")
    lift = float(top @ support_normal + distance)
    if lift < MIN_HEIGHT_M:
        return (f"the plane around the object is not below it (its centre {lift * 100:.1f} cm "
                "above it)")
    if up_hint is not None and abs(support_normal @ up_hint) < math.cos(
            math.radians(MAX_TILT_DEG)):
        return f"the plane around the object is tilted more than {MAX_TILT_DEG:g} degrees"
    nx, ny, nz = (float(c) for c in support_normal)
    return Support((nx, ny, nz), distance, float(band), inliers)


def _ring(masks: Sequence[np.ndarray], found: PixelBox, depth_m: np.ndarray,
          intr: Intrinsics, min_m: float, max_m: float) -> tuple[np.ndarray, np.ndarray]:
    """The ring's points (N, 3) and depths (module doc) around the pixel box ``found``."""
    height, width = depth_m.shape
    x0, y0, x1, y1 = found
    grow = max(RING_MIN_PX, int(RING_FRACTION * max(x1 - x0, y1 - y0)))
    x0, y0 = max(0, x0 - grow), max(0, y0 - grow)
    x1, y1 = min(width, x1 + grow), min(height, y1 + grow)
    step = max(1, math.ceil(math.sqrt((x1 - x0) * (y1 - y0) / RING_MAX_SAMPLES)))
    taken = np.zeros(((y1 - y0 + step - 1) // step, (x1 - x0 + step - 1) // step), np.uint8)
    for other in masks:
        taken |= np.ascontiguousarray(other[y0:y1:step, x0:x1:step], np.uint8)
    margin = -(-MASK_MARGIN_PX // step)
    kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (2 * margin + 1,) * 2)
    free = cv2.dilate(taken, kernel) == 0
    depth = depth_m[y0:y1:step, x0:x1:step]
    free &= (depth >= min_m) & (depth <= max_m) & (depth > 0)
    rows, cols = np.nonzero(free)
    z = depth[rows, cols].astype(np.float64)
    u, v = ideal_pixels(intr, rows * step + y0, cols * step + x0)
    return np.stack([(u - intr.cx) / intr.fx * z, (v - intr.cy) / intr.fy * z, z], axis=1), z


def reaching_box(box: Box3D, support: Support, top: float | None = None,
                 points: np.ndarray | None = None) -> Box3D | str:
    """The upright box over ``box`` standing on ``support`` (module doc), or the reason.
    ``top``: the object's height above the support measured from its points
    (``object_top``; None: the box's highest corner); ``points``: the object's points, whose
    footprint (less ``FOOTPRINT_TRIM`` percent at each end) widens the box's where it reaches
    further (a face seen at a slant is shorter than the object's top)."""
    normal = np.asarray(support.normal, np.float64)
    rotation = box.rotation
    half = np.asarray(box.size, np.float64) / 2.0
    signs = _SIGNS
    corners = np.asarray(box.center) + (signs * half) @ rotation.T
    if top is None:
        top = float(support.heights(corners).max())
    if top < MIN_HEIGHT_M:
        return f"the box does not stand above its support (top {top * 100:.1f} cm above it)"
    lean = np.abs(rotation.T @ normal)
    first = rotation[:, int(np.argmin(lean))]
    axis_u = first - (first @ normal) * normal
    axis_u /= np.linalg.norm(axis_u)
    axis_v = cross(normal, axis_u)
    plane_axes = np.stack([axis_u, axis_v], axis=1)  # (3, 2)
    along = corners @ plane_axes  # (8, 2): the corners along each
    low, high = along.min(axis=0), along.max(axis=0)
    if points is not None and len(points):
        above = np.compress(support.heights(points) > support.band, points, axis=0)
        if len(above):
            ranks = _ranks(len(above), (FOOTPRINT_TRIM / 100.0, 1.0 - FOOTPRINT_TRIM / 100.0))
            trimmed = np.partition(above @ plane_axes, ranks, axis=0)[ranks]  # (2, 2)
            low, high = np.minimum(low, trimmed[0]), np.maximum(high, trimmed[1])
    (extent_u, extent_v), (mid_u, mid_v) = (high - low).tolist(), (0.5 * (low + high)).tolist()
    foot = -support.distance * normal  # the frame origin's foot on the plane
    centre = foot + mid_u * axis_u + mid_v * axis_v + 0.5 * top * normal
    long_axis, extents = (axis_u, (extent_u, extent_v)) if extent_u >= extent_v else (
        axis_v, (extent_v, extent_u))
    axes = box_axes(long_axis, normal, centre)
    cx, cy, cz = (float(c) for c in centre)
    return Box3D(center=(cx, cy, cz), size=(extents[0], extents[1], top),
                 orientation=matrix_to_quaternion(axes))


def object_points(mask: np.ndarray, depth_m: np.ndarray,
                  k: Intrinsics | Sequence[float] | np.ndarray, *, min_m: float = 0.1,
                  max_m: float = 10.0, pixel_box_of: PixelBox | None = None) -> np.ndarray:
    """(N, 3): at most about ``TOP_SAMPLES`` of the mask's valid depth points (a pixel grid)."""
    intr = as_intrinsics(k)
    height, width = mask.shape
    depth_m = resize_depth_to(depth_m, height, width)
    found = pixel_box_of if pixel_box_of is not None else pixel_box(mask)
    if found is None:
        return np.zeros((0, 3))
    x0, y0, x1, y1 = found
    step = max(1, math.ceil(math.sqrt((x1 - x0) * (y1 - y0) / TOP_SAMPLES)))
    depth = depth_m[y0:y1:step, x0:x1:step]
    inside = mask[y0:y1:step, x0:x1:step] & (depth >= min_m) & (depth <= max_m) & (depth > 0)
    rows, cols = np.nonzero(inside)
    z = depth[rows, cols].astype(np.float64)
    u, v = ideal_pixels(intr, rows * step + y0, cols * step + x0)
    return np.stack([(u - intr.cx) / intr.fx * z, (v - intr.cy) / intr.fy * z, z], axis=1)


def object_top(points: np.ndarray, support: Support) -> float | None:
    """The height of the object's top above ``support``: the ``TOP_PERCENTILE``-th percentile
    of its points' heights (``object_points``); None without points."""
    if len(points) == 0:
        return None
    return _quantiles(support.heights(points), (TOP_PERCENTILE / 100.0,))[0]


def _ranks(count: int, fractions: tuple[float, ...]) -> list[int]:
    """The nearest ranks of these fractions among ``count`` sorted values."""
    return [min(count - 1, max(0, round(f * (count - 1)))) for f in fractions]


def _quantiles(values: np.ndarray, fractions: tuple[float, ...]) -> list[float]:
    """The values at these fractions of the sorted ``values`` (nearest rank; one partition)."""
    ranks = _ranks(len(values), fractions)
    ordered = np.partition(values, ranks)
    return [float(ordered[rank]) for rank in ranks]


_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)],
                  np.float64)


def reach_support(masks: Sequence[np.ndarray], index: int, depth_m: np.ndarray,
                  k: Intrinsics | Sequence[float] | np.ndarray, box: Box3D, *,
                  min_m: float = 0.1, max_m: float = 10.0,
                  up: Sequence[float] | None = None, known: Support | None = None,
                  pixel_box_of: PixelBox | None = None) -> Reaching:
    """``fit_support`` then ``reaching_box``: the support and the box down to it, or the
    measured box and the reason (the result JSON's ``support_error``). ``known`` and
    ``pixel_box_of`` as for ``fit_support``."""
    found = pixel_box_of if pixel_box_of is not None else pixel_box(masks[index])
    if found is None:
        return Reaching(None, box, "empty mask")
    support = fit_support(masks, index, depth_m, k, box, min_m=min_m, max_m=max_m, up=up,
                          known=known, pixel_box_of=found)
    if isinstance(support, str):
        return Reaching(None, box, support)
    points = object_points(masks[index], depth_m, k, min_m=min_m, max_m=max_m,
                           pixel_box_of=found)
    reached = reaching_box(box, support, object_top(points, support), points)
    if isinstance(reached, str):
        return Reaching(support, box, reached)
    return Reaching(support, reached, None)
