"""Every topic the node publishes, with its type: ONE table, the only place an output topic's
name is spelled. ``ros/outputs.NodeOutputs`` creates a publisher for every row its configuration
turns on; ``sam3-agent record``'s default topics, the console and the docs read it too.

A row says which kinds of update send on the topic (``updates``: ``answer``, ``status``,
``follow``, ``concepts``; none: published by rclpy or the diagnostics publisher), under which
``field`` their builders hand the message over (``ros/messages/``: an update's outputs are a
``{field: message}`` mapping), when the publisher exists (``when``: ``always``, ``overlay`` with
``node.publish_overlay``, ``depth`` with ``depth.enabled``, ``scene`` with ``depth.enabled`` and
``scene.enabled``, ``interfaces`` when the generated interfaces are installed), whether it is
``lazy`` (built and sent only for a subscriber), whether it carries the deep text QoS (``text``:
``~/result``, ``~/status``) and whether it is latched (``latched``: transient local, a planning
scene that starts later still gets the objects: ``~/collision_objects``).
``test/ros/test_output_topics.py`` checks the table against what a node with all of them on
advertises; ``test/ros/test_output_room.py`` that every row has a publisher and every builder's
output a row. Names are the node's own (``~/`` = private: ``<node>/...``). Imports nothing ROS.
"""

from __future__ import annotations

from dataclasses import dataclass

IMAGE = "sensor_msgs/msg/Image"
COMPRESSED = "sensor_msgs/msg/CompressedImage"
STRING = "std_msgs/msg/String"
POINT = "geometry_msgs/msg/PointStamped"
MARKERS = "visualization_msgs/msg/MarkerArray"
DETECTIONS_2D = "vision_msgs/msg/Detection2DArray"
DETECTIONS_3D = "vision_msgs/msg/Detection3DArray"
CLOUD = "sensor_msgs/msg/PointCloud2"

UPDATES = ("answer", "status", "follow", "concepts")  # the kinds of update that publish
COLLISION_OBJECT = "moveit_msgs/msg/CollisionObject"
POSES = "geometry_msgs/msg/PoseArray"

WHEN = ("always", "overlay", "depth", "scene", "interfaces")


@dataclass(frozen=True)
class OutputTopic:
    """One output topic (see the module's docstring)."""

    name: str
    type: str
    updates: tuple[str, ...] = ()
    field: str = ""
    when: str = "always"
    lazy: bool = True
    text: bool = False
    latched: bool = False


def _row(name: str, type_name: str, update: str = "", when: str = "always", lazy: bool = True,
         field: str = "", also: tuple[str, ...] = (), text: bool = False,
         latched: bool = False) -> OutputTopic:
    updates = ((update,) if update else ()) + also
    base = {"answer": "~/", "status": "~/", "follow": "~/follow/",
            "concepts": "~/concepts/"}.get(update, "~/")
    return OutputTopic(name, type_name, updates, field or name.removeprefix(base), when, lazy,
                       text, latched)


TOPICS: tuple[OutputTopic, ...] = (
    # answers (interface §5): the result JSON and status always, the images for a subscriber
    _row("~/result", STRING, "answer", lazy=False, text=True),
    _row("~/status", STRING, "status", lazy=False, text=True),
    _row("~/mask", IMAGE, "answer"), _row("~/labels", IMAGE, "answer"),
    _row("~/overlay", IMAGE, "answer", "overlay"),
    _row("~/overlay/compressed", COMPRESSED, "answer", "overlay"),
    # vision_msgs (CONTRACTS §9): 2D always, 3D and the cloud with depth.enabled
    _row("~/detections", DETECTIONS_2D, "answer"),
    # 3D (with depth.enabled; in target_frame when set); the followed boxes on ~/markers too
    _row("~/target", POINT, "answer", "depth", lazy=False),
    _row("~/targets", POSES, "answer", "depth", lazy=False),
    _row("~/markers", MARKERS, "answer", "depth", lazy=False, also=("follow",)),
    _row("~/detections_3d", DETECTIONS_3D, "answer", "depth"),
    _row("~/target/points", CLOUD, "answer", "depth", lazy=False, field="points"),
    # the grasp scene (CONTRACTS §12; with depth.enabled and scene.enabled): answers only
    _row("~/collision_objects", COLLISION_OBJECT, "answer", "scene", lazy=False, latched=True),
    _row("~/scene/points", CLOUD, "answer", "scene", field="scene_points"),
    _row("~/grasps", POSES, "answer", "scene", lazy=False),
    # follow mode (interface §5b): the status always
    _row("~/follow/mask", IMAGE, "follow"), _row("~/follow/labels", IMAGE, "follow"),
    _row("~/follow/target", POINT, "follow", lazy=False),
    _row("~/follow/status", STRING, "follow", lazy=False),
    _row("~/follow/overlay/compressed", COMPRESSED, "follow", "overlay"),
    # standing concepts (docs/concepts.md): the detections always
    _row("~/concepts/detections", "sam3_agent_ros/msg/ConceptDetections", "concepts",
         "interfaces", lazy=False),
    _row("~/concepts/labels", IMAGE, "concepts"),
    _row("~/concepts/overlay/compressed", COMPRESSED, "concepts"),
    _row("~/concepts/markers", MARKERS, "concepts", "depth"),
    _row("~/concepts/detections_2d", DETECTIONS_2D, "concepts"),
    _row("~/concepts/detections_3d", DETECTIONS_3D, "concepts", "depth"),
    # the lifecycle (rclpy's LifecycleNode: every state change)
    _row("~/transition_event", "lifecycle_msgs/msg/TransitionEvent"),
    # health (ros/diagnostics.py): a global topic, other nodes publish there too
    _row("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray"),
)

DIAGNOSTICS = TOPICS[-1].name  # the global health topic (ros/diagnostics.py, the console)
OUTPUT_TOPICS: tuple[tuple[str, str], ...] = tuple((t.name, t.type) for t in TOPICS)
TYPE_OF: dict[str, str] = dict(OUTPUT_TOPICS)
# Sent whether or not anybody subscribes, when the update has it (the others are built only for
# a subscriber).
ALWAYS_SENT = frozenset(t.name for t in TOPICS if t.updates and not t.lazy)
# Published by rclpy / the diagnostics publisher, not by ros/outputs.py.
NOT_FROM_OUTPUTS = frozenset(t.name for t in TOPICS if not t.updates)
# (update, field) -> the topic its message goes to
ROUTES: dict[tuple[str, str], str] = {(update, t.field): t.name for t in TOPICS
                                      for update in t.updates}

DEFAULT_NODE = "/sam3_agent"


def topic_of(update: str, field: str) -> str:
    """The topic (``~/...``) where ``update``'s message ``field`` goes (KeyError: none)."""
    return ROUTES[(update, field)]


def fields_of(update: str) -> tuple[str, ...]:
    """The fields an ``update`` may hand over, in the table's order."""
    return tuple(field for (kind, field) in ROUTES if kind == update)


def resolve(name: str, node: str = DEFAULT_NODE) -> str:
    """``~/result`` of node ``/robot1/sam3_agent`` -> ``/robot1/sam3_agent/result``."""
    node = "/" + node.strip("/")
    return node + name[1:] if name.startswith("~/") else name


def node_output_topics(node: str = DEFAULT_NODE) -> tuple[str, ...]:
    """The absolute names of ``OUTPUT_TOPICS`` for the node ``node`` (fully qualified)."""
    return tuple(resolve(name, node) for name, _ in OUTPUT_TOPICS)
