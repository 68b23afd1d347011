"""Synthetic scenes of known geometry for the geometry tests: a table plane at 1 m seen from
above, boxes standing on it (their top faces nearer the camera), depth ray-cast exactly (side walls
included); and SCENES, the sample bag's tabletop and the rotated scene (turned and leaning top
faces) of demo/sam3_agent_demo/scene.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sam3_agent_demo.scene import default_scene, rotated_scene
from sam3_agent_ros.geometry.camera_model import Intrinsics

TABLE_Z = 1.0
CENTRED = Intrinsics(fx=600.0, fy=600.0, cx=319.5, cy=239.5)
OFF_CENTRE = Intrinsics(fx=580.0, fy=610.0, cx=290.0, cy=265.0)
SCENES = {"tabletop": default_scene(), "rotated": rotated_scene()}


@dataclass(frozen=True)
class Box:
    """An axis-aligned box standing on the table: footprint [x0, x1] x [y0, y1], ``height`` m."""

    x0: float
    x1: float
    y0: float
    y1: float
    height: float

    @property
    def top_centre(self) -> np.ndarray:
        return np.array([(self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2, TABLE_Z - self.height])


BOXES = {
    "centre": Box(-0.05, 0.05, -0.04, 0.04, 0.10),
    "left": Box(-0.30, -0.20, -0.10, 0.00, 0.05),
    "bottom_right": Box(0.15, 0.24, 0.10, 0.18, 0.15),
}


def render(intr: Intrinsics, width: int = 640, height: int = 480,
           boxes: dict[str, Box] = BOXES) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Exact depth (m, float32) and per-box visible masks by ray casting every pixel."""
    us, vs = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    dx, dy = (us - intr.cx) / intr.fx, (vs - intr.cy) / intr.fy  # ray (dx, dy, 1)
    with np.errstate(divide="ignore", invalid="ignore"):  # rays parallel to a wall
        return _cast(dx, dy, boxes)


def _cast(dx: np.ndarray, dy: np.ndarray,
          boxes: dict[str, Box]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    height, width = dx.shape
    depth = np.full((height, width), TABLE_Z)
    owner = np.full((height, width), -1)
    names = list(boxes)
    for index, box in enumerate(boxes.values()):
        top = TABLE_Z - box.height
        hits = [np.where(_inside(dx * top, dy * top, box), top, np.inf)]
        for wall_x in (box.x0, box.x1):  # walls x = const: the ray reaches it at z = x / dx
            z = wall_x / dx
            ok = (z >= top) & (z <= TABLE_Z) & (dy * z >= box.y0) & (dy * z <= box.y1)
            hits.append(np.where(ok, z, np.inf))
        for wall_y in (box.y0, box.y1):
            z = wall_y / dy
            ok = (z >= top) & (z <= TABLE_Z) & (dx * z >= box.x0) & (dx * z <= box.x1)
            hits.append(np.where(ok, z, np.inf))
        nearest = np.min(hits, axis=0)
        closer = nearest < depth
        depth[closer] = nearest[closer]
        owner[closer] = index
    masks = {name: owner == index for index, name in enumerate(names)}
    return depth.astype(np.float32), masks


def _inside(x: np.ndarray, y: np.ndarray, box: Box) -> np.ndarray:
    return (x >= box.x0) & (x <= box.x1) & (y >= box.y0) & (y <= box.y1)


def error_cm(position, box: Box) -> float:
    return float(np.linalg.norm(np.asarray(position) - box.top_centre)) * 100
