"""TfBuffer against what a hostile or broken peer sends (issue 34): quaternions that are no
rotation, links that compose to inf, floods of samples on one link, one message of 10,000
frames, far-future stamps. Each refused, bounded or counted; none becomes a wrong pose."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from sam3_agent_ros.frames import TfBuffer, Transform, TransformUnavailable
from sam3_agent_ros.frames.link_history import SAMPLE_BYTES
from sam3_agent_ros.frames.transform import normalized_quaternion, transform_problem

S = 1_000_000_000
IDENTITY = (0.0, 0.0, 0.0, 1.0)
YAW_90 = (0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4))


def failure(buffer: TfBuffer, target: str, source: str, stamp_ns: int) -> TransformUnavailable:
    with pytest.raises(TransformUnavailable) as caught:
        buffer.lookup(target, source, stamp_ns)
    return caught.value


@pytest.mark.parametrize("scale", [1e155, 1e200, 1e-155, 1e-300])
def test_a_scaled_quaternion_is_refused_before_it_is_normalised(scale):
    # 1e155 * a 90 degree yaw squares to inf: normalised naively it became (0, 0, 0, 0), passed
    # the zero check and was used as the identity (~/target 1.42 m off).
    with pytest.raises(ValueError, match="no rotation"):
        normalized_quaternion([c * scale for c in YAW_90])
    buffer = TfBuffer()
    assert not buffer.set_transform("base", "cam", 0, (1, 0, 0), [c * scale for c in YAW_90],
                                    static=True)
    assert buffer.stats().refused["malformed"] == 1
    assert "'base' -> 'cam'" in buffer.stats().last_refusal
    assert failure(buffer, "base", "cam", 0).kind == "unknown_frame"


def test_a_moderately_off_quaternion_is_normalised_without_overflow():
    q = normalized_quaternion([c * 3.0 for c in YAW_90])
    np.testing.assert_allclose(q, YAW_90, atol=1e-15)
    np.testing.assert_allclose(normalized_quaternion([1e-2, 0, 0, 1e-2]),
                               [math.sqrt(0.5), 0, 0, math.sqrt(0.5)], atol=1e-15)


def test_a_denormalised_quaternion_is_refused_as_tf2_refuses_it():
    buffer = TfBuffer()
    assert not buffer.set_transform("base", "cam", 0, (0, 0, 0), (0, 0, 0, 2.0), static=True)
    assert buffer.stats().refused["denormalized"] == 1
    assert "not normalised" in buffer.stats().last_refusal
    # Within tf2's tolerance (|q|^2 off 1 by < 0.01): accepted, normalised.
    assert buffer.set_transform("base", "cam", 0, (0, 0, 0), (0, 0, 0, 1.004), static=True)


def test_two_finite_links_that_compose_to_inf_fail_the_lookup_with_the_reason():
    buffer = TfBuffer()
    buffer.set_transform("world", "base", 0, (1e308, 0, 0), IDENTITY, static=True)
    buffer.set_transform("base", "cam", 0, (1e308, 0, 0), IDENTITY, static=True)
    caught = failure(buffer, "world", "cam", 0)
    assert caught.kind == "invalid"
    assert "not finite" in str(caught) and "'cam'" in str(caught)
    # The other way round (the inverse of the chain) fails alike.
    assert failure(buffer, "cam", "world", 0).kind == "invalid"


def test_an_absurdly_far_or_non_rigid_transform_is_named():
    far = Transform(np.array([2e9, 0.0, 0.0]), np.array(IDENTITY))
    assert "beyond" in (transform_problem(far) or "")
    skewed = Transform._made(np.zeros(3), np.array(IDENTITY), np.diag([1.0, 1.0, 2.0]))
    assert "not a rotation" in (transform_problem(skewed) or "")
    assert transform_problem(Transform(np.zeros(3), np.array(YAW_90))) is None


def test_samples_per_link_are_bounded_inside_the_cache_window():
    # 300,000 samples in the 10 s window took +241 MB; the link now keeps at most its cap.
    buffer = TfBuffer(max_samples_per_link=100)
    for k in range(1000):
        assert buffer.set_transform("odom", "base", k * 1_000_000, (k * 1e-3, 0, 0), IDENTITY)
    stats = buffer.stats()
    assert stats.samples == 100 and stats.dropped == 900
    assert stats.bytes == 100 * SAMPLE_BYTES
    np.testing.assert_allclose(buffer.lookup("odom", "base", 995 * 1_000_000).translation,
                               [0.995, 0, 0])
    assert failure(buffer, "odom", "base", 500 * 1_000_000).kind == "extrapolation_past"


def test_all_links_together_are_bounded_in_bytes():
    buffer = TfBuffer(max_bytes=50 * SAMPLE_BYTES)
    for k in range(40):
        buffer.set_transform("odom", "a", k * 1_000_000, (0, 0, 0), IDENTITY)
    for k in range(40):  # the second link pushes out its own oldest, never the first's
        buffer.set_transform("odom", "b", k * 1_000_000, (0, 0, 0), IDENTITY)
    stats = buffer.stats()
    assert stats.samples == 50 and stats.bytes <= 50 * SAMPLE_BYTES
    assert buffer.lookup("odom", "a", 0) is not None  # a keeps all 40
    assert failure(buffer, "odom", "b", 0).kind == "extrapolation_past"


def test_one_message_of_10000_frames_with_rising_stamps_costs_what_it_changes():
    # Each rising stamp rescanned every frame for vanished ones: 10,000 frames took ~10 s.
    buffer = TfBuffer()
    started = time.perf_counter()
    for k in range(10_000):
        buffer.set_transform("world", f"f{k}", S + k * 1000, (0, 0, 0), IDENTITY)
    elapsed = time.perf_counter() - started
    print(f"\n10,000 frames, rising stamps: {elapsed * 1e3:.0f} ms")
    assert elapsed < 3.0
    assert buffer.stats().frames == 10_000
    # They vanish once the newest stamp is a cache beyond theirs (found without a scan).
    buffer.set_transform("world", "late", 12 * S, (0, 0, 0), IDENTITY)
    assert buffer.stats().frames == 1
    assert failure(buffer, "world", "f9999", 12 * S).kind == "vanished"


def test_a_far_future_sample_is_refused_and_leaves_the_link_working():
    now = [100 * S]
    buffer = TfBuffer(now_ns=lambda: now[0])
    for k in range(10):
        buffer.set_transform("odom", "base", 100 * S + k * S // 10, (k * 0.1, 0, 0), IDENTITY)
    assert not buffer.set_transform("odom", "base", 10_000 * S, (9, 9, 9), IDENTITY)
    stats = buffer.stats()
    assert stats.refused["future"] == 1
    assert "'odom' -> 'base'" in stats.last_refusal and "ahead of the node's clock" in \
        stats.last_refusal
    # The real samples that follow keep the link, and every other frame, alive.
    now[0] = 160 * S
    buffer.set_transform("odom", "base", 160 * S, (5, 0, 0), IDENTITY)
    buffer.set_transform("odom", "base", 160 * S + S // 10, (6, 0, 0), IDENTITY)
    np.testing.assert_allclose(buffer.lookup("odom", "base", 160 * S + S // 20).translation,
                               [5.5, 0, 0])
    # A clock at 0 (sim time before /clock) checks nothing.
    now[0] = 0
    assert buffer.set_transform("odom", "other", 10_000 * S, (0, 0, 0), IDENTITY)


def test_refusals_are_counted_by_kind():
    buffer = TfBuffer(max_frames=1, now_ns=lambda: S)
    buffer.set_transform("r", "a", 0, (0, 0, 0), IDENTITY, static=True)
    buffer.set_transform("r", "b", 0, (0, 0, 0), IDENTITY, static=True)  # over the cap
    buffer.set_transform("r", "a", 0, (math.inf, 0, 0), IDENTITY)
    buffer.set_transform("r", "a", 100 * S, (0, 0, 0), IDENTITY)
    stats = buffer.stats()
    assert stats.refused == {"names": 0, "malformed": 1, "denormalized": 0, "future": 1,
                             "frame_cap": 1}
    assert stats.refused_total == 3
    assert set(stats.last_by_kind) == {"malformed", "future", "frame_cap"}


def test_a_link_dropping_its_oldest_one_by_one_keeps_exact_samples():
    # Samples leave from the front as they arrive (a moving start, compacted when half dead):
    # every lookup still lands on the samples a plain list would hold, in and out of order.
    rng = np.random.default_rng(3)
    buffer = TfBuffer(cache_s=0.05, max_samples_per_link=40)
    kept: dict[int, float] = {}
    for k in range(600):
        stamp = k * 1_000_000 + int(rng.integers(-3, 1)) * 1_000_000  # some a little late
        buffer.set_transform("odom", "base", stamp, (stamp / 1e9, 0, 0), IDENTITY)
        kept[stamp] = stamp / 1e9
        newest = max(kept)
        window = sorted(s for s in kept if s >= newest - 50_000_000)[-40:]
        kept = {s: kept[s] for s in window}
        assert buffer.stats().samples == len(kept)
        probe = window[len(window) // 2]
        np.testing.assert_allclose(buffer.lookup("odom", "base", probe).translation,
                                   [kept[probe], 0, 0], atol=1e-12)
