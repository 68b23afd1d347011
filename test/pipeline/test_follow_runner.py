"""FollowRunner without ROS: newest-only frames, one final status per follow, stops."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from sam3_agent_ros.core.types import Frame
from sam3_agent_ros.follow import FollowedObject, FollowUpdate
from sam3_agent_ros.pipeline.follow_runner import FollowRunner, status_json
from test.pipeline.runner_support import Collected, Msg, frame_converter, running
from test.waiting import TIMEOUT_S, wait_until

to_frame = frame_converter(np.zeros((4, 6, 3), np.uint8))


def visible(index: int = 0) -> FollowedObject:
    mask = np.zeros((4, 6), bool)
    mask[1:3, 2:4] = True
    return FollowedObject(mask=mask, bbox=(2, 1, 4, 3), centroid=(2.5, 1.5), confidence=0.9,
                          index=index)


class FakeSession:
    """Answers ``tracking`` unless told otherwise; ``gate`` (when given) holds each update until
    the test releases it. Fails loudly on an update after stop()."""

    mode = "flow"

    def __init__(self, states: dict[int, str] | None = None, gate: threading.Event | None = None):
        self.states = states or {}
        self.gate = gate
        self.seen: list[float] = []
        self.stopped = False
        self.entered = threading.Event()

    def update(self, rgb, now_s):
        assert not self.stopped, "update after stop()"
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(TIMEOUT_S), "the test never released the update"
        self.seen.append(now_s)
        state = self.states.get(int(now_s), "tracking")
        objects = [visible(1)] if state == "tracking" else []
        return FollowUpdate(state=state, source="flow", objects=objects,
                            reground=state == "lost")

    def stop(self):
        self.stopped = True
        return FollowUpdate(state="stopped", source="flow")


class Recorder(Collected):
    """The follow publisher: ``calls`` = (frame, masks, status) per update."""

    def __call__(self, frame, masks, status):
        self.add((frame, masks, status))

    @property
    def calls(self) -> list[tuple]:
        return self.items

    def wait(self, predicate, what):
        """Until ``predicate(the statuses published)`` holds."""
        self.wait_for(lambda _: predicate(self.statuses()), what, self.statuses)

    def statuses(self):
        return [c[2] for c in self.calls]


@pytest.fixture
def runner():
    published = Recorder()
    regrounds: list[tuple] = []
    with running(FollowRunner(to_frame=to_frame, publish=published,
                              on_reground=lambda qid, text: regrounds.append((qid, text)))
                 ) as made:
        made.published, made.regrounds = published, regrounds
        yield made


def test_frames_are_followed_after_the_answer_frame_with_labels_kept(runner):
    session = FakeSession()
    runner.follow("q-1", session, 2, Frame(np.zeros((4, 6, 3), np.uint8), 10, 0, "cam"), "x")
    runner.offer(Msg(11))
    runner.published.wait(lambda s: len(s) == 1, "one update")
    frame, masks, status = runner.published.calls[0]
    assert frame.stamp_sec == 11 and masks[0] is None and masks[1] is not None
    assert status["state"] == "tracking" and status["query_id"] == "q-1"
    assert status["objects"][0]["id"] == 2 and status["frame"] == {"sec": 11, "nanosec": 0}
    assert status["latency_ms"] >= 0 and status["mode"] == "flow"
    assert runner.following == "q-1"


def test_a_busy_tracker_sees_only_the_newest_frame(runner):
    gate = threading.Event()
    session = FakeSession(gate=gate)
    runner.follow("q-1", session, 1, None)
    runner.offer(Msg(1))
    assert session.entered.wait(TIMEOUT_S)
    for sec in range(2, 7):  # arrive while frame 1 is processed
        runner.offer(Msg(sec))
    gate.set()
    runner.published.wait(lambda s: len(s) == 2, "two updates")
    assert [call[0].stamp_sec for call in runner.published.calls] == [1, 6]
    assert len(session.seen) == 2 and runner.stats.dropped == 4


def test_end_publishes_one_stopped_and_ignores_later_frames(runner):
    session = FakeSession()
    runner.follow("q-1", session, 1, None)
    assert runner.end("stop_follow") == "q-1"
    assert runner.end("again") is None
    runner.offer(Msg(3))
    runner.published.wait(lambda s: len(s) == 1, "the stopped status")
    assert runner.wait_idle(TIMEOUT_S)
    status = runner.published.statuses()[0]
    assert status["state"] == "stopped" and status["reason"] == "stop_follow"
    assert session.stopped and session.seen == [] and runner.following is None


def test_an_end_during_a_frame_drops_that_frames_update(runner):
    gate = threading.Event()
    session = FakeSession(gate=gate)
    runner.follow("q-1", session, 1, None)
    runner.offer(Msg(1))
    assert session.entered.wait(TIMEOUT_S)
    runner.end("new query q-2")
    gate.set()
    assert runner.wait_idle(TIMEOUT_S)
    runner.published.wait(lambda s: [x["state"] for x in s] == ["stopped"], "only stopped")


def test_lost_is_final_and_asks_for_a_reground(runner):
    session = FakeSession(states={2: "lost"})
    runner.follow("q-1", session, 1, None, text="the blue box")
    runner.offer(Msg(1))
    runner.published.wait(lambda s: len(s) == 1, "tracking")
    runner.offer(Msg(2))
    runner.published.wait(lambda s: len(s) == 2, "lost")
    assert runner.published.statuses()[1]["state"] == "lost"
    assert runner.regrounds == [("q-1", "the blue box")]
    assert runner.following is None
    runner.offer(Msg(3))
    assert runner.end("late") is None and runner.wait_idle(TIMEOUT_S)
    assert len(runner.published.calls) == 2  # nothing after lost


def test_a_new_follow_stops_the_previous_one_and_bad_frames_are_skipped(runner):
    first, second = FakeSession(), FakeSession()
    runner.follow("q-1", first, 1, None)
    runner.follow("q-2", second, 1, None)
    runner.offer(Msg(5, bad=True))
    runner.published.wait(lambda s: len(s) == 1, "the first follow's stopped")
    wait_until(lambda: runner.stats.unusable == 1, "the bad frame to be refused")
    assert second.seen == []
    runner.offer(Msg(6))
    runner.published.wait(lambda s: len(s) == 2, "the second follow's update")
    states = [(s["query_id"], s["state"]) for s in runner.published.statuses()]
    assert states == [("q-1", "stopped"), ("q-2", "tracking")]
    assert "replaced by the follow of q-2" in runner.published.statuses()[0]["reason"]


def test_a_decompression_bomb_on_the_image_topic_is_skipped_undecoded_while_following():
    """Follow mode converts frames with the node's converter (FrameReader, the
    max_image_pixels cap): the bomb is skipped from its header, the follow goes on."""
    import cv2
    from sensor_msgs.msg import CompressedImage

    from sam3_agent_ros.ros.conversions import FrameReader
    from test.fakes.image_bombs import png_bomb

    def compressed(data: bytes, sec: int) -> CompressedImage:
        msg = CompressedImage(format="png")
        msg.data, msg.header.stamp.sec, msg.header.frame_id = data, sec, "cam"
        return msg

    published = Recorder()
    runner = FollowRunner(to_frame=FrameReader(40_000_000).frame, publish=published)
    with running(runner):
        session = FakeSession()
        runner.follow("q-1", session, 1, None)
        runner.offer(compressed(png_bomb(20_000, 20_000), 5))
        wait_until(lambda: runner.stats.unusable == 1, "the bomb to be refused")
        assert session.seen == [] and published.calls == []
        runner.offer(compressed(cv2.imencode(".png", np.zeros((4, 6, 3), np.uint8))[1]
                                .tobytes(), 6))
        published.wait(lambda s: len(s) == 1, "the next frame followed")
        assert session.seen == [6.0]


def test_shutdown_stops_the_follow_and_a_publisher_failure_does_not_kill_the_thread():
    calls = []

    def failing(frame, masks, status):
        calls.append(status["state"])
        raise RuntimeError("publisher gone")

    runner = FollowRunner(to_frame=to_frame, publish=failing)
    runner.start()
    runner.follow("q-1", FakeSession(), 1, None)
    runner.offer(Msg(1))
    wait_until(lambda: calls == ["tracking"], "the first update")
    runner.offer(Msg(2))
    wait_until(lambda: len(calls) == 2, "the second update: the thread survived")
    assert runner.shutdown(TIMEOUT_S)
    assert calls == ["tracking", "tracking", "stopped"]


def test_status_json_rounds_and_numbers_objects():
    status = status_json("q", "redetect", "tracking", "redetect",
                         Frame(np.zeros((2, 2, 3), np.uint8), 3, 4, "cam"), 1.23456,
                         [visible(0)], None)
    assert status["objects"] == [{"id": 1, "bbox": [2.0, 1.0, 4.0, 3.0], "centroid": [2.5, 1.5],
                                  "confidence": 0.9}]
    assert status["latency_ms"] == 1.23 and status["frame_id"] == "cam"


# --- frame order by arrival (issue 25: zero, equal, backwards and future stamps) ---------------


class StepClock:
    """A clock the test moves: each offer() reads it as the frame's arrival time."""

    def __init__(self, start: float = 100.0):
        self.now = start

    def __call__(self) -> float:
        return self.now


