"""``/diagnostics``: the node's health (``health/recorder.py``) as a
``diagnostic_msgs/DiagnosticArray`` about once a second.

Each status is named ``<node's fully qualified name>: <area>`` (``/robot1/sam3_agent: frames``)
with ``hardware_id`` the node's fully qualified name, as ``diagnostic_aggregator`` and
``rqt_runtime_monitor`` expect. The publisher lives as long as the node, whatever its lifecycle
state, so an unconfigured or inactive node says so too, and its timer runs on steady time (a
node with use_sim_time reports before any /clock arrives); the header stamp is the node's clock.
The timer callback runs on the executor: it only reads a snapshot and never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType

from sam3_agent_ros.health.status import HealthInputs, Level, Status, statuses
from sam3_agent_ros.ros.output_topics import DIAGNOSTICS
from sam3_agent_ros.ros.qos import OUTPUT_QOS

TOPIC = DIAGNOSTICS
PERIOD_S = 1.0
_LEVELS = {Level.OK: DiagnosticStatus.OK, Level.WARN: DiagnosticStatus.WARN,
           Level.ERROR: DiagnosticStatus.ERROR}


def status_message(status: Status, node_name: str) -> DiagnosticStatus:
    """One ``DiagnosticStatus``: ``name`` = ``<node_name>: <area>``, hardware_id the node."""
    return DiagnosticStatus(
        level=_LEVELS[status.level], name=f"{node_name}: {status.name}", message=status.message,
        hardware_id=node_name,
        values=[KeyValue(key=key, value=value) for key, value in status.values.items()])


def diagnostic_array(inputs: HealthInputs, node_name: str, stamp: Any = None) -> DiagnosticArray:
    array = DiagnosticArray(status=[status_message(s, node_name) for s in statuses(inputs)])
    if stamp is not None:
        array.header.stamp = stamp
    return array


class DiagnosticsPublisher:
    """Publishes ``inputs()`` on ``/diagnostics`` every ``period_s`` from ``node``'s executor."""

    def __init__(self, node: Any, inputs: Callable[[], HealthInputs],
                 period_s: float = PERIOD_S):
        self._node = node
        self._inputs = inputs
        self._name = node.get_fully_qualified_name()
        self._publisher = node.create_publisher(DiagnosticArray, TOPIC, OUTPUT_QOS)
        # Steady time: with use_sim_time and no /clock yet, a node-clock timer would never fire.
        self._timer = node.create_timer(period_s, self.publish,
                                        clock=Clock(clock_type=ClockType.STEADY_TIME))

    def publish(self) -> None:
        try:
            self._publisher.publish(diagnostic_array(
                self._inputs(), self._name, self._node.get_clock().now().to_msg()))
        except Exception as exc:  # noqa: BLE001 (a timer callback that raises stops the executor)
            self._node.get_logger().warning(f"diagnostics: {type(exc).__name__}: {exc}",
                                            throttle_duration_sec=30.0)

    def destroy(self) -> None:
        self._node.destroy_timer(self._timer)
        self._node.destroy_publisher(self._publisher)
