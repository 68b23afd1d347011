"""rotations: rotation matrix <-> quaternion round trips through every branch; ``cross`` gives
np.cross's bits for one pair and for broadcast batches."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.geometry.rotations import cross, matrix_to_quaternion, quaternion_to_matrix


@pytest.mark.parametrize("seed", range(5))
def test_quaternions_round_trip_through_every_branch(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        rotation = quaternion_to_matrix(q)
        back = np.array(matrix_to_quaternion(rotation))
        assert back[3] >= 0
        np.testing.assert_allclose(quaternion_to_matrix(back), rotation, atol=1e-9)
    for turn in (np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]),
                 np.diag([-1.0, -1.0, 1.0])):  # half turns: trace -1, one branch each
        np.testing.assert_allclose(quaternion_to_matrix(matrix_to_quaternion(turn)), turn,
                                   atol=1e-12)


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((40, 3), (40, 3)), ((6, 3, 1, 3), (6, 1, 3, 3)),
                                    ((3,), (7, 3))])
def test_cross_is_np_cross_bit_for_bit(shapes):
    rng = np.random.default_rng(len(shapes[0]))
    a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
    assert np.array_equal(cross(a, b), np.cross(a, b))
    assert np.array_equal(cross([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]), [0.0, 0.0, 1.0])
