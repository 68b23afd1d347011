"""InstanceIds: ids carried from pass to pass by follow mode's association (no ROS)."""

from __future__ import annotations

import numpy as np

from sam3_agent_ros.concepts import instances
from sam3_agent_ros.concepts.instances import InstanceIds
from sam3_agent_ros.core.types import Mask

SHAPE = (100, 160)


def square(x: int, y: int, side: int = 16, score: float = 0.9) -> Mask:
    mask = np.zeros(SHAPE, bool)
    mask[y:y + side, x:x + side] = True
    return Mask.from_array(mask, score, (x, y, x + side, y + side))


def test_ids_follow_moving_objects_and_are_unique_across_concepts():
    ids = InstanceIds()
    first = ids.assign([[square(10, 10), square(80, 10)], [square(40, 60)]], SHAPE)
    assert first == [[1, 2], [3]]
    # everything moves a little; the detector lists them in another order
    second = ids.assign([[square(83, 12), square(12, 11)], [square(43, 58)]], SHAPE)
    assert second == [[2, 1], [3]]


def test_a_new_object_gets_a_new_id_and_a_vanished_one_keeps_its_id_for_a_while():
    ids = InstanceIds(keep_missing=2)
    assert ids.assign([[square(10, 10)]], SHAPE) == [[1]]
    assert ids.assign([[square(10, 10), square(120, 70)]], SHAPE) == [[1, 2]]
    for _ in range(2):  # object 1 unseen for two passes (occluded): remembered
        assert ids.assign([[square(120, 70)]], SHAPE) == [[2]]
    assert ids.assign([[square(11, 10), square(120, 70)]], SHAPE) == [[1, 2]]
    for _ in range(3):  # unseen for three passes: forgotten
        ids.assign([[square(120, 70)]], SHAPE)
    assert ids.assign([[square(11, 10), square(120, 70)]], SHAPE) == [[3, 2]]


def test_an_object_that_jumps_far_is_another_instance():
    ids = InstanceIds()
    assert ids.assign([[square(5, 5)]], SHAPE) == [[1]]
    assert ids.assign([[square(130, 75)]], SHAPE) == [[2]]


def test_reset_and_a_new_frame_size_restart_the_ids():
    ids = InstanceIds()
    ids.assign([[square(10, 10), square(50, 50)]], SHAPE)
    ids.reset()
    assert ids.assign([[square(50, 50)]], SHAPE) == [[1]]
    other = np.zeros((50, 80), bool)
    other[5:10, 5:10] = True
    assert ids.assign([[Mask.from_array(other, 0.9, (5, 5, 10, 10))]], (50, 80)) == [[1]]


def test_ids_wrap_to_the_smallest_free_value_after_the_label_image_s_range(monkeypatch):
    monkeypatch.setattr(instances, "MAX_ID", 3)
    ids = InstanceIds(keep_missing=0)
    assert ids.assign([[square(10, 10), square(60, 10), square(110, 10)]], SHAPE) == [[1, 2, 3]]
    # 1 and 3 vanish (forgotten at once); a new object takes the smallest free id
    assert ids.assign([[square(60, 10), square(10, 70)]], SHAPE) == [[2, 1]]
