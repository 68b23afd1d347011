"""A query's life, ROS-free: intake -> follow hooks -> the agent -> the 3D step -> one typed
answer to the outputs port, then the action's result, then follow mode.

``QueryLife`` owns the ORDER of the calls of the collaborators a query passes, the node's real
logic, tested with fakes in ``test/pipeline/test_query_life.py``. It lives as long as the node
(the query ids it makes count across lifecycle cycles); what a configured node's queries pass
comes as one ``QueryParts``, built with all its parts at configure (``configure``) and let go
at cleanup (``release``); activation adds the depth source, the action server and
``accepting``:

- ``take`` (the intake thread of pipeline/inbox.py: a topic query): a query id that a running
  goal holds is refused alone, its failed result published to the topics only (the action's
  result hook would end that goal); else ``submit``. ``refuse``: a topic query that will not
  run gets its one ``failed`` result the same way (the inbox was full, the node deactivated
  or is shutting down).
- ``submit`` (topic query, action goal, follow's re-grounding): without a runner (released
  meanwhile) the query still gets its one ``failed`` result; else following ends
  (``follow.before_query``) and the runner takes it.
- ``bind_world`` (whoever takes the query's colour frame: ``QueryRunner``'s ``bind``): the
  depth frame, camera model and transform of that frame's stamp bound to it
  (``pipeline.frame_world``; CONTRACTS §11), so that a slow answer is measured on them.
- ``answer`` (query worker): ``follow.before_answer`` (the follow thread is done with the
  segmenter), the frame's transform waited for (``tf.timeout_s``) if it was not in the buffer
  when the frame was taken, then ``Agent.run``.
- ``finish`` (query worker, every query exactly once): the result names its backends; the 3D
  step (``measurement.measure_answer``) fills the masks' positions BEFORE anything is built;
  the outputs port publishes images, result JSON and targets; the action ends its goal with
  what was published (whatever publishing raised); the log line; ``follow.after_result``
  starts following when asked.
- ``status`` (query worker): a status event to the topics, then to the goal's feedback.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import secrets
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.ports import Logger
from sam3_agent_ros.core.types import Frame, Query, QueryStatus, Result, StatusEvent
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.log_limit import QUERY_LINES, LogLimiter
from sam3_agent_ros.pipeline.frame_world import FrameWorld, bind_target, world_of
from sam3_agent_ros.pipeline.measurement import Answer, SceneRequest, measure_answer
from sam3_agent_ros.pipeline.target_frame import TargetFrame, TargetFrameRequest
from sam3_agent_ros.pipeline.three_d import DepthSource

log = logging.getLogger(__name__)
ERROR_LOG_CHARS = 500  # the most of a result's error that its log line repeats
MAX_AWAITING_TRANSFORM = 32  # taken frames whose transform had not arrived yet, tried again
TF_CACHE_NS = 10_000_000_000  # what a TF buffer keeps: beyond it a later try cannot succeed


class OutputsPort(Protocol):
    """Where an answer goes out (the node: ``ros/outputs.NodeOutputs``)."""

    def publish_status(self, event: StatusEvent) -> None: ...

    def publish_answer(self, answer: Answer) -> object:
        """Publish the answer; return what was published (the action reuses it)."""


class ActionPort(Protocol):
    """The goals of the action server (``ros/segment_action.SegmentActionServer``)."""

    def refuse_duplicate(self, query: Query) -> Result | None: ...

    def on_status(self, event: StatusEvent) -> None: ...

    def on_result(self, result: Result, published: object = None) -> None: ...


class FollowHooks(Protocol):
    """Follow mode around a query (``pipeline/follow_control.FollowControl``)."""

    def before_query(self, query_id: str, text: str, follow: bool | None) -> None: ...

    def before_answer(self, query_id: str) -> None: ...

    def after_result(self, result: Result) -> None: ...


class Runner(Protocol):
    def submit(self, query: Query) -> None: ...

    def reject(self, query: Query, reason: str) -> None: ...


class AgentLike(Protocol):
    def run(self, frame: Frame | None, query: Query, cancel: CancelToken | None = None,
            on_status: Callable[[StatusEvent], None] | None = None) -> Result: ...


def result_line(result: Result) -> str:
    """The log line of a finished query: its id, status and error or mask count, and the
    answer it refined."""
    ending = (f" ({for_log(result.error, ERROR_LOG_CHARS)})" if result.error
              else f", {len(result.masks)} mask(s)")
    return f"query {for_log(result.query_id)}: {result.status.value}{ending}{refines_note(result)}"


def refines_note(item: object) -> str:
    """`` (refines 'ID')`` for a query or result that refines an earlier answer, else ``""``:
    the id escaped like any outside text in a log line."""
    refines = getattr(item, "refines", None)
    return "" if refines is None else f" (refines '{for_log(refines)}')"


@dataclass(frozen=True)
class QueryParts:
    """What a configured node's queries pass, built together (``ros/assembly.py``): the agent,
    the outputs port, the worker (``QueryRunner``, on the life's steps), follow mode's hooks,
    with ``target_frame`` set (CONTRACTS §9) the TF request of every answer, the most points of
    the target's cloud (computed only when the outputs want it), ``node.max_query_chars``, and
    who sees each lookup (``on_target``) and each measured answer (``on_answer``)."""

    agent: AgentLike
    outputs: OutputsPort
    runner: Runner
    follow: FollowHooks | None = None
    target_frame: TargetFrameRequest | None = None
    cloud_max_points: int = 0
    scene: SceneRequest | None = None  # the grasp scene of every answer (scene.enabled)
    max_query_chars: int = 0
    on_target: Callable[[TargetFrame, str], None] | None = None
    on_answer: Callable[[Answer], None] | None = None


class QueryLife:
    """The road of every query. ``backends()``: what answers (named in every result);
    ``live()``: False once the middleware is shut down (nothing can be published);
    ``logger``: ``info`` / ``warning`` lines, a line per query at most as ``limiter`` allows
    (a peer's flood of queries is a flood of lines)."""

    def __init__(self, backends: Callable[[], dict[str, str]], live: Callable[[], bool],
                 logger: Logger, limiter: LogLimiter | None = None,
                 run: str | None = None):
        self._backends, self._live, self._logger = backends, live, logger
        self._limiter = limiter if limiter is not None else LogLimiter()
        self._parts: QueryParts | None = None  # while configured
        self._taking = False  # configured, cleanup not begun: the worker takes queries
        self._following = False  # configured, the worker not stopped by cleanup yet
        # while active: the depth source (depth.enabled), inputs subscribed; the action server
        # once made (kept across lifecycle cycles)
        self.depth: DepthSource | None = None
        self.accepting = False
        self.action: ActionPort | None = None
        self._awaiting_tf: list[weakref.ref[FrameWorld]] = []  # bound, transform not yet found
        self._awaiting_lock = threading.Lock()
        # The ids the node makes are unique in a bag of many node runs: the counter lives as
        # long as the node (lifecycle cycles keep it), ``run`` tells one node start from another.
        self.run = secrets.token_hex(3) if run is None else run
        self._ids = itertools.count(1)

    # --- the parts -----------------------------------------------------------------------------
    def configure(self, parts: QueryParts) -> None:
        """A configured node's parts, all at once."""
        self._parts, self._taking, self._following = parts, True, True

    def stop_taking(self) -> None:
        """Cleanup begins: the worker is gone (a query from now on gets its one ``failed``
        result, "not configured", still published while the outputs are)."""
        self._taking = False

    def stop_following(self) -> None:
        """Once the worker stopped: follow mode's hooks are gone (no follow starts now)."""
        self._following = False

    def release(self) -> QueryParts | None:
        """Let go of the parts (the end of cleanup, once the threads stopped); returned, for
        their owner to free."""
        parts, self._parts = self._parts, None
        self._taking = self._following = False
        return parts

    @property
    def parts(self) -> QueryParts | None:
        return self._parts

    @property
    def runner(self) -> Runner | None:
        return self._parts.runner if self._parts is not None and self._taking else None

    @property
    def agent(self) -> AgentLike | None:
        return self._parts.agent if self._parts is not None else None

    @property
    def outputs(self) -> OutputsPort | None:
        return self._parts.outputs if self._parts is not None else None

    @property
    def follow(self) -> FollowHooks | None:
        return self._parts.follow if self._parts is not None and self._following else None

    @property
    def target_frame(self) -> TargetFrameRequest | None:
        return self._parts.target_frame if self._parts is not None else None

    # --- what the collaborators read (bound methods: they see the current parts) ------------
    def current_runner(self) -> Runner | None:
        return self.runner

    def current_depth(self) -> DepthSource | None:
        return self.depth

    def current_target_frame(self) -> TargetFrameRequest | None:
        return self.target_frame

    def _cloud_points(self, outputs: OutputsPort | None) -> int | None:
        """The most points of this answer's cloud when the outputs want one, else None."""
        wants = getattr(outputs, "cloud_max_points", None)
        most = self._parts.cloud_max_points if self._parts is not None else 0
        if self.depth is None or most <= 0 or not callable(wants):
            return None
        points = wants(most)
        return int(points) if points is not None else None

    def is_accepting(self) -> bool:
        return self.accepting

    def query_chars(self) -> int:
        """``node.max_query_chars`` while configured, else 0."""
        return self._parts.max_query_chars if self._parts is not None else 0

    def new_query_id(self) -> str:
        """An id for a query that gave none: ``q-RUN-N`` (``run``: this node start's six hex
        digits; N counts from 1 for the node's whole life, across lifecycle cycles)."""
        return f"q-{self.run}-{next(self._ids)}"

    # --- intake --------------------------------------------------------------------------------
    def take(self, query: Query, follow: bool | None) -> None:
        """A topic query, parsed: refused alone when a running goal holds its id, else
        submitted."""
        action = self.action
        duplicate = action.refuse_duplicate(query) if action is not None else None
        if duplicate is not None:  # published here: the action's result hook would end the goal
            self._limiter.emit("query rejected", self._logger.warning,
                               lambda: f"query rejected: {for_log(duplicate.error)}",
                               QUERY_LINES)
            if (outputs := self.outputs) is not None:
                outputs.publish_answer(Answer(duplicate))
            return
        self._limiter.emit("query", self._logger.info,
                           lambda: f"query {for_log(query.id)}: {for_log(repr(query.text))}"
                                   + refines_note(query), QUERY_LINES)
        self.submit(query, follow)

    def refuse(self, query: Query, reason: str) -> None:
        """A topic query that will not run (the inbox was full, the node deactivated or is
        shutting down): its one ``failed`` result with ``reason``; to the topics only when a
        running goal holds its id (as ``take``)."""
        action = self.action
        duplicate = action.refuse_duplicate(query) if action is not None else None
        if duplicate is not None:
            if (outputs := self.outputs) is not None:
                outputs.publish_answer(Answer(duplicate))  # its reason: the id is in use
            return
        runner = self.runner
        if runner is None:
            self.finish(Result(query.id, query.text, QueryStatus.FAILED, error=reason,
                               refines=query.refines))
            return
        runner.reject(query, reason)

    def submit(self, query: Query, follow: bool | None) -> None:
        """Hand a query to the worker; following ends and the answer is followed when asked
        (``follow`` None: ``follow.default``)."""
        runner, control = self.runner, self.follow
        if runner is None:  # released meanwhile: the query still gets its one result
            self.finish(Result(query.id, query.text, QueryStatus.FAILED,
                               error="the node is not configured", refines=query.refines))
            return
        if control is not None:
            control.before_query(query.id, query.text, follow)
        runner.submit(query)

    def reground(self, query_id: str, text: str) -> None:
        """follow.reground_on_lost: run the lost query again, followed (follow thread)."""
        if self.runner is not None:
            self.submit(Query(f"{query_id}-reground-{next(self._ids)}", text), True)

    def bind_world(self, stamp: int, frame_id: str) -> FrameWorld | None:
        """What belongs to a colour frame stamped ``stamp`` (ns), found as a query takes it: its
        depth frame and camera model (the depth source's ``bind``), its transform into
        ``target_frame`` if the TF buffer has it now (else waited for in ``answer``). Cheap,
        never blocks (the executor calls it); None when neither depth nor target_frame is on."""
        depth, request = self.depth, self.target_frame
        bind = getattr(depth, "bind", None)
        if not callable(bind) and request is None:
            return None
        world = FrameWorld(int(stamp), str(frame_id))
        if callable(bind):
            world.depth = bind(int(stamp))
        if request is not None:
            bind_target(world, request, 0.0)
            if world.target is None:  # its transform usually arrives just after the image
                with self._awaiting_lock:
                    self._awaiting_tf.append(weakref.ref(world))
                    del self._awaiting_tf[:-MAX_AWAITING_TRANSFORM]
        return world

    def settle_transforms(self, newest_stamp: int) -> None:
        """A colour frame stamped ``newest_stamp`` (ns) arrived (executor): the frames taken
        before their transform had arrived (a query waiting in the queue) look it up again,
        without waiting, so that they have it whenever they run; those older than a TF buffer
        keeps are given up (their answer says why). Cheap when none waits."""
        request = self.target_frame
        with self._awaiting_lock:
            waiting, self._awaiting_tf = self._awaiting_tf, []
        if not waiting:
            return
        still = []
        for ref in waiting:
            world = ref()
            if world is None or world.target is not None or request is None:
                continue
            if newest_stamp - world.stamp_ns > TF_CACHE_NS:
                continue
            bind_target(world, request, 0.0)
            if world.target is None:
                still.append(ref)
        with self._awaiting_lock:
            self._awaiting_tf = (still + self._awaiting_tf)[-MAX_AWAITING_TRANSFORM:]

    # --- the worker's steps --------------------------------------------------------------------
    def answer(self, frame: Frame | None, query: Query, cancel: CancelToken,
               on_status: Callable[[StatusEvent], None]) -> Result:
        """The agent, once following ended and the follow thread is done with the segmenter.
        A refinement (frame None) runs on the frame of the answer it refines."""
        follow, agent = self.follow, self.agent
        world, request = world_of(frame), self.target_frame
        if world is not None and request is not None:  # the transform of the frame's stamp,
            bind_target(world, request, request.timeout_s)  # before the TF buffer forgets it
        if follow is not None:
            follow.before_answer(query.id)
        if agent is None:  # released meanwhile
            return Result(query.id, query.text, QueryStatus.FAILED,
                          error="the node is not configured", refines=query.refines)
        return agent.run(frame, query, cancel, on_status)

    def status(self, event: StatusEvent) -> None:
        if not self._live():  # Ctrl-C: the middleware is shut down, nothing can be published
            return
        if event.backends is None:
            event = dataclasses.replace(event, backends=self._backends())
        if (outputs := self.outputs) is not None:
            outputs.publish_status(event)
        if (action := self.action) is not None:
            action.on_status(event)

    def finish(self, result: Result) -> None:
        """Measure, publish, end the goal, log, follow (see the module's docstring)."""
        if not self._live():  # Ctrl-C: the middleware is shut down; the process is exiting
            log.info("query %s ended (%s) during shutdown; not published",
                     for_log(result.query_id), result.status.value)
            return
        if not result.backends:  # every result names its backends (interface §6), also those
            result.backends = self._backends()  # that never reached the agent (no frame...)
        parts, published, depth = self._parts, None, self.depth
        outputs = parts.outputs if parts is not None else None
        try:  # the 3D step first: the result JSON, the targets and the action read it
            answer = measure_answer(result, depth, self._logger, self.target_frame,
                                    self._cloud_points(outputs),
                                    parts.scene if parts is not None else None)
            result.candidates = []  # the grasp scene read them: not kept with the result
            if (answer.target is not None and parts is not None
                    and (seen := parts.on_target) is not None):
                seen(answer.target, "answer")
            if parts is not None and (measured := parts.on_answer) is not None:
                measured(answer)
            published = outputs.publish_answer(answer) if outputs is not None else None
        finally:  # whatever publishing raised (the worker logs it), the goal of this query ends
            if (action := self.action) is not None:
                action.on_result(result, published)
        if outputs is not None:
            self._limiter.emit("query result", self._logger.info,
                               lambda: result_line(result), QUERY_LINES)
            if (follow := self.follow) is not None:  # None once released meanwhile
                follow.after_result(result)
