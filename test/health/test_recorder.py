"""health/recorder.py: the node's health model, without ROS (a fake clock drives the recorder)."""

from __future__ import annotations

import time

import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError, LlmFailure
from sam3_agent_ros.core.types import LlmReply
from sam3_agent_ros.health import recorder as health
from sam3_agent_ros.health.follow import follow_started
from sam3_agent_ros.health.recorder import Level

TOPIC = "/robot/camera/image_raw"


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def recorder(clock):
    return health.HealthRecorder(clock)


def frames(recorder, max_frame_age_s=2.0):
    return health.frames_status(recorder.frames(max_frame_age_s))


def feed(recorder, clock, seconds, rate_hz=30.0, problem=None):
    for _ in range(round(seconds * rate_hz)):
        clock.advance(1.0 / rate_hz)
        recorder.frame(problem)


# --- frames ----------------------------------------------------------------------------------


def test_frames_go_from_waiting_to_ok_to_warn_to_error_as_the_camera_stops(recorder, clock):
    status = frames(recorder)
    assert status.level == Level.WARN and "not active" in status.message
    recorder.listening(TOPIC)
    clock.advance(0.5)
    status = frames(recorder)
    assert status.level == Level.OK and status.message.startswith(
        f"waiting for the first frame on {TOPIC}")
    clock.advance(4.0)
    status = frames(recorder)
    assert status.level == Level.ERROR
    assert status.message.startswith(f"no frame received on {TOPIC} in the 4.5 s since")

    feed(recorder, clock, 3.0)
    status = frames(recorder)
    assert status.level == Level.OK
    assert status.message.startswith(f"30.0 Hz on {TOPIC}, newest 0.00 s old")
    assert status.values["frames"] == "90" and status.values["topic"] == TOPIC

    clock.advance(1.5)  # a stall: more than half of max_frame_age_s
    status = frames(recorder)
    assert (status.level, status.message) == (Level.WARN, f"no frame for 1.5 s on {TOPIC}")
    clock.advance(3.7)
    status = frames(recorder)
    assert status.level == Level.ERROR
    assert status.message == (f"no frame for 5.2 s on {TOPIC} (queries need one newer than "
                              "max_frame_age_s=2 s)")
    assert status.values["rate_hz"] == ""  # no frame in the last 5 s


def test_the_rate_follows_the_camera_and_max_frame_age_0_waits_5_s(recorder, clock):
    recorder.listening(TOPIC)
    feed(recorder, clock, 10.0, rate_hz=30.0)
    feed(recorder, clock, 6.0, rate_hz=10.0)  # the window holds only the new rate
    assert recorder.frames(2.0).rate_hz == pytest.approx(10.0)
    clock.advance(2.0)
    assert frames(recorder, max_frame_age_s=0.0).level == Level.OK
    clock.advance(1.0)
    assert frames(recorder, max_frame_age_s=0.0).level == Level.WARN
    clock.advance(3.0)
    status = frames(recorder, max_frame_age_s=0.0)
    assert (status.level, status.message) == (Level.ERROR, f"no frame for 6.0 s on {TOPIC}")


def test_unusable_frames_are_an_error_that_says_why(recorder, clock):
    recorder.listening(TOPIC)
    feed(recorder, clock, 1.0, problem="unsupported image encoding 'yuv422'")
    status = frames(recorder)
    assert status.level == Level.ERROR
    assert status.message == (f"frames on {TOPIC} cannot be used: unsupported image encoding "
                              "'yuv422'")
    feed(recorder, clock, 0.1)
    assert frames(recorder).level == Level.OK


def test_a_new_subscription_starts_a_new_count(recorder, clock):
    recorder.listening(TOPIC)
    feed(recorder, clock, 1.0)
    recorder.not_listening()
    assert frames(recorder).level == Level.WARN
    recorder.listening("/other")
    seen = recorder.frames(2.0)
    assert (seen.count, seen.newest_age_s, seen.topic) == (0, None, "/other")


# --- the LLM endpoint ------------------------------------------------------------------------


def llm(recorder, backend="openai", timeout_s=60.0):
    return health.llm_status(recorder.llm(backend, "http://***@gpu:8000/v1", "qwen", timeout_s))


