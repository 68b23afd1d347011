"""The console's ROS side: an rclpy context, node and executor of its own, in a thread of its own.

It subscribes to the node's public outputs and hands what the page shows to the ``Hub``; it
sends what a page asks (``commands.Command``) as a client of the node would: goals on
``~/segment`` (cancelled when their tab closes), ``~/stop_follow``, and ``concepts.prompts``
through the parameter service. Every rclpy call happens on this thread: a page's request is
queued and a guard condition wakes the executor. The node may start after the console, vanish
and come back: DDS reconnects the subscriptions and the action client; the 0.5 s tick says on
the page whether the node is there, what has gone stale (``panels.Panels``) and which camera
topic the node subscribes (its graph: the preview follows remappings without being told).
Image subscriptions exist only while a page is open (the node draws its overlays only for
subscribers; the live preview costs nothing without a page).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from typing import Any

from sam3_agent_ros.console import views
from sam3_agent_ros.console.commands import Command, Limits
from sam3_agent_ros.console.health import STALE_S, HealthBook, frames_topic
from sam3_agent_ros.console.hub import Hub
from sam3_agent_ros.console.node_requests import NodeRequests
from sam3_agent_ros.console.panels import Panels
from sam3_agent_ros.console.preview import (
    Throttle,
    camera_topic,
    is_jpeg,
    preview_jpeg,
    stamp_filter,
)
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.ros.output_topics import DIAGNOSTICS, resolve, topic_of

LOG = logging.getLogger("sam3_agent_ros.console")
TICK_S = 0.5
OVERLAY_HZ = 10.0  # follow / concepts overlays forwarded at most this often (answers: each)
MAX_PENDING = 64
LIMIT_PARAMETERS = ("max_query_chars", "concepts.max_prompts", "concepts.max_prompt_chars")


def create_console_node(context: Any) -> Any:
    """The console's node: a name of its own per process, and no service of its own (no
    parameter services, no type description service), so that an SROS2 enclave for it names
    only absolute interfaces (config/sros2/sam3_agent_policy.xml, ``/sam3_agent_console``)."""
    import rclpy
    from rclpy.parameter import Parameter

    return rclpy.create_node(
        f"sam3_agent_console_{os.getpid()}", context=context, start_parameter_services=False,
        parameter_overrides=[Parameter("start_type_description_service", value=False)])


class RosLink:
    def __init__(self, hub: Hub, node_name: str, image_topic: str | None = None,
                 preview_hz: float = 4.0):
        """``image_topic``: the camera topic of the preview; None: the one the node subscribes
        (found on the graph)."""
        self.hub = hub
        self.node_name = node_name
        self.given_image_topic = image_topic
        self.panels = Panels(hub)
        self.health = HealthBook(node_name)
        self._frames_hint = ""  # the topic the node's frames health names
        self.preview_hz = preview_hz
        self.limits = Limits()
        self._pending: queue.Queue = queue.Queue(MAX_PENDING)
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-ros", daemon=True)
        self.error: BaseException | None = None
        hub.set("connection", {"state": "waiting", "node": node_name,
                               "message": f"waiting for the node {node_name}"})

    # --- called from the web side ------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> None:
        self._thread.start()
        self._ready.wait(timeout_s)
        if self.error is not None:
            raise RuntimeError(f"ROS did not start: {self.error}") from self.error

    def submit(self, page: str, command: Command | None) -> bool:
        """Queue a page's request (None: the page closed); False when the queue is full."""
        try:
            self._pending.put_nowait((page, command))
        except queue.Full:
            return False
        guard = getattr(self, "_guard", None)
        if guard is not None:
            guard.trigger()
        return True

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10.0)

    # --- the ROS thread ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            import rclpy
            from rclpy.executors import SingleThreadedExecutor
            from rclpy.signals import SignalHandlerOptions

            context = rclpy.Context()
            rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
        except Exception as exc:  # no ROS 2 here, or rcl refused: the command says so
            self.error = exc
            self._ready.set()
            return
        executor = SingleThreadedExecutor(context=context)
        try:
            self.node = create_console_node(context)
            self._create_entities()
            executor.add_node(self.node)
        except Exception as exc:
            self.error = exc
            self._ready.set()
            rclpy.try_shutdown(context=context)
            return
        self._ready.set()
        races = 0
        while not self._stop.is_set() and context.ok():
            try:
                executor.spin_once(timeout_sec=0.2)
                races = 0
            except Exception as exc:  # an entity made or destroyed meanwhile; a callback bug
                races += 1
                if races in (1, 100):
                    LOG.warning("console: the ROS executor raised (%s: %s); going on",
                                type(exc).__name__, for_log(exc))
                time.sleep(0.01)
        self.requests.cancel_all()
        executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=context)

    def _create_entities(self) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rcl_interfaces.msg import ParameterEvent
        from rcl_interfaces.srv import GetParameters
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        node, name = self.node, self.node_name
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        for (update, field), callback in ((("status", "status"), self._on_status),
                                          (("answer", "result"), self._on_result),
                                          (("follow", "status"), self._on_follow)):
            node.create_subscription(String, resolve(topic_of(update, field), name), callback,
                                     reliable)
        node.create_subscription(DiagnosticArray, DIAGNOSTICS, self._on_diagnostics, reliable)
        # concepts.prompts changed by anyone (ros2 param set, another console)
        node.create_subscription(ParameterEvent, "/parameter_events", self._on_parameter_event,
                                 reliable)
        try:
            from sam3_agent_ros.msg import ConceptDetections

            node.create_subscription(ConceptDetections,
                                     resolve(topic_of("concepts", "detections"), name),
                                     self._on_detections, reliable)
        except ImportError:  # interfaces without the concepts messages: no detections shown
            pass
        self.requests = NodeRequests(node, name, self.hub, self.panels.status,
                                     self.panels.concepts)
        self._get_params: Any = node.create_client(GetParameters, f"{name}/get_parameters")
        self._guard = node.create_guard_condition(self._drain)
        self._images: list[Any] = []
        self._image_kind = ""  # "" none, "raw" or "compressed"
        self.image_topic = ""  # the preview's topic ("": none found yet)
        # the stamp filter spaces frames 1/preview_hz apart, give or take a camera period
        self._live_throttle = Throttle(self.preview_hz * 1.5)
        self._overlay_throttles = {s: Throttle(OVERLAY_HZ) for s in ("follow", "concepts")}
        self._connected = False
        self._ticks = 0
        node.create_timer(TICK_S, self._tick)

    # --- subscriptions ---

    def _on_status(self, msg: Any) -> None:
        status = views.json_text(msg.data)
        if status is not None:
            self.panels.status(status)

    def _on_result(self, msg: Any) -> None:
        self.panels.result_text(msg.data)  # one it cannot read is an error line, never nothing

    def _on_follow(self, msg: Any) -> None:
        follow = views.json_text(msg.data)
        if follow is not None:
            self.panels.follow({k: views.finite(follow.get(k))
                                for k in ("query_id", "state", "mode")})

    def _on_detections(self, msg: Any) -> None:
        self.panels.detections(views.detections_view(msg))

    def _on_parameter_event(self, msg: Any) -> None:
        if msg.node != self.node_name:
            return
        for parameter in (*msg.new_parameters, *msg.changed_parameters):
            if parameter.name == "concepts.prompts":
                self.panels.concepts(list(parameter.value.string_array_value))

    def _on_diagnostics(self, msg: Any) -> None:
        now = time.monotonic()
        self.health.update(msg, now)
        self._frames_hint = frames_topic(msg, self.node_name) or self._frames_hint
        if self.health.due(now):  # at most once a second, however fast they come
            self.hub.set("health", self.health.view(now))

    def _on_overlay(self, source: str, msg: Any) -> None:
        throttle = self._overlay_throttles.get(source)
        if throttle is not None and not throttle.due():
            return
        data = bytes(msg.data)
        if not is_jpeg(data):
            return
        if source == "answer":
            self.panels.answer_overlay((msg.header.stamp.sec, msg.header.stamp.nanosec), data)
        elif source == "concepts":
            self.panels.concepts_overlay(data)
        else:
            self.hub.put_image(source, data)

    def _on_raw_frame(self, serialized: bytes) -> None:
        if not self._live_throttle.due():
            return  # dropped before deserialising
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import Image

        from sam3_agent_ros.ros.conversions import image_to_rgb

        try:
            self.panels.live_frame(preview_jpeg(
                image_to_rgb(deserialize_message(serialized, Image))))
        except Exception as exc:  # an unusable frame: the node's health says more
            LOG.debug("console: preview skipped: %s", for_log(exc))

    def _on_compressed_frame(self, msg: Any) -> None:
        if self._live_throttle.due():
            data = bytes(msg.data)
            if is_jpeg(data):
                self.panels.live_frame(data)

    # --- the tick: is the node there, which image subscriptions ---

    def _tick(self) -> None:
        self._ticks += 1
        present = self._node_present()
        if present != self._connected:
            self._connected = present
            if present:
                self.hub.set("connection", {"state": "connected", "node": self.node_name,
                                            "message": f"connected to {self.node_name}"})
                self._ask_parameters()
            else:
                self.hub.set("connection", {
                    "state": "waiting", "node": self.node_name,
                    "message": f"waiting for the node {self.node_name} (not on the ROS graph: "
                               "start it, or check ROS_DOMAIN_ID)"})
        now = time.monotonic()
        self.health.forget_old(now)
        if now - self.health.heard_at > STALE_S and self.health.heard_at > 0:
            self.health.mark_changed()  # shown STALE, with an age that grows
        if self.health.due(now):
            self.hub.set("health", self.health.view(now))
        self.panels.tick()
        self._update_image_subscriptions()

    def _node_present(self) -> bool:
        namespace, _, base = self.node_name.rpartition("/")
        return (base, namespace or "/") in self.node.get_node_names_and_namespaces()

    def _update_image_subscriptions(self) -> None:
        wanted = self.hub.pages > 0
        topic, kind = self.image_topic, self._image_kind
        if wanted and (self._ticks % 4 == 1 or not topic):  # every 2 s: the node's camera
            topic, kind = self._find_camera()
        if not wanted:
            topic, kind = "", ""
        if (topic, kind) == (self.image_topic, self._image_kind) and bool(self._images) == wanted:
            return
        for subscription in self._images:
            self.node.destroy_subscription(subscription)
        self._images, self.image_topic, self._image_kind = [], topic, kind
        if wanted:
            self._images = self._make_image_subscriptions(topic, kind)

    def _find_camera(self) -> tuple[str, str]:
        """The preview's topic and kind: the node's own colour subscription (its graph), or
        ``--image-topic``; with a raw topic, its ``/compressed`` when a camera publishes one."""
        if self.given_image_topic:
            topic, kind, problem = self.given_image_topic, "raw", ""
        else:
            namespace, _, base = self.node_name.rpartition("/")
            try:
                subscriptions = self.node.get_subscriber_names_and_types_by_node(
                    base, namespace or "/")
            except Exception:  # the node is not on the graph (now): keep what was found
                return self.image_topic, self._image_kind
            topic, kind, problem = camera_topic(subscriptions, self._frames_hint)
        if kind == "raw":
            topics = dict(self.node.get_topic_names_and_types())
            if "sensor_msgs/msg/CompressedImage" in topics.get(topic + "/compressed", []):
                topic, kind = topic + "/compressed", "compressed"
        self.panels.camera_topic(topic, kind, problem)
        return topic, kind

    def _make_image_subscriptions(self, topic: str, kind: str) -> list[Any]:
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CompressedImage, Image

        newest = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        node, name = self.node, self.node_name
        made = [node.create_subscription(
            CompressedImage, resolve(topic, name),
            lambda msg, source=source: self._on_overlay(source, msg), reliable)
            for source, topic in ((source, topic_of(source, "overlay/compressed"))
                                  for source in ("answer", "follow", "concepts"))]
        if kind == "compressed":
            made.append(node.create_subscription(CompressedImage, topic,
                                                 self._on_compressed_frame, newest))
        elif kind == "raw":
            made.append(self._raw_frames(Image, topic, newest))
        return made

    def _raw_frames(self, image_type: Any, topic: str, qos: Any) -> Any:
        """The raw camera topic, thinned by a content filter on the stamps where the middleware
        has one (``preview.stamp_filter``), serialised (deserialised only when a preview is
        due)."""
        from rclpy.subscription_content_filter_options import ContentFilterOptions

        expression, parameters = stamp_filter(self.preview_hz)
        try:
            return self.node.create_subscription(
                image_type, topic, self._on_raw_frame, qos, raw=True,
                content_filter_options=ContentFilterOptions(expression, parameters))
        except Exception as exc:  # no content filter in this middleware: every frame comes
            LOG.info("console: no content filter for the preview (%s)", for_log(exc))
            return self.node.create_subscription(image_type, topic,
                                                 self._on_raw_frame, qos, raw=True)

    def _ask_parameters(self) -> None:
        from rcl_interfaces.srv import GetParameters

        if not self._get_params.service_is_ready():
            self._connected = False  # asked again at the next tick
            return
        request = GetParameters.Request(names=["concepts.prompts", *LIMIT_PARAMETERS])
        self._get_params.call_async(request).add_done_callback(self._got_parameters)

    def _got_parameters(self, future: Any) -> None:
        values = future.result().values if future.result() is not None else []
        if len(values) != 1 + len(LIMIT_PARAMETERS):
            return
        self.panels.concepts(list(values[0].string_array_value))
        numbers = [v.integer_value for v in values[1:]]
        if all(n > 0 for n in numbers):
            self.limits = Limits(*numbers)

    def _drain(self) -> None:
        """The page requests queued since the last wake-up, on this thread."""
        while True:
            try:
                page, command = self._pending.get_nowait()
            except queue.Empty:
                return
            try:
                self.requests.handle(page, command)
            except Exception as exc:  # a request must never stop the ROS thread
                LOG.warning("console: request failed: %s", for_log(exc))
                self.requests.notice(f"the request failed: {exc}")
