"""Every topic the node publishes, with its type: one table for whoever needs the whole list
(``sam3-agent record``'s default topics, the docs, and ``ros/publishers.py``, which creates
every output publisher from it).

Names are the node's own (``~/`` = private: ``<node>/...``); which exist depends on the
parameters (``~/overlay*`` with ``node.publish_overlay``, ``~/target``, ``~/targets``,
``~/markers``, ``~/detections_3d``, ``~/target/points``, ``~/concepts/markers`` and
``~/concepts/detections_3d`` with ``depth.enabled``, ``~/concepts/detections`` when
the generated interfaces are installed). ``test/ros/test_output_topics.py`` checks the table
against what a node with all of them on advertises. Imports nothing ROS.
"""

from __future__ import annotations

IMAGE = "sensor_msgs/msg/Image"
COMPRESSED = "sensor_msgs/msg/CompressedImage"
STRING = "std_msgs/msg/String"
POINT = "geometry_msgs/msg/PointStamped"
MARKERS = "visualization_msgs/msg/MarkerArray"
DETECTIONS_2D = "vision_msgs/msg/Detection2DArray"
DETECTIONS_3D = "vision_msgs/msg/Detection3DArray"
CLOUD = "sensor_msgs/msg/PointCloud2"

OUTPUT_TOPICS: tuple[tuple[str, str], ...] = (
    # answers (interface §5, ros/outputs.py AnswerPublisher)
    ("~/result", STRING), ("~/status", STRING), ("~/mask", IMAGE), ("~/labels", IMAGE),
    ("~/overlay", IMAGE), ("~/overlay/compressed", COMPRESSED),
    # vision_msgs (CONTRACTS §9): 2D always, 3D and the cloud with depth.enabled
    ("~/detections", DETECTIONS_2D),
    # 3D (with depth.enabled; in target_frame when set)
    ("~/target", POINT), ("~/targets", "geometry_msgs/msg/PoseArray"), ("~/markers", MARKERS),
    ("~/detections_3d", DETECTIONS_3D), ("~/target/points", CLOUD),
    # follow mode (interface §5b, ros/outputs.py FollowPublisher)
    ("~/follow/mask", IMAGE), ("~/follow/labels", IMAGE), ("~/follow/target", POINT),
    ("~/follow/status", STRING), ("~/follow/overlay/compressed", COMPRESSED),
    # standing concepts (ros/concepts_control.py)
    ("~/concepts/detections", "sam3_agent_ros/msg/ConceptDetections"),
    ("~/concepts/labels", IMAGE), ("~/concepts/overlay/compressed", COMPRESSED),
    ("~/concepts/markers", MARKERS), ("~/concepts/detections_2d", DETECTIONS_2D),
    ("~/concepts/detections_3d", DETECTIONS_3D),
    # the lifecycle (rclpy's LifecycleNode: every state change)
    ("~/transition_event", "lifecycle_msgs/msg/TransitionEvent"),
    # health (ros/diagnostics.py): a global topic, other nodes publish there too
    ("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray"),
)

# Sent whether or not anybody subscribes (the others are built only for a subscriber).
ALWAYS_SENT = frozenset({"~/result", "~/status", "~/follow/status"})
# Published by rclpy / the diagnostics publisher, not through ros/publishers.py.
NOT_FROM_PUBLISHERS = frozenset({"~/transition_event", "/diagnostics"})
TYPE_OF: dict[str, str] = dict(OUTPUT_TOPICS)

DEFAULT_NODE = "/sam3_agent"


def resolve(name: str, node: str = DEFAULT_NODE) -> str:
    """``~/result`` of node ``/robot1/sam3_agent`` -> ``/robot1/sam3_agent/result``."""
    node = "/" + node.strip("/")
    return node + name[1:] if name.startswith("~/") else name


def node_output_topics(node: str = DEFAULT_NODE) -> tuple[str, ...]:
    """The absolute names of ``OUTPUT_TOPICS`` for the node ``node`` (fully qualified)."""
    return tuple(resolve(name, node) for name, _ in OUTPUT_TOPICS)
