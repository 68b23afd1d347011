"""A synthetic moving tabletop sequence with exact ground truth, for follow mode.

The camera of ``scene.py``'s default tabletop pans (and wobbles, and comes a little closer) while
three objects move on the table: ``blue_cylinder`` circles, ``red_box`` slides and turns,
``green_prism`` slides up the image. Near the end the pan speeds up to the right, so
``blue_box`` (the leftmost object) leaves the view (``LEAVING_OBJECT``): following it must end in
``lost``. Every frame carries RGB, depth (float32 m), the intrinsics, per-object masks and the
camera-frame 3D top centres (``scene.SceneFrame``).

Deterministic given the seed: ``MovingSequence(seed=0).frame(i)`` renders frame ``i`` on its own.
Resolution follows the intrinsics (``intrinsics_for(1920, 1080)`` keeps the field of view).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from sam3_agent_ros.demo.scene import (
    CameraIntrinsics,
    CameraPose,
    Lighting,
    Scene,
    SceneFrame,
    default_scene,
    render_scene,
)

LEAVING_OBJECT = "blue_box"
# Horizontal pan (m, camera x) over the whole sequence: a slow wobble, then a fast sweep to the
# right from half-way that carries LEAVING_OBJECT out of the left edge.
_WOBBLE_M = 0.05
_SWEEP_M = 0.36
_SWEEP_START, _SWEEP_END = 0.5, 0.8  # fractions of the sequence


def intrinsics_for(width: int, height: int) -> CameraIntrinsics:
    """Intrinsics of the default camera (600 px focal length at 640 px) at another resolution,
    keeping the horizontal field of view and square pixels."""
    focal = 600.0 * width / 640.0
    return CameraIntrinsics(fx=focal, fy=focal, cx=(width - 1) / 2.0 + 0.5,
                            cy=(height - 1) / 2.0 + 0.5, width=width, height=height)


def _smoothstep(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


def camera_pose(progress: float) -> CameraPose:
    """Camera offset at ``progress`` in [0, 1] of the sequence."""
    sweep = _SWEEP_M * _smoothstep((progress - _SWEEP_START) / (_SWEEP_END - _SWEEP_START))
    return CameraPose(tx=_WOBBLE_M * math.sin(2.0 * math.pi * progress) + sweep,
                      ty=0.02 * math.sin(2.0 * math.pi * progress + 0.5),
                      tz=0.03 * math.sin(math.pi * progress))


def lighting(progress: float) -> Lighting:
    """Mild brightness and gradient changes at ``progress`` in [0, 1]."""
    phase = 2.0 * math.pi * progress
    return Lighting(brightness=1.0 + 0.05 * math.sin(phase + 0.4),
                    gradient_x=0.06 * math.cos(phase), gradient_y=-0.04 + 0.02 * math.sin(phase))


def moved_scene(progress: float, base: Scene | None = None) -> Scene:
    """The default scene with its moving objects where they are at ``progress`` in [0, 1]."""
    base = base or default_scene()
    phase = 2.0 * math.pi * progress
    moved = []
    for obj in base.objects:
        x, y = obj.position
        if obj.name == "blue_cylinder":  # one loop of a 5 cm circle
            obj = replace(obj, position=(x + 0.05 * (math.cos(phase) - 1.0),
                                         y + 0.05 * math.sin(phase)))
        elif obj.name == "red_box":  # slides right and back, turning
            obj = replace(obj, position=(x + 0.08 * math.sin(math.pi * progress), y),
                          yaw_deg=obj.yaw_deg + 25.0 * progress)
        elif obj.name == "green_prism":  # slides up the image
            obj = replace(obj, position=(x, y - 0.06 * progress))
        moved.append(obj)
    return replace(base, objects=tuple(moved))


@dataclass(frozen=True)
class MovingFrame:
    """Frame ``index`` of a ``MovingSequence``, at ``t_s`` seconds, with its ground truth."""

    index: int
    t_s: float
    scene_frame: SceneFrame

    @property
    def rgb(self) -> np.ndarray:
        return self.scene_frame.rgb

    @property
    def depth_m(self) -> np.ndarray:
        return self.scene_frame.depth_m

    @property
    def masks(self) -> dict[str, np.ndarray]:
        return self.scene_frame.masks

    @property
    def positions(self) -> dict[str, tuple[float, float, float]]:
        return self.scene_frame.positions

    @property
    def intrinsics(self) -> CameraIntrinsics:
        return self.scene_frame.intrinsics

    def visible(self, name: str) -> bool:
        return bool(self.masks[name].any())


@dataclass(frozen=True)
class MovingSequence:
    """``n_frames`` frames at ``fps``; ``frame(i)`` renders one, iterating renders them all."""

    n_frames: int = 90
    fps: float = 10.0
    seed: int = 0
    intrinsics: CameraIntrinsics = field(default_factory=CameraIntrinsics)

    def __post_init__(self) -> None:
        if self.n_frames < 2 or self.fps <= 0:
            raise ValueError("a moving sequence needs n_frames >= 2 and fps > 0")

    def __len__(self) -> int:
        return self.n_frames

    def __iter__(self) -> Iterator[MovingFrame]:
        return (self.frame(i) for i in range(self.n_frames))

    def progress(self, index: int) -> float:
        return index / (self.n_frames - 1)

    def stamp(self, index: int) -> float:
        return index / self.fps

    def frame(self, index: int) -> MovingFrame:
        if not 0 <= index < self.n_frames:
            raise IndexError(f"frame {index} is outside 0..{self.n_frames - 1}")
        p = self.progress(index)
        scene = moved_scene(p, default_scene(self.intrinsics))
        rendered = render_scene(scene, camera_pose(p), lighting(p),
                                seed=self.seed * 1_000_003 + index)
        return MovingFrame(index=index, t_s=self.stamp(index), scene_frame=rendered)

    def first_index_without(self, name: str) -> int | None:
        """The first frame on which object ``name`` has no visible pixel (None: always visible).

        Geometric (no rendering): the object's top outline lies wholly outside the image.
        """
        k = self.intrinsics
        for index in range(self.n_frames):
            p = self.progress(index)
            scene = moved_scene(p, default_scene(k))
            obj = scene.object(name)
            pose = camera_pose(p)
            z = scene.table_distance_m - pose.tz - obj.height
            outline = obj.top_outline()
            u = k.fx * (outline[:, 0] - pose.tx) / z + k.cx
            v = k.fy * (outline[:, 1] - pose.ty) / z + k.cy
            if u.max() < -0.5 or u.min() > k.width - 0.5 or v.max() < -0.5 \
                    or v.min() > k.height - 0.5:
                return index
        return None
