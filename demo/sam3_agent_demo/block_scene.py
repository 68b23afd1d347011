"""A tabletop of known geometry for the grasp scene (issue 36: the tests of geometry.support,
scene_cloud and grasps, and bench/grasp_scene.py): upright boxes (yawed, of known heights) on a
table, seen by a camera that looks down at it obliquely, depth ray-cast exactly (top faces and
side walls). World frame: the table is z = 0, z up; camera frame: the optical frame (x right,
y down, z forward), as the 3D step measures. ROS-free (numpy)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sam3_agent_ros.geometry.camera_model import Intrinsics

INTRINSICS = Intrinsics(fx=600.0, fy=600.0, cx=319.5, cy=239.5)
WIDTH, HEIGHT = 640, 480


@dataclass(frozen=True)
class Block:
    """An upright box on the table: footprint centre (x, y), size (x, y, height), yaw (deg)."""

    x: float
    y: float
    size: tuple[float, float, float]
    yaw_deg: float = 0.0

    @property
    def height(self) -> float:
        return self.size[2]

    def rotation(self) -> np.ndarray:
        c, s = math.cos(math.radians(self.yaw_deg)), math.sin(math.radians(self.yaw_deg))
        return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])

    def centre(self) -> np.ndarray:
        return np.array([self.x, self.y, self.height / 2])


@dataclass(frozen=True)
class Camera:
    """A camera at ``position`` (world, m) looking at ``target``; image x along the world's
    horizontal, so the image is not rolled."""

    position: tuple[float, float, float] = (0.0, -0.45, 0.65)
    target: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def world_from_camera(self) -> np.ndarray:
        """4x4: camera-frame points -> world points."""
        eye, at = np.asarray(self.position), np.asarray(self.target)
        forward = (at - eye) / np.linalg.norm(at - eye)
        right = np.cross(forward, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        down = np.cross(forward, right)
        matrix = np.eye(4)
        matrix[:3, :3] = np.stack([right, down, forward], axis=1)
        matrix[:3, 3] = eye
        return matrix

    def camera_from_world(self) -> np.ndarray:
        return np.linalg.inv(self.world_from_camera())


@dataclass
class Tabletop:
    """The scene: named blocks (``segmented``: those a mask is given for) and the camera."""

    blocks: dict[str, Block]
    camera: Camera = field(default_factory=Camera)

    def render(self, intr: Intrinsics = INTRINSICS, width: int = WIDTH, height: int = HEIGHT
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Exact depth (m, float32; the table ends nowhere) and each block's visible mask."""
        to_world = self.camera.world_from_camera()
        us, vs = np.meshgrid(np.arange(width, dtype=np.float64),
                             np.arange(height, dtype=np.float64))
        rays = np.stack([(us - intr.cx) / intr.fx, (vs - intr.cy) / intr.fy,
                         np.ones_like(us)], axis=-1)  # t along a ray = camera depth
        directions = rays @ to_world[:3, :3].T
        eye = to_world[:3, 3]
        with np.errstate(divide="ignore", invalid="ignore"):
            table = np.where(directions[..., 2] < 0, -eye[2] / directions[..., 2], np.inf)
            depth, owner = table, np.full((height, width), -1)
            for index, block in enumerate(self.blocks.values()):
                hit = _slab(eye, directions, block)
                closer = hit < depth
                depth = np.where(closer, hit, depth)
                owner[closer] = index
        masks = {name: owner == index for index, name in enumerate(self.blocks)}
        return np.where(np.isfinite(depth), depth, 0.0).astype(np.float32), masks

    def table_in_camera(self) -> tuple[np.ndarray, float]:
        """(up normal, distance) of the table, ``normal . p + distance = 0`` in the camera
        frame."""
        to_camera = self.camera.camera_from_world()
        normal = to_camera[:3, :3] @ np.array([0.0, 0.0, 1.0])
        point = to_camera[:3, :3] @ np.zeros(3) + to_camera[:3, 3]
        return normal, float(-(normal @ point))

    def corners_in_camera(self, name: str) -> np.ndarray:
        """(8, 3) corners of a block in the camera frame."""
        block = self.blocks[name]
        half = np.asarray(block.size) / 2
        signs = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)])
        world = block.centre() + (signs * half) @ block.rotation().T
        to_camera = self.camera.camera_from_world()
        return world @ to_camera[:3, :3].T + to_camera[:3, 3]


def _slab(eye: np.ndarray, directions: np.ndarray, block: Block) -> np.ndarray:
    """Each ray's camera depth where it enters the block (inf: a miss)."""
    rotation = block.rotation()
    origin = rotation.T @ (eye - block.centre())
    local = directions @ rotation  # rotation.T applied to each direction
    half = np.asarray(block.size) / 2
    low = (-half - origin) / local
    high = (half - origin) / local
    enter = np.nanmax(np.minimum(low, high), axis=-1)
    leave = np.nanmin(np.maximum(low, high), axis=-1)
    return np.where((enter <= leave) & (leave > 0), np.maximum(enter, 0.0), np.inf)


def close_pair() -> Tabletop:
    """The grasp scene: a tall box (the target), a segmented neighbour 1.5 cm beside it (+x), a
    second neighbour nobody segmented 1.5 cm on its other side (-x), and a flat box further
    away. Only a top-down grasp closing across y, or (without the unsegmented one) a side grasp
    from -x, fits between them with the default gripper and 1 cm clearance."""
    return Tabletop({
        "target": Block(0.0, 0.0, (0.06, 0.05, 0.10)),
        "neighbour": Block(0.095, 0.0, (0.10, 0.08, 0.08)),  # its side at x = 0.045
        "unsegmented": Block(-0.08, 0.0, (0.07, 0.06, 0.09)),  # its side at x = -0.045
        "flat": Block(-0.05, -0.17, (0.09, 0.07, 0.03), yaw_deg=25.0),
    })
