"""The node's collaborators: what its lifecycle builds, starts, stops and frees (``NodeParts``).

The node (``ros/node.py``) creates the ROS entities and runs the transitions; ``NodeParts`` wires
what a query passes (frames, reader, ``QueryLife``, runner, outputs, follow, concepts, depth, the
action server) and takes the node's callbacks (images, queries, parameter changes, diagnostics),
so the road from the query callback to the published result enters the node once.

``build_agent`` checks what the configuration needs first (milliseconds: endpoint, key, SAM 3
weights), then builds the LLM client, the segmenter (SAM 3 loads for seconds to minutes) and the
``Agent`` behind a ``SegmenterGate``. Any failure raises ``CannotConfigure`` once its lines are
logged; the node stays unconfigured and says why (the configure transition fails).
``release`` stops the node's threads and frees the models (cleanup, shutdown, error, exit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sam3_agent_ros.config import Config, backends_of, demo_backends_warning, offline_overrides
from sam3_agent_ros.core.types import Frame, Mask, Query, stamp_ns
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.health import recorder as health
from sam3_agent_ros.log_limit import QUERY_LINES, limiter_of
from sam3_agent_ros.pipeline.concepts_control import SHUTDOWN_WAIT_S as CONCEPTS_SHUTDOWN_WAIT_S
from sam3_agent_ros.pipeline.concepts_control import ConceptsControl
from sam3_agent_ros.pipeline.follow_control import SHUTDOWN_WAIT_S as FOLLOW_SHUTDOWN_WAIT_S
from sam3_agent_ros.pipeline.follow_control import FollowControl
from sam3_agent_ros.pipeline.inbox import QueryInbox
from sam3_agent_ros.pipeline.intake import QueryRejected, StopFollow, parse_query_message
from sam3_agent_ros.pipeline.latest_frame import LatestFrame
from sam3_agent_ros.pipeline.measurement import SceneRequest
from sam3_agent_ros.pipeline.query_life import QueryLife, QueryParts
from sam3_agent_ros.pipeline.query_runner import QueryRunner
from sam3_agent_ros.redact import redact_text
from sam3_agent_ros.ros import operator_hints, params, segment_action
from sam3_agent_ros.ros.conversions import FrameReader
from sam3_agent_ros.ros.outputs import NodeOutputs
from sam3_agent_ros.ros.stop_follow import serve_stop_follow
from sam3_agent_ros.ros.target_frame_source import start_target_frame, stop_target_frame

if TYPE_CHECKING:
    from rclpy.lifecycle import LifecycleNode
    from rclpy.parameter import Parameter

    from sam3_agent_ros.concepts import SegmenterGate
    from sam3_agent_ros.core.agent import Agent
    from sam3_agent_ros.ros.depth import DepthTargets

DEACTIVATE_WAIT_S = 5.0  # how long deactivate waits for the worker to leave an ended query
INTAKE_WAIT_S = 1.0  # how long deactivate waits for the message the intake thread handles
# The error of every query the node ends when it shuts down (CONTRACTS §11): a topic query's
# result is ``failed``, a goal ``aborted``; deactivate says which way it went down.
SHUTTING_DOWN = "node shutting down"
DEACTIVATED = f"{SHUTTING_DOWN} (deactivated)"
CLEANUP_WAIT_S = 30.0  # how long cleanup waits for the worker before freeing the models

# Appended to every "cannot configure" line about a missing endpoint, key or checkpoint.
TRY_OFFLINE = ("to try without a model: ros2 launch sam3_agent_ros sam3_agent.launch.py "
               "offline:=true, or " + " ".join(f"-p {o}" for o in offline_overrides()))


class CannotConfigure(Exception):
    """The backends cannot be built; ``problem`` is what /diagnostics reports (logged already);
    ``by_building``: they failed while being built (not for want of a requirement)."""

    def __init__(self, problem: str, by_building: bool):
        super().__init__(problem)
        self.problem = problem
        self.by_building = by_building


def build_agent(config: Config, recorder: health.HealthRecorder, logger: Any,
                node_name: str) -> tuple[Agent, SegmenterGate]:
    """The agent (the LLM observed by ``recorder``) and the gate in front of the segmenter
    (the agent and follow mode first, the standing concepts between)."""
    from sam3_agent_ros.backends import (
        close_quietly,
        describe_backends,
        make_llm,
        make_segmenter,
        missing_requirements,
    )
    from sam3_agent_ros.concepts import SegmenterGate
    from sam3_agent_ros.core.agent import Agent
    from sam3_agent_ros.core.answers import AnswerStore

    missing = missing_requirements(config)  # milliseconds: before anything slow
    if missing:
        for problem in missing:
            logger.error(f"cannot configure: {problem}; {TRY_OFFLINE}")
        raise CannotConfigure("; ".join(missing), by_building=False)
    demo = demo_backends_warning(config.to_params())
    if demo:
        logger.warning(demo)
    logger.info(
        f"configuring: llm.backend={config.llm.backend} segmenter.backend="
        f"{config.segmenter.backend} (building the backends; SAM 3 may take a while)")
    segmenter = None
    try:
        llm = health.ObservedLlm(make_llm(config), recorder)
        segmenter = make_segmenter(config)
        gate = SegmenterGate(segmenter)
        agent = Agent(config, llm=llm, segmenter=gate.first,
                      answers=AnswerStore(config.refine.keep_answers,
                                          config.refine.max_kept_mib * 2**20))
        agent.backends = describe_backends(config, segmenter)  # + SAM 3's engine, providers
    except Exception as exc:  # any backend failure: stay unconfigured, say why
        close_quietly(segmenter)
        problem = (f"cannot build the backends: {type(exc).__name__}: "
                   f"{redact_text(str(exc))}")
        logger.error(problem)
        logger.error(f"to configure: {operator_hints.fix_backends(node_name)}")
        raise CannotConfigure(problem, by_building=True) from None
    return agent, gate


def release(life: QueryLife, runner: QueryRunner | None, follow: FollowControl | None,
            concepts: ConceptsControl | None, outputs: NodeOutputs | None, *,
            wait_s: float, logger: Any) -> QueryParts | None:
    """Stop the worker, follow and concepts threads (each waited for up to ``wait_s``, the
    follow and concepts threads at most their own shutdown wait) and free the models unless
    one of them is still busy with the segmenter; the life's parts let go, returned. The
    outputs go last: a query cancelled while the worker stops still publishes its one
    result."""
    life.stop_taking()  # "not configured" from now on
    worker_done = runner.stop("node shutting down", wait_s) if runner is not None else True
    life.stop_following()  # follow's hooks are gone
    follow_done = (follow.destroy(min(wait_s, FOLLOW_SHUTDOWN_WAIT_S))
                   if follow is not None else True)
    concepts_done = (concepts.destroy(min(wait_s, CONCEPTS_SHUTDOWN_WAIT_S))
                     if concepts is not None else True)
    parts = life.release()
    agent = parts.agent if parts is not None else None
    close = getattr(getattr(agent, "segmenter", None), "close", None)
    if callable(close) and worker_done and follow_done and concepts_done:
        try:
            close()
        except Exception as exc:
            logger.warning(f"segmenter close failed: {exc}")
    if outputs is not None:
        outputs.destroy()
    return parts


class NodeParts:
    """The collaborators of ``node``, None while absent; the order of their calls in a query is
    the life's (``pipeline/query_life.py``), which sees them through its ports only."""

    def __init__(self, node: LifecycleNode, recorder: health.HealthRecorder):
        self._node = node
        self._health = recorder
        self._logger = node.get_logger()
        self.limiter = limiter_of(node)  # the node's log lines a peer can cause (log_limit.py)
        self.frames = LatestFrame()
        self.reader = FrameReader()  # under config.node.max_image_pixels once configured
        self.config: Config | None = None
        self.life = QueryLife(self.backends, node.context.ok, self._logger, self.limiter)
        self.runner: QueryRunner | None = None
        self.inbox: QueryInbox | None = None  # the query topic's messages (pipeline/inbox.py)
        self.follow: FollowControl | None = None
        self.stop_follow: Any = None  # the ~/stop_follow service while configured
        self.outputs: NodeOutputs | None = None  # every output publisher (ros/outputs.py)
        self.depth: DepthTargets | None = None
        self.concepts: ConceptsControl | None = None  # standing concepts (concepts_control.py)

    # --- the lifecycle -------------------------------------------------------------------------
    def configure(self, config: Config) -> None:
        """Build the agent (``CannotConfigure`` when it cannot be), the outputs, the query worker,
        follow mode and the standing concepts, and start the worker."""
        node, life = self._node, self.life
        agent, gate = build_agent(config, self._health, self._logger,
                                  node.get_fully_qualified_name())
        self.config = config
        self.reader = reader = FrameReader(config.node.max_image_pixels)
        self.outputs = outputs = NodeOutputs(node, config)  # the table's rows
        request = start_target_frame(node, config, self._health)  # CONTRACTS §9
        settings = config.node
        self.runner = runner = QueryRunner(
            answer=life.answer, to_frame=reader.frame, publish=life.finish, status=life.status,
            frames=self.frames, policy=settings.query_policy, queue_size=settings.queue_size,
            max_frame_age_s=settings.max_frame_age_s, frame_wait_s=settings.frame_wait_s,
            bind=self._bind_world, limiter=self.limiter)
        self.follow = follow = FollowControl(
            self._logger, self.limiter, config, gate.first, reader.frame,
            depth=life.current_depth, reground=life.reground, outputs=outputs,
            on_status=self._health.follow_update, target_frame=life.current_target_frame,
            on_target=self._health.target_frame_looked_up)
        life.configure(QueryParts(  # what every query passes, built together
            agent=agent, outputs=outputs, runner=runner, follow=follow, target_frame=request,
            cloud_max_points=config.depth.cloud_max_points,
            scene=(SceneRequest(config.scene, config.grasp, config.depth.cloud_max_points,
                                neighbours=self._concept_neighbours)
                   if config.depth.enabled and config.scene.enabled else None),
            max_query_chars=settings.max_query_chars,
            on_target=self._health.target_frame_looked_up,
            on_answer=self._health.answer_measured))  # the 3D status (CONTRACTS §11)
        runner.start()
        self.inbox = QueryInbox(self._take_message, self._refuse_message)
        self.inbox.start()
        self.stop_follow = serve_stop_follow(node, follow.stop)  # ~/stop_follow (std_srvs)
        self.concepts = ConceptsControl(self._logger, self.limiter, config, gate, reader.frame,
                                        depth=life.current_depth, outputs=outputs,
                                        target_frame=life.current_target_frame)

    def _concept_neighbours(self, frame: Frame) -> list[Mask]:
        """The standing concepts' detections on an answer's frame (its grasp scene's
        obstacles); none before the concepts are built or after they are gone."""
        concepts = self.concepts
        return concepts.detections_on(frame) if concepts is not None else []

    def activate(self, config: Config, image_topic: str = "") -> None:
        """Accept queries; the depth inputs when enabled; the action server (kept once made).
        ``image_topic``: the resolved colour topic (named when no frame comes)."""
        life = self.life
        life.accepting = True
        if self.runner is not None and image_topic:
            self.runner.image_topic = image_topic
        if config.depth.enabled:
            from sam3_agent_ros.ros.depth import start_depth

            self.depth = life.depth = start_depth(self._node, config.depth,
                                                  self.reader.max_pixels, self._health)
        if life.action is None:  # ros/segment_action.py: goals run through the same runner
            life.action = segment_action.serve(
                self._node, runner=life.current_runner, active=life.is_accepting,
                new_query_id=life.new_query_id, max_query_chars=life.query_chars,
                submit=life.submit, backends=self.backends,
                result_timeout_s=config.action.result_timeout_s,
                max_results_with_images=config.action.max_results_with_images)

    def deactivate(self) -> None:
        """End following, drop the waiting frames, refuse what still waits in the inbox, end
        every query at once with its ``failed`` result (goals aborted: CONTRACTS §11), then wait
        up to ``DEACTIVATE_WAIT_S`` for the worker to leave the one it was running."""
        if self.follow is not None:
            self.follow.stop("node deactivated")
        if self.concepts is not None:
            self.concepts.clear()
        if self.inbox is not None:  # the query subscription is gone: nothing more comes in
            self.inbox.drain("node deactivated")
            self.inbox.wait_empty(INTAKE_WAIT_S)  # the message it handles, before cancel_all
        if self.runner is not None:
            self.end_queries(DEACTIVATED)
            if not self.runner.wait_idle(DEACTIVATE_WAIT_S):
                self._logger.warning("the worker is still inside the ended query's last call "
                                     "(its late answer will be dropped)")
        self.frames.clear()

    def end_queries(self, reason: str = SHUTTING_DOWN, refuse_more: bool = False) -> list[str]:
        """Every query the node has taken, running or waiting, ends now with a ``failed`` result
        (``reason``), each goal ``aborted`` (shutdown and deactivate); the ids ended."""
        runner = self.runner
        if runner is None:
            return []
        if refuse_more and self.inbox is not None:  # received, not yet taken: refused first
            self.inbox.drain(reason)
            self.inbox.wait_empty(INTAKE_WAIT_S)
        ended = runner.end_all(reason, refuse_more)
        if ended:
            self._logger.warning(f"{reason}: ended {len(ended)} query(ies): "
                                 + ", ".join(for_log(query_id) for query_id in ended))
        return ended

    def flush_results(self, timeout_s: float) -> bool:
        """The last results acknowledged by their subscribers (``NodeOutputs.flush``)."""
        return self.outputs.flush(timeout_s) if self.outputs is not None else True

    def goals_in_flight(self) -> int:
        """Goals whose ``execute`` has not returned yet (their result not sent)."""
        return int(getattr(self.life.action, "in_flight", 0))

    def stop_inputs(self) -> None:
        """Refuse queries; the depth inputs go."""
        self.life.accepting = False
        depth, self.depth = self.depth, None
        self.life.depth = None
        if depth is not None:
            depth.destroy()

    def release(self, wait_s: float = CLEANUP_WAIT_S) -> None:
        """Stop the worker, follow and concepts threads and free the models (cleanup, shutdown,
        error, process exit)."""
        inbox, self.inbox = self.inbox, None
        if inbox is not None:  # first: what still waits gets its failed result from the runner
            inbox.stop("node shutting down", min(wait_s, INTAKE_WAIT_S))
        parts = (self.runner, self.follow, self.concepts, self.outputs)
        self.runner = self.follow = self.concepts = self.outputs = None
        released = release(self.life, *parts, wait_s=wait_s, logger=self._logger)
        service, self.stop_follow = self.stop_follow, None
        if service is not None:
            self._node.destroy_service(service)
        stop_target_frame(released.target_frame if released is not None else None,
                          self._health, self._logger)
        self.config = None
        self.frames.clear()

    def _bind_world(self, msg: Any) -> object | None:
        """The world of a query's colour frame message (its stamp's depth, camera model and
        transform: ``QueryLife.bind_world``), as the query takes it."""
        header = msg.header
        return self.life.bind_world(stamp_ns(header.stamp.sec, header.stamp.nanosec),
                                    header.frame_id)

    # --- the node's callbacks, forwarded -------------------------------------------------------
    def on_image(self, msg: Any) -> str | None:
        """A frame for every consumer (by reference); what is wrong with it from its header
        (cheap, nothing decoded), or None."""
        self.frames.put(msg)
        if self.life.target_frame is not None:  # queued queries' transforms (CONTRACTS §11)
            stamp = msg.header.stamp
            self.life.settle_transforms(stamp_ns(stamp.sec, stamp.nanosec))
        if self.follow is not None:
            self.follow.offer(msg)
        if self.concepts is not None:
            self.concepts.offer(msg)
        return self.reader.problem(msg)

    def on_query(self, text: str) -> None:
        """A query topic message (the executor's callback): into the inbox, read by the intake
        thread (``_take_message``) or answered at once when the inbox is full. Unconfigured:
        ignored."""
        inbox = self.inbox
        if inbox is not None and self.config is not None:
            inbox.put(text)

    def _take_message(self, text: str) -> None:
        """One message of the inbox (intake thread): parsed (pipeline/intake.py), then its life,
        or its one failed result; ``stop_follow`` ends following."""
        runner, config = self.runner, self.config
        if runner is None or config is None:  # released meanwhile (stop refuses the rest)
            return
        try:
            parsed = parse_query_message(text, config.node.max_query_chars)
        except QueryRejected as exc:
            query = exc.failed_query(self.life.new_query_id)
            self.limiter.emit("query rejected", self._logger.warning,
                              f"query {for_log(query.id)} rejected: {for_log(exc.reason)}",
                              QUERY_LINES)
            runner.reject(query, exc.reason)
            return
        if isinstance(parsed, StopFollow):
            follow = self.follow
            if follow is not None and follow.stop("stop_follow on the query topic") is None:
                self.limiter.emit("stop_follow", self._logger.info, "stop_follow: not following")
            return
        query = Query(parsed.query_id or self.life.new_query_id(), parsed.text, parsed.refines)
        if not self.life.accepting:  # deactivated while it waited in the inbox
            self.life.refuse(query, "node deactivated")
            return
        self.life.take(query, parsed.follow)

    def _refuse_message(self, text: str, reason: str) -> None:
        """A message that will not be taken (inbox full, deactivated, shutting down): its one
        ``failed`` result with ``reason`` (a malformed one: with what is wrong with it); a
        ``stop_follow`` is still obeyed (cheap)."""
        config = self.config
        try:
            parsed = parse_query_message(text, config.node.max_query_chars if config else 0)
        except QueryRejected as exc:
            self.life.refuse(exc.failed_query(self.life.new_query_id), exc.reason)
            return
        if isinstance(parsed, StopFollow):
            if self.follow is not None:
                self.follow.stop("stop_follow on the query topic")
            return
        self.life.refuse(Query(parsed.query_id or self.life.new_query_id(), parsed.text,
                               parsed.refines), reason)

    def on_parameters(self, changes: Sequence[Parameter]) -> None:
        """Accepted runtime changes: concepts.prompts / rate_hz apply at once."""
        if self.concepts is not None:
            self.concepts.on_parameters(changes)

    def health_inputs(self) -> health.HealthInputs:
        """What /diagnostics reports now (its timer, on the executor)."""
        config, runner, agent = self.config, self.runner, self.life.agent
        values = config.to_params() if config is not None else params.current_values(self._node)
        return health.snapshot(self._health, values, getattr(agent, "segmenter", None),
                               runner.load() if runner is not None else None)

    def backends(self) -> dict[str, str]:
        """What answers: the configured backends, else (unconfigured) the parameters'."""
        if self.config is not None:
            # the agent's: + SAM 3's engine and the providers it really uses
            backends = getattr(self.life.agent, "backends", None)
            return dict(backends) if backends is not None else self.config.backends
        return backends_of({name: self._node.get_parameter(name).value
                            for name in ("llm.backend", "segmenter.backend")})
