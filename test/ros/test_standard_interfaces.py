"""vision_msgs, tf2_msgs, moveit_msgs, shape_msgs and object_recognition_msgs in the venv: the
real packages, or the wire-identical copies under interfaces/ that scripts/build_interfaces.sh
builds where the real ones are missing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from geometry_msgs.msg import Point32, Pose, TransformStamped
from moveit_msgs.msg import CollisionObject
from object_recognition_msgs.msg import ObjectType
from rclpy.serialization import deserialize_message, serialize_message
from shape_msgs.msg import Mesh, MeshTriangle, Plane, SolidPrimitive
from tf2_msgs.msg import TFMessage
from vision_msgs.msg import (
    BoundingBox2D,
    BoundingBox3D,
    Detection2D,
    Detection2DArray,
    Detection3D,
    Detection3DArray,
    ObjectHypothesis,
    ObjectHypothesisWithPose,
    Point2D,
    Pose2D,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# The documented fields (vision_msgs 4.x, tf2_msgs), as rosidl's Python types list them.
FIELDS = {
    Point2D: {"x": "double", "y": "double"},
    Pose2D: {"position": "vision_msgs/Point2D", "theta": "double"},
    BoundingBox2D: {"center": "vision_msgs/Pose2D", "size_x": "double", "size_y": "double"},
    BoundingBox3D: {"center": "geometry_msgs/Pose", "size": "geometry_msgs/Vector3"},
    ObjectHypothesis: {"class_id": "string", "score": "double"},
    ObjectHypothesisWithPose: {"hypothesis": "vision_msgs/ObjectHypothesis",
                               "pose": "geometry_msgs/PoseWithCovariance"},
    Detection2D: {"header": "std_msgs/Header",
                  "results": "sequence<vision_msgs/ObjectHypothesisWithPose>",
                  "bbox": "vision_msgs/BoundingBox2D", "id": "string"},
    Detection2DArray: {"header": "std_msgs/Header",
                       "detections": "sequence<vision_msgs/Detection2D>"},
    Detection3D: {"header": "std_msgs/Header",
                  "results": "sequence<vision_msgs/ObjectHypothesisWithPose>",
                  "bbox": "vision_msgs/BoundingBox3D", "id": "string"},
    Detection3DArray: {"header": "std_msgs/Header",
                       "detections": "sequence<vision_msgs/Detection3D>"},
    TFMessage: {"transforms": "sequence<geometry_msgs/TransformStamped>"},
    # moveit_msgs (CollisionObject) and what it needs: shape_msgs, object_recognition_msgs.
    ObjectType: {"key": "string", "db": "string"},
    SolidPrimitive: {"type": "uint8", "dimensions": "sequence<double, 3>",
                     "polygon": "geometry_msgs/Polygon"},
    MeshTriangle: {"vertex_indices": "uint32[3]"},
    Mesh: {"triangles": "sequence<shape_msgs/MeshTriangle>",
           "vertices": "sequence<geometry_msgs/Point>"},
    Plane: {"coef": "double[4]"},
    CollisionObject: {"header": "std_msgs/Header", "pose": "geometry_msgs/Pose", "id": "string",
                      "type": "object_recognition_msgs/ObjectType",
                      "primitives": "sequence<shape_msgs/SolidPrimitive>",
                      "primitive_poses": "sequence<geometry_msgs/Pose>",
                      "meshes": "sequence<shape_msgs/Mesh>",
                      "mesh_poses": "sequence<geometry_msgs/Pose>",
                      "planes": "sequence<shape_msgs/Plane>",
                      "plane_poses": "sequence<geometry_msgs/Pose>",
                      "subframe_names": "sequence<string>",
                      "subframe_poses": "sequence<geometry_msgs/Pose>", "operation": "octet"},
}
# The type hashes the real packages publish (the same on Jazzy and Kilted; seen in `ros2 topic
# info -v` of real /tf publishers and in other ROS 2 client libraries).
REAL_HASHES = {
    "tf2_msgs/msg/TFMessage":
        "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087",
    "vision_msgs/msg/Detection3D":
        "RIHS01_ddd703be132ab0b69d33121f1bb034132bfbb3b0ac5f9fb1516005ba1c8a265b",
    "vision_msgs/msg/Detection3DArray":
        "RIHS01_793f5eab9595ac1c0da07873cc859db42eae51f0ee76056db8562515d830e018",
    # As the real moveit_msgs, shape_msgs and object_recognition_msgs give them (the expected
    # hashes of referenced types in rosidl-generated type descriptions of packages built against
    # them, e.g. a service holding a moveit_msgs/PlanningSceneWorld).
    "moveit_msgs/msg/CollisionObject":
        "RIHS01_74b0acd6d56be032bf4f764b2c2633f50588b5fb2bd71e97206c59052747cf7e",
    "object_recognition_msgs/msg/ObjectType":
        "RIHS01_5eb3ee3976403366d7c50d7dbee8bec96b3bced1e752674a7194a35841632134",
    "shape_msgs/msg/SolidPrimitive":
        "RIHS01_2802a15190aadc3f496584df4b0b4c5824d8a0b31aaef839faa75bc34dda38ac",
    "shape_msgs/msg/Mesh":
        "RIHS01_f2150b82d8ee7e8bc3f396a2b158aefb4b9a5510a474be271ba1268aebb55289",
    "shape_msgs/msg/MeshTriangle":
        "RIHS01_618e5c073eeb729e433ef6226e72c01d995c459fb7d76348c9700409a5020bd0",
    "shape_msgs/msg/Plane":
        "RIHS01_dfbfe8314689c850615d4a727af017e9aa86c10e369a606c8c851ef8f16c58c8",
}


@pytest.mark.parametrize("msg_type", list(FIELDS), ids=lambda t: t.__name__)
def test_fields_and_types_are_the_documented_ones(msg_type):
    assert msg_type.get_fields_and_field_types() == FIELDS[msg_type]


def _share(package: str) -> Path:
    """share/<package> of the prefix that holds it: a sourced ROS (AMENT_PREFIX_PATH), else the
    venv, where scripts/build_interfaces.sh installs."""
    prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    for prefix in [*prefixes, sys.prefix]:
        if (Path(prefix) / "share" / package / "package.xml").is_file():
            return Path(prefix) / "share" / package
    raise AssertionError(f"share/{package} not found in {prefixes + [sys.prefix]}")


@pytest.mark.parametrize("type_name", [
    "tf2_msgs/msg/TFMessage", "vision_msgs/msg/Detection2DArray", "vision_msgs/msg/Detection3D",
    "vision_msgs/msg/Detection3DArray", "moveit_msgs/msg/CollisionObject",
    "object_recognition_msgs/msg/ObjectType", "shape_msgs/msg/SolidPrimitive",
    "shape_msgs/msg/Mesh", "shape_msgs/msg/MeshTriangle", "shape_msgs/msg/Plane"])
def test_the_type_hash_is_installed_and_is_the_real_packages(type_name):
    package, _, name = type_name.split("/")
    description = json.loads((_share(package) / "msg" / f"{name}.json").read_text())
    first = description["type_hashes"][0]
    assert first["type_name"] == type_name
    assert re.fullmatch(r"RIHS01_[0-9a-f]{64}", first["hash_string"])
    if type_name in REAL_HASHES:
        assert first["hash_string"] == REAL_HASHES[type_name]


def test_a_detection_array_round_trips_through_serialization():
    detection = Detection3D(id="7")
    detection.header.frame_id = "base_link"
    detection.bbox.center.position.x = 0.25
    detection.bbox.size.z = 0.05
    hypothesis = ObjectHypothesisWithPose()
    hypothesis.hypothesis.class_id = "blue cube"
    hypothesis.hypothesis.score = 0.875
    hypothesis.pose.pose.orientation.w = 1.0
    detection.results.append(hypothesis)
    array = Detection3DArray(detections=[detection])
    array.header.stamp.sec = 12
    back = deserialize_message(serialize_message(array), Detection3DArray)
    assert back == array
    assert back.detections[0].results[0].hypothesis.class_id == "blue cube"

    flat = Detection2D(id="1")
    flat.bbox.center.position.x, flat.bbox.size_x = 320.5, 40.0
    back2 = deserialize_message(serialize_message(Detection2DArray(detections=[flat])),
                                Detection2DArray)
    assert back2.detections[0].bbox.center.position.x == 320.5


def test_a_tf_message_round_trips_through_serialization():
    item = TransformStamped(child_frame_id="camera_link")
    item.header.frame_id = "base_link"
    item.transform.translation.x = 0.1
    item.transform.rotation.w = 1.0
    message = TFMessage(transforms=[item, item])
    assert deserialize_message(serialize_message(message), TFMessage) == message


def test_a_collision_object_round_trips_with_moveits_constants():
    assert (CollisionObject.ADD, CollisionObject.REMOVE, CollisionObject.APPEND,
            CollisionObject.MOVE) == (b"\x00", b"\x01", b"\x02", b"\x03")
    assert (SolidPrimitive.BOX, SolidPrimitive.SPHERE, SolidPrimitive.CYLINDER,
            SolidPrimitive.CONE, SolidPrimitive.PRISM) == (1, 2, 3, 4, 5)
    assert (SolidPrimitive.BOX_X, SolidPrimitive.BOX_Y, SolidPrimitive.BOX_Z) == (0, 1, 2)
    box = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.06, 0.05, 0.10])
    prism = SolidPrimitive(type=SolidPrimitive.PRISM, dimensions=[0.02])
    prism.polygon.points = [Point32(x=0.0, y=0.0), Point32(x=0.5, y=0.0), Point32(x=0.0, y=0.25)]
    pose = Pose()
    pose.orientation.w = 1.0
    item = CollisionObject(id="sam3_agent/target", primitives=[box, prism],
                           primitive_poses=[pose, pose], operation=CollisionObject.ADD,
                           subframe_names=["grasp"], subframe_poses=[pose])
    item.header.frame_id = "base_link"
    item.type.key, item.type.db = "blue cube", "sam3_agent"
    item.meshes = [Mesh(triangles=[MeshTriangle(vertex_indices=[0, 1, 2])])]
    item.planes, item.plane_poses = [Plane(coef=[0.0, 0.0, 1.0, -0.7])], [pose]
    back = deserialize_message(serialize_message(item), CollisionObject)
    assert back == item
    assert list(back.primitives[0].dimensions) == [0.06, 0.05, 0.10]
    assert back.type.key == "blue cube" and back.operation == CollisionObject.ADD


def test_colcon_never_builds_or_installs_the_copies():
    """A ROS install has the real packages: colcon must not see ours, nor the package install
    them (interfaces/README.md)."""
    assert (REPO_ROOT / "interfaces" / "COLCON_IGNORE").is_file()
    assert "interfaces/" not in (REPO_ROOT / "CMakeLists.txt").read_text()
    for package in ("vision_msgs", "tf2_msgs", "shape_msgs", "object_recognition_msgs",
                    "moveit_msgs"):
        xml = (REPO_ROOT / "interfaces" / package / "package.xml").read_text()
        assert f"<name>{package}</name>" in xml


def test_the_setup_hashes_cover_the_copies():
    """Changing a copied message rebuilds an existing venv's interfaces."""
    for script in ("build_interfaces.sh", "setup_venv.sh"):
        text = (REPO_ROOT / "scripts" / script).read_text()
        assert "interfaces/*/msg/*.msg" in text and "interfaces/*/CMakeLists.txt" in text


@pytest.mark.skipif(shutil.which("colcon", path=str(Path(sys.executable).parent)) is None,
                    reason="no colcon in this venv")
def test_colcon_sees_only_this_package(tmp_path):
    colcon = shutil.which("colcon", path=str(Path(sys.executable).parent))
    completed = subprocess.run([colcon, "list", "--base-paths", str(REPO_ROOT), "--names-only"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["sam3_agent_ros"]
