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
- one worker thread (``QueryRunner``) converts the frame (``ros/conversions.py``), runs the agent
  and publishes (``ros/outputs.py``). Publishers are plain (not lifecycle) publishers so a query
  cancelled by ``deactivate`` still publishes its one result.
Every query lives in ``pipeline/query_life.py`` (``QueryLife``, ROS-free): topic queries, action
goals (``ros/segment_action.py``) and re-groundings are submitted there; it calls follow mode's
hooks, the agent, the 3D step and the outputs in their order. The node holds its collaborators
on it (``self._life``: runner, agent, outputs, action, follow, depth) and only builds, starts
and frees them.
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
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
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
    demo_backends_warning,
    offline_overrides,
)
from sam3_agent_ros.core.types import Query
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.pipeline.intake import QueryRejected, StopFollow, parse_query_message
from sam3_agent_ros.pipeline.query_life import QueryLife
from sam3_agent_ros.pipeline.query_runner import LatestFrame, QueryRunner
from sam3_agent_ros.redact import install_log_redaction, redact_text
from sam3_agent_ros.ros import (
    health,
    hints,
    node_cli,
    param_guard,
    params,
    rclpy_compat,
    segment_action,
)
from sam3_agent_ros.ros.concepts_control import SHUTDOWN_WAIT_S as CONCEPTS_SHUTDOWN_WAIT_S
from sam3_agent_ros.ros.conversions import FrameReader
from sam3_agent_ros.ros.diagnostics import DiagnosticsPublisher
from sam3_agent_ros.ros.follow_control import SHUTDOWN_WAIT_S as FOLLOW_SHUTDOWN_WAIT_S
from sam3_agent_ros.ros.follow_control import FollowControl
from sam3_agent_ros.ros.outputs import AnswerPublisher
from sam3_agent_ros.ros.python_logging import configure_node_logging
from sam3_agent_ros.ros.qos import IMAGE_QOS, OUTPUT_QOS, QUERY_QOS
from sam3_agent_ros.ros.spinning import sigint_noted, spin_until_shutdown

if TYPE_CHECKING:  # imported when first used (configure, activate)
    from sam3_agent_ros.ros.concepts_control import ConceptsControl
    from sam3_agent_ros.ros.depth import DepthTargets

# Appended to every "cannot configure" line about a missing endpoint, key or checkpoint.
TRY_OFFLINE = ("to try without a model: ros2 launch sam3_agent_ros sam3_agent.launch.py "
               "offline:=true, or " + " ".join(f"-p {o}" for o in offline_overrides()))
