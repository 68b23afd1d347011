"""ConceptsRunner without ROS: newest-only frames, the rate limit, a changed list, failures, and
the priority of the agent over concept passes with a slow segmenter."""

from __future__ import annotations

import threading
import time

from sam3_agent_demo import sample
from sam3_agent_ros.concepts import SegmenterGate, StandingConcepts
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.pipeline.concepts_runner import ConceptsRunner
from sam3_agent_ros.segmenters.color import ColorSegmenter
from test.pipeline.runner_support import Collected, Msg, frame_converter
from test.waiting import TIMEOUT_S, wait_until

RGB = sample.render_frame(0.0).rgb
to_frame = frame_converter(RGB)


class SlowSegmenter(ColorSegmenter):
    """The colour segmenter, ``delay_s`` per phrase; logs (who, start, end) of every call;
    ``hold`` (when given) blocks each call until the test sets it."""

    def __init__(self, delay_s: float = 0.0, hold: threading.Event | None = None):
        super().__init__()
        self.delay_s, self.hold = delay_s, hold
        self.log: list[tuple[str, float, float]] = []
        self.entered = threading.Event()
        self.fail = False

    def segment(self, image, text_prompt):
        started = time.monotonic()
        self.entered.set()
        if self.hold is not None:
            assert self.hold.wait(TIMEOUT_S), "the test never released the segmenter"
        if self.fail:
            raise SegmenterError("simulated failure")
        time.sleep(self.delay_s)
        out = super().segment(image, text_prompt)
        self.log.append((threading.current_thread().name, started, time.monotonic()))
        return out


class Published(Collected):
    """The concepts publisher: ``items`` = the results in order."""

    def __call__(self, result) -> None:
        self.add(result)


def make_runner(segmenter, prompts=("blue object",), rate_hz: float = 100.0,
                convert=to_frame):
    concepts = StandingConcepts(prompts)
    gate = SegmenterGate(segmenter)
    published = Published()
    runner = ConceptsRunner(concepts=concepts, gate=gate, to_frame=convert, publish=published,
                            rate_hz=rate_hz)
    runner.start()
    return runner, concepts, gate, published


def test_a_slow_segmenter_drops_frames_and_takes_the_newest():
    hold = threading.Event()
    segmenter = SlowSegmenter(hold=hold)
    runner, _, _, published = make_runner(segmenter)
    try:
        runner.offer(Msg(1))
        assert segmenter.entered.wait(TIMEOUT_S)
        for sec in range(2, 12):  # the pass on frame 1 is still running
            runner.offer(Msg(sec))
        hold.set()
        wait_until(lambda: len(published.items) >= 2, "two passes")
        assert [r.frame.stamp_sec for r in published.items[:2]] == [1, 11]
        assert runner.stats.dropped == 9
        assert [d.id for d in published.items[1].detections] == [1, 2]  # same objects, same ids
    finally:
        assert runner.shutdown(TIMEOUT_S)


def test_no_concepts_no_pass_and_the_rate_bounds_the_passes():
    segmenter = SlowSegmenter()
    starts: list[float] = []  # a pass converts its frame first thing

    def converting(msg: Msg) -> Frame:
        starts.append(time.monotonic())
        return to_frame(msg)

    runner, concepts, _, published = make_runner(segmenter, prompts=(), rate_hz=4.0,
                                                 convert=converting)
    try:
        runner.offer(Msg(1))
        time.sleep(0.3)
        assert published.items == [] and segmenter.log == []
        concepts.set_prompts(["blue object"])
        stop = threading.Event()

        def camera():
            sec = 1
            while not stop.is_set():
                sec += 1
                runner.offer(Msg(sec))
                stop.wait(0.02)

        feeder = threading.Thread(target=camera, daemon=True)
        started = time.monotonic()
        feeder.start()
        time.sleep(1.6)
        stop.set()
        feeder.join(TIMEOUT_S)
        elapsed = time.monotonic() - started
        # at most one pass per 1/4 s (a loaded machine gives fewer, never more)
        assert 1 <= len(starts) <= int(elapsed * 4.0) + 1
        assert all(b - a >= 0.25 - 0.01 for a, b in zip(starts, starts[1:]))
    finally:
        assert runner.shutdown(TIMEOUT_S)


