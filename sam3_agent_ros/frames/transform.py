"""A rigid transform (translation + unit quaternion x, y, z, w, the ROS order) and its math.

``Transform`` maps points of a child frame into its parent frame: ``p_parent = R p_child + t``,
what a ``geometry_msgs/TransformStamped`` with ``header.frame_id = parent`` and
``child_frame_id = child`` says. Rotations go through ``transforms3d`` (quaternions in w, x, y, z
order there: converted at this module's edges only); only the slerp of ``interpolate`` is ours,
held to transforms3d's quaternion power by a test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from transforms3d import quaternions


def _wxyz(xyzw: np.ndarray) -> np.ndarray:
    return np.array([xyzw[3], xyzw[0], xyzw[1], xyzw[2]], dtype=np.float64)


def _xyzw(wxyz: np.ndarray) -> np.ndarray:
    return np.array([wxyz[1], wxyz[2], wxyz[3], wxyz[0]], dtype=np.float64)


# A quaternion's length must lie in this range before it is normalised: outside, it is a unit
# mistake or garbage, not a rotation (1e155 * a 90 degree yaw has a length that squares to inf).
MIN_QUATERNION_NORM = 1e-3
MAX_QUATERNION_NORM = 1e3
# A composed transform's rotation block must be orthonormal (R R^T = I, det +1) to this, and its
# translation within this many metres (farther is an overflow on its way, not a robot: and the
# target's cloud is float32).
ORTHONORMAL_TOLERANCE = 1e-6
MAX_TRANSLATION_M = 1e9


def unit_quaternion(x: float, y: float, z: float, w: float) -> tuple[float, float, float, float]:
    """``(x, y, z, w)`` normalised; ValueError when a value is not finite or the length is outside
    ``[MIN_QUATERNION_NORM, MAX_QUATERNION_NORM]``: checked before it is normalised, and
    normalised without overflow (the largest component factored out first), so a huge or tiny
    quaternion is refused, never turned into (0, 0, 0, 0) or guessed. Plain floats: a /tf message
    of 10,000 samples is checked one by one."""
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z) and math.isfinite(w)):
        raise ValueError(f"a quaternion is 4 finite numbers (x, y, z, w), got {[x, y, z, w]}")
    largest = max(abs(x), abs(y), abs(z), abs(w))
    if largest == 0.0:
        raise ValueError("a zero quaternion is no rotation")
    x, y, z, w = x / largest, y / largest, z / largest, w / largest
    length = math.sqrt(x * x + y * y + z * z + w * w)  # in [1, 2]: no overflow, no underflow
    norm = largest * length
    if not MIN_QUATERNION_NORM <= norm <= MAX_QUATERNION_NORM:
        raise ValueError(f"a quaternion of length {norm:.3g} is no rotation (a unit quaternion "
                         f"has length 1; accepted {MIN_QUATERNION_NORM:g}.."
                         f"{MAX_QUATERNION_NORM:g} before normalising)")
    return x / length, y / length, z / length, w / length


def normalized_quaternion(xyzw: object) -> np.ndarray:
    """``xyzw`` as a float64 unit quaternion (``unit_quaternion``); ValueError when it is not 4
    finite numbers of a plausible length."""
    q = np.asarray(xyzw, dtype=np.float64).reshape(-1)
    if q.shape != (4,):
        raise ValueError(f"a quaternion is 4 finite numbers (x, y, z, w), got {q.tolist()}")
    return np.array(unit_quaternion(*q.tolist()))


def transform_problem(transform: Transform) -> str | None:
    """Why ``transform`` is no rigid motion (None: it is one): a non-finite or absurdly far
    translation, a non-finite rotation or one whose matrix is not orthonormal with det +1. What a
    lookup checks on the composed result (two finite links can compose to inf)."""
    t, q, m = transform.translation, transform.rotation, transform.rotation_matrix
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(q)) and np.all(np.isfinite(m))):
        return (f"the composed transform is not finite (translation {t.tolist()}, rotation "
                f"{q.tolist()}): a link overflows")
    if float(np.max(np.abs(t))) > MAX_TRANSLATION_M:
        return (f"the composed translation {t.tolist()} is beyond {MAX_TRANSLATION_M:g} m: "
                "no robot's frames are that far apart")
    error = float(np.max(np.abs(m @ m.T - np.eye(3))))
    if error > ORTHONORMAL_TOLERANCE or float(np.linalg.det(m)) <= 0.0:
        return (f"the composed rotation is not a rotation (|R R^T - I| = {error:.3g}, det "
                f"{float(np.linalg.det(m)):.3g})")
    return None


@dataclass(frozen=True)
class Transform:
    """``p_parent = rotation * p_child + translation``; rotation as a unit quaternion x, y, z, w."""

    translation: np.ndarray
    rotation: np.ndarray
    _matrix: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        t = np.asarray(self.translation, dtype=np.float64).reshape(-1)
        if t.shape != (3,) or not np.all(np.isfinite(t)):
            raise ValueError(f"a translation is 3 finite numbers, got {t.tolist()}")
        q = normalized_quaternion(self.rotation)
        object.__setattr__(self, "translation", t)
        object.__setattr__(self, "rotation", q)
        object.__setattr__(self, "_matrix", quaternions.quat2mat(_wxyz(q)))

    @classmethod
    def identity(cls) -> Transform:
        return cls._made(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), np.eye(3))

    @classmethod
    def _made(cls, translation: np.ndarray, rotation: np.ndarray,
              matrix: np.ndarray) -> Transform:
        """A transform from values this module computed from valid ones (no checks again: a
        chain lookup composes eight of them, and the checks were most of its cost)."""
        made = object.__new__(cls)
        object.__setattr__(made, "translation", translation)
        object.__setattr__(made, "rotation", rotation)
        object.__setattr__(made, "_matrix", matrix)
        return made

    @classmethod
    def from_matrix(cls, matrix: np.ndarray) -> Transform:
        """From a 4x4 homogeneous matrix (its rotation block must be a rotation)."""
        m = np.asarray(matrix, dtype=np.float64)
        return cls(m[:3, 3], _xyzw(quaternions.mat2quat(m[:3, :3])))

    @property
    def rotation_matrix(self) -> np.ndarray:
        return self._matrix

    def matrix(self) -> np.ndarray:
        """The 4x4 homogeneous matrix."""
        m = np.eye(4)
        m[:3, :3] = self._matrix
        m[:3, 3] = self.translation
        return m

    def inverse(self) -> Transform:
        rotation_t = self._matrix.T
        x, y, z, w = self.rotation
        return Transform._made(-rotation_t @ self.translation, np.array([-x, -y, -z, w]),
                               np.ascontiguousarray(rotation_t))

    def __mul__(self, other: Transform) -> Transform:
        """``self * other``: ``other`` first, then ``self`` (T_a_c = T_a_b * T_b_c)."""
        q = _xyzw(quaternions.qmult(_wxyz(self.rotation), _wxyz(other.rotation)))
        return Transform._made(self._matrix @ other.translation + self.translation,
                               q / math.sqrt(float(q @ q)), self._matrix @ other._matrix)

    def apply_points(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) points of the child frame -> (N, 3) points of the parent frame, float32 for
        float32 points and float64 otherwise. (The target's cloud is moved by its own affine
        map: ``geometry.target_points.GridSamples.place``.)"""
        p = np.asarray(points)
        p = p if p.dtype in (np.float32, np.float64) else p.astype(np.float64)
        p = p.reshape(-1, 3)
        return (p @ self._matrix.T + self.translation).astype(p.dtype, copy=False)

    def apply_point(self, point: tuple[float, float, float]) -> np.ndarray:
        """One point (x, y, z) of the child frame -> the parent frame's (3,) float64."""
        return self._matrix @ np.array(point, dtype=np.float64) + self.translation

    def apply_pose(self, position: object, orientation: object) -> tuple[np.ndarray, np.ndarray]:
        """A pose (position x, y, z; orientation quaternion x, y, z, w) in the child frame -> the
        same pose in the parent frame (position, unit quaternion x, y, z, w)."""
        p = np.asarray(position, dtype=np.float64).reshape(3)
        q = normalized_quaternion(orientation)
        moved = quaternions.qmult(_wxyz(self.rotation), _wxyz(q))
        return self._matrix @ p + self.translation, _xyzw(moved)


