"""The node's health statuses (pure): a ``HealthInputs`` snapshot in, one ``Status`` per area
out (frames, LLM endpoint, segmenter, queries, follow, camera model), each with a level (OK / WARN
/ ERROR) and a message an operator understands without reading logs. ROS-free; the snapshot comes
from ``health/recorder.py``'s recorder, ``ros/diagnostics.py`` publishes the statuses.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from sam3_agent_ros.core.errors import LlmFailure
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.health import llm_failure
from sam3_agent_ros.health.answer_3d import STATUS_NAME as ANSWER_3D_STATUS
from sam3_agent_ros.health.answer_3d import Answer3dSeen
from sam3_agent_ros.health.follow import FOLLOW_STARTED, FollowSeen
from sam3_agent_ros.health.target_frame import (
    FRAME_CHARS,
    REFUSAL_WARN_S,
    STATUS_NAME,
    TargetFrameSeen,
)

# --- what the statuses say, and when ---------------------------------------------------------

FRAMES_WINDOW_S = 5.0  # the frame rate is measured over the frames of the last 5 s
STALE_WITHOUT_MAX_AGE_S = 5.0  # frames count as stopped after this when max_frame_age_s is 0
SLOW_LLM_FRACTION = 0.5  # a call taking half of llm.timeout_s or more is slow (WARN)
QUEUE_WARN_FRACTION = 0.75  # queue policy: WARN from 3/4 of queue_size waiting
FOLLOW_QUIET_S = 2.0  # following, but no update for this long: WARN (frames stopped?)
LOST_WARN_S = 60.0  # a follow that ended lost stays a WARN for this long
ERROR_CHARS = 240  # the most of an error a message repeats (values carry more)
VALUE_CHARS = 1000


class Level(enum.IntEnum):
    """diagnostic_msgs/DiagnosticStatus levels."""

    OK = 0
    WARN = 1
    ERROR = 2


@dataclass(frozen=True)
class Status:
    """One area of the node's health. ``name`` is the area (the ROS name prefixes the node's
    fully qualified name); ``values`` are shown as key/value pairs."""

    name: str
    level: Level
    message: str
    values: dict[str, str] = field(default_factory=dict)


# --- inputs: a snapshot of what the node knows -----------------------------------------------


@dataclass(frozen=True)
class FramesSeen:
    topic: str  # the image topic (resolved name); "" while not subscribed
    listening: bool  # subscribed (the node is active)
    listening_for_s: float  # since the subscription
    count: int  # frames received since the subscription
    rate_hz: float | None  # over the last FRAMES_WINDOW_S (None: fewer than 2 frames there)
    newest_age_s: float | None  # None: no frame since the subscription
    problem: str | None  # why the newest frame cannot be used (from its header), None: usable
    max_frame_age_s: float  # what a query accepts (0: any age)


@dataclass(frozen=True)
class LlmSeen:
    backend: str  # llm.backend
    endpoint: str  # llm.base_url, redacted
    model: str
    timeout_s: float
    calls: int  # ended calls (cancelled ones are not counted: not the endpoint's doing)
    failures: int
    last_ok: bool | None  # the outcome of the newest call; None: no call yet
    last_latency_s: float | None  # of the newest call
    last_call_age_s: float | None
    last_ok_age_s: float | None  # of the newest successful call; None: never
    last_error: str | None  # of the newest failed call
    last_failure: LlmFailure | None = None  # its fields (kind, attempts...), when known


@dataclass(frozen=True)
class SegmenterSeen:
    backend: str
    state: str  # "unconfigured", "configuring" or "configured"
    device: str = ""  # "cuda:0", "cpu"; "" when the backend does not say
    dtype: str = ""
    untrained: bool = False  # SAM 3 built with random weights
    configure_error: str | None = None  # why the last configure failed


@dataclass(frozen=True)
class QueueSeen:
    accepting: bool  # a query runner exists (the node is configured)
    policy: str
    queue_size: int
    waiting: int
    running: str | None  # the running query's id


@dataclass(frozen=True)
class CameraModelSeen:
    """The camera model (camera_info) the newest 3D answer was measured with (depth on)."""

    checked: bool  # a query has used one since depth started
    problem: str | None = None  # why it did not fit the colour frame; None: it fitted
    summary: str = ""  # what it was: "640x480, fx=600 fy=600 cx=319.5 cy=239.5"
    age_s: float = 0.0  # since that check


@dataclass(frozen=True)
class HealthInputs:
    frames: FramesSeen
    llm: LlmSeen
    segmenter: SegmenterSeen
    queue: QueueSeen
    follow: FollowSeen
    camera_model: CameraModelSeen | None = None  # None: depth is off
    target_frame: TargetFrameSeen | None = None  # None: target_frame unset
    answer_3d: Answer3dSeen | None = None  # None: depth is off


# --- the statuses (pure) ---------------------------------------------------------------------


def statuses(inputs: HealthInputs) -> list[Status]:
    """One status per area, in a fixed order (the camera model and 3D only with depth on)."""
    result = [frames_status(inputs.frames), llm_status(inputs.llm),
              segmenter_status(inputs.segmenter), queue_status(inputs.queue),
              follow_status(inputs.follow)]
    if inputs.camera_model is not None:
        result.append(camera_model_status(inputs.camera_model))
    if inputs.answer_3d is not None:
        result.append(answer_3d_status(inputs.answer_3d))
    if inputs.target_frame is not None:
        result.append(target_frame_status(inputs.target_frame))
    return result


def frames_status(seen: FramesSeen) -> Status:
    """ERROR once a query would find no usable frame (none newer than max_frame_age_s, or an
    unusable one); WARN from half that age (a stall) and while the node does not listen."""
    stale_s = seen.max_frame_age_s if seen.max_frame_age_s > 0 else STALE_WITHOUT_MAX_AGE_S
    values = {"topic": seen.topic or "(not subscribed)", "frames": str(seen.count),
              "rate_hz": _number(seen.rate_hz), "newest_age_s": _number(seen.newest_age_s),
              "max_frame_age_s": f"{seen.max_frame_age_s:g}"}

    def status(level: Level, message: str) -> Status:
        return Status("frames", level, message, values)

    topic = seen.topic
    if not seen.listening:
        return status(Level.WARN, "not subscribed to the image topic: the node is not active "
                                  "(queries are not answered until it is activated)")
    if seen.newest_age_s is None:
        if seen.listening_for_s < stale_s:
            return status(Level.OK, f"waiting for the first frame on {topic} (subscribed "
                                    f"{seen.listening_for_s:.1f} s ago)")
        return status(Level.ERROR, f"no frame received on {topic} in the "
                                   f"{ago(seen.listening_for_s)} since the node subscribed: "
                                   "check the camera driver, the topic name (remap 'image') "
                                   "and image_qos")
    if seen.problem:
        return status(Level.ERROR, f"frames on {topic} cannot be used: "
                                   f"{for_log(seen.problem, ERROR_CHARS)}")
    if seen.newest_age_s > stale_s:
        need = (f" (queries need one newer than max_frame_age_s={seen.max_frame_age_s:g} s)"
                if seen.max_frame_age_s > 0 else "")
        return status(Level.ERROR, f"no frame for {seen.newest_age_s:.1f} s on {topic}{need}")
    if seen.newest_age_s > stale_s / 2:
        return status(Level.WARN, f"no frame for {seen.newest_age_s:.1f} s on {topic}")
    rate = f"{seen.rate_hz:.1f} Hz" if seen.rate_hz is not None else "frames"
    return status(Level.OK, f"{rate} on {topic}, newest {seen.newest_age_s:.2f} s old")


def llm_status(seen: LlmSeen) -> Status:
    """ERROR when the newest call failed; WARN when it was slow; OK otherwise."""
    values = {"backend": seen.backend, "endpoint": seen.endpoint, "model": seen.model,
              "calls": str(seen.calls), "failures": str(seen.failures),
              "last_latency_s": _number(seen.last_latency_s),
              "last_ok_age_s": _number(seen.last_ok_age_s),
              "last_error": for_log(seen.last_error or "", VALUE_CHARS)}
    if seen.backend == "offline":
        return Status("LLM endpoint", Level.OK,
                      "offline demo planner (llm.backend offline): no endpoint", values)
    where = f"LLM endpoint {seen.endpoint}"
    if seen.last_ok is None:
        return Status("LLM endpoint", Level.OK, f"{where}: no call yet", values)
    if not seen.last_ok:
        since = (f"last ok {ago(seen.last_ok_age_s)} ago" if seen.last_ok_age_s is not None
                 else "no call has succeeded yet")
        when = ago(seen.last_call_age_s)
        error = _without_hints(seen.last_error or "unknown error")
        known = llm_failure.failure_message(where, seen.last_failure, when, since, ERROR_CHARS)
        if known:  # from the error's fields: unreachable (ERROR), no answer in time (WARN)
            return Status("LLM endpoint", Level.ERROR if known[0] else Level.WARN, known[1],
                          values)
        return Status("LLM endpoint", Level.ERROR,
                      f"{where}: the last call failed {when} ago: "
                      f"{for_log(error, ERROR_CHARS)} ({since})", values)
    latency = seen.last_latency_s or 0.0
    if latency >= SLOW_LLM_FRACTION * seen.timeout_s:
        return Status("LLM endpoint", Level.WARN,
                      f"{where} is slow: the last call took {latency:.1f} s "
                      f"(llm.timeout_s={seen.timeout_s:g})", values)
    return Status("LLM endpoint", Level.OK,
                  f"{where}: last call ok {ago(seen.last_call_age_s)} ago, {latency:.2f} s",
                  values)


# The LLM client's errors (llm/openai_client.py) end in hints for a person at a terminal; the
# status says what failed from the error's fields (LlmFailure), shorter.
_HINT_TAILS = (": start the server or check llm.base_url", "; to try without a model")


def _without_hints(error: str) -> str:
    for tail in _HINT_TAILS:
        error = error.split(tail, 1)[0]
    return error


def segmenter_status(seen: SegmenterSeen) -> Status:
    values = {"backend": seen.backend, "state": seen.state, "device": seen.device or "?",
              "dtype": seen.dtype or "?"}
    if seen.state == "configuring":
        return Status("segmenter", Level.WARN, f"loading {seen.backend} (configuring)", values)
    if seen.state != "configured":
        if seen.configure_error:
            error = for_log(seen.configure_error, ERROR_CHARS)
            return Status("segmenter", Level.ERROR,
                          f"not loaded: the last configure failed: {error}", values)
        return Status("segmenter", Level.WARN, "not loaded: the node is unconfigured", values)
    if seen.backend == "color":
        return Status("segmenter", Level.OK, "colour demo segmenter (segmenter.backend color, "
                                             "CPU)", values)
    where = f" on {seen.device}" if seen.device else ""
    kind = f" ({seen.dtype})" if seen.dtype else ""
    if seen.untrained:
        return Status("segmenter", Level.WARN,
                      f"{seen.backend} loaded{where} with random weights "
                      "(segmenter.random_weights): its masks mean nothing", values)
    return Status("segmenter", Level.OK, f"{seen.backend} loaded{where}{kind}", values)


def queue_status(seen: QueueSeen) -> Status:
    """ERROR when a queued query would be refused (queue full); WARN when nearly so."""
    values = {"policy": seen.policy, "waiting": str(seen.waiting),
              "running": seen.running or "", "queue_size": str(seen.queue_size)}
    if not seen.accepting:
        return Status("queries", Level.OK, "not accepting queries (the node is unconfigured)",
                      values)
    running = f"running {for_log(seen.running, 80)}" if seen.running else "idle"
    waiting = f", {seen.waiting} waiting" if seen.waiting else ""
    if seen.policy == "queue" and seen.waiting >= seen.queue_size:
        return Status("queries", Level.ERROR,
                      f"queue full: {seen.waiting} queries waiting (queue_size="
                      f"{seen.queue_size}), new queries are refused; {running}", values)
    if seen.policy == "queue" and seen.waiting >= QUEUE_WARN_FRACTION * seen.queue_size:
        return Status("queries", Level.WARN, f"queue nearly full: {seen.waiting} of "
                                             f"{seen.queue_size} places taken; {running}",
                      values)
    return Status("queries", Level.OK, f"{running}{waiting} (query_policy {seen.policy})",
                  values)


def follow_status(seen: FollowSeen) -> Status:
    values = {"state": seen.state or "", "query_id": seen.query_id,
              "objects": str(seen.objects), "age_s": f"{seen.age_s:.1f}"}
    query = for_log(seen.query_id, 80)
    if seen.state is None:
        return Status("follow", Level.OK, "not following", values)
    quiet = f"no update for {seen.age_s:.1f} s"
    why = "(no usable frame, or the follow thread is busy)"
    if seen.state == FOLLOW_STARTED:  # a session that published nothing yet (follow_health)
        if seen.age_s > FOLLOW_QUIET_S:
            return Status("follow", Level.WARN, f"following {query}: {quiet} since it began "
                                                f"{why}", values)
        return Status("follow", Level.OK, f"following {query}: waiting for its first update",
                      values)
    if seen.state == "tracking":
        if seen.age_s > FOLLOW_QUIET_S:
            return Status("follow", Level.WARN, f"following {query}: {quiet} {why}", values)
        return Status("follow", Level.OK, f"following {query}: tracking {seen.objects} "
                                          "object(s)", values)
    reason = f": {for_log(seen.reason, ERROR_CHARS)}" if seen.reason else ""
    if seen.state == "lost" and seen.age_s <= LOST_WARN_S:
        return Status("follow", Level.WARN, f"lost {query} {ago(seen.age_s)} ago{reason}",
                      values)
    return Status("follow", Level.OK, f"not following ({query} {seen.state} "
                                      f"{ago(seen.age_s)} ago{reason})", values)


def camera_model_status(seen: CameraModelSeen) -> Status:
    """WARN while the newest 3D answer found the camera_info unusable for its colour frame."""
    values = {"camera_info": seen.summary, "problem": seen.problem or "",
              "age_s": f"{seen.age_s:.1f}"}
    if not seen.checked:
        return Status("camera model", Level.OK, "no 3D answer yet", values)
    if seen.problem:
        return Status("camera model", Level.WARN, f"no 3D positions {ago(seen.age_s)} ago: "
                      f"{for_log(seen.problem, ERROR_CHARS)}", values)
    return Status("camera model", Level.OK, f"camera_info fits the colour frame "
                                            f"({for_log(seen.summary, 120)})", values)


def target_frame_status(seen: TargetFrameSeen) -> Status:
    """WARN while the newest answer's or follow update's transform was unavailable, or while
    the TF listener refused samples in the last ``REFUSAL_WARN_S``."""
    target = for_log(seen.target_frame, FRAME_CHARS)
    source = for_log(seen.source_frame, FRAME_CHARS)
    values = {"target_frame": seen.target_frame, "source_frame": seen.source_frame,
              "last_lookup": seen.what if seen.checked else "", "problem": seen.reason,
              "age_s": f"{seen.age_s:.1f}"}
    tf_input, refusal = seen.input, ""
    if tf_input is not None:
        values.update({"tf_frames": str(tf_input.frames), "tf_samples": str(tf_input.samples),
                       "tf_bytes": str(tf_input.bytes), "tf_refused": str(tf_input.refused),
                       "tf_dropped_old_samples": str(tf_input.dropped),
                       "tf_last_refusal": tf_input.last_refusal})
        if tf_input.refusal_age_s is not None and tf_input.refusal_age_s < REFUSAL_WARN_S:
            refusal = (f"; TF samples refused: {tf_input.refused} so far, the newest "
                       f"{ago(tf_input.refusal_age_s)} ago ("
                       f"{for_log(tf_input.last_refusal, ERROR_CHARS)})")
    if not seen.checked:
        return Status(STATUS_NAME, Level.WARN if refusal else Level.OK,
                      f"into '{target}': no 3D answer yet{refusal}", values)
    if seen.reason:
        return Status(STATUS_NAME, Level.WARN,
                      f"no pose in '{target}' for the newest {seen.what} "
                      f"({ago(seen.age_s)} ago): {for_log(seen.reason, ERROR_CHARS)}{refusal}",
                      values)
    return Status(STATUS_NAME, Level.WARN if refusal else Level.OK,
                  f"'{source}' -> '{target}' found for the newest {seen.what} "
                  f"({ago(seen.age_s)} ago){refusal}", values)


def answer_3d_status(seen: Answer3dSeen) -> Status:
    """WARN, with the reason, while the newest answer that wanted 3D lacks it for some mask."""
    values = {"query_id": seen.query_id, "masks": str(seen.masks),
              "problem": seen.reason or "", "age_s": f"{seen.age_s:.1f}"}
    if not seen.checked:
        return Status(ANSWER_3D_STATUS, Level.OK, "no 3D answer yet", values)
    query = for_log(seen.query_id, 80)
    if seen.reason:
        return Status(ANSWER_3D_STATUS, Level.WARN,
                      f"the newest answer ({query}, {ago(seen.age_s)} ago) has no 3D: "
                      f"{for_log(seen.reason, ERROR_CHARS)}", values)
    return Status(ANSWER_3D_STATUS, Level.OK, f"the newest answer ({query}, {ago(seen.age_s)} "
                                              f"ago) has 3D for its {seen.masks} mask(s)", values)


def ago(seconds: float | None) -> str:
    """``0.4 s``, ``12 s``, ``3 min``, ``2.5 h``: how long ago, for a message."""
    if seconds is None:
        return "?"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"
