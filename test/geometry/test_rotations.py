"""rotations: rotation matrix <-> quaternion round trips through every branch."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.geometry.rotations import matrix_to_quaternion, quaternion_to_matrix


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
