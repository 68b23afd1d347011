"""Rotations: a 3x3 rotation matrix <-> the unit quaternion (x, y, z, w) of geometry_msgs, and
``cross``: the cross product of 3-vectors without ``np.cross``'s per-call overhead."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def matrix_to_quaternion(rotation: np.ndarray) -> tuple[float, float, float, float]:
    """A 3x3 rotation matrix -> the unit quaternion (x, y, z, w) with w >= 0."""
    # Python floats: numpy's scalar arithmetic costs several times more per operation.
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = np.asarray(
        rotation, dtype=np.float64).tolist()
    trace = m00 + m11 + m22
    if trace > 0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = ((m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, s / 4)
    elif m00 > m11 and m00 > m22:
        s = 2.0 * math.sqrt(1.0 + m00 - m11 - m22)
        q = (s / 4, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s)
    elif m11 > m22:
        s = 2.0 * math.sqrt(1.0 + m11 - m00 - m22)
        q = ((m01 + m10) / s, s / 4, (m12 + m21) / s, (m02 - m20) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m22 - m00 - m11)
        q = ((m02 + m20) / s, (m12 + m21) / s, s / 4, (m10 - m01) / s)
    norm = math.sqrt(sum(c * c for c in q))
    if q[3] < 0:
        norm = -norm
    x, y, z, w = (c / norm + 0.0 for c in q)  # + 0.0: no -0.0
    return x, y, z, w


def quaternion_to_matrix(quaternion: Sequence[float]) -> np.ndarray:
    """A quaternion (x, y, z, w), normalised first -> its 3x3 rotation matrix."""
    x, y, z, w = (float(c) for c in np.asarray(quaternion, dtype=np.float64).reshape(4))
    norm = math.sqrt(x * x + y * y + z * z + w * w) or math.nan  # zero: NaN, as numpy's
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def cross(a: np.ndarray | Sequence[float], b: np.ndarray | Sequence[float]) -> np.ndarray:
    """The cross product along the last axis (length 3), broadcast like ``np.cross`` and with
    the same products, so the same bits; ``np.cross`` costs ~10 us a call in axis handling,
    which the grasp scene's few hundred small products a frame notice."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape == (3,) and b.shape == (3,):
        return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                         a[0] * b[1] - a[1] * b[0]])
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