def test_a_pass_of_a_list_changed_meanwhile_is_dropped_and_ids_restart():
    hold = threading.Event()
    segmenter = SlowSegmenter(hold=hold)
    runner, concepts, _, published = make_runner(segmenter, prompts=("blue object",))
    try:
        runner.offer(Msg(1))
        assert segmenter.entered.wait(TIMEOUT_S)
        concepts.set_prompts(["red object", "blue object"])
        runner.offer(Msg(2))
        hold.set()
        wait_until(lambda: published.items, "a pass with the new list")
        (result,) = published.items
        assert result.frame.stamp_sec == 2 and result.generation == 2
        assert [(d.concept, d.id) for d in result.detections] == [
            ("red object", 1), ("red object", 2), ("blue object", 3), ("blue object", 4)]
        assert runner.stats.stale == 1
    finally:
        assert runner.shutdown(TIMEOUT_S)


def test_unusable_frames_and_segmenter_failures_are_counted_and_the_thread_goes_on():
    segmenter = SlowSegmenter()
    runner, _, _, published = make_runner(segmenter)
    try:
        runner.offer(Msg(1, bad=True))
        wait_until(lambda: runner.stats.unusable == 1, "the unusable frame")
        segmenter.fail = True
        runner.offer(Msg(2))
        wait_until(lambda: runner.stats.failed == 1, "the failed pass")
        segmenter.fail = False
        runner.offer(Msg(3))
        wait_until(lambda: published.items, "a pass after the failures")
        assert published.items[0].frame.stamp_sec == 3
    finally:
        assert runner.shutdown(TIMEOUT_S)


def test_the_agent_waits_at_most_for_the_concept_pass_running_when_it_asks():
    """A slow segmenter (0.1 s a phrase, 3 concepts: 0.3 s a pass), concept passes back to back on
    a camera's frames, and agent segment calls at various moments: no concept pass starts
    between an agent's request and its call, and the agent's wait ends with the pass that held
    the segmenter when it asked."""
    prompts = ("blue object", "red object", "green object")
    segmenter = SlowSegmenter(delay_s=0.1)
    runner, _, gate, published = make_runner(segmenter, prompts=prompts, rate_hz=100.0)
    stop = threading.Event()

    def camera():
        sec = 0
        while not stop.is_set():
            sec += 1
            runner.offer(Msg(sec))
            stop.wait(0.03)

    feeder = threading.Thread(target=camera, name="camera", daemon=True)
    feeder.start()
    waits = []
    try:
        wait_until(lambda: len(published.items) >= 2, "concept passes running")
        for delay in (0.0, 0.05, 0.13, 0.21, 0.29):
            time.sleep(delay)
            asked = time.monotonic()
            gate.first.segment(RGB, "yellow object")
            waits.append((asked, time.monotonic()))
            time.sleep(0.05)  # let a concept pass start again
    finally:
        stop.set()
        feeder.join(TIMEOUT_S)
        assert runner.shutdown(TIMEOUT_S)
    log = sorted(segmenter.log, key=lambda entry: entry[1])
    concept_calls = [(s, e) for who, s, e in log if who == "sam3_agent_concepts"]
    agent_calls = [(s, e) for who, s, e in log if who != "sam3_agent_concepts"]
    assert len(agent_calls) == len(waits) == 5
    # concept passes: consecutive runs of 3 calls of the concepts thread
    passes = [(concept_calls[i][0], concept_calls[i + 2][1])
              for i in range(0, len(concept_calls) - 2, 3)]
    assert len(concept_calls) % 3 == 0 and len(passes) >= 2
    pass_s = max(end - start for start, end in passes)
    for (asked, _), (call_start, _) in zip(waits, agent_calls):
        assert not [p for p in passes if asked < p[0] < call_start], \
            "a concept pass started while the agent waited"
        running = [p for p in passes if p[0] <= asked < p[1]]
        if running:
            assert call_start >= running[0][1]  # it waited for that pass to end, no more
        # generous bound for a loaded machine: the wait is at most about one pass
        assert call_start - asked <= pass_s + 1.0
    assert runner.stats.passes >= 2