def test_the_endpoint_status_is_the_outcome_of_the_newest_call(recorder, clock):
    assert llm(recorder).message == "LLM endpoint http://***@gpu:8000/v1: no call yet"
    recorder.llm_call(True, 1.25)
    clock.advance(3.0)
    status = llm(recorder)
    assert (status.level, status.message) == (
        Level.OK, "LLM endpoint http://***@gpu:8000/v1: last call ok 3.0 s ago, 1.25 s")
    clock.advance(120.0)
    recorder.llm_call(False, 0.01, "cannot reach the LLM endpoint http://***@gpu:8000/v1 after "
                                   "3 attempts ([Errno 111] Connection refused): start the server "
                                   "or check llm.base_url; to try without a model: -p ...",
                      LlmFailure(LlmError.UNREACHABLE, "http://***@gpu:8000/v1", attempts=3,
                                 cause="[Errno 111] Connection refused"))
    status = llm(recorder)
    assert status.level == Level.ERROR
    assert status.message == (
        "LLM endpoint http://***@gpu:8000/v1 unreachable: [Errno 111] Connection refused "
        "(3 attempts, 0.0 s ago; last ok 2 min ago)")
    assert (status.values["calls"], status.values["failures"]) == ("2", "1")
    assert status.values["last_error"].endswith("to try without a model: -p ...")
    clock.advance(5.0)
    recorder.llm_call(False, 2.0, "HTTP 401 from http://***@gpu:8000/v1: invalid key")
    assert llm(recorder).message == (
        "LLM endpoint http://***@gpu:8000/v1: the last call failed 0.0 s ago: HTTP 401 from "
        "http://***@gpu:8000/v1: invalid key (last ok 2 min ago)")
    recorder.llm_call(True, 40.0)  # back, but slow
    status = llm(recorder)
    assert status.level == Level.WARN and "slow: the last call took 40.0 s" in status.message


def test_an_endpoint_that_never_answered_says_so_and_offline_has_none(recorder):
    recorder.llm_call(False, 0.5, "HTTP 401 from http://***@gpu:8000/v1: " + "x" * 1000)
    status = llm(recorder)
    assert status.level == Level.ERROR and status.message.endswith("(no call has succeeded yet)")
    assert len(status.message) < 400  # the error is clipped; the values keep more
    assert len(status.values["last_error"]) > 900
    offline = llm(recorder, backend="offline")
    assert offline.level == Level.OK and "no endpoint" in offline.message


class FakeLlm:
    def __init__(self, error: str | LlmError | None = None):
        self.error = error
        self.calls: list[tuple] = []

    def complete(self, messages, cancel, tools=None):
        self.calls.append((messages, tools))
        if isinstance(self.error, LlmError):
            raise self.error
        if self.error:
            raise LlmError(self.error)
        return LlmReply("ok")

    def encoder_for(self, cancel):
        return "encoder"


def test_observed_llm_records_each_call_but_not_a_cancelled_one(recorder, clock):
    observed = health.ObservedLlm(FakeLlm(), recorder)
    assert observed.complete([], CancelToken()).text == "ok"
    observed.complete([], CancelToken(), tools=[{"type": "function"}])
    assert observed.inner.calls[1][1] == [{"type": "function"}]
    assert observed.encoder_for(None) == "encoder"  # the rest of the client passes through
    seen = recorder.llm("openai", "u", "m", 60.0)
    assert (seen.calls, seen.failures, seen.last_ok) == (2, 0, True)

    failing = health.ObservedLlm(FakeLlm("HTTP 500 from http://user:secret@gpu/v1: boom"),
                                 recorder)
    with pytest.raises(LlmError):
        failing.complete([], CancelToken())
    seen = recorder.llm("openai", "u", "m", 60.0)
    assert (seen.calls, seen.failures, seen.last_ok) == (3, 1, False)
    assert "secret" not in seen.last_error and "http://***@gpu/v1" in seen.last_error

    cancelled = CancelToken()
    cancelled.cancel("preempted")
    expired = CancelToken(deadline=time.monotonic() - 1.0)  # the query's deadline passed
    for token in (cancelled, expired):
        with pytest.raises(LlmError):
            health.ObservedLlm(FakeLlm("cancelled"), recorder).complete([], token)
    assert recorder.llm("openai", "u", "m", 60.0).calls == 3


