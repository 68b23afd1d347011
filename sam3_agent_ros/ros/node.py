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
- one worker thread (``QueryRunner``) converts the frame, runs the agent and publishes. Publishers
  are plain (not lifecycle) publishers so a query cancelled by ``deactivate`` still publishes its
  one result.
- ``on_configure`` builds the backends synchronously (SAM 3 loads for seconds to minutes), so a
  failure makes the transition fail as ROS tools expect. With ``autostart`` (the default) the
  transitions run on a start-up thread, so the executor keeps answering ``get_state`` and
  parameter services during the load. A configure requested through the lifecycle service runs in
  the service callback (rclpy transitions are synchronous) and holds the executor while loading.

Parameters (ros/params.py): the ones that choose the endpoint, the key, code or files, and the
limits that protect the node against a peer, are read-only after start-up (a runtime set answers
how to change them: a restart); a lifecycle cycle re-reads them, so it re-reads the start-up
values. Unknown overrides (typos) and bad start-up values keep the node unconfigured with the fix.
Accepted runtime changes are logged with their old and new values.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import sys
import threading
from typing import Any

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
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
from sam3_agent_ros.core.types import Frame, Query, QueryStatus, Result, StatusEvent
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.image_header import DEFAULT_MAX_PIXELS
from sam3_agent_ros.redact import install_log_redaction, redact_text
from sam3_agent_ros.ros import hints, node_cli, params, rclpy_compat, segment_action
from sam3_agent_ros.ros.conversions import frame_problem, message_to_frame
from sam3_agent_ros.ros.follow_control import SHUTDOWN_WAIT_S as FOLLOW_SHUTDOWN_WAIT_S
from sam3_agent_ros.ros.follow_control import FollowControl
from sam3_agent_ros.ros.outputs import OUTPUT_QOS, AnswerPublisher
from sam3_agent_ros.ros.query_message import QueryRejected, StopFollow, parse_query_message
from sam3_agent_ros.ros.query_runner import LatestFrame, QueryRunner
from sam3_agent_ros.ros.spinning import spin_until_shutdown

QUERY_QOS = OUTPUT_QOS
IMAGE_QOS = {
    "sensor_data": QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT,
                              history=HistoryPolicy.KEEP_LAST, depth=1,
                              durability=DurabilityPolicy.VOLATILE),
    "reliable": QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                           depth=1, durability=DurabilityPolicy.VOLATILE),
}
# Appended to every "cannot configure" line about a missing endpoint, key or checkpoint.
TRY_OFFLINE = ("to try without a model: ros2 launch sam3_agent_ros sam3_agent.launch.py "
               "offline:=true, or " + " ".join(f"-p {o}" for o in offline_overrides()))
DEACTIVATE_WAIT_S = 5.0  # how long deactivate waits for a cancelled query to publish its result
CLEANUP_WAIT_S = 30.0  # how long cleanup waits for the worker before freeing the models
# At process exit (Ctrl-C, SIGTERM) nothing can be published any more (rclpy has shut the context
# down) and the worker and follow threads are daemons: each gets this long to see that it was
# cancelled, then the process exits without it; a SAM 3 or LLM call in flight would otherwise hold
# the exit for its whole length (bench/node_exit.py: exit within 2 s, even mid-query).
EXIT_WAIT_S = 0.5
ERROR_LOG_CHARS = 500  # the most of a result's error that its log line repeats