def answer_frame(sec: int) -> Frame:
    return Frame(np.zeros((4, 6, 3), np.uint8), sec, 0, "cam")


def offer_each(runner, clock: StepClock, secs, step_s: float = 0.1) -> None:
    """Offer frames one at a time (each waited for), ``step_s`` apart by arrival."""
    for sec in secs:
        count = len(runner.published.calls)
        clock.now += step_s
        runner.offer(Msg(sec))
        runner.published.wait(lambda s, n=count: len(s) == n + 1, f"the update of frame {sec}")


@pytest.fixture
def clocked():
    clock = StepClock()
    published = Recorder()
    with running(FollowRunner(to_frame=to_frame, publish=published, clock=clock)) as made:
        made.published, made.clock = published, clock
        yield made


def test_zero_stamps_are_followed_in_arrival_order(clocked):
    """A camera without a clock: every frame stamped 0, like the answer's frame."""
    session = FakeSession()
    clocked.follow("q-1", session, 1, answer_frame(0))
    offer_each(clocked, clocked.clock, [0, 0, 0, 0])
    assert [s["state"] for s in clocked.published.statuses()] == ["tracking"] * 4
    assert session.seen == pytest.approx([0.1, 0.2, 0.3, 0.4])  # session time: arrival steps


def test_after_one_frame_stamped_in_the_future_later_frames_are_followed(clocked):
    session = FakeSession()
    clocked.follow("q-1", session, 1, answer_frame(10))
    offer_each(clocked, clocked.clock, [10 ** 9, 11, 12])
    assert [s["state"] for s in clocked.published.statuses()] == ["tracking"] * 3
    # the future stamp is a clock jump (its arrival step counts), 11 is backwards (arrival
    # step), 12 is one second after 11 (its stamp step)
    assert session.seen == pytest.approx([10.1, 10.2, 11.2])


