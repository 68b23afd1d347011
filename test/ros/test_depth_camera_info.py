"""The camera model of DepthTargets over real rclpy (issue 25): camera_info mapped by its
binning/ROI, refused when its focal lengths are unusable, matched to the colour frame by stamp;
depth frame_ids escaped in the log and warned about once. The rig of test_depth.py."""

from __future__ import annotations

from typing import Any

import pytest
from sensor_msgs.msg import CameraInfo

from test.ros import test_depth as depth_rig
from test.ros.test_depth import (
    COLOUR_FRAME,
    STAMP,
    colour_frame,
    error_cm,
    has_position,
    inputs_arrived,
    scene_masks,
)

# test_depth.py's fixtures: its module-scoped rclpy context, the rig, the rendered scene.
ros_context, rig, scene = depth_rig.ros_context, depth_rig.rig, depth_rig.scene


def test_binned_camera_info_maps_to_the_colour_frame(rig, scene):
    r = rig()
    names, masks = scene_masks(scene)
    k = scene.intrinsics
    # The full-resolution 1280x960 calibration of a sensor binned 2x2 to 640x480 (REP 104).
    info = CameraInfo(width=1280, height=960, binning_x=2, binning_y=2)
    info.header.frame_id = COLOUR_FRAME
    info.k = [2 * k.fx, 0.0, 2 * k.cx, 0.0, 2 * k.fy, 2 * k.cy, 0.0, 0.0, 1.0]
    r._send("info", info)
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(colour_frame(scene), masks, has_position)
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name


@pytest.mark.parametrize(("k", "fragment"), [
    ((1e-9, 600.0), "fx=1e-09 px is implausible"),
    ((float("nan"), 600.0), "fx is nan"),
    ((-600.0, 600.0), "focal lengths must be positive"),
])
def test_implausible_focal_lengths_give_no_position(rig, scene, k, fragment):
    r = rig()
    _, masks = scene_masks(scene)
    fx, fy = k
    r.send_info([[fx, 0, 319.5], [0, fy, 239.5], [0, 0, 1]], 640, 480)
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(colour_frame(scene), masks, inputs_arrived)
    assert all(e["position"] is None and e["box"] is None for e in extras), extras
    assert fragment in extras[0]["position_error"]
    assert extras[0]["position_error"].startswith("unusable camera_info: ")


def test_camera_info_is_matched_to_the_colour_frame_by_stamp(rig, scene):
    """A K that arrives later (mid-query) applies from its own stamp on, not to the frame."""
    r = rig()
    names, masks = scene_masks(scene)
    sec, nsec = STAMP
    k = scene.intrinsics.K.copy()
    r.send_info(k, 640, 480, stamp=STAMP)
    r.send_depth(scene.depth_mm(), "16UC1")
    frame = colour_frame(scene)
    r.locate_when(frame, masks, has_position)
    shifted = k.copy()
    shifted[0, 2] += 100.0  # 100 px off: ~17 cm at 1 m
    r.send_info(shifted, 640, 480, stamp=(sec + 1, nsec))
    # The next frame (stamped with the new K) is measured with it: the new K has arrived.
    r.send_depth(scene.depth_mm(), "16UC1", stamp=(sec + 1, nsec))
    later_frame = colour_frame(scene, stamp=(sec + 1, nsec))
    r.locate_when(later_frame, masks, lambda e: has_position(e) and error_cm(
        e[0]["position"], scene.positions[names[0]]) > 5.0)
    # The earlier frame is still measured with the K of its own stamp.
    extras = r.targets.measure(frame, masks)
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name


class ListLogger:
    def __init__(self):
        self.lines: list[str] = []

    def warning(self, message: str, **_: Any) -> None:
        self.lines.append(message)

    warn = info = error = warning


def test_depth_frame_ids_are_escaped_and_warned_once(rig, scene):
    """Distinct frame_ids holding newlines and fake log prefixes: one warning, escaped, and the
    once-per-kind memory does not grow with them."""
    r = rig()
    _, masks = scene_masks(scene)
    logger = r.targets._logger = ListLogger()
    r.send_info(scene.intrinsics.K, 640, 480)
    frame = colour_frame(scene)
    for i in range(20):
        evil = f"evil{i}\n[ERROR] [0.0] [sam3_agent]: forged {i}\x1b[2J"
        r.send_depth(scene.depth_mm(), "16UC1", frame_id=evil)
        r.locate_when(frame, masks, lambda e, evil=evil: has_position(e) and any(
            m.header.frame_id == evil for m in r.targets._ring.messages()))
    warned = [line for line in logger.lines if "differs from the colour frame_id" in line]
    assert len(warned) == 1, logger.lines
    assert "\n" not in warned[0] and "\x1b" not in warned[0]
    assert "evil0\\n[ERROR] [0.0]" in warned[0]
    assert len(r.targets._warned) <= 2, r.targets._warned


def test_a_shared_camera_info_measures_a_rectified_stream_with_p(rig, scene):
    # The usual driver camera_info: K of the raw sensor, P of the rectified stream the node
    # gets; with K alone the positions came out 6.3 cm off (issue 34).
    r = rig()
    names, masks = scene_masks(scene)
    k = scene.intrinsics
    info = CameraInfo(width=640, height=480, distortion_model="plumb_bob")
    info.header.frame_id = COLOUR_FRAME
    info.k = [k.fx * 1.08, 0.0, k.cx + 12.0, 0.0, k.fy * 1.08, k.cy - 9.0, 0.0, 0.0, 1.0]
    info.d = [-0.3, 0.1, 0.0, 0.0, 0.0]
    info.p = [k.fx, 0.0, k.cx, 0.0, 0.0, k.fy, k.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
    r._send("info", info)
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(colour_frame(scene), masks, has_position)
    for name, extra in zip(names, extras, strict=True):
        assert error_cm(extra["position"], scene.positions[name]) < 1.0, name


@pytest.mark.parametrize(("field", "fragment"), [
    ("roi", "is not all-or-nothing"), ("d", "D holds nan"), ("p", "P holds inf")])
def test_a_half_set_roi_or_non_finite_d_or_p_give_no_position(rig, scene, field, fragment):
    # An ROI (100, 0, 540, 0) shifted cx silently (15.8-17.6 cm off); NaN in D or P passed.
    r = rig()
    _, masks = scene_masks(scene)
    k = scene.intrinsics
    info = CameraInfo(width=640, height=480, distortion_model="plumb_bob")
    info.header.frame_id = COLOUR_FRAME
    info.k = [k.fx, 0.0, k.cx, 0.0, k.fy, k.cy, 0.0, 0.0, 1.0]
    if field == "roi":
        info.roi.x_offset, info.roi.width = 100, 540
    elif field == "d":
        info.d = [float("nan"), 0.0, 0.0, 0.0, 0.0]
    else:
        info.p = [float("inf")] + [0.0] * 11
    r._send("info", info)
    r.send_depth(scene.depth_mm(), "16UC1")
    extras = r.locate_when(colour_frame(scene), masks, inputs_arrived)
    assert all(e["position"] is None and e["box"] is None for e in extras), extras
    assert fragment in extras[0]["position_error"]
