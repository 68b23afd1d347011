"""Synthetic moving tabletop sequences with exact ground truth, for follow mode.

``MovingSequence``: the camera of ``scene.py``'s default tabletop pans (and wobbles, and comes a
little closer) while three objects move on the table: ``blue_cylinder`` circles, ``red_box``
slides and turns, ``green_prism`` slides up the image. Near the end the pan speeds up to the
right, so ``blue_box`` (the leftmost object) leaves the view (``LEAVING_OBJECT``): following it
must end in ``lost``.

``GraspSequence``: the same table with a look-alike (``LOOK_ALIKE``, a blue box of the same size)
standing 2 cm to the right of ``blue_box``; the camera only wobbles, and ``blue_box``
(``GRASPED_OBJECT``) is taken away in place (it vanishes between two frames, as when a gripper
takes it or a hand covers it), then optionally put back where it was. Following it must end in
``lost`` and never switch to the look-alike; put back, it is found again.

Every frame carries RGB, depth (float32 m), the intrinsics, per-object masks and the camera-frame
3D top centres (``scene.SceneFrame``). Deterministic given the seed: ``sequence.frame(i)``
renders frame ``i`` on its own. Resolution follows the intrinsics (``intrinsics_for(1920, 1080)``
keeps the field of view).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from sam3_agent_demo.scene import (
    CameraIntrinsics,
    CameraPose,
    Lighting,
    Scene,
    SceneFrame,
    SceneObject,
    default_scene,
    render_scene,
)

LEAVING_OBJECT = "blue_box"
GRASPED_OBJECT = "blue_box"
LOOK_ALIKE = "blue_twin"
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

    def scene(self, index: int) -> Scene:
        """The objects where they stand on frame ``index``."""
        return moved_scene(self.progress(index), default_scene(self.intrinsics))

    def pose(self, index: int) -> CameraPose:
        """The camera on frame ``index``."""
        return camera_pose(self.progress(index))

    def frame(self, index: int, pixel_noise: bool = True) -> MovingFrame:
        """Frame ``index``; ``pixel_noise=False`` renders it without pixel noise (the sample
        bags: noise would make them ~15x larger)."""
        if not 0 <= index < self.n_frames:
            raise IndexError(f"frame {index} is outside 0..{self.n_frames - 1}")
        light = lighting(self.progress(index))
        if not pixel_noise:
            light = replace(light, noise_sigma=0.0)
        rendered = render_scene(self.scene(index), self.pose(index), light,
                                seed=self.seed * 1_000_003 + index)
        return MovingFrame(index=index, t_s=self.stamp(index), scene_frame=rendered)

    def first_index_without(self, name: str, start: int = 0) -> int | None:
        """The first frame from ``start`` on which object ``name`` has no visible pixel (None:
        always visible).

        Geometric (no rendering): the object is not on the table, or its top outline lies wholly
        outside the image.
        """
        k = self.intrinsics
        for index in range(start, self.n_frames):
            scene = self.scene(index)
            if name not in {obj.name for obj in scene.objects}:
                return index
            obj = scene.object(name)
            pose = self.pose(index)
            z = scene.table_distance_m - pose.tz - obj.height
            outline = obj.top_outline()
            u = k.fx * (outline[:, 0] - pose.tx) / z + k.cx
            v = k.fy * (outline[:, 1] - pose.ty) / z + k.cy
            if u.max() < -0.5 or u.min() > k.width - 0.5 or v.max() < -0.5 \
                    or v.min() > k.height - 0.5:
                return index
        return None


def grasp_scene(intrinsics: CameraIntrinsics | None = None) -> Scene:
    """The default tabletop with ``LOOK_ALIKE``: a blue box the size of ``GRASPED_OBJECT``, 12 cm
    to its right (2 cm between their edges; about 76 px between their centroids at 640x480,
    within the default ``follow.match_max_shift`` of 80 px)."""
    base = default_scene(intrinsics)
    grasped = base.object(GRASPED_OBJECT)
    x, y = grasped.position
    twin = SceneObject(LOOK_ALIKE, grasped.color_name, grasped.shape, (x + 0.12, y), grasped.size,
                       grasped.height)
    return replace(base, objects=base.objects + (twin,))


def grasp_camera_pose(progress: float) -> CameraPose:
    """A hand-held wobble (about +-3 cm), no sweep: every object stays in view."""
    return CameraPose(tx=0.03 * math.sin(2.0 * math.pi * progress),
                      ty=0.015 * math.sin(2.0 * math.pi * progress + 0.5),
                      tz=0.02 * math.sin(math.pi * progress))


@dataclass(frozen=True)
class GraspSequence(MovingSequence):
    """``GRASPED_OBJECT`` is on the table before frame ``removed_at``, gone from it until frame
    ``put_back_at`` (None: for good), then back where it stood; ``LOOK_ALIKE`` stays beside it.
    The other objects move as in ``MovingSequence``."""

    n_frames: int = 60
    removed_at: int = 25
    put_back_at: int | None = 50

    def __post_init__(self) -> None:
        super().__post_init__()
        end = self.n_frames if self.put_back_at is None else self.put_back_at
        if not 0 < self.removed_at < end <= self.n_frames:
            raise ValueError("a grasp sequence needs 0 < removed_at < put_back_at <= n_frames")

    def on_table(self, index: int) -> bool:
        """Whether ``GRASPED_OBJECT`` stands on the table on frame ``index``."""
        return index < self.removed_at or (self.put_back_at is not None
                                           and index >= self.put_back_at)

    def scene(self, index: int) -> Scene:
        moved = moved_scene(self.progress(index), grasp_scene(self.intrinsics))
        if self.on_table(index):
            return moved
        return replace(moved, objects=tuple(o for o in moved.objects
                                            if o.name != GRASPED_OBJECT))

    def pose(self, index: int) -> CameraPose:
        return grasp_camera_pose(self.progress(index))

    def frame(self, index: int, pixel_noise: bool = True) -> MovingFrame:
        """As ``MovingSequence.frame``; while ``GRASPED_OBJECT`` is away its mask is empty and its
        position NaN, so every frame names the same objects."""
        moving = super().frame(index, pixel_noise)
        rendered = moving.scene_frame
        if GRASPED_OBJECT in rendered.masks:
            return moving
        names = [obj.name for obj in grasp_scene(self.intrinsics).objects]
        empty = np.zeros(rendered.depth_m.shape, bool)
        masks = {name: rendered.masks.get(name, empty) for name in names}
        positions = {name: rendered.positions.get(name, (math.nan,) * 3) for name in names}
        return replace(moving, scene_frame=replace(rendered, masks=masks, positions=positions))