def test_an_endpoint_that_does_not_answer_is_a_warning_naming_it(recorder, clock):
    """Issue 25: a hung endpoint (connects, never answers) ended queries in "query timed out"
    while the status said OK: the call that ran out the query's time was not recorded. It is
    now, from the error's fields (kind, endpoint, attempts, how long it waited)."""
    hung = LlmError("the LLM endpoint http://***@gpu:8000/v1 did not answer within 60.0 s "
                    "(the query's deadline, agent.query_timeout_s) after 1 attempt",
                    kind=LlmError.TIMEOUT, endpoint="http://***@gpu:8000/v1", attempts=1,
                    waited_s=60.0)
    expired = CancelToken(deadline=time.monotonic() - 1.0)  # it waited out the query's time
    with pytest.raises(LlmError):
        health.ObservedLlm(FakeLlm(hung), recorder).complete([], expired)
    clock.advance(2.0)
    status = llm(recorder)
    assert status.level == Level.WARN
    assert status.message == ("LLM endpoint http://***@gpu:8000/v1 did not answer within 60.0 s "
                              "(1 attempt, 2.0 s ago; no call has succeeded yet): is the server "
                              "stuck or overloaded? (its log; llm.timeout_s)")
    assert (status.values["calls"], status.values["failures"]) == ("1", "1")
    # A deadline that had passed before the request was sent is not the endpoint's doing.
    late = LlmError("query deadline reached before the LLM request", kind=LlmError.DEADLINE)
    with pytest.raises(LlmError):
        health.ObservedLlm(FakeLlm(late), recorder).complete([], expired)
    assert recorder.llm("openai", "u", "m", 60.0).calls == 1


# --- segmenter, queries, follow --------------------------------------------------------------


@pytest.mark.parametrize("seen, level, message", [
    (health.SegmenterSeen("sam3", "configuring"), Level.WARN, "loading sam3 (configuring)"),
    (health.SegmenterSeen("sam3", "unconfigured"), Level.WARN,
     "not loaded: the node is unconfigured"),
    (health.SegmenterSeen("sam3", "unconfigured", configure_error="no SAM 3 checkpoint"),
     Level.ERROR, "not loaded: the last configure failed: no SAM 3 checkpoint"),
    (health.SegmenterSeen("sam3", "configured", "cuda:0", "bfloat16"), Level.OK,
     "sam3 loaded on cuda:0 (bfloat16)"),
    (health.SegmenterSeen("sam3", "configured", "cpu", "float32", untrained=True), Level.WARN,
     "sam3 loaded on cpu with random weights (segmenter.random_weights): its masks mean "
     "nothing"),
    (health.SegmenterSeen("color", "configured"), Level.OK,
     "colour demo segmenter (segmenter.backend color, CPU)"),
])
def test_segmenter_status(seen, level, message):
    status = health.segmenter_status(seen)
    assert (status.level, status.message) == (level, message)


@pytest.mark.parametrize("seen, level, message", [
    (health.QueueSeen(False, "preempt", 8, 0, None), Level.OK,
     "not accepting queries (the node is unconfigured)"),
    (health.QueueSeen(True, "preempt", 8, 0, None), Level.OK, "idle (query_policy preempt)"),
    (health.QueueSeen(True, "queue", 8, 2, "q-3"), Level.OK,
     "running q-3, 2 waiting (query_policy queue)"),
    (health.QueueSeen(True, "queue", 8, 6, "q-3"), Level.WARN,
     "queue nearly full: 6 of 8 places taken; running q-3"),
    (health.QueueSeen(True, "queue", 8, 8, "q-3"), Level.ERROR,
     "queue full: 8 queries waiting (queue_size=8), new queries are refused; running q-3"),
])
def test_queue_status(seen, level, message):
    status = health.queue_status(seen)
    assert (status.level, status.message) == (level, message)


def test_follow_status_tracks_the_newest_follow_update(recorder, clock):
    assert health.follow_status(recorder.follow()).message == "not following"
    recorder.follow_update({"query_id": "q-3", "state": "tracking",
                            "objects": [{"id": 1}, {"id": 2}], "reason": None})
    status = health.follow_status(recorder.follow())
    assert (status.level, status.message) == (Level.OK, "following q-3: tracking 2 object(s)")
    clock.advance(3.0)
    status = health.follow_status(recorder.follow())
    assert (status.level, status.message) == (
        Level.WARN, "following q-3: no update for 3.0 s (no usable frame, or the follow thread "
                    "is busy)")
    recorder.follow_update({"query_id": "q-3", "state": "lost", "objects": [],
                            "reason": "no followed object seen for follow.lost_timeout_s"})
    clock.advance(12.0)
    status = health.follow_status(recorder.follow())
    assert (status.level, status.message) == (
        Level.WARN, "lost q-3 12 s ago: no followed object seen for follow.lost_timeout_s")
    clock.advance(120.0)
    assert health.follow_status(recorder.follow()).level == Level.OK
    recorder.follow_update({"query_id": "q-4", "state": "stopped", "objects": [],
                            "reason": "new query q-5"})
    status = health.follow_status(recorder.follow())
    assert (status.level, status.message) == (
        Level.OK, "not following (q-4 stopped 0.0 s ago: new query q-5)")


# --- the snapshot of a node ------------------------------------------------------------------


