"""A rigid transform (translation + unit quaternion x, y, z, w, the ROS order) and its math.

``Transform`` maps points of a child frame into its parent frame: ``p_parent = R p_child + t``,
what a ``geometry_msgs/TransformStamped`` with ``header.frame_id = parent`` and
``child_frame_id = child`` says. Rotations go through ``transforms3d`` (quaternions in w, x, y, z
order there: converted at this module's edges only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from transforms3d import quaternions


def _wxyz(xyzw: np.ndarray) -> np.ndarray:
    return np.array([xyzw[3], xyzw[0], xyzw[1], xyzw[2]], dtype=np.float64)


def _xyzw(wxyz: np.ndarray) -> np.ndarray:
    return np.array([wxyz[1], wxyz[2], wxyz[3], wxyz[0]], dtype=np.float64)


def normalized_quaternion(xyzw: object) -> np.ndarray:
    """``xyzw`` as a float64 unit quaternion; ValueError when it is not 4 finite numbers or has
    no length (a zero quaternion is no rotation: refused rather than guessed)."""
    q = np.asarray(xyzw, dtype=np.float64).reshape(-1)
    if q.shape != (4,) or not np.all(np.isfinite(q)):
        raise ValueError(f"a quaternion is 4 finite numbers (x, y, z, w), got {q.tolist()}")
    norm = float(np.linalg.norm(q))
    if norm < 1e-9:
        raise ValueError("a zero quaternion is no rotation")
    return q / norm


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
        return cls(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))

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
        return Transform(-rotation_t @ self.translation,
                         _xyzw(quaternions.qconjugate(_wxyz(self.rotation))))

    def __mul__(self, other: Transform) -> Transform:
        """``self * other``: ``other`` first, then ``self`` (T_a_c = T_a_b * T_b_c)."""
        return Transform(self._matrix @ other.translation + self.translation,
                         _xyzw(quaternions.qmult(_wxyz(self.rotation), _wxyz(other.rotation))))

    def apply_points(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) points of the child frame -> (N, 3) float64 points of the parent frame."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        return p @ self._matrix.T + self.translation

    def apply_pose(self, position: object, orientation: object) -> tuple[np.ndarray, np.ndarray]:
        """A pose (position x, y, z; orientation quaternion x, y, z, w) in the child frame -> the
        same pose in the parent frame (position, unit quaternion x, y, z, w)."""
        p = np.asarray(position, dtype=np.float64).reshape(3)
        q = normalized_quaternion(orientation)
        moved = quaternions.qmult(_wxyz(self.rotation), _wxyz(q))
        return self._matrix @ p + self.translation, _xyzw(moved)


def interpolate(before: Transform, after: Transform, fraction: float) -> Transform:
    """The transform ``fraction`` (0..1) of the way from ``before`` to ``after``: translation
    linear, rotation along the shorter great arc (slerp), as tf2 interpolates."""
    if fraction <= 0.0:
        return before
    if fraction >= 1.0:
        return after
    translation = before.translation + fraction * (after.translation - before.translation)
    q0, q1 = _wxyz(before.rotation), _wxyz(after.rotation)
    if float(np.dot(q0, q1)) < 0.0:
        q1 = -q1  # the same rotation; the shorter way round
    step = quaternions.qmult(quaternions.qconjugate(q0), q1)
    if abs(step[0]) >= 1.0 - 1e-15:
        rotation = q0  # no rotation between the two (qpow of the identity is the identity)
    else:
        rotation = quaternions.qmult(q0, quaternions.qpow(step, fraction))
    return Transform(translation, _xyzw(rotation))