def test_an_answer_stamped_in_the_future_is_still_followed(clocked):
    session = FakeSession()
    clocked.follow("q-1", session, 1, answer_frame(10 ** 9))
    offer_each(clocked, clocked.clock, [11, 12])
    assert [s["state"] for s in clocked.published.statuses()] == ["tracking"] * 2
    assert session.seen == pytest.approx([10 ** 9 + 0.1, 10 ** 9 + 1.1])


def test_a_bag_replayed_in_a_loop_is_followed_across_the_jump_back(clocked):
    session = FakeSession()
    clocked.follow("q-1", session, 1, answer_frame(5))
    offer_each(clocked, clocked.clock, [6, 7, 1, 2, 2])
    assert len(clocked.published.statuses()) == 5
    assert session.seen == pytest.approx([6.0, 7.0, 7.1, 8.1, 8.2])  # never backwards


def test_zero_stamps_a_real_session_goes_lost_when_the_object_is_taken_away():
    """The grasp sequence with every frame stamped 0 (arrival 0.1 s apart): tracking while
    blue_box stands there, then ``lost`` (the lost clock runs on arrival time)."""
    from sam3_agent_demo.moving_scene import GRASPED_OBJECT, GraspSequence
    from sam3_agent_ros.config import Config
    from sam3_agent_ros.follow import FollowSession
    from sam3_agent_ros.segmenters.color import ColorSegmenter

    sequence = GraspSequence(put_back_at=None, n_frames=40)
    frames = list(sequence)
    images = {}

    def frame_of(msg):
        return Frame(images[msg.sec], 0, 0, "cam")

    clock, published = StepClock(), Recorder()
    runner = FollowRunner(to_frame=frame_of, publish=published, clock=clock)
    with running(runner):
        config = Config().follow
        session = FollowSession(config, ColorSegmenter(), frames[0].rgb,
                                [frames[0].masks[GRASPED_OBJECT]], "blue", now_s=0.0)
        runner.follow("q-1", session, 1, Frame(frames[0].rgb, 0, 0, "cam"))
        for index, frame in enumerate(frames[1:], start=1):
            if runner.following is None:
                break
            images = {0: frame.rgb}
            count = len(published.calls)
            clock.now += 0.1
            runner.offer(Msg(0))
            published.wait(lambda s, n=count: len(s) == n + 1, f"the update of frame {index}")
        states = [s["state"] for s in published.statuses()]
    assert states[:sequence.removed_at - 1] == ["tracking"] * (sequence.removed_at - 1), states
    assert states[-1] == "lost", states
    lost_at = len(states)  # the frame index of the lost update
    assert lost_at - sequence.removed_at <= 20, states  # within lost_timeout_s + a period


