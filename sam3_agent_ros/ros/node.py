"""The lifecycle node ``sam3_agent`` (executable ``sam3_agent_node``): a thin adapter.

It declares the parameters, keeps a reference to the latest frame, hands queries to a worker
(``QueryRunner``) that runs the ROS-free ``Agent``, and publishes what the agent answers.

Threads:
- the executor (a ``SingleThreadedExecutor``) runs only short callbacks: the image callback stores a
  reference to the message (no conversion, no copy), the query callback parses and enqueues.
  (rclpy's ``MultiThreadedExecutor`` cost 2-4x the CPU of a bare subscriber at 30 Hz, with spikes
  to 75 % of a core, for nothing here: see bench/ros_node.py.)
- one follow thread (``pipeline/follow_control.py``) keeps a followed answer's masks current on the
  newest frame (follow mode); it publishes ``~/follow/*``.
- one concepts thread (``pipeline/concepts_control.py``) segments the standing concepts
  (``concepts.prompts``) on the newest frame and publishes ``~/concepts/*``. The agent and follow
  mode reach the segmenter through a ``SegmenterGate`` first: they wait at most for the concept
  pass holding it.
- a 1 Hz timer on the executor publishes ``/diagnostics`` (``ros/diagnostics.py``) from what the
  node records as it runs (``health/recorder.py``: frames, LLM calls, lifecycle, follow statuses).
- one worker thread (``pipeline/query_runner.py``) converts the frame, runs the agent and
  publishes (``ros/outputs.py``: plain publishers, so a query ended by ``deactivate`` still
  publishes its one result). Shutdown and deactivate end every taken query with its result at
  once (``NodeParts.end_queries``), without waiting for the worker's call in flight.
Every query lives in ``pipeline/query_life.py`` (``QueryLife``, ROS-free): topic queries
(``pipeline/intake.py``), action goals (``ros/segment_action.py``) and re-groundings are
submitted there; it calls follow mode's hooks, the agent, the 3D step and the outputs in their
order. The node creates the entities (parameters, subscriptions, timers), runs the lifecycle
transitions and forwards its callbacks to its collaborators, which ``ros/assembly.NodeParts``
wires, builds, starts and frees (``self._parts``).
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
from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.parameter import Parameter
from rclpy.subscription import Subscription
from rclpy.timer import Timer
from sensor_msgs.msg import CompressedImage, Image
from std_msgs.msg import String

from sam3_agent_ros.config import NODE_NAME, ConfigError
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.health import recorder as health
from sam3_agent_ros.log_limit import Budget, limiter_of
from sam3_agent_ros.redact import redact_text
from sam3_agent_ros.ros import node_main, operator_hints, param_guard, params
from sam3_agent_ros.ros.assembly import CLEANUP_WAIT_S, SHUTTING_DOWN, CannotConfigure, NodeParts
from sam3_agent_ros.ros.diagnostics import DiagnosticsPublisher
from sam3_agent_ros.ros.qos import IMAGE_QOS, QUERY_QOS

UNUSABLE_FRAME_LINES = Budget(burst=1, per_s=0.2)


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
        self._inputs: list[Subscription] = []
        self._autostart_timer: Timer | None = None
        self.start_up_failed = threading.Event()  # autostart failed: main exits with status 1
        self._restart_only = False  # the last configure failed for want of a restart
        self._health = health.HealthRecorder()  # /diagnostics (health/recorder.py)
        self._configure_problem: str | None = None  # why the last configure failed
        self._parts = NodeParts(self, self._health)  # the collaborators (ros/assembly.py)
        self._life = self._parts.life  # a query's road (bench/node_costs.py reads its parts)
        self._diagnostics = DiagnosticsPublisher(self, self._parts.health_inputs)
        # Log lines a peer can cause are rate-limited per kind (log_limit.py); the count of a
        # kind that went quiet is said within a second.
        self._log_limit = limiter_of(self)
        self._log_flush_timer = self.create_timer(1.0, self._flush_log_counts)
        name = self.get_fully_qualified_name()
        if self.get_parameter("autostart").value:
            self._autostart_timer = self.create_timer(0.0, self._start_autostart)
        elif self._param_problems:  # autostart's configure would say it; nothing else will
            fix = operator_hints.fix_parameters(self._param_problems, name)
            self.get_logger().error(f"the node cannot configure: {fix}")
        else:
            self.get_logger().info(operator_hints.manual_start(name))

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
                self.get_logger().error(operator_hints.autostart_failed(
                    self.get_fully_qualified_name(), self._restart_only))
                self.start_up_failed.set()
                return
            if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                self.get_logger().error(f"autostart: activate failed (see above); "
                                        f"{operator_hints.EXITING}")
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
            self.get_logger().error(f"to configure: {operator_hints.fix_parameters(reasons, name)}")
            return TransitionCallbackReturn.FAILURE
        try:
            config = params.read_config(self)
        except ConfigError as exc:
            self._configure_problem = redact_text(str(exc))
            self.get_logger().error(f"cannot configure: {redact_text(str(exc))}")
            self._restart_only = False
            return TransitionCallbackReturn.FAILURE
        try:
            self._parts.configure(config)
        except CannotConfigure as exc:
            self._configure_problem = exc.problem
            if exc.by_building:
                self._restart_only = False
            return TransitionCallbackReturn.FAILURE
        self.get_logger().info("configured")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        config = self._parts.config
        if config is None:  # rclpy activates only a configured node
            return TransitionCallbackReturn.FAILURE
        node = config.node
        image_type, image_topic = ((CompressedImage, "image/compressed")
                                   if node.image_transport == "compressed" else (Image, "image"))
        image_sub = self.create_subscription(image_type, image_topic, self._on_image,
                                             IMAGE_QOS[node.image_qos])
        query_sub = self.create_subscription(String, "query", self._on_query, QUERY_QOS)
        self._inputs = [image_sub, query_sub]
        self._health.listening(image_sub.topic_name)
        self._parts.activate(config, image_sub.topic_name)  # depth inputs, the action server
        self.get_logger().info(
            f"active: listening on {image_sub.topic_name} ({node.image_qos}) and "
            f"{query_sub.topic_name}")
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_inputs()
        self._parts.deactivate()
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

    def end_queries(self, reason: str = SHUTTING_DOWN) -> list[str]:
        """Before the process exits (node_main): refuse new queries and goals, and end every
        taken one with its result now (CONTRACTS §11); the executor must spin afterwards for
        the goals' results to go out (``goals_in_flight``)."""
        self._stop_inputs()
        return self._parts.end_queries(reason, refuse_more=True)

    def goals_in_flight(self) -> int:
        return self._parts.goals_in_flight()

    def flush_results(self, timeout_s: float) -> bool:
        return self._parts.flush_results(timeout_s)

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
        self._parts.stop_inputs()

    def _release(self, wait_s: float = CLEANUP_WAIT_S) -> None:
        """Stop the worker, follow and concepts threads and free the models (cleanup, shutdown,
        error, process exit)."""
        self._parts.release(wait_s)
        self._health.unconfigured()

    def _on_set_parameters(self, changes: list[Parameter]) -> SetParametersResult:
        result = params.on_set_parameters(self, changes,
                                          configured=self._parts.config is not None)
        if result.successful:  # a start-up problem fixed by this change is gone
            changed = {c.name for c in changes}
            self._param_problems = [p for p in self._param_problems if p.name not in changed]
            self._parts.on_parameters(changes)
        return result

    def _flush_log_counts(self) -> None:
        self._log_limit.flush()

    # --- inputs, forwarded ----------------------------------------------------------------------
    def _on_image(self, msg: Any) -> None:
        problem = self._parts.on_image(msg)
        self._health.frame(problem)
        if problem:  # at most one line every 5 s, with the count of the others
            self._log_limit.emit("unusable frame on the image topic", self.get_logger().warning,
                                 f"unusable frame on the image topic: {problem}",
                                 UNUSABLE_FRAME_LINES)

    def _on_query(self, msg: String) -> None:
        try:
            self._parts.on_query(msg.data)
        except Exception as exc:  # a callback that raises would stop the executor
            self._log_limit.emit("query callback failed", self.get_logger().error,
                                 f"query callback failed: {for_log(repr(exc))}")


def main(args: list[str] | None = None) -> int:
    """The executable ``sam3_agent_node`` (ros/node_main.py: start-up, spin, exit status)."""
    return node_main.run(Sam3AgentNode, args)


if __name__ == "__main__":
    sys.exit(main())
