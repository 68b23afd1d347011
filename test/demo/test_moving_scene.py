"""The moving tabletop sequence: determinism, motion, the leaving object, consistent truth."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.demo.moving_scene import LEAVING_OBJECT, MovingSequence, intrinsics_for


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
