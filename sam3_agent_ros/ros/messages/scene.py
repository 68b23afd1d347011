"""An answer's grasp scene as messages (CONTRACTS §12), from ``pipeline.answer_scene``'s
``AnswerScene`` (already in the output frame): ``~/collision_objects`` (moveit_msgs, what a
planning scene takes: a REMOVE of the previous answer's ids, then an ADD per object),
``~/scene/points`` (the labelled cloud: x y z rgb FLOAT32, label UINT32) and ``~/grasps``
(geometry_msgs/PoseArray, best first). Pure builders: the previous answer's ids are handed in
(``ros/outputs.NodeOutputs`` keeps them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from geometry_msgs.msg import Point, Pose, PoseArray, Quaternion, Vector3
from moveit_msgs.msg import CollisionObject
from sensor_msgs.msg import PointCloud2, PointField
from shape_msgs.msg import SolidPrimitive
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker

from sam3_agent_ros.geometry.box import Box3D
from sam3_agent_ros.geometry.grasps import Grasp
from sam3_agent_ros.geometry.scene_cloud import SCENE_FIELDS, SCENE_POINT_STEP, ScenePoints
from sam3_agent_ros.pipeline.answer_scene import AnswerScene

GRASP_NAMESPACE = "grasps"  # ~/markers: an ARROW per grasp, ending where the jaws close
GRASP_MARKERS = 5  # the best few
GRASP_ARROW_M = (0.08, 0.008, 0.012)  # length, shaft and head diameters
MIN_DIMENSION_M = 1e-4  # a BOX primitive's side is never 0 (MoveIt refuses degenerate shapes)

_SCENE_FIELDS = tuple(PointField(name=name, offset=offset, datatype=datatype, count=1)
                      for name, offset, datatype in SCENE_FIELDS)


@dataclass
class SceneMessages:
    """One answer's grasp-scene messages: the collision objects in publishing order (REMOVEs
    first; empty when there is nothing to remove or add), the cloud and the grasps (None
    without a scene)."""

    collision_objects: list[CollisionObject] = field(default_factory=list)
    scene_points: PointCloud2 | None = None
    grasps: PoseArray | None = None
    measured: bool = True  # built for a measured answer: its ids replace the previous ones

    @property
    def added_ids(self) -> list[str]:
        return [obj.id for obj in self.collision_objects
                if obj.operation == CollisionObject.ADD]


def _pose(position: Sequence[float], orientation: Sequence[float]) -> Pose:
    x, y, z = (float(v) for v in position)
    qx, qy, qz, qw = (float(v) for v in orientation)
    return Pose(position=Point(x=x, y=y, z=z), orientation=Quaternion(x=qx, y=qy, z=qz, w=qw))


def box_object(header: Header, name: str, box: Box3D) -> CollisionObject:
    """An ADD of ``box`` as one BOX primitive, posed by the object's pose (MoveIt 2)."""
    primitive = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[
        max(float(v), MIN_DIMENSION_M) for v in box.size])
    pose = _pose(box.center, box.orientation)
    return CollisionObject(header=header, id=name, pose=pose, primitives=[primitive],
                           primitive_poses=[Pose()], operation=CollisionObject.ADD)


def removal(header: Header, name: str) -> CollisionObject:
    return CollisionObject(header=header, id=name, operation=CollisionObject.REMOVE)


def collision_objects(header: Header, scene: AnswerScene | None,
                      previous: Sequence[str] = ()) -> list[CollisionObject]:
    """A REMOVE of every id of ``previous`` (the last answer's), then an ADD per object of
    ``scene`` (none without one)."""
    out = [removal(header, name) for name in previous]
    if scene is not None:
        out += [box_object(header, obj.name, obj.box) for obj in scene.objects]
    return out


def scene_cloud(header: Header, cloud: ScenePoints) -> PointCloud2:
    """The labelled cloud (already packed as ``scene_cloud.SCENE_FIELDS`` say)."""
    count = len(cloud)
    msg = PointCloud2(header=header, height=1, width=count, is_bigendian=False,
                      point_step=SCENE_POINT_STEP, row_step=SCENE_POINT_STEP * count,
                      is_dense=bool(np.isfinite(cloud.points).all()))
    msg.fields = list(_SCENE_FIELDS)
    msg.data = cloud.data
    return msg


def grasp_poses(header: Header, grasps: Sequence[Grasp]) -> PoseArray:
    """The grasps' poses, best first (x the approach, y the closing direction)."""
    return PoseArray(header=header, poses=[_pose(g.position, g.orientation) for g in grasps])


def grasp_markers(header: Header, grasps: Sequence[Grasp]) -> list[Marker]:
    """For ``~/markers`` (after its DELETEALL): the best ``GRASP_MARKERS`` grasps as ARROWs
    along their approach (pose x), ending at the grasp's position, greener the better."""
    out = []
    length, shaft, head = GRASP_ARROW_M
    for k, grasp in enumerate(grasps[:GRASP_MARKERS]):
        approach = grasp.rotation[:, 0]
        start = np.asarray(grasp.position) - length * approach
        score = max(0.0, min(1.0, float(grasp.score)))
        out.append(Marker(header=header, ns=GRASP_NAMESPACE, id=k + 1, type=Marker.ARROW,
                          action=Marker.ADD, pose=_pose(start.tolist(), grasp.orientation),
                          scale=Vector3(x=length, y=shaft, z=head),
                          color=ColorRGBA(r=1.0 - score, g=score, b=0.2, a=1.0)))
    return out


def scene_messages(header: Header, scene: AnswerScene | None,
                   previous: Sequence[str] = ()) -> SceneMessages:
    """Everything the answer's grasp scene publishes, in ``header``'s (output) frame."""
    out = SceneMessages(collision_objects(header, scene, previous))
    if scene is not None:
        out.grasps = grasp_poses(header, scene.grasps)
        if scene.cloud is not None:
            out.scene_points = scene_cloud(header, scene.cloud)
    return out
