"""The node's health for ``/diagnostics``: what is recorded, and the snapshot the statuses read.

ROS-free. ``HealthRecorder`` is fed by the node as things happen (a frame arrives, an LLM call
ends, a follow update goes out, the lifecycle moves) and is cheap enough for the image callback;
``snapshot`` turns it into a ``HealthInputs``. The pure statuses live in ``health_status.py``,
the LLM wrapper that records every call in ``observed_llm.py``; both are re-exported here (the
names the node, ``ros/diagnostics.py`` and the tests use).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sam3_agent_ros.core.errors import LlmFailure
from sam3_agent_ros.health.answer_3d import Answer3dRecord
from sam3_agent_ros.health.follow import FollowRecord, FollowSeen
from sam3_agent_ros.health.observed_llm import ObservedLlm
from sam3_agent_ros.health.status import (
    ERROR_CHARS,
    FOLLOW_QUIET_S,
    FRAMES_WINDOW_S,
    LOST_WARN_S,
    QUEUE_WARN_FRACTION,
    SLOW_LLM_FRACTION,
    STALE_WITHOUT_MAX_AGE_S,
    VALUE_CHARS,
    CameraModelSeen,
    FramesSeen,
    HealthInputs,
    Level,
    LlmSeen,
    QueueSeen,
    SegmenterSeen,
    Status,
    ago,
    camera_model_status,
    follow_status,
    frames_status,
    llm_status,
    queue_status,
    segmenter_status,
    statuses,
)
from sam3_agent_ros.health.target_frame import TargetFrameSeen, TfInputSeen
from sam3_agent_ros.redact import redact_url

__all__ = [
    "ERROR_CHARS", "FOLLOW_QUIET_S", "FRAMES_WINDOW_S", "FRAME_TIMES_KEPT", "LOST_WARN_S",
    "QUEUE_WARN_FRACTION", "SLOW_LLM_FRACTION", "STALE_WITHOUT_MAX_AGE_S", "VALUE_CHARS",
    "CameraModelSeen", "FollowSeen", "FramesSeen", "HealthInputs", "HealthRecorder", "Level",
    "LlmSeen", "ObservedLlm", "QueueSeen", "SegmenterSeen", "Status", "ago",
    "camera_model_status", "follow_status", "frames_status", "llm_status", "queue_status",
    "segmenter_status", "snapshot", "statuses",
]

FRAME_TIMES_KEPT = 600  # arrival times kept for the frame rate (20 s at 30 Hz, 2 s at 300 Hz)


def snapshot(recorder: HealthRecorder, params: dict[str, Any], segmenter: Any = None,
             load: tuple[int, str | None] | None = None) -> HealthInputs:
    """The inputs of ``statuses`` now: ``params`` the node's parameter values (its
    configuration's, else the current ones), ``segmenter`` the loaded one (None: none), ``load``
    the query runner's (waiting, running id) (None: no runner)."""
    state, configure_error = recorder.lifecycle()
    loaded = state == "configured"
    return HealthInputs(
        frames=recorder.frames(float(params["max_frame_age_s"])),
        llm=recorder.llm(str(params["llm.backend"]), redact_url(str(params["llm.base_url"])),
                         str(params["llm.model"]), float(params["llm.timeout_s"])),
        segmenter=SegmenterSeen(
            backend=str(params["segmenter.backend"]), state=state,
            device=str(getattr(segmenter, "device", "") or ""),
            dtype=str(getattr(segmenter, "dtype", "") or ""),
            untrained=loaded and bool(params["segmenter.random_weights"]),
            configure_error=configure_error),
        queue=QueueSeen(accepting=load is not None, policy=str(params["query_policy"]),
                        queue_size=int(params["queue_size"]),
                        waiting=load[0] if load else 0, running=load[1] if load else None),
        follow=recorder.follow(), camera_model=recorder.camera_model(),
        target_frame=recorder.target_frame(), answer_3d=recorder.answer_3d())


