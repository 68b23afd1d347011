"""Lens distortion of a raw (unrectified) stream, ROS-free: where each pixel's ray really goes.

``depth_image_proc`` and ``image_geometry`` assume rectified images; with ``depth.rectified:
false`` the node takes raw ones and undistorts the mask pixels instead: a ``PixelMap`` gives,
for every pixel ``(u, v)`` of the raw image, the pixel ``(u', v')`` of the ideal pinhole camera
with the same K that its ray passes through (``cv2.undistortPoints``, iterated to 1e-10, or
``cv2.fisheye.undistortPoints`` for ``equidistant``), so back-projection stays
``((u' - cx) z / fx, (v' - cy) z / fy, z)``. The map is built once per calibration and image size
(a small cache) and read per pixel by the 3D step and the cloud.

Distortion models are the ones sensor_msgs/CameraInfo names (``sensor_msgs/distortion_models``):
``plumb_bob`` (k1, k2, p1, p2, k3), ``rational_polynomial`` (k1, k2, p1, p2, k3, k4, k5, k6) and
``equidistant`` (k1, k2, k3, k4).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

# Model name -> the coefficient counts OpenCV's matching function takes.
DISTORTION_MODELS = {"plumb_bob": (4, 5, 8, 12, 14), "rational_polynomial": (4, 5, 8, 12, 14),
                     "equidistant": (4,)}
MAPS_KEPT = 4  # calibrations x sizes whose maps are cached (a 1080p map is 16 MB)
_CRITERIA = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 50, 1e-10)


def distortion_problem(model: str, d: Sequence[float]) -> str | None:
    """Why ``d`` of ``model`` cannot be used to undistort (None: it can). All-zero ``d`` is no
    distortion whatever the model says."""
    values = [float(v) for v in d]
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        return f"D holds non-finite values ({bad[0]}): publish the camera's calibration"
    if not any(values):
        return None
    counts = DISTORTION_MODELS.get(model)
    if counts is None:
        return (f"distortion model {model!r} is not supported (plumb_bob, rational_polynomial, "
                "equidistant): rectify the stream (image_proc) and set depth.rectified: true")
    if len(values) not in counts:
        return (f"{model} takes {' or '.join(map(str, counts))} coefficients, D has "
                f"{len(values)}")
    return None


@dataclass(frozen=True, eq=False)
class PixelMap:
    """For every raw pixel (row v, column u), the ideal pinhole pixel its ray goes through:
    ``u[v, u]``, ``v[v, u]`` (float32, the image's size)."""

    u: np.ndarray
    v: np.ndarray

    def at(self, rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(u', v') of the pixels at ``rows``, ``cols`` (float64)."""
        return (self.u[rows, cols].astype(np.float64), self.v[rows, cols].astype(np.float64))


def undistortion_map(k: tuple[float, float, float, float], model: str, d: Sequence[float],
                     size: tuple[int, int]) -> PixelMap | None:
    """The ``PixelMap`` of an image of ``size`` (width, height) with intrinsics ``k`` (fx, fy,
    cx, cy) and distortion ``d``; None when ``d`` is all zero (nothing to undistort).
    ValueError when ``distortion_problem`` says why it cannot."""
    problem = distortion_problem(model, d)
    if problem is not None:
        raise ValueError(problem)
    coefficients = tuple(float(v) for v in d)
    if not any(coefficients):
        return None
    return _cached_map(tuple(float(v) for v in k), model, coefficients,
                       (int(size[0]), int(size[1])))


@functools.lru_cache(maxsize=MAPS_KEPT)
def _cached_map(k: tuple[float, ...], model: str, d: tuple[float, ...],
                size: tuple[int, int]) -> PixelMap:
    fx, fy, cx, cy = k
    width, height = size
    matrix = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
    cols, rows = np.meshgrid(np.arange(width, dtype=np.float64),
                             np.arange(height, dtype=np.float64))
    raw = np.stack([cols.ravel(), rows.ravel()], axis=1).reshape(-1, 1, 2)
    coefficients = np.array(d, dtype=np.float64)
    if model == "equidistant":
        ideal = cv2.fisheye.undistortPoints(raw, matrix, coefficients, R=np.eye(3), P=matrix,
                                            criteria=_CRITERIA)
    else:
        ideal = cv2.undistortPoints(raw, matrix, coefficients, R=np.eye(3), P=matrix,
                                    criteria=_CRITERIA)
    ideal = ideal.reshape(height, width, 2)
    u = np.ascontiguousarray(ideal[:, :, 0], dtype=np.float32)
    v = np.ascontiguousarray(ideal[:, :, 1], dtype=np.float32)
    if not (np.isfinite(u).all() and np.isfinite(v).all()):
        raise ValueError("the distortion coefficients send some pixels' rays to infinity: "
                         "check D")
    u.flags.writeable = False
    v.flags.writeable = False
    return PixelMap(u, v)
