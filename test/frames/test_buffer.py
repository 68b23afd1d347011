"""TfBuffer against hand-computed chains: static and moving links, interpolation, extrapolation
refused, a frame that vanishes, broken chains, unknown frames, and the words of each error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sam3_agent_ros.frames import TfBuffer, TransformUnavailable

S = 1_000_000_000
IDENTITY = (0.0, 0.0, 0.0, 1.0)


def yaw(degrees: float) -> tuple[float, float, float, float]:
    half = math.radians(degrees) / 2
    return (0.0, 0.0, math.sin(half), math.cos(half))


def mount(buffer: TfBuffer) -> None:
    """base -> cam: 1 m ahead, turned 90 deg left; cam -> opt: 0.5 m up (both static)."""
    buffer.set_transform("base", "cam", 0, (1.0, 0.0, 0.0), yaw(90), static=True)
    buffer.set_transform("cam", "opt", 0, (0.0, 0.0, 0.5), IDENTITY, static=True)


def drive(buffer: TfBuffer) -> None:
    """world -> base: x from 0 m (1 s) to 2 m (3 s) while turning from 0 to 90 deg."""
    buffer.set_transform("world", "base", 1 * S, (0.0, 0.0, 0.0), yaw(0))
    buffer.set_transform("world", "base", 3 * S, (2.0, 0.0, 0.0), yaw(90))


def failure(buffer: TfBuffer, target: str, source: str, stamp_ns: int) -> TransformUnavailable:
    with pytest.raises(TransformUnavailable) as caught:
        buffer.lookup(target, source, stamp_ns)
    return caught.value


def test_static_chain_maps_a_point_both_ways():
    buffer = TfBuffer()
    mount(buffer)
    # opt (1, 0, 0) -> cam (1, 0, 0.5) -> base: yaw 90 gives (0, 1, 0.5), + (1, 0, 0).
    to_base = buffer.lookup("base", "opt", 123 * S)
    np.testing.assert_allclose(to_base.apply_points([[1.0, 0.0, 0.0]]), [[1.0, 1.0, 0.5]],
                               atol=1e-12)
    to_opt = buffer.lookup("opt", "base", 5 * S)
    np.testing.assert_allclose(to_opt.apply_points([[1.0, 1.0, 0.5]]), [[1.0, 0.0, 0.0]],
                               atol=1e-12)


def test_static_edges_hold_at_any_stamp_even_far_from_their_own():
    buffer = TfBuffer()
    mount(buffer)
    for stamp in (0, 1, 10**6 * S):
        np.testing.assert_allclose(buffer.lookup("base", "cam", stamp).translation, [1, 0, 0])


def test_moving_link_is_interpolated_at_the_midpoint():
    buffer = TfBuffer()
    mount(buffer)
    drive(buffer)
    # At 2 s: base at x = 1, turned 45 deg. cam origin (1, 0, 0) in base -> world
    # (1 + cos 45, sin 45, 0); the point at opt's origin is 0.5 m above it.
    to_world = buffer.lookup("world", "opt", 2 * S)
    c = math.cos(math.radians(45))
    np.testing.assert_allclose(to_world.apply_points([[0.0, 0.0, 0.0]]),
                               [[1.0 + c, c, 0.5]], atol=1e-9)
    # Orientation: 45 (base) + 90 (mount) = 135 deg about z.
    _, quaternion = to_world.apply_pose((0, 0, 0), IDENTITY)
    np.testing.assert_allclose(np.abs(np.dot(quaternion, yaw(135))), 1.0, atol=1e-9)


def test_interpolation_at_a_quarter_and_at_the_samples():
    buffer = TfBuffer()
    drive(buffer)
    quarter = buffer.lookup("world", "base", int(1.5 * S))
    np.testing.assert_allclose(quarter.translation, [0.5, 0, 0], atol=1e-12)
    np.testing.assert_allclose(abs(np.dot(quarter.rotation, yaw(22.5))), 1.0, atol=1e-12)
    np.testing.assert_allclose(buffer.lookup("world", "base", 3 * S).translation, [2, 0, 0])


def test_slerp_takes_the_shorter_way_when_the_quaternions_have_opposite_signs():
    buffer = TfBuffer()
    buffer.set_transform("world", "base", 0, (0, 0, 0), yaw(10))
    buffer.set_transform("world", "base", 2 * S, (0, 0, 0), tuple(-v for v in yaw(30)))
    middle = buffer.lookup("world", "base", 1 * S)
    np.testing.assert_allclose(abs(np.dot(middle.rotation, yaw(20))), 1.0, atol=1e-12)


def test_lookup_into_the_future_is_refused_with_the_newest_stamp():
    buffer = TfBuffer()
    mount(buffer)
    drive(buffer)
    error = failure(buffer, "world", "opt", int(3.5 * S))
    assert error.kind == "extrapolation_future"
    assert error.newest_stamp_ns == 3 * S
    text = str(error)
    assert "no transform from 'opt' to 'world' at 3.500000000 s" in text
    assert "the newest transform 'world' -> 'base' is at 3.000000000 s, 500.0 ms before" in text
    assert "newest stamp seen: 3.000000000 s" in text


def test_lookup_into_the_past_is_refused():
    buffer = TfBuffer()
    drive(buffer)
    error = failure(buffer, "world", "base", int(0.5 * S))
    assert error.kind == "extrapolation_past"
    assert "the oldest transform 'world' -> 'base' kept is at 1.000000000 s" in str(error)


def test_a_small_tolerance_at_the_ends_uses_the_end_sample():
    buffer = TfBuffer(tolerance_ns=1_000_000)
    drive(buffer)
    late = buffer.lookup("world", "base", 3 * S + 500_000)
    np.testing.assert_allclose(late.translation, [2, 0, 0])
    assert failure(buffer, "world", "base", 3 * S + 2_000_000).kind == "extrapolation_future"


def test_samples_older_than_the_cache_are_dropped():
    buffer = TfBuffer(cache_s=10.0)
    for second in range(0, 16):
        buffer.set_transform("world", "base", second * S, (float(second), 0, 0), IDENTITY)
    np.testing.assert_allclose(buffer.lookup("world", "base", int(5.5 * S)).translation,
                               [5.5, 0, 0])
    error = failure(buffer, "world", "base", int(4.5 * S))
    assert error.kind == "extrapolation_past"
    assert "kept is at 5.000000000 s" in str(error) and "the buffer keeps 10 s" in str(error)


def test_a_frame_without_updates_for_longer_than_the_cache_vanishes():
    buffer = TfBuffer(cache_s=10.0)
    mount(buffer)
    drive(buffer)  # base's last sample: 3 s
    buffer.set_transform("world", "drone", 14 * S, (0, 0, 1), IDENTITY)  # 11 s later
    error = failure(buffer, "world", "base", 3 * S)
    assert error.kind == "vanished"
    assert error.newest_stamp_ns == 3 * S
    text = str(error)
    assert "frame 'base' vanished: its last transform was at 3.000000000 s" in text
    assert "no update for longer than the cache (10 s)" in text
    # opt hangs off base, whose link to world is gone: the same words.
    assert "frame 'base' vanished" in str(failure(buffer, "world", "opt", 3 * S))
    # A new sample brings the frame back.
    buffer.set_transform("world", "base", 14 * S, (5, 0, 0), IDENTITY)
    np.testing.assert_allclose(buffer.lookup("world", "cam", 14 * S).translation, [6, 0, 0])


def test_two_trees_give_no_path_naming_both_roots():
    buffer = TfBuffer()
    mount(buffer)
    buffer.set_transform("map", "odom", 1 * S, (0, 0, 0), IDENTITY)
    error = failure(buffer, "odom", "opt", 1 * S)
    assert error.kind == "no_path"
    text = str(error)
    assert "no path between them: 'opt' is in the tree of 'base', 'odom' in the tree of 'map'" \
        in text
    assert "newest stamp seen: 1.000000000 s" in text
    assert "frames known (5): 'base', 'cam', 'map', 'odom', 'opt'" in text


def test_an_unknown_frame_is_named_with_the_frames_the_buffer_knows():
    buffer = TfBuffer()
    mount(buffer)
    error = failure(buffer, "base_link", "opt", 2 * S)
    assert error.kind == "unknown_frame"
    assert error.target == "base_link" and error.source == "opt"
    text = str(error)
    assert "frame 'base_link' is unknown (never received on /tf or /tf_static)" in text
    assert "newest stamp seen: none (no dynamic transform)" in text
    assert "frames known (3): 'base', 'cam', 'opt'" in text
    assert error.known_frames == ["base", "cam", "opt"]


def test_an_empty_buffer_says_it_knows_no_frame():
    text = str(failure(TfBuffer(), "base_link", "camera", 0))
    assert "frame 'camera' is unknown" in text and "frames known (0): none" in text


def test_the_known_frames_list_is_bounded():
    buffer = TfBuffer()
    for index in range(30):
        buffer.set_transform("root", f"f{index:02d}", 0, (0, 0, 0), IDENTITY, static=True)
    error = failure(buffer, "root", "missing", 0)
    assert "frames known (31): 'f00'," in str(error) and "and 19 more" in str(error)
    assert len(error.known_frames) == 12


def test_frame_names_from_peers_are_escaped_and_clipped():
    buffer = TfBuffer()
    mount(buffer)
    text = str(failure(buffer, "base", "x\n[ERROR] forged" + "y" * 500, 0))
    assert "\n" not in text and "x\\n[ERROR] forged" in text
    assert "characters)" in text and len(text) < 600


def test_a_loop_between_frames_is_reported_not_followed():
    buffer = TfBuffer()
    buffer.set_transform("a", "b", 0, (1, 0, 0), IDENTITY, static=True)
    buffer.set_transform("b", "a", 0, (1, 0, 0), IDENTITY, static=True)
    assert failure(buffer, "a", "b", 0).kind == "loop"


def test_same_frame_is_the_identity_and_bad_input_is_refused():
    buffer = TfBuffer()
    np.testing.assert_allclose(buffer.lookup("x", "x", 0).matrix(), np.eye(4))
    assert buffer.set_transform("", "child", 0, (0, 0, 0), IDENTITY) is False
    assert buffer.set_transform("a", "a", 0, (0, 0, 0), IDENTITY) is False
    assert buffer.set_transform("a", "b", 0, (0, 0, 0), (0, 0, 0, 0)) is False
    assert "zero quaternion" in buffer.stats().last_refusal
    assert buffer.set_transform("a", "b", 0, (math.nan, 0, 0), IDENTITY) is False
    assert "3 finite numbers" in buffer.stats().last_refusal
    assert buffer.frames() == []
    assert buffer.stats().refused == {"names": 2, "malformed": 2, "denormalized": 0,
                                      "future": 0, "frame_cap": 0}


def test_max_frames_bounds_what_peers_can_make_it_hold():
    buffer = TfBuffer(max_frames=2)
    assert buffer.set_transform("r", "a", 0, (0, 0, 0), IDENTITY, static=True)
    assert buffer.set_transform("r", "b", 0, (0, 0, 0), IDENTITY, static=True)
    assert not buffer.set_transform("r", "c", 0, (0, 0, 0), IDENTITY, static=True)
    assert buffer.set_transform("r", "a", 1, (1, 0, 0), IDENTITY, static=True)  # an update
    assert buffer.frames() == ["a", "b", "r"]
    stats = buffer.stats()  # the frame over the cap is counted and named, not dropped silently
    assert stats.refused["frame_cap"] == 1 and "'c'" in stats.last_refusal


def test_samples_arriving_out_of_order_are_sorted():
    buffer = TfBuffer()
    buffer.set_transform("world", "base", 3 * S, (2, 0, 0), IDENTITY)
    buffer.set_transform("world", "base", 1 * S, (0, 0, 0), IDENTITY)
    np.testing.assert_allclose(buffer.lookup("world", "base", 2 * S).translation, [1, 0, 0])
    assert buffer.newest_stamp_ns() == 3 * S
    assert buffer.can_transform("world", "base", 2 * S)
    assert not buffer.can_transform("world", "base", 4 * S)