def interpolate(before: Transform, after: Transform, fraction: float) -> Transform:
    """The transform ``fraction`` (0..1) of the way from ``before`` to ``after``: translation
    linear, rotation along the shorter great arc (slerp), as tf2 interpolates.

    The slerp is the textbook formula on Python floats (one per lookup of a moving link, right
    after an answer's 3D step: numpy's small-array calls, transforms3d's ``qpow``, cost several
    times more there); test/frames/test_transform.py holds it to transforms3d's
    ``q0 (q0^-1 q1)^fraction``."""
    if fraction <= 0.0:
        return before
    if fraction >= 1.0:
        return after
    t0, t1 = before.translation.tolist(), after.translation.tolist()
    translation = [a + fraction * (b - a) for a, b in zip(t0, t1)]
    x0, y0, z0, w0 = before.rotation.tolist()
    x1, y1, z1, w1 = after.rotation.tolist()
    cos_angle = x0 * x1 + y0 * y1 + z0 * z1 + w0 * w1
    if cos_angle < 0.0:  # the same rotation; the shorter way round
        x1, y1, z1, w1, cos_angle = -x1, -y1, -z1, -w1, -cos_angle
    if cos_angle > 1.0 - 1e-12:  # (nearly) no rotation between the two: linear is exact enough
        a, b = 1.0 - fraction, fraction
    else:
        angle = math.acos(cos_angle)
        sin_angle = math.sin(angle)
        a = math.sin((1.0 - fraction) * angle) / sin_angle
        b = math.sin(fraction * angle) / sin_angle
    q = [a * x0 + b * x1, a * y0 + b * y1, a * z0 + b * z1, a * w0 + b * w1]
    norm = math.sqrt(sum(c * c for c in q))
    x, y, z, w = (c / norm for c in q)
    return Transform._made(np.array(translation), np.array([x, y, z, w]),
                           quaternions.quat2mat((w, x, y, z)))
