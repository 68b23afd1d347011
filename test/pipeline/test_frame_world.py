"""The world of a colour frame (CONTRACTS §11): the depth ring bounded in count and bytes, the
pin of a stamp's depth frame, the transform of the stamp bound when a query takes its frame and
used however late the answer is measured (a TF buffer that forgets after 10 s, an arm that moves).
Pure, with fake ports."""

from __future__ import annotations

import dataclasses
import gc

import numpy as np

from sam3_agent_ros.core.answers import AnswerStore
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
from sam3_agent_ros.frames import Transform
from sam3_agent_ros.pipeline.frame_world import (
    MAX_OPEN_PINS,
    DepthRing,
    FrameWorld,
    bind_target,
    world_of,
)
from sam3_agent_ros.pipeline.measurement import measure_answer
from sam3_agent_ros.pipeline.query_life import QueryLife, QueryParts
from sam3_agent_ros.pipeline.target_frame import TargetFrameRequest
from test.pipeline.depth_doubles import CountingDepth

MS = 1_000_000
S = 1_000_000_000


# --- the ring ---------------------------------------------------------------------------------
def test_the_ring_is_bounded_in_count_and_in_bytes_and_refuses_a_frame_over_its_budget():
    ring = DepthRing(max_count=30, max_bytes=3_000, close_after_ns=50 * MS)
    for k in range(10):
        assert ring.add(k * 33 * MS, 1_000, f"d{k}") is None
    assert len(ring) == 3 and ring.kept_bytes == 3_000  # bytes bound: the newest three
    assert ring.messages() == ["d7", "d8", "d9"]
    reason = ring.add(400 * MS, 3_001, "huge")
    assert reason == "a depth frame of 0.0 MiB is over depth.buffer_mib=0.00286102 MiB"
    assert ring.messages() == ["d7", "d8", "d9"] and ring.refused == 1
    by_count = DepthRing(max_count=2, max_bytes=10**9)
    for k in range(5):
        by_count.add(k, 10, k)
    assert by_count.messages() == [3, 4]
    ring.clear()
    assert len(ring) == 0 and ring.kept_bytes == 0


def test_a_pin_keeps_the_nearest_frame_after_the_ring_forgot_it():
    ring = DepthRing(max_count=30, max_bytes=10**9, close_after_ns=50 * MS)
    ring.add(1 * S - 30 * MS, 10, "before")
    pin = ring.pin(1 * S)
    assert pin.best is not None and pin.best.message == "before"
    ring.add(1 * S + 2 * MS, 10, "just after")  # the stamp's own depth arrives next: taken
    ring.add(1 * S + 40 * MS, 10, "later")
    assert pin.best.message == "just after" and pin.distance_ns() == 2 * MS
    for k in range(100):  # three seconds at 30 Hz: the ring forgets, the pin does not
        ring.add(1 * S + 100 * MS + k * 33 * MS, 10, f"new{k}")
    assert "just after" not in ring.messages()
    assert pin.best.message == "just after" and pin.nbytes == 10
    same = DepthRing(max_count=30, max_bytes=10**9)
    same.add(5, 1, "first")
    same.add(5, 1, "re-sent")  # equal stamps: the newer one wins
    assert same.pin(5).best.message == "re-sent"


def test_open_pins_are_bounded_and_go_with_their_frames():
    ring = DepthRing(max_count=30, max_bytes=10**9, close_after_ns=50 * MS)
    pins = [ring.pin(k) for k in range(MAX_OPEN_PINS + 10)]
    assert len(ring._open) == MAX_OPEN_PINS
    del pins
    gc.collect()
    ring.add(0, 1, "d")
    assert ring._open == []  # nobody holds them: dropped
    assert ring.pin(10 * S, keep_open=False).best.message == "d" and ring._open == []


# --- the transform at the colour stamp, bound at take time ------------------------------------
class ForgetfulTf:
    """A TF buffer of a moving arm that keeps ``cache_s`` (10 s, as tf2) before its newest
    sample: the transform at stamp t is a shift of t seconds along x (the arm moves 1 m/s)."""

    def __init__(self, cache_s: float = 10.0):
        self.newest_ns = 0
        self.cache_ns = int(cache_s * S)
        self.calls: list[tuple[int, float]] = []

    def lookup(self, target, source, stamp_ns, timeout_s):
        self.calls.append((stamp_ns, timeout_s))
        if stamp_ns > self.newest_ns or stamp_ns < self.newest_ns - self.cache_ns:
            return None, f"no transform at {stamp_ns} (newest {self.newest_ns})"
        return Transform(np.array([stamp_ns / S, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 1.0])), ""