# --- recording (thread-safe; the node's threads call it) ----------------------------------------


@dataclass
class _LlmCalls:
    calls: int = 0
    failures: int = 0
    last_ok: bool | None = None
    last_latency_s: float | None = None
    last_at: float | None = None
    last_ok_at: float | None = None
    last_error: str | None = None
    last_failure: LlmFailure | None = None


class HealthRecorder:
    """What happened, and when (``clock``: monotonic seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._topic = ""
        self._listening_since: float | None = None
        self._frames = 0
        self._frame_times: collections.deque[float] = collections.deque(maxlen=FRAME_TIMES_KEPT)
        self._problem: str | None = None
        self._llm = _LlmCalls()
        self._state = "unconfigured"
        self._configure_error: str | None = None
        self._follow = FollowRecord(clock)
        self._camera_model: tuple[bool, str | None, str, float] | None = None
        self._target_frame: tuple[str, str, str, str, float | None] | None = None
        self._answer_3d = Answer3dRecord(clock)
        self._tf_input: Callable[[], Any] | None = None

    @property
    def clock(self) -> Callable[[], float]:
        return self._clock

    # --- frames (the image callback: O(1)) ---
    def listening(self, topic: str) -> None:
        with self._lock:
            self._topic, self._listening_since = topic, self._clock()
            self._frames, self._problem = 0, None
            self._frame_times.clear()

    def not_listening(self) -> None:
        with self._lock:
            self._topic, self._listening_since = "", None

    def frame(self, problem: str | None = None) -> None:
        """A frame arrived; ``problem``: why it cannot be used (from its header), or None."""
        now = self._clock()
        with self._lock:
            self._frames += 1
            self._frame_times.append(now)
            self._problem = problem

    def frames(self, max_frame_age_s: float) -> FramesSeen:
        now = self._clock()
        with self._lock:
            since = self._listening_since
            times = [t for t in self._frame_times if now - t <= FRAMES_WINDOW_S]
            newest = self._frame_times[-1] if self._frame_times else None
            rate = ((len(times) - 1) / (times[-1] - times[0])
                    if len(times) >= 2 and times[-1] > times[0] else None)
            return FramesSeen(
                topic=self._topic, listening=since is not None,
                listening_for_s=now - since if since is not None else 0.0, count=self._frames,
                rate_hz=rate, newest_age_s=now - newest if newest is not None else None,
                problem=self._problem, max_frame_age_s=max_frame_age_s)

    # --- LLM calls ---
    def llm_call(self, ok: bool, latency_s: float, error: str | None = None,
                 failure: LlmFailure | None = None) -> None:
        now = self._clock()
        with self._lock:
            llm = self._llm
            llm.calls += 1
            llm.failures += 0 if ok else 1
            llm.last_ok, llm.last_latency_s, llm.last_at = ok, latency_s, now
            if ok:
                llm.last_ok_at = now
            else:
                llm.last_error, llm.last_failure = error, failure

    def llm(self, backend: str, endpoint: str, model: str, timeout_s: float) -> LlmSeen:
        now = self._clock()
        with self._lock:
            llm = self._llm
            return LlmSeen(
                backend=backend, endpoint=endpoint, model=model, timeout_s=timeout_s,
                calls=llm.calls, failures=llm.failures, last_ok=llm.last_ok,
                last_latency_s=llm.last_latency_s,
                last_call_age_s=now - llm.last_at if llm.last_at is not None else None,
                last_ok_age_s=now - llm.last_ok_at if llm.last_ok_at is not None else None,
                last_error=llm.last_error, last_failure=llm.last_failure)

    # --- lifecycle ---
    def configuring(self) -> None:
        with self._lock:
            self._state = "configuring"

    def configured(self, ok: bool, error: str | None = None) -> None:
        """The end of a configure: ``error`` says why it failed (None: see the log)."""
        with self._lock:
            self._state = "configured" if ok else "unconfigured"
            self._configure_error = None if ok else (error or "see the node's log")
            if ok:
                self._llm = _LlmCalls()  # new backends: the old endpoint's record is void

    def unconfigured(self) -> None:
        with self._lock:
            self._state, self._configure_error = "unconfigured", None

    def lifecycle(self) -> tuple[str, str | None]:
        with self._lock:
            return self._state, self._configure_error

    # --- follow mode (the follow thread) ---
    def follow_update(self, status: dict[str, Any]) -> None:
        """A ~/follow/status went out, or ``follow_health.follow_started``'s record."""
        self._follow.update(status)

    def follow(self) -> FollowSeen:
        return self._follow.seen()


    # --- the camera model (depth's worker thread) ---
    def camera_model_started(self, started: bool = True) -> None:
        """Depth started (a camera model status appears) or stopped (it goes)."""
        with self._lock:
            self._camera_model = (False, None, "", self._clock()) if started else None
        self._answer_3d.started(started)  # the 3D status lives while depth is on

    def camera_model_checked(self, problem: str | None, summary: str = "") -> None:
        with self._lock:
            self._camera_model = (True, problem, summary, self._clock())

    def camera_model(self) -> CameraModelSeen | None:
        now = self._clock()
        with self._lock:
            if self._camera_model is None:
                return None
            checked, problem, summary, at = self._camera_model
        return CameraModelSeen(checked, problem, summary, now - at)

    # --- the newest answer's 3D (the query worker) ---
    def answer_measured(self, answer: Any) -> None:
        """A measured answer (``pipeline.measurement.Answer``): the ``3D`` status reads it."""
        self._answer_3d.measured(answer)

    def answer_3d(self) -> Any:
        """``answer_3d_health.Answer3dSeen`` (None while depth is off)."""
        return self._answer_3d.seen()

    # --- the transform into target_frame (the query worker, the follow thread) ---
    def target_frame_started(self, target_frame: str,
                             tf_input: Callable[[], Any] | None = None) -> None:
        """``target_frame`` in use (a ``target frame`` status appears); "": none (it goes).
        ``tf_input``: the TF source's ``stats`` (``frames.buffer.TfInputStats`` or None), read
        whenever the status is built."""
        with self._lock:
            self._target_frame = (target_frame, "", "", "answer", None) if target_frame else None
            self._tf_input = tf_input if target_frame else None

    def target_frame_looked_up(self, target: Any, what: str = "answer") -> None:
        """A lookup was made (``pipeline.target_frame.TargetFrame``: its frames, and its
        reason when the transform was unavailable) for an ``answer`` or a ``follow update``."""
        with self._lock:
            self._target_frame = (str(target.frame_id), str(target.source_frame),
                                  "" if target.ok else str(target.reason or "no transform"),
                                  what, self._clock())

    def target_frame(self) -> TargetFrameSeen | None:
        """The newest lookup into target_frame (None: target_frame unset)."""
        now = self._clock()
        with self._lock:
            if self._target_frame is None:
                return None
            frame_id, source, reason, what, at = self._target_frame
            tf_input = self._tf_input
        seen = tf_input_seen(tf_input, now)
        if at is None:
            return TargetFrameSeen(frame_id, input=seen)
        return TargetFrameSeen(frame_id, True, source, reason, what, now - at, seen)


def tf_input_seen(stats_of: Callable[[], Any] | None, now: float) -> TfInputSeen | None:
    """The TF source's counts now (None: no source of ours, or it failed to say)."""
    if stats_of is None:
        return None
    try:
        stats = stats_of()
    except Exception:  # noqa: BLE001 (a status never breaks /diagnostics)
        return None
    if stats is None:
        return None
    at = stats.last_refusal_at
    return TfInputSeen(stats.frames, stats.samples, stats.bytes, stats.refused_total,
                       stats.dropped, stats.last_refusal, None if at is None else now - at)
