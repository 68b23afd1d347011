"""SegmenterGate: the agent and follow mode first, concept passes in between (no ROS)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sam3_agent_ros.concepts.gate import CONCEPTS, FIRST, PassAbandoned, SegmenterGate
from test.fakes.segmenters import BoxSegmenter
from test.waiting import TIMEOUT_S, wait_until

IMAGE = np.zeros((40, 60, 3), np.uint8)


def start(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_first_caller_waits_for_the_running_pass_only_and_no_new_pass_starts_before_it():
    gate = SegmenterGate(BoxSegmenter({"thing": [(1, 1, 5, 5, 0.9)]}))
    order: list[str] = []
    release_pass = threading.Event()

    def first_pass():
        with gate.concept_pass():
            order.append("pass 1")
            assert release_pass.wait(TIMEOUT_S)

    def agent():
        gate.first.segment(IMAGE, "thing")
        order.append("agent")

    def second_pass():
        with gate.concept_pass():
            order.append("pass 2")

    threads = [start(first_pass)]
    wait_until(lambda: gate.holder == CONCEPTS, "the first pass to hold the segmenter")
    threads.append(start(agent))
    wait_until(lambda: gate.first_waiting == 1, "the agent to wait")
    threads.append(start(second_pass))
    threading.Event().wait(0.2)  # the second pass had time to start, were it allowed to
    assert order == ["pass 1"]
    release_pass.set()
    for thread in threads:
        thread.join(TIMEOUT_S)
    assert order == ["pass 1", "agent", "pass 2"]
    assert gate.holder is None


def test_first_calls_are_the_segmenter_s_own():
    inner = BoxSegmenter({"thing": [(1, 1, 5, 5, 0.9)]}, untrained_weights=True)
    gate = SegmenterGate(inner)
    found = gate.first.segment(IMAGE, "thing")
    assert found.scores.tolist() == [0.9]
    many = gate.first.segment_many(IMAGE, ["thing", "nothing"])
    assert [len(d.scores) for d in many] == [1, 0]
    assert inner.calls == ["thing", "thing", "nothing"]
    assert gate.first.untrained_weights is True  # attributes are the segmenter's
    with pytest.raises(AttributeError):
        gate.first.close  # noqa: B018 (BoxSegmenter has no close: neither has the view)


def test_the_holder_is_released_when_the_call_raises():
    class Failing:
        def segment(self, image, text_prompt):
            raise RuntimeError("simulated")

    gate = SegmenterGate(Failing())
    with pytest.raises(RuntimeError):
        gate.first.segment(IMAGE, "x")
    assert gate.holder is None
    with pytest.raises(RuntimeError), gate.concept_pass():
        raise RuntimeError("inside a pass")
    assert gate.holder is None


def test_a_waiting_pass_gives_up_when_its_runner_stops():
    gate = SegmenterGate(BoxSegmenter({}))
    release = threading.Event()
    stop = threading.Event()
    outcome: list[str] = []

    def agent():
        gate.run_first(lambda: release.wait(TIMEOUT_S))

    def waiting_pass():
        try:
            with gate.concept_pass(stopped=stop.is_set):
                outcome.append("ran")
        except PassAbandoned:
            outcome.append("abandoned")

    holder = start(agent)
    wait_until(lambda: gate.holder == FIRST, "the agent to hold the segmenter")
    passer = start(waiting_pass)
    stop.set()
    passer.join(TIMEOUT_S)
    assert outcome == ["abandoned"]
    release.set()
    holder.join(TIMEOUT_S)
