"""transform.py: composition and inverse against 4x4 matrices, the slerp of ``interpolate``
against transforms3d's quaternion power, and ``apply_points`` (float64 and float32)."""

from __future__ import annotations

import numpy as np
import pytest
from transforms3d import quaternions

from sam3_agent_ros.frames.transform import Transform, interpolate


def random_transform(rng: np.random.Generator) -> Transform:
    return Transform(rng.normal(0.0, 2.0, 3), rng.normal(0.0, 1.0, 4))


def library_slerp(before: Transform, after: Transform, fraction: float) -> np.ndarray:
    """The oracle: q0 (q0^-1 q1)^fraction with transforms3d, the shorter way round (x, y, z, w)."""
    q0 = np.roll(before.rotation, 1)  # w, x, y, z
    q1 = np.roll(after.rotation, 1)
    if q0 @ q1 < 0.0:
        q1 = -q1
    step = quaternions.qmult(quaternions.qconjugate(q0), q1)
    q = quaternions.qmult(q0, quaternions.qpow(step, fraction))
    return np.roll(q / np.linalg.norm(q), -1)


def same_rotation(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(min(np.abs(a - b).max(), np.abs(a + b).max()) < 1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_the_slerp_is_the_librarys_quaternion_power(seed):
    rng = np.random.default_rng(seed)
    before, after = random_transform(rng), random_transform(rng)
    for fraction in (1e-6, 0.25, 0.5, 0.9, 1 - 1e-6):
        moved = interpolate(before, after, fraction)
        assert same_rotation(moved.rotation, library_slerp(before, after, fraction))
        np.testing.assert_allclose(
            moved.rotation_matrix,
            quaternions.quat2mat(np.roll(moved.rotation, 1)), atol=1e-12)
        np.testing.assert_allclose(
            moved.translation,
            before.translation + fraction * (after.translation - before.translation), atol=1e-12)


def test_interpolating_between_equal_or_opposite_quaternions():
    a = Transform((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))
    b = Transform((2.0, 0.0, 0.0), (0.0, 0.0, 0.0, -1.0))  # the same rotation, the sign flipped
    half = interpolate(a, b, 0.5)
    assert same_rotation(half.rotation, np.array([0.0, 0.0, 0.0, 1.0]))
    np.testing.assert_allclose(half.translation, (1.0, 0.0, 0.0))
    assert interpolate(a, b, 0.0) is a and interpolate(a, b, 1.0) is b


@pytest.mark.parametrize("seed", range(5))
def test_composition_and_inverse_are_the_matrices(seed):
    rng = np.random.default_rng(100 + seed)
    a, b = random_transform(rng), random_transform(rng)
    np.testing.assert_allclose((a * b).matrix(), a.matrix() @ b.matrix(), atol=1e-12)
    np.testing.assert_allclose(a.inverse().matrix(), np.linalg.inv(a.matrix()), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm((a * b).rotation), 1.0, atol=1e-12)


@pytest.mark.parametrize("count", [1, 63, 64, 5000])
def test_points_are_the_matrix_product(count):
    rng = np.random.default_rng(count)
    shift = random_transform(rng)
    points = rng.normal(0.0, 3.0, (count, 3))
    expected = points @ shift.rotation_matrix.T + shift.translation
    moved = shift.apply_points(points)
    assert moved.dtype == np.float64
    np.testing.assert_allclose(moved, expected, atol=1e-12)
    single = shift.apply_points(points.astype(np.float32))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, expected, atol=1e-4)
    assert shift.apply_points(np.zeros((0, 3))).shape == (0, 3)