def test_snapshot_of_a_node_reads_its_parameters_segmenter_and_queue(recorder):
    params = Config.from_params({"llm.base_url": "http://user:pass@gpu:8000/v1?api-key=K",
                                 "query_policy": "queue", "queue_size": 4}).to_params()

    class Segmenter:
        device, dtype = "cuda:1", "bfloat16"

    recorder.configuring()
    inputs = health.snapshot(recorder, params)
    assert [s.level for s in health.statuses(inputs)][2] == Level.WARN  # loading
    recorder.configured(True)
    inputs = health.snapshot(recorder, params, Segmenter(), (4, "q-9"))
    assert inputs.llm.endpoint == "http://***@gpu:8000/v1?api-key=***"
    names = [s.name for s in health.statuses(inputs)]
    assert names == ["frames", "LLM endpoint", "segmenter", "queries", "follow"]
    assert health.segmenter_status(inputs.segmenter).message == "sam3 loaded on cuda:1 (bfloat16)"
    assert health.queue_status(inputs.queue).level == Level.ERROR
    recorder.configured(False, "the API key variable OPENAI_API_KEY is not set")
    failed = health.segmenter_status(health.snapshot(recorder, params).segmenter)
    assert failed.level == Level.ERROR and "OPENAI_API_KEY is not set" in failed.message
    recorder.unconfigured()
    assert health.snapshot(recorder, params).segmenter.configure_error is None


@pytest.mark.parametrize("seconds, text", [(None, "?"), (0.04, "0.0 s"), (9.96, "10.0 s"),
                                           (42.4, "42 s"), (150, "2 min"), (9000, "2.5 h")])
def test_ago(seconds, text):
    assert health.ago(seconds) == text


def test_the_camera_model_status_appears_with_depth_and_warns_while_it_does_not_fit(
        recorder, clock):
    params = Config.from_params({}).to_params()
    assert recorder.camera_model() is None  # depth off: no such area
    assert "camera model" not in [s.name for s in health.statuses(
        health.snapshot(recorder, params))]
    recorder.camera_model_started()
    assert health.camera_model_status(recorder.camera_model()).message == "no 3D answer yet"
    recorder.camera_model_checked("unusable camera_info: camera_info is for 1280x720 images "
                                  "but the colour frame is 640x480\n[ERROR] x", "1280x720")
    clock.advance(3.0)
    statuses = health.statuses(health.snapshot(recorder, params))
    (status,) = [s for s in statuses if s.name == "camera model"]
    assert status.level == Level.WARN
    assert status.message.startswith("no 3D positions 3.0 s ago: unusable camera_info: ")
    assert "\n" not in status.message
    recorder.camera_model_checked(None, "640x480, fx=600 fy=600 cx=319.5 cy=239.5")
    status = health.camera_model_status(recorder.camera_model())
    assert status.level == Level.OK and "640x480, fx=600" in status.message
    recorder.camera_model_started(False)
    assert recorder.camera_model() is None

def test_a_follow_that_publishes_nothing_warns_and_is_never_not_following(recorder, clock):
    """Issue 25: a session exists but no ~/follow/status went out (frames unusable, none
    arriving): a WARN that says so, never "not following"."""
    recorder.follow_update({"query_id": "q-6", "state": "tracking", "objects": [{"id": 1}]})
    recorder.follow_update(follow_started("q-7"))
    status = health.follow_status(recorder.follow())
    assert (status.level, status.message) == (
        Level.OK, "following q-7: waiting for its first update")
    # the previous follow's final status may come after the new one began
    recorder.follow_update({"query_id": "q-6", "state": "stopped", "objects": [],
                            "reason": "replaced by the follow of q-7"})
    clock.advance(health.FOLLOW_QUIET_S + 1.0)
    status = health.follow_status(recorder.follow())
    assert status.level == Level.WARN
    assert status.message == ("following q-7: no update for 3.0 s since it began (no usable "
                              "frame, or the follow thread is busy)")
    assert status.values["state"] == "started" and status.values["query_id"] == "q-7"
    recorder.follow_update({"query_id": "q-7", "state": "tracking", "objects": [{"id": 1}]})
    status = health.follow_status(recorder.follow())
    assert (status.level, status.message) == (Level.OK, "following q-7: tracking 1 object(s)")
    clock.advance(health.FOLLOW_QUIET_S + 0.5)
    status = health.follow_status(recorder.follow())
    assert status.level == Level.WARN and "following q-7: no update for 2.5 s" in status.message
    recorder.follow_update({"query_id": "q-7", "state": "lost", "objects": [],
                            "reason": "no update for 1.0 s (follow.lost_timeout_s): no usable "
                                      "frame arrived"})
    status = health.follow_status(recorder.follow())
    assert status.level == Level.WARN and status.message.startswith("lost q-7 ")