class Sam3AgentNode(params.ReadOnlyParameters, LifecycleNode):
    def __init__(self, **kwargs: Any):
        super().__init__(NODE_NAME, **kwargs)
        # Start-up problems: bad override values, unknown override names. Those of read-only or
        # unknown parameters last until a restart; the others until a valid runtime set.
        self._param_problems = params.declare_parameters(self) + params.unknown_overrides(self)
        for problem in self._param_problems:
            self.get_logger().error(f"parameter refused at start-up: {redact_text(str(problem))}")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._query_ids = itertools.count(1)
        self._frames = LatestFrame()
        self._config: Config | None = None
        self._max_image_pixels = DEFAULT_MAX_PIXELS  # config.node.max_image_pixels once configured
        self._agent = None
        self._runner: QueryRunner | None = None
        self._answers: AnswerPublisher | None = None  # ~/mask, ~/labels, ~/overlay, ~/result
        self._status_pub = None
        self._follow: FollowControl | None = None  # follow mode (ros/follow_control.py)
        self._inputs: list[Any] = []
        self._depth = None
        self._autostart_timer = None
        self._segment = None  # the action ~/segment, from the first activation on
        self._restart_only = False  # the last configure failed for want of a restart
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
        self.destroy_timer(self._autostart_timer)
        self._autostart_timer = None
        threading.Thread(target=self._autostart, name="sam3_agent_autostart", daemon=True).start()

    def _autostart(self) -> None:
        try:
            if self.trigger_configure() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error(hints.autostart_failed(
                    self.get_fully_qualified_name(), self._restart_only))
                return
            if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error("autostart: activate failed (see above)")
        except Exception as exc:  # e.g. the process is shutting down during the load
            self.get_logger().warning(f"autostart stopped: {type(exc).__name__}: {exc}")

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        # Read-only parameters still hold their start-up values: a cycle re-reads those.
        name = self.get_fully_qualified_name()
        reasons = self._param_problems + params.problems(params.current_values(self))
        if reasons:
            for reason in reasons:
                self.get_logger().error(f"cannot configure: {redact_text(str(reason))}")
            self._restart_only = any(r.fixed_by_restart for r in reasons)
            self.get_logger().error(f"to configure: {hints.fix_parameters(reasons, name)}")
            return TransitionCallbackReturn.FAILURE
        try:
            config = params.read_config(self)
        except ConfigError as exc:
            self.get_logger().error(f"cannot configure: {redact_text(str(exc))}")
            self._restart_only = False
            return TransitionCallbackReturn.FAILURE
        from sam3_agent_ros.backends import (
            close_quietly,
            make_llm,
            make_segmenter,
            missing_requirements,
        )
        from sam3_agent_ros.core.agent import Agent

        missing = missing_requirements(config)  # milliseconds: before anything slow
        if missing:
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
            llm = make_llm(config)
            segmenter = make_segmenter(config)
            self._agent = Agent(config, llm=llm, segmenter=segmenter)
        except Exception as exc:  # any backend failure: stay unconfigured, say why
            close_quietly(segmenter)
            self.get_logger().error(
                f"cannot build the backends: {type(exc).__name__}: {redact_text(str(exc))}")
            self._restart_only = False
            self.get_logger().error(f"to configure: {hints.fix_backends(name)}")
            return TransitionCallbackReturn.FAILURE
        self._config = config
        self._max_image_pixels = config.node.max_image_pixels
        self._answers = AnswerPublisher(self, config.node.publish_overlay, OUTPUT_QOS)
        self._status_pub = self.create_publisher(String, "~/status", OUTPUT_QOS)
        node = config.node
        self._runner = QueryRunner(
            answer=self._answer, to_frame=self._to_frame, publish=self._publish_result,
            status=self._publish_status, frames=self._frames, policy=node.query_policy,
            queue_size=node.queue_size, max_frame_age_s=node.max_frame_age_s,
            frame_wait_s=node.frame_wait_s)
        self._runner.start()
        self._follow = FollowControl(self, config, self._agent.segmenter, self._to_frame,
                                     depth=lambda: self._depth, reground=self._reground)
        self.get_logger().info("configured")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        node = self._config.node
        if node.image_transport == "compressed":
            image_sub = self.create_subscription(
                CompressedImage, "image/compressed", self._on_image, IMAGE_QOS[node.image_qos])
        else:
            image_sub = self.create_subscription(
                Image, "image", self._on_image, IMAGE_QOS[node.image_qos])
        query_sub = self.create_subscription(String, "query", self._on_query, QUERY_QOS)
        self._inputs = [image_sub, query_sub]
        if self._config.depth.enabled:
            try:
                from sam3_agent_ros.ros.depth import DepthTargets

                self._depth = DepthTargets(self, self._config.depth,
                                           callback_group=self.default_callback_group,
                                           max_pixels=self._max_image_pixels)
            except Exception as exc:
                self.get_logger().error(f"depth disabled: {type(exc).__name__}: {exc}")
                self._depth = None
        self.get_logger().info(
            f"active: listening on {image_sub.topic_name} ({node.image_qos}) and "
            f"{query_sub.topic_name}")
        if self._segment is None:  # ros/segment_action.py: goals run through the same runner
            self._segment = segment_action.serve(
                self, runner=lambda: self._runner, active=lambda: bool(self._inputs),
                new_query_id=self._new_query_id,
                max_query_chars=lambda: self._config.node.max_query_chars if self._config else 0,
                request_follow=self._request_follow, backends=self._backends,
                result_timeout_s=self._config.action.result_timeout_s,
                max_results_with_images=self._config.action.max_results_with_images)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        if self._follow is not None:
            self._follow.stop("node deactivated")
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
        self._stop_inputs()
        self._release()
        return super().on_shutdown(state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        self._release()
        return TransitionCallbackReturn.SUCCESS

    def _stop_inputs(self) -> None:
        for sub in self._inputs:
            self.destroy_subscription(sub)
        self._inputs = []
        if self._depth is not None:
            try:
                self._depth.destroy()
            except Exception as exc:
                self.get_logger().warning(f"depth: destroy failed: {exc}")
            self._depth = None

    def _release(self, wait_s: float = CLEANUP_WAIT_S,
                 follow_wait_s: float = FOLLOW_SHUTDOWN_WAIT_S) -> None:
        """Stop the worker and the follow thread (waited for up to ``wait_s`` and
        ``follow_wait_s``) and free the models unless one of them is still busy with the
        segmenter (cleanup, shutdown, error, process exit)."""
        runner, self._runner = self._runner, None
        worker_done = True
        if runner is not None:
            worker_done = runner.stop("node shutting down", wait_s)
        follow, self._follow = self._follow, None
        follow_done = True
        if follow is not None:
            follow_done = follow.destroy(follow_wait_s)
        agent, self._agent = self._agent, None
        close = getattr(getattr(agent, "segmenter", None), "close", None)
        if callable(close) and worker_done and follow_done:
            try:
                close()
            except Exception as exc:
                self.get_logger().warning(f"segmenter close failed: {exc}")
        answers, self._answers = self._answers, None
        if answers is not None:
            answers.destroy()
        if self._status_pub is not None:
            self.destroy_publisher(self._status_pub)
            self._status_pub = None
        self._config = None
        self._frames.clear()

    def _on_set_parameters(self, changes: list[Any]):
        """Validate a runtime change of dynamic parameters (read-only ones never get here:
        ``ReadOnlyParameters``); log each accepted one once, with its old and new value. Nothing
        after this callback can refuse the change (rclpy checked the descriptors before)."""
        current = params.current_values(self)
        result = params.validate_changes(current, changes)
        if not result.successful:
            self.get_logger().warning(f"parameter change rejected: {redact_text(result.reason)}")
            return result
        when = (" (takes effect at the next configure: deactivate, cleanup, configure, activate)"
                if self._config is not None else "")
        for line in params.change_lines(current, changes):
            self.get_logger().info(f"parameter changed: {line}{when}")
        changed = {c.name for c in changes}
        self._param_problems = [p for p in self._param_problems if p.name not in changed]
        return result

    # --- inputs --------------------------------------------------------------------------------
    def _on_image(self, msg: Any) -> None:
        self._frames.put(msg)
        follow = self._follow
        if follow is not None:
            follow.offer(msg)
        try:  # header fields, len(data), the PNG/JPEG header: cheap, nothing decoded
            problem = frame_problem(msg, self._max_image_pixels)
        except Exception as exc:  # a callback that raises would stop the executor
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            self.get_logger().warning(f"unusable frame on the image topic: {problem}",
                                      throttle_duration_sec=5.0)

    def _on_query(self, msg: String) -> None:
        try:
            self._handle_query(msg)
        except Exception as exc:  # a callback that raises would stop the executor
            self.get_logger().error(f"query callback failed: {type(exc).__name__}: {exc}")

    def _handle_query(self, msg: String) -> None:
        runner, config = self._runner, self._config
        if runner is None or config is None:
            return
        try:
            parsed = parse_query_message(msg.data, config.node.max_query_chars)
        except QueryRejected as exc:
            query = Query(exc.query_id or self._new_query_id(), exc.text)
            self.get_logger().warning(f"query {for_log(query.id)} rejected: {for_log(exc.reason)}",
                                      throttle_duration_sec=1.0)
            runner.reject(query, exc.reason)
            return
        follow = self._follow
        if isinstance(parsed, StopFollow):
            if follow is not None and follow.stop("stop_follow on the query topic") is None:
                self.get_logger().info("stop_follow: not following")
            return
        query = Query(parsed.query_id or self._new_query_id(), parsed.text)
        if self._segment is not None and self._segment.has_goal(query.id):
            # Its result would end that goal: refuse it alone, past the action's result hook.
            reason = f"query_id {query.id!r} is already in use by a running goal"
            self.get_logger().warning(f"query rejected: {for_log(reason)}")
            if self._answers is not None:
                self._answers.publish(self._with_backends(
                    Result(query.id, query.text, QueryStatus.FAILED, error=reason)), None)
            return
        self.get_logger().info(f"query {for_log(query.id)}: {for_log(repr(query.text))}")
        if follow is not None:
            follow.stop(f"new query {query.id}")  # following must not slow the query
            follow.request(query.id, query.text, parsed.follow)
        runner.submit(query)

    def _reground(self, query_id: str, text: str) -> None:
        """follow.reground_on_lost: run the lost query again, followed (follow thread)."""
        runner, follow = self._runner, self._follow
        if runner is None or follow is None:
            return
        query = Query(f"{query_id}-reground-{next(self._query_ids)}", text)
        follow.request(query.id, query.text, True)
        runner.submit(query)

    def _answer(self, frame: Frame, query: Query, cancel: Any, on_status: Any) -> Result:
        """The agent, once following ended and the follow thread is done with the segmenter
        (query worker). Topic queries stopped following on arrival; this covers action goals."""
        follow = self._follow
        if follow is not None:
            follow.stop(f"new query {query.id}")
            follow.before_answer()
        return self._agent.run(frame, query, cancel, on_status)

    def _request_follow(self, query_id: str, text: str, follow: bool | None) -> None:
        """An action goal asks (or not) to be followed, like ``"follow"`` in a topic query."""
        control = self._follow
        if control is not None:
            control.request(query_id, text, follow)

    def _new_query_id(self) -> str:
        return f"q-{next(self._query_ids)}"

    def _to_frame(self, msg: Any) -> Frame:
        """A frame message as a Frame (query worker, follow thread); ``FrameUnusable`` for a
        malformed one or one over ``max_image_pixels`` (refused before decoding)."""
        return message_to_frame(msg, self._max_image_pixels)

    # --- outputs -------------------------------------------------------------------------------
    def _backends(self) -> dict[str, str]:
        """What answers: the configured backends, else (unconfigured) the parameters'."""
        config = self._config
        if config is not None:
            return config.backends
        return backends_of({name: self.get_parameter(name).value
                            for name in ("llm.backend", "segmenter.backend")})

    def _with_backends(self, result: Result) -> Result:
        """Every result the node publishes names its backends (CONTRACTS §8d), also those that
        never reached the agent (no frame, rejected, duplicate id)."""
        if not result.backends:
            result.backends = self._backends()
        return result

    def _publish_status(self, event: StatusEvent) -> None:
        if not self.context.ok():  # Ctrl-C: rclpy is shut down, nothing can be published
            return
        if event.backends is None:
            event = dataclasses.replace(event, backends=self._backends())
        publisher = self._status_pub
        if publisher is not None:
            publisher.publish(String(data=json.dumps(event.to_json())))
        if self._segment is not None:
            self._segment.on_status(event)

    def _publish_result(self, result: Result) -> None:
        """Images (lazily), the result JSON and the 3D targets: see ``ros/outputs.py``."""
        if not self.context.ok():  # Ctrl-C: rclpy is shut down; the process is exiting
            logging.getLogger(__name__).info(
                "query %s ended (%s) during shutdown; not published", result.query_id,
                result.status.value)
            return
        self._with_backends(result)
        answers = self._answers
        published = answers.publish(result, self._depth) if answers is not None else None
        if self._segment is not None:
            self._segment.on_result(result, published)  # ends the goal of this query, if any
        if answers is None:
            return
        self.get_logger().info(
            f"query {for_log(result.query_id)}: {result.status.value}"
            + (f" ({for_log(result.error, ERROR_LOG_CHARS)})" if result.error
               else f", {len(result.masks)} mask(s)"))
        follow = self._follow
        if follow is not None:
            follow.after_result(result)

    def release(self) -> None:
        """Free everything before the process exits (whatever the lifecycle state), waiting at
        most EXIT_WAIT_S for each busy thread."""
        self._stop_inputs()
        self._release(EXIT_WAIT_S, EXIT_WAIT_S)


def main(args: list[str] | None = None) -> int:
    argv = list(sys.argv if args is None else args)
    early = node_cli.early_exit(argv[1:], sys.stdout, sys.stderr)  # --help, unreadable files
    if early is not None:
        return early
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] [%(name)s]: %(message)s")
    install_log_redaction()  # no URL credentials in any Python log line (httpx, openai, ours)
    try:
        with rclpy_compat.initialized(args=argv):  # `with rclpy.init()` needs rclpy >= 8
            node = Sam3AgentNode()
            executor = SingleThreadedExecutor()
            executor.add_node(node)
            try:
                spin_until_shutdown(executor)  # not executor.spin(): see ros/spinning.py
            finally:
                node.release()
                executor.shutdown(timeout_sec=1.0)
                node.destroy_node()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except rclpy_compat.InitFailed as exc:  # e.g. a params file rcl cannot parse
        sys.stderr.write(f"{node_cli.PROGRAM}: cannot start: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