# --- the watchdog: a follow that publishes nothing for lost_timeout_s goes lost ---------------


def test_a_follow_without_any_usable_frame_goes_lost_after_lost_timeout():
    published = Recorder()
    runner = FollowRunner(to_frame=to_frame, publish=published, lost_timeout_s=0.2)
    with running(runner):
        session = FakeSession()
        runner.follow("q-1", session, 2, answer_frame(10))
        runner.offer(Msg(11, bad=True))  # only unusable frames: no update
        published.wait(lambda s: len(s) == 1, "the watchdog's lost")
        status = published.statuses()[0]
        assert status["state"] == "lost" and status["objects"] == []
        assert "no update for" in status["reason"] and "follow.lost_timeout_s" in status["reason"]
        assert status["frame"] == {"sec": 10, "nanosec": 0}  # the last frame followed
        assert published.calls[0][1] == [None, None]
        assert runner.following is None and session.seen == []
        runner.offer(Msg(12))
        assert runner.wait_idle(TIMEOUT_S)
        assert len(published.calls) == 1  # lost is final
    assert len(published.calls) == 1  # no stopped after lost


def test_the_watchdog_counts_from_the_last_update():
    published = Recorder()
    runner = FollowRunner(to_frame=to_frame, publish=published, lost_timeout_s=0.3)
    with running(runner):
        runner.follow("q-1", FakeSession(), 1, None)
        runner.offer(Msg(1))
        published.wait(lambda s: [x["state"] for x in s] == ["tracking"], "the update")
        published.wait(lambda s: [x["state"] for x in s] == ["tracking", "lost"],
                       "the watchdog's lost after the update")


def test_the_first_step_from_the_answer_counts_the_query_time(clocked):
    """The answer's frame arrived about ``answer_age_s`` before following began: the stamp step
    to the first frame (the query's duration) is real time, no clock jump."""
    session = FakeSession()
    clocked.follow("q-1", session, 1, answer_frame(10), answer_age_s=2.0)
    offer_each(clocked, clocked.clock, [12], step_s=0.0)
    assert session.seen == pytest.approx([12.0])