DEACTIVATE_WAIT_S = 5.0  # how long deactivate waits for a cancelled query to publish its result
CLEANUP_WAIT_S = 30.0  # how long cleanup waits for the worker before freeing the models
# At process exit (Ctrl-C, SIGTERM) nothing can be published any more (rclpy has shut the context
# down) and the worker, follow and concepts threads are daemons: each gets this long to see that it
# was cancelled, then the process exits without it; a SAM 3 or LLM call in flight would otherwise
# hold the exit for its whole length (bench/node_exit.py: exit within 2 s, even mid-query).
EXIT_WAIT_S = 0.5


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
        from sam3_agent_ros.backends import (
            close_quietly,
            make_llm,
            make_segmenter,
            missing_requirements,
        )
        from sam3_agent_ros.concepts import SegmenterGate
        from sam3_agent_ros.core.agent import Agent
        from sam3_agent_ros.core.answers import AnswerStore

        missing = missing_requirements(config)  # milliseconds: before anything slow
        if missing:
            self._configure_problem = "; ".join(missing)
            for problem in missing:
                self.get_logger().error(f"cannot configure: {problem}; {TRY_OFFLINE}")
            return TransitionCallbackReturn.FAILURE
        demo = demo_backends_warning(config.to_params())
        if demo:
            self.get_logger().warning(demo)
        self.get_logger().info(
            f"configuring: llm.backend={config.llm.backend} segmenter.backend="
            f"{config.segmenter.backend} (building the backends; SAM 3 may take a while)")

        segmenter = None
        try:
            llm = health.ObservedLlm(make_llm(config), self._health)
            segmenter = make_segmenter(config)
            gate = SegmenterGate(segmenter)  # the agent and follow mode first, concepts between
            self._life.agent = Agent(config, llm=llm, segmenter=gate.first,
                                answers=AnswerStore(config.refine.keep_answers,
                                                    config.refine.max_kept_mib * 2**20))
        except Exception as exc:  # any backend failure: stay unconfigured, say why
            close_quietly(segmenter)
            self._configure_problem = (f"cannot build the backends: {type(exc).__name__}: "
                                       f"{redact_text(str(exc))}")
            self.get_logger().error(self._configure_problem)
            self._restart_only = False
            self.get_logger().error(f"to configure: {hints.fix_backends(name)}")
            return TransitionCallbackReturn.FAILURE
        self._config = config
        self._life.max_query_chars = config.node.max_query_chars
        self._reader = FrameReader(config.node.max_image_pixels)
        self._outputs = self._life.outputs = AnswerPublisher(
            self, config.node.publish_overlay, OUTPUT_QOS, config.overlay)
        node = config.node
        self._runner = self._life.runner = QueryRunner(
            answer=self._life.answer, to_frame=self._reader.frame, publish=self._life.finish,
            status=self._life.status, frames=self._frames, policy=node.query_policy,
            queue_size=node.queue_size, max_frame_age_s=node.max_frame_age_s,
            frame_wait_s=node.frame_wait_s)
        self._runner.start()
        self._follow = self._life.follow = FollowControl(
            self, config, gate.first, self._reader.frame, depth=self._life.current_depth,
            reground=self._life.reground, on_status=self._health.follow_update)
        from sam3_agent_ros.ros.concepts_control import ConceptsControl

        self._concepts = ConceptsControl(self, config, gate, self._reader.frame,
                                         depth=self._life.current_depth)
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
        main passes EXIT_WAIT_S: at exit nobody can receive a result any more)."""
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
        """Stop the worker, follow and concepts threads (each waited for up to ``wait_s``, the
        follow and concepts threads at most their own shutdown wait) and free the models unless
        one of them is still busy with the segmenter (cleanup, shutdown, error, process exit)."""
        runner, self._runner = self._runner, None
        self._life.runner = None
        worker_done = True
        if runner is not None:
            worker_done = runner.stop("node shutting down", wait_s)
        follow, self._follow = self._follow, None
        self._life.follow = None
        follow_done = True
        if follow is not None:
            follow_done = follow.destroy(min(wait_s, FOLLOW_SHUTDOWN_WAIT_S))
        concepts, self._concepts = self._concepts, None
        concepts_done = True
        if concepts is not None:
            concepts_done = concepts.destroy(min(wait_s, CONCEPTS_SHUTDOWN_WAIT_S))
        agent, self._life.agent = self._life.agent, None
        close = getattr(getattr(agent, "segmenter", None), "close", None)
        if callable(close) and worker_done and follow_done and concepts_done:
            try:
                close()
            except Exception as exc:
                self.get_logger().warning(f"segmenter close failed: {exc}")
        answers, self._outputs = self._outputs, None
        self._life.outputs = None
        if answers is not None:
            answers.destroy()
        self._config = None
        self._life.max_query_chars = 0
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
    argv = list(sys.argv if args is None else args)
    early = node_cli.early_exit(argv[1:], sys.stdout, sys.stderr)  # --help, unreadable files
    if early is not None:
        return early
    configure_node_logging()  # Python's lines (httpx, openai, ours) in rclpy's format
    install_log_redaction()  # no URL credentials in any Python log line (httpx, openai, ours)
    start_up_failed = threading.Event()
    try:
        # Ctrl-C is noted, never raised mid-callback (ros/spinning.py); rclpy's handler, installed
        # by init, shuts the context down and passes the signal on to this one.
        with sigint_noted() as interrupted, rclpy_compat.initialized(args=argv):
            node = Sam3AgentNode()
            start_up_failed = node.start_up_failed
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:  # not executor.spin(): see ros/spinning.py
                spin_until_shutdown(
                    executor, stop=lambda: interrupted.is_set() or start_up_failed.is_set())
            finally:
                node.release(EXIT_WAIT_S)
                executor.shutdown(timeout_sec=1.0)
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except rclpy_compat.InitFailed as exc:  # e.g. a params file rcl cannot parse
        sys.stderr.write(f"{node_cli.PROGRAM}: cannot start: {exc}\n")
        return 2
    return 1 if start_up_failed.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
