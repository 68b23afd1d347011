"""The lifecycle node ``sam3_agent`` (executable ``sam3_agent_node``): a thin adapter.

It declares the parameters, keeps a reference to the latest frame, hands queries to a worker
(``QueryRunner``) that runs the ROS-free ``Agent``, and publishes what the agent answers.

Threads:
- the executor (a ``SingleThreadedExecutor``) runs only short callbacks: the image callback stores a
  reference to the message (no conversion, no copy), the query callback parses and enqueues.
  (rclpy's ``MultiThreadedExecutor`` cost 2-4x the CPU of a bare subscriber at 30 Hz, with spikes
  to 75 % of a core, for nothing here: see bench/ros_node.py.)
- one follow thread (``ros/follow_control.py``) keeps a followed answer's masks current on the
  newest frame (follow mode); it publishes ``~/follow/*``.
- one concepts thread (``ros/concepts_control.py``) segments the standing concepts
  (``concepts.prompts``) on the newest frame and publishes ``~/concepts/*``. The agent and follow
  mode reach the segmenter through a ``SegmenterGate`` first: they wait at most for the concept
  pass holding it.
- a 1 Hz timer on the executor publishes ``/diagnostics`` (``ros/diagnostics.py``) from what the
  node records as it runs (``ros/health.py``: frames, LLM calls, lifecycle, follow statuses).
- one worker thread (``pipeline/query_runner.py``) converts the frame, runs the agent and
  publishes (``ros/outputs.py``: plain publishers, so a query cancelled by ``deactivate`` still
  publishes its one result).
Every query lives in ``pipeline/query_life.py`` (``QueryLife``, ROS-free): topic queries
(``pipeline/intake.py``), action goals (``ros/segment_action.py``) and re-groundings are
submitted there; it calls follow mode's hooks, the agent, the 3D step and the outputs in their
order. The node builds its collaborators (backends: ``ros/assembly.py``), hands them to the life
(``self._life``), starts and frees them.
- ``on_configure`` builds the backends synchronously (SAM 3 loads for seconds to minutes), so a
  failure makes the transition fail as ROS tools expect. With ``autostart`` (the default) the
  transitions run on a start-up thread, so the executor keeps answering ``get_state`` and
  parameter services during the load. A configure requested through the lifecycle service runs in
  the service callback (rclpy transitions are synchronous) and holds the executor while loading.

Parameters (ros/params.py): the ones that choose the endpoint, the key, code or files, and the
limits that protect the node against a peer, are read-only after start-up (a runtime set answers
how to change them: a restart); a lifecycle cycle re-reads them, so it re-reads the start-up
values. Unknown overrides (typos) and bad start-up values make configure fail with the fix.
A failed autostart (configure or activate) then ends the process with status 1 once the reasons
are logged, so launch, systemd or a supervisor see it die instead of an idle process that looks
alive; with ``autostart`` false (a lifecycle manager drives it) the node stays up, unconfigured.
Accepted runtime changes are logged with their old and new values.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.subscription import Subscription
from rclpy.timer import Timer
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import String

from sam3_agent_ros.config import (
    NODE_NAME,
    Config,
    ConfigError,
    backends_of,
)
from sam3_agent_ros.core.types import Query
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.pipeline.intake import QueryRejected, StopFollow, parse_query_message
from sam3_agent_ros.pipeline.query_life import QueryLife
from sam3_agent_ros.pipeline.query_runner import LatestFrame, QueryRunner
from sam3_agent_ros.redact import redact_text
from sam3_agent_ros.ros import (
    health,
    hints,
    node_main,
    param_guard,
    params,
    segment_action,
)
from sam3_agent_ros.ros.assembly import (
    CannotConfigure,
    build_agent,
    release,
    start_target_frame,
    stop_target_frame,
)
from sam3_agent_ros.ros.conversions import FrameReader
from sam3_agent_ros.ros.diagnostics import DiagnosticsPublisher
from sam3_agent_ros.ros.follow_control import FollowControl
from sam3_agent_ros.ros.outputs import AnswerPublisher
from sam3_agent_ros.ros.qos import IMAGE_QOS, OUTPUT_QOS, QUERY_QOS

if TYPE_CHECKING:  # imported when first used (configure, activate)
    from sam3_agent_ros.ros.concepts_control import ConceptsControl
    from sam3_agent_ros.ros.depth import DepthTargets

DEACTIVATE_WAIT_S = 5.0  # how long deactivate waits for a cancelled query to publish its result
CLEANUP_WAIT_S = 30.0  # how long cleanup waits for the worker before freeing the models


class Sam3AgentNode(params.ReadOnlyParameters, LifecycleNode):
    def __init__(self, **kwargs: Any):
        super().__init__(NODE_NAME, **kwargs)
        # Start-up problems: bad override values, unknown override names. Those of read-only or
        # unknown parameters last until a restart; the others until a valid runtime set.
        self._param_problems = params.declare_parameters(self) + params.unknown_overrides(self)
        for problem in self._param_problems:
            self.get_logger().error(f"parameter refused at start-up: {redact_text(str(problem))}")
        # Whatever a peer sends, a set is answered (refused with the reason if a check raises)
        # and never ends the spin (ros/param_guard.py).
        self.add_on_set_parameters_callback(param_guard.refusing(self, self._on_set_parameters))
        if hasattr(self, "add_pre_set_parameters_callback"):  # rclpy of Iron and later
            self.add_pre_set_parameters_callback(params.typed_string_arrays)
        param_guard.guard_parameter_services(self)
        self._frames = LatestFrame()
        self._config: Config | None = None
        self._reader = FrameReader()  # under config.node.max_image_pixels once configured
        # a query's collaborators (runner, agent, outputs, action, follow, depth): None while
        # absent; the order of their calls is the life's (pipeline/query_life.py)
        self._life = QueryLife(self._backends, self.context.ok, self.get_logger())
        # the same collaborators as built here (the life sees them through its ports only)
        self._runner: QueryRunner | None = None
        self._follow: FollowControl | None = None
        self._outputs: AnswerPublisher | None = None
        self._depth: DepthTargets | None = None
        self._concepts: ConceptsControl | None = None  # standing concepts (concepts_control.py)
        self._inputs: list[Subscription] = []
        self._autostart_timer: Timer | None = None
        self.start_up_failed = threading.Event()  # autostart failed: main exits with status 1
        self._restart_only = False  # the last configure failed for want of a restart
        self._health = health.HealthRecorder()  # /diagnostics (ros/health.py)
        self._configure_problem: str | None = None  # why the last configure failed
        self._diagnostics = DiagnosticsPublisher(self, self._health_inputs)
        name = self.get_fully_qualified_name()
        if self.get_parameter("autostart").value:
            self._autostart_timer = self.create_timer(0.0, self._start_autostart)
        elif self._param_problems:  # autostart's configure would say it; nothing else will
            self.get_logger().error(
                f"the node cannot configure: {hints.fix_parameters(self._param_problems, name)}")
        else:
            self.get_logger().info(hints.manual_start(name))

    # --- lifecycle -----------------------------------------------------------------------------
    def _start_autostart(self) -> None:
        """Once the executor spins: configure + activate on a start-up thread (see above)."""
        if self._autostart_timer is not None:
            self.destroy_timer(self._autostart_timer)
        self._autostart_timer = None
        threading.Thread(target=self._autostart, name="sam3_agent_autostart", daemon=True).start()

    def _autostart(self) -> None:
        try:
            if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error(hints.autostart_failed(
                    self.get_fully_qualified_name(), self._restart_only))
                self.start_up_failed.set()
                return
            if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error(f"autostart: activate failed (see above); "
                                        f"{hints.EXITING}")
                self.start_up_failed.set()
        except Exception as exc:  # e.g. the process is shutting down during the load
            self.get_logger().warning(f"autostart stopped: {type(exc).__name__}: {exc}")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._health.configuring()
        self._configure_problem = None
        outcome = self._configure()
        self._health.configured(outcome == TransitionCallbackReturn.SUCCESS,
                                self._configure_problem)
        return outcome

    def _configure(self) -> TransitionCallbackReturn:
        # Read-only parameters still hold their start-up values: a cycle re-reads those.
        name = self.get_fully_qualified_name()
        reasons = self._param_problems + params.problems(params.current_values(self))
        if reasons:
            self._configure_problem = redact_text("; ".join(str(r) for r in reasons))
            for reason in reasons:
                self.get_logger().error(f"cannot configure: {redact_text(str(reason))}")
            self._restart_only = any(r.fixed_by_restart for r in reasons)
            self.get_logger().error(f"to configure: {hints.fix_parameters(reasons, name)}")
            return TransitionCallbackReturn.FAILURE
        try:
            config = params.read_config(self)
        except ConfigError as exc:
            self._configure_problem = redact_text(str(exc))
            self.get_logger().error(f"cannot configure: {redact_text(str(exc))}")
            self._restart_only = False
            return TransitionCallbackReturn.FAILURE
        try:
            self._life.agent, gate = build_agent(config, self._health, self.get_logger(), name)
        except CannotConfigure as exc:
            self._configure_problem = exc.problem
            if exc.by_building:
                self._restart_only = False
            return TransitionCallbackReturn.FAILURE
        self._config = config
        self._life.max_query_chars = config.node.max_query_chars
        self._reader = FrameReader(config.node.max_image_pixels)
        self._outputs = self._life.outputs = AnswerPublisher(
            self, config.node.publish_overlay, OUTPUT_QOS, config.overlay)
        self._life.target_frame = start_target_frame(self, config, self._health)  # CONTRACTS §9
        self._life.cloud_max_points = config.depth.cloud_max_points
        self._life.on_target = self._health.target_frame_looked_up
        node = config.node
        self._runner = self._life.runner = QueryRunner(
            answer=self._life.answer, to_frame=self._reader.frame, publish=self._life.finish,
            status=self._life.status, frames=self._frames, policy=node.query_policy,
            queue_size=node.queue_size, max_frame_age_s=node.max_frame_age_s,
            frame_wait_s=node.frame_wait_s)
        self._runner.start()
        self._follow = self._life.follow = FollowControl(
            self, config, gate.first, self._reader.frame, depth=self._life.current_depth,
            reground=self._life.reground, on_status=self._health.follow_update,
            target_frame=self._life.current_target_frame,
            on_target=self._health.target_frame_looked_up)
        from sam3_agent_ros.ros.concepts_control import ConceptsControl

        self._concepts = ConceptsControl(self, config, gate, self._reader.frame,
                                         depth=self._life.current_depth,
                                         target_frame=self._life.current_target_frame)
        self.get_logger().info("configured")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        config = self._config
        if config is None:  # rclpy activates only a configured node
            return TransitionCallbackReturn.FAILURE
        node = config.node
        image_type, image_topic = ((CompressedImage, "image/compressed")
                                   if node.image_transport == "compressed" else (Image, "image"))
        image_sub = self.create_subscription(image_type, image_topic, self._on_image,
                                             IMAGE_QOS[node.image_qos])
        query_sub = self.create_subscription(String, "query", self._on_query, QUERY_QOS)
        self._inputs = [image_sub, query_sub]
        self._life.accepting = True
        self._health.listening(image_sub.topic_name)
        if config.depth.enabled:
            from sam3_agent_ros.ros.depth import start_depth

            self._depth = self._life.depth = start_depth(self, config.depth,
                                                         self._reader.max_pixels, self._health)
        self.get_logger().info(
            f"active: listening on {image_sub.topic_name} ({node.image_qos}) and "
            f"{query_sub.topic_name}")
        if self._life.action is None:  # ros/segment_action.py: goals run through the same runner
            self._life.action = segment_action.serve(
                self, runner=self._life.current_runner, active=self._life.is_accepting,
                new_query_id=self._life.new_query_id, max_query_chars=self._life.query_chars,
                submit=self._life.submit, backends=self._backends,
                result_timeout_s=config.action.result_timeout_s,
                max_results_with_images=config.action.max_results_with_images)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        if self._follow is not None:
            self._follow.stop("node deactivated")
        if self._concepts is not None:
            self._concepts.clear()
        if self._runner is not None:
            self._runner.cancel_all("node deactivated")
            if not self._runner.wait_idle(DEACTIVATE_WAIT_S):
                self.get_logger().warning(
                    "the cancelled query is still finishing; its result will follow")
        self._frames.clear()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self, wait_s: float = CLEANUP_WAIT_S) -> None:
        """Free everything (shutdown, error, and before the process exits, whatever the state;
        node_main passes EXIT_WAIT_S: at exit nobody can receive a result any more)."""
        self._stop_inputs()
        self._release(wait_s)

    def _stop_inputs(self) -> None:
        self._health.not_listening()
        for sub in self._inputs:
            self.destroy_subscription(sub)
        self._inputs = []
        self._life.accepting = False
        depth, self._depth = self._depth, None
        self._life.depth = None
        if depth is not None:
            depth.destroy()

    def _release(self, wait_s: float = CLEANUP_WAIT_S) -> None:
        """Stop the worker, follow and concepts threads and free the models (ros/assembly.py:
        cleanup, shutdown, error, process exit)."""
        parts = (self._runner, self._follow, self._concepts, self._outputs)
        self._runner = self._follow = self._concepts = self._outputs = None
        release(self._life, *parts, wait_s=wait_s, logger=self.get_logger())
        stop_target_frame(self._life, self._health, self.get_logger())
        self._config = None
        self._frames.clear()
        self._health.unconfigured()

    def _on_set_parameters(self, changes: list[Parameter]) -> SetParametersResult:
        result = params.on_set_parameters(self, changes, configured=self._config is not None)
        if result.successful:  # a start-up problem fixed by this change is gone
            changed = {c.name for c in changes}
            self._param_problems = [p for p in self._param_problems if p.name not in changed]
            if self._concepts is not None:  # concepts.prompts / rate_hz apply at once
                self._concepts.on_parameters(changes)
        return result

    # --- inputs --------------------------------------------------------------------------------
    def _on_image(self, msg: Any) -> None:
        self._frames.put(msg)
        follow = self._follow
        if follow is not None:
            follow.offer(msg)
        concepts = self._concepts
        if concepts is not None:
            concepts.offer(msg)
        problem = self._reader.problem(msg)  # from the header: cheap, nothing decoded
        self._health.frame(problem)
        if problem:
            self.get_logger().warning(f"unusable frame on the image topic: {problem}",
                                      throttle_duration_sec=5.0)

    def _on_query(self, msg: String) -> None:
        try:
            self._handle_query(msg)
        except Exception as exc:  # a callback that raises would stop the executor
            self.get_logger().error(f"query callback failed: {for_log(repr(exc))}")

    def _handle_query(self, msg: String) -> None:
        runner, config = self._runner, self._config
        if runner is None or config is None:
            return
        try:
            parsed = parse_query_message(msg.data, config.node.max_query_chars)
        except QueryRejected as exc:
            query = exc.failed_query(self._life.new_query_id)
            self.get_logger().warning(f"query {for_log(query.id)} rejected: {for_log(exc.reason)}",
                                      throttle_duration_sec=1.0)
            runner.reject(query, exc.reason)
            return
        if isinstance(parsed, StopFollow):
            follow = self._follow
            if follow is not None and follow.stop("stop_follow on the query topic") is None:
                self.get_logger().info("stop_follow: not following")
            return
        query = Query(parsed.query_id or self._life.new_query_id(), parsed.text, parsed.refines)
        self._life.take(query, parsed.follow)

    # --- outputs -------------------------------------------------------------------------------
    def _health_inputs(self) -> health.HealthInputs:
        """What /diagnostics reports now (its timer, on the executor)."""
        config, runner, agent = self._config, self._runner, self._life.agent
        values = config.to_params() if config is not None else params.current_values(self)
        return health.snapshot(self._health, values, getattr(agent, "segmenter", None),
                               runner.load() if runner is not None else None)

    def _backends(self) -> dict[str, str]:
        """What answers: the configured backends, else (unconfigured) the parameters'."""
        config = self._config
        if config is not None:
            return config.backends
        return backends_of({name: self.get_parameter(name).value
                            for name in ("llm.backend", "segmenter.backend")})


def main(args: list[str] | None = None) -> int:
    """The executable ``sam3_agent_node`` (ros/node_main.py: start-up, spin, exit status)."""
    return node_main.run(Sam3AgentNode, args)


if __name__ == "__main__":
    sys.exit(main())