def _frame(stamp_ns: int) -> Frame:
    return Frame(np.zeros((4, 6, 3), np.uint8), stamp_ns // S, stamp_ns % S, "camera")


def _result(frame: Frame, query_id: str = "q") -> Result:
    mask = Mask.from_array(np.ones((4, 6), bool), 0.9, (0, 0, 6, 4))
    return Result(query_id, "a box", QueryStatus.SUCCEEDED, masks=[mask], frame=frame)


def _life(depth, request, agent=None) -> QueryLife:
    life = QueryLife(lambda: {"llm": "fake"}, lambda: True, logger=None)  # type: ignore[arg-type]
    life.configure(QueryParts(agent=agent, outputs=None, runner=None,  # type: ignore[arg-type]
                              target_frame=request))
    life.depth = depth
    return life


def test_a_60_s_query_on_a_moving_arm_gets_the_transform_of_its_frame():
    """Bound when the query took its frame: 60 s later the TF buffer no longer has the stamp
    (it keeps 10 s), and the newest transform is 60 m off; the answer uses the stamp's. Without
    the binding (the transform looked up when the answer is measured), no target at all."""
    tf = ForgetfulTf()
    request = TargetFrameRequest("base_link", tf, timeout_s=0.2)
    life = _life(CountingDepth(), request)
    taken = 100 * S
    tf.newest_ns = taken + 20 * MS
    world = life.bind_world(taken, "camera")
    assert world is not None and world.target is not None and world.target.ok
    assert tf.calls == [(taken, 0.0)]  # at take time: what the buffer holds, no wait
    tf.newest_ns = taken + 60 * S  # the model thought for a minute; the arm moved on
    frame = dataclasses.replace(_frame(taken), world=world)
    answer = measure_answer(_result(frame), CountingDepth(), target_frame=request)
    target = answer.result.to_json()["masks"][0]["target"]
    assert target["position"] == {"x": 100.1, "y": -0.2, "z": 0.9}
    assert len(tf.calls) == 1  # not looked up again
    unbound = measure_answer(_result(_frame(taken)), CountingDepth(), target_frame=request)
    assert unbound.result.to_json()["masks"][0]["target"] is None


def test_a_transform_not_yet_in_the_buffer_is_waited_for_before_the_agent_runs():
    """The TF of a stamp usually arrives just after its image: not there at take time, found
    by the worker (waiting tf.timeout_s) before the agent thinks for a minute."""
    tf = ForgetfulTf()
    request = TargetFrameRequest("base_link", tf, timeout_s=0.2)
    seen = []

    class Agent:
        def run(self, frame, query, cancel, on_status):
            seen.append(world_of(frame).target)
            return _result(frame)

    life = _life(None, request, Agent())
    taken = 50 * S
    tf.newest_ns = taken - 10 * MS
    world = life.bind_world(taken, "camera")
    assert world is not None and world.target is None and "no transform" in world.target_reason
    tf.newest_ns = taken + 10 * MS
    from sam3_agent_ros.core.cancel import CancelToken
    from sam3_agent_ros.core.types import Query
    life.answer(dataclasses.replace(_frame(taken), world=world), Query("q", "x"),
                CancelToken(), lambda event: None)
    assert seen[0] is not None and seen[0].ok and tf.calls[-1] == (taken, 0.2)


def test_a_refinement_minutes_later_gets_the_kept_answers_world():
    """The kept answer keeps its frame's world: a refinement 120 s later (its frame is the
    answer's) gets the same target, and the store counts the world's bytes."""
    tf = ForgetfulTf()
    request = TargetFrameRequest("base_link", tf)
    taken = 10 * S
    tf.newest_ns = taken
    world = FrameWorld(taken, "camera")
    bind_target(world, request, 0.0)
    world.depth = type("Binding", (), {"nbytes": 614_400})()
    frame = dataclasses.replace(_frame(taken), world=world)
    store = AnswerStore(8, 2**30)
    store.remember(_result(frame, "q-1"))
    assert store.kept_bytes == frame.image.nbytes + 614_400 + 3  # + the packed mask
    tf.newest_ns = taken + 120 * S
    kept = store.find("q-1")
    refined = measure_answer(_result(kept.frame, "q-2"), CountingDepth(), target_frame=request)
    assert refined.result.to_json()["masks"][0]["target"]["position"]["x"] == 10.1


def test_without_depth_or_target_frame_nothing_is_bound():
    assert _life(None, None).bind_world(5, "camera") is None


def test_a_queued_query_gets_its_transform_as_later_frames_arrive():
    """With query_policy queue a query may wait long before it runs: its frame's transform,
    not yet in the buffer when it took the frame, is looked up again as frames arrive (without
    waiting), so it has it even if it runs after the buffer forgot that stamp."""
    tf = ForgetfulTf()
    life = _life(None, TargetFrameRequest("base_link", tf, timeout_s=0.2))
    taken = 20 * S
    tf.newest_ns = taken - 5 * MS
    world = life.bind_world(taken, "camera")
    assert world is not None and world.target is None
    life.settle_transforms(taken + 33 * MS)  # the next frame: still not there
    assert world.target is None
    tf.newest_ns = taken + 30 * MS
    life.settle_transforms(taken + 66 * MS)
    assert world.target is not None and world.target.transform.translation[0] == 20.0
    tf.newest_ns = taken + 40 * S  # it runs 40 s later: the bound transform is still there
    lookups = len(tf.calls)
    frame = dataclasses.replace(_frame(taken), world=world)
    answer = measure_answer(_result(frame), CountingDepth(), target_frame=life.target_frame)
    assert answer.target is world.target and len(tf.calls) == lookups  # not looked up again
    old = life.bind_world(taken, "camera")  # never found: given up past the buffer's 10 s
    tf.newest_ns = 0
    life.settle_transforms(taken + 11 * S)
    assert old is not None and old.target is None and life._awaiting_tf == []


def test_a_missing_transform_is_waited_for_once_per_query():
    """No transform at all: the worker waits tf.timeout_s for it before the agent runs; the
    answer's measurement looks again without waiting a second time."""
    tf = ForgetfulTf()
    request = TargetFrameRequest("base_link", tf, timeout_s=0.2)
    world = FrameWorld(30 * S, "camera")
    bind_target(world, request, 0.2)  # what QueryLife.answer does
    frame = dataclasses.replace(_frame(30 * S), world=world)
    answer = measure_answer(_result(frame), CountingDepth(), target_frame=request)
    assert answer.target is not None and not answer.target.ok
    assert [timeout for _, timeout in tf.calls] == [0.2, 0.0]
    assert answer.result.to_json()["masks"][0]["target"] is None
