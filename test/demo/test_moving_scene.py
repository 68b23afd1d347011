"""The moving tabletop sequences: determinism, motion, the leaving object, the grasped object
beside its look-alike, consistent truth."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo.moving_scene import (
    GRASPED_OBJECT,
    LEAVING_OBJECT,
    LOOK_ALIKE,
    GraspSequence,
    MovingSequence,
    intrinsics_for,
)
from sam3_agent_ros.segmenters.color import ColorSegmenter


@pytest.fixture(scope="module")
def sequence():
    return MovingSequence()


def test_frames_are_deterministic_by_seed(sequence):
    a, b = sequence.frame(17), MovingSequence().frame(17)
    assert np.array_equal(a.rgb, b.rgb) and np.array_equal(a.depth_m, b.depth_m)
    other = MovingSequence(seed=1).frame(17)
    assert not np.array_equal(a.rgb, other.rgb)  # other noise
    assert all(np.array_equal(a.masks[n], other.masks[n]) for n in a.masks)  # same motion


def test_stamps_and_length(sequence):
    assert len(sequence) == 90 and len(list(MovingSequence(n_frames=3))) == 3
    assert sequence.frame(25).t_s == pytest.approx(2.5)


def test_camera_and_objects_move(sequence):
    first, middle = sequence.frame(0), sequence.frame(30)
    for name in ("blue_cylinder", "red_box", "green_prism", "yellow_ellipse"):
        shift = np.subtract(middle.scene_frame.centroid_px(name),
                            first.scene_frame.centroid_px(name))
        assert np.hypot(*shift) > 5.0, name
    # The moving objects move relative to the static ones (not just the camera).
    def relative(frame, name):
        return np.subtract(frame.scene_frame.centroid_px(name),
                           frame.scene_frame.centroid_px("yellow_ellipse"))
    assert np.hypot(*(relative(middle, "blue_cylinder") - relative(first, "blue_cylinder"))) > 10


def test_the_leaving_object_leaves_and_the_others_stay(sequence):
    gone = sequence.first_index_without(LEAVING_OBJECT)
    assert gone is not None and gone <= len(sequence) - 15  # room to time out after it
    assert sequence.frame(gone - 1).visible(LEAVING_OBJECT)
    for index in (gone, len(sequence) - 1):
        frame = sequence.frame(index)
        assert not frame.visible(LEAVING_OBJECT)
        assert all(frame.visible(n) for n in frame.masks if n != LEAVING_OBJECT)
    assert sequence.first_index_without("blue_cylinder") is None


def test_truth_is_consistent_with_depth_and_intrinsics(sequence):
    frame = sequence.frame(40)
    k = frame.intrinsics
    for name, (x, y, z) in frame.positions.items():
        mask = frame.masks[name]
        assert np.allclose(frame.depth_m[mask], z, atol=1e-5)
        u, v = frame.scene_frame.centroid_px(name)
        assert (u - k.cx) * z / k.fx == pytest.approx(x, abs=0.003)
        assert (v - k.cy) * z / k.fy == pytest.approx(y, abs=0.003)


def test_other_resolutions_keep_the_field_of_view():
    big = MovingSequence(intrinsics=intrinsics_for(1920, 1080)).frame(10)
    small = MovingSequence().frame(10)
    assert big.rgb.shape == (1080, 1920, 3)
    for name in ("red_box", "blue_cylinder"):
        ratio = big.masks[name].sum() / small.masks[name].sum()
        assert ratio == pytest.approx(9.0, rel=0.05)


def test_bad_arguments():
    with pytest.raises(ValueError):
        MovingSequence(n_frames=1)
    with pytest.raises(IndexError):
        MovingSequence(n_frames=5).frame(5)


def test_the_grasped_object_vanishes_in_place_beside_its_look_alike_and_comes_back():
    grasp = GraspSequence()
    assert grasp.first_index_without(GRASPED_OBJECT) == grasp.removed_at
    assert grasp.first_index_without(GRASPED_OBJECT, start=grasp.put_back_at) is None
    assert grasp.first_index_without(LOOK_ALIKE) is None
    before, away, back = (grasp.frame(i) for i in (grasp.removed_at - 1, grasp.removed_at,
                                                   grasp.put_back_at))
    assert list(away.masks) == list(before.masks)  # every frame names every object
    assert not away.visible(GRASPED_OBJECT) and np.isnan(away.positions[GRASPED_OBJECT]).all()
    assert all(frame.visible(GRASPED_OBJECT) for frame in (before, back))
    # In place: the camera barely moved, and the object is where it stood.
    assert np.hypot(*np.subtract(back.scene_frame.centroid_px(GRASPED_OBJECT),
                                 before.scene_frame.centroid_px(GRASPED_OBJECT))) < 30
    # The look-alike: same colour and size, beside it, a separate blob for the detector, its
    # centroid within the default follow.match_max_shift (0.1 of the 800 px diagonal).
    for frame in (before, back):
        shift = np.hypot(*np.subtract(frame.scene_frame.centroid_px(LOOK_ALIKE),
                                      frame.scene_frame.centroid_px(GRASPED_OBJECT)))
        assert 60 < shift < 80
        ratio = frame.masks[LOOK_ALIKE].sum() / frame.masks[GRASPED_OBJECT].sum()
        assert ratio == pytest.approx(1.0, abs=0.1)
    blue = ColorSegmenter().segment(before.rgb, "blue").masks
    assert any((m & before.masks[GRASPED_OBJECT]).sum() == m.sum() for m in blue)
    assert not np.array_equal(before.rgb, away.rgb)


def test_grasp_sequence_arguments():
    assert GraspSequence(n_frames=30, removed_at=10, put_back_at=None).on_table(29) is False
    with pytest.raises(ValueError):
        GraspSequence(n_frames=30, removed_at=20, put_back_at=10)
    with pytest.raises(ValueError):
        GraspSequence(n_frames=60, removed_at=0)
