"""Synthetic tabletop scenes with exact ground truth (example image, sample bag, 3D tests).

Geometry: a pinhole camera looks straight down at a flat table ``table_distance_m`` away. The
camera frame is the ROS optical frame (x right, y down, z forward). Table coordinates (x, y) are
metres on the table plane, aligned with the camera's x/y when the camera is at its nominal pose.
Every object is a flat-topped prism (box, cylinder, triangular prism...) standing on the table;
only its top face is rendered, so depth is piecewise constant: the table at ``table_distance_m``
(minus the camera's z offset) and each top face at ``table_distance_m - height``. Because every
top face is parallel to the image plane, its projection is exact (an affine image of the face),
so mask centroids back-project exactly to the 3D top centres in ``SceneFrame.positions``.

A top face may also be tilted (``SceneObject.tilt_deg``: an object leaning on something): its
outline is projected vertex by vertex (exact: a pinhole maps lines to lines) and its depth is
ray-cast onto its plane, pixel by pixel. ``SceneFrame.true_box(name)`` is the face's true
oriented box: its centre, the two sides of its minimum-area rectangle and its axes, in the camera
frame (what ``geometry.box.fit_box`` estimates from the depth; ``scene_boxes.py``, with the errors
of an estimated box). The ground truth files: ``scene_files.py``.

Everything is deterministic given the seed; one 640x480 frame renders in a few milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import cv2
import numpy as np

from sam3_agent_demo.scene_boxes import (  # noqa: F401 (re-exported: the scene's API)
    SQUARE_TOLERANCE,
    BoxErrors,
    TrueBox,
    box_errors,
    true_box,
)
from sam3_agent_demo.scene_files import (  # noqa: F401 (re-exported)
    load_ground_truth_masks,
    save_ground_truth,
)
from sam3_agent_ros.palette import COLORS, TABLE_COLOR

SHAPES = ("circle", "ellipse", "rectangle", "triangle")
_FILL_SHIFT = 4  # sub-pixel bits for cv2.fillPoly
_NOISE_PAD = 64


@dataclass(frozen=True)
class CameraIntrinsics:
    fx: float = 600.0
    fy: float = 600.0
    cx: float = 320.0
    cy: float = 240.0
    width: int = 640
    height: int = 480

    @property
    def K(self) -> np.ndarray:  # noqa: N802 (the usual name of the camera matrix)
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    def project(self, x: float, y: float, z: float) -> tuple[float, float]:
        """Camera-frame point (m) -> pixel (u, v)."""
        return self.fx * x / z + self.cx, self.fy * y / z + self.cy


@dataclass(frozen=True)
class SceneObject:
    """A flat-topped prism on the table.

    ``shape``: circle (cylinder), ellipse (elliptic cylinder), rectangle (box) or triangle
    (triangular prism). ``size`` = (extent along x, extent along y) of the top face in metres
    before ``yaw_deg``; for a triangle: (base width, height), with its centroid at ``position``.
    """

    name: str
    color_name: str
    shape: str
    position: tuple[float, float]  # table x, y (m) of the top face's centre
    size: tuple[float, float]
    height: float  # m above the table
    yaw_deg: float = 0.0
    # The top face turned about the table's x axis, then its y axis, through its centre (deg).
    tilt_deg: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"object {self.name!r}: shape {self.shape!r} is not one of {SHAPES}")
        if self.color_name not in COLORS:
            raise ValueError(f"object {self.name!r}: unknown colour {self.color_name!r}")
        if self.height < 0 or min(self.size) <= 0:
            raise ValueError(f"object {self.name!r}: size and height must be positive")

    def top_outline(self) -> np.ndarray:
        """(K, 2) table x, y (m) of the top face's outline."""
        sx, sy = self.size
        if self.shape in ("circle", "ellipse"):
            if self.shape == "circle":
                sy = sx
            angles = np.linspace(0.0, 2.0 * math.pi, 96, endpoint=False)
            local = np.stack([0.5 * sx * np.cos(angles), 0.5 * sy * np.sin(angles)], axis=1)
        elif self.shape == "rectangle":
            local = np.array([[-sx, -sy], [sx, -sy], [sx, sy], [-sx, sy]]) * 0.5
        else:  # triangle, apex pointing to -y (up in the image), centroid at the origin
            local = np.array([[-0.5 * sx, sy / 3.0], [0.5 * sx, sy / 3.0], [0.0, -2.0 * sy / 3.0]])
        yaw = math.radians(self.yaw_deg)
        rot = np.array([[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]])
        return local @ rot.T + np.asarray(self.position)

    @property
    def tilted(self) -> bool:
        return any(self.tilt_deg)

    def tilt(self) -> np.ndarray:
        """3x3 rotation of the top face about its centre (table x, then y; identity untilted)."""
        ax, ay = (math.radians(a) for a in self.tilt_deg)
        about_x = np.array([[1.0, 0.0, 0.0], [0.0, math.cos(ax), -math.sin(ax)],
                            [0.0, math.sin(ax), math.cos(ax)]])
        about_y = np.array([[math.cos(ay), 0.0, math.sin(ay)], [0.0, 1.0, 0.0],
                            [-math.sin(ay), 0.0, math.cos(ay)]])
        return about_y @ about_x

    def top_outline_3d(self, top_z: float) -> np.ndarray:
        """(K, 3) table x, y and camera depth z (m) of the top face's outline, its centre at
        depth ``top_z``, tilted."""
        flat = self.top_outline() - np.asarray(self.position)
        offsets = np.concatenate([flat, np.zeros((len(flat), 1))], axis=1) @ self.tilt().T
        return offsets + np.array([*self.position, top_z])


@dataclass(frozen=True)
class CameraPose:
    """Offset of the camera from its nominal pose (m), axes of the camera frame; no rotation."""

    tx: float = 0.0
    ty: float = 0.0
    tz: float = 0.0


@dataclass(frozen=True)
class Lighting:
    """Multiplicative light field ``brightness * (1 + gx * (2u/W - 1) + gy * (2v/H - 1))``
    plus Gaussian pixel noise of ``noise_sigma`` grey levels."""

    brightness: float = 1.0
    gradient_x: float = 0.06
    gradient_y: float = -0.04
    noise_sigma: float = 2.0


@dataclass(frozen=True)
class Scene:
    objects: tuple[SceneObject, ...]
    intrinsics: CameraIntrinsics = field(default_factory=CameraIntrinsics)
    table_distance_m: float = 1.0
    table_color: tuple[int, int, int] = TABLE_COLOR

    def object(self, name: str) -> SceneObject:
        for obj in self.objects:
            if obj.name == name:
                return obj
        raise KeyError(f"no object named {name!r} in the scene")


@dataclass(frozen=True)
class SceneFrame:
    """One rendered frame and its ground truth.

    ``masks[name]``: the visible pixels of each object (pairwise disjoint; nearer objects occlude
    farther ones). ``positions[name]``: the camera-frame (x, y, z) in metres of the centre of the
    object's top face. ``depth_m``: float32 metres, exact (no noise) unless asked for.
    """

    rgb: np.ndarray
    depth_m: np.ndarray
    masks: dict[str, np.ndarray]
    positions: dict[str, tuple[float, float, float]]
    intrinsics: CameraIntrinsics
    scene: Scene
    pose: CameraPose
    lighting: Lighting

    def centroid_px(self, name: str) -> tuple[float, float]:
        ys, xs = np.nonzero(self.masks[name])
        if xs.size == 0:
            return (float("nan"), float("nan"))
        return float(xs.mean()), float(ys.mean())

    def label_image(self) -> np.ndarray:
        """uint8 (H, W): k on the k-th object of ``scene.objects`` (1-based), 0 on the table."""
        labels = np.zeros(self.depth_m.shape, np.uint8)
        for index, obj in enumerate(self.scene.objects, start=1):
            labels[self.masks[obj.name]] = index
        return labels

    def depth_mm(self) -> np.ndarray:
        """Depth as ``16UC1`` millimetres (0 where invalid), as a RealSense publishes it."""
        depth = np.nan_to_num(self.depth_m, nan=0.0, posinf=0.0, neginf=0.0)
        return np.clip(np.rint(depth * 1000.0), 0, 65535).astype(np.uint16)

    def spilled_mask(self, name: str, pixels: int) -> np.ndarray:
        """The object's mask grown by ``pixels`` onto the table around it, as a segmenter's mask
        bleeds past an object's edge; but not over the object's footprint on the table (where
        a real prism's side walls would be seen: this scene renders top faces only, so the
        table under a face's edge is visible here and nowhere else)."""
        mask = self.masks[name]
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * pixels + 1,) * 2)
        grown = cv2.dilate(mask.view(np.uint8), kernel).astype(bool)
        obj, k, pose = self.scene.object(name), self.intrinsics, self.pose
        table_z = self.scene.table_distance_m - pose.tz
        outline = obj.top_outline()
        u = k.fx * (outline[:, 0] - pose.tx) / table_z + k.cx
        v = k.fy * (outline[:, 1] - pose.ty) / table_z + k.cy
        footprint = np.zeros(mask.shape, np.uint8)
        points = np.rint(np.stack([u, v], axis=1) * (1 << _FILL_SHIFT)).astype(np.int32)
        cv2.fillPoly(footprint, [points], 1, cv2.LINE_8, _FILL_SHIFT)
        return mask | (grown & ~footprint.astype(bool))

    def true_box(self, name: str) -> TrueBox:
        """The true oriented box of an object's top face in the camera frame (see TrueBox)."""
        return true_box(self.scene.object(name), self.positions[name])


def default_scene(intrinsics: CameraIntrinsics | None = None) -> Scene:
    """Six objects on a table, 1 m below the camera.

    Built so that the example queries have one clear answer: two blue objects far apart in x
    (``blue_box`` is the leftmost), two red objects of very different sizes (``red_box`` is the
    largest), one green, one yellow, and nothing purple.
    """
    objects = (
        SceneObject("blue_box", "blue", "rectangle", (-0.33, 0.06), (0.09, 0.09), 0.05, 12.0),
        SceneObject("blue_cylinder", "blue", "circle", (0.10, -0.17), (0.09, 0.09), 0.07),
        SceneObject("red_box", "red", "rectangle", (0.28, 0.14), (0.15, 0.10), 0.04, -8.0),
        SceneObject("red_cylinder", "red", "circle", (-0.12, -0.22), (0.055, 0.055), 0.03),
        SceneObject("green_prism", "green", "triangle", (-0.06, 0.20), (0.11, 0.10), 0.03),
        SceneObject("yellow_ellipse", "yellow", "ellipse", (0.36, -0.20), (0.10, 0.06), 0.05, 20.0),
    )
    return Scene(objects=objects, intrinsics=intrinsics or CameraIntrinsics())


def rotated_scene(intrinsics: CameraIntrinsics | None = None) -> Scene:
    """Eight objects turned every way, for the 3D box: rectangles and ellipses at yaws across
    the half turn, top faces tilted up to 25 degrees (leaning objects), a turned square, a
    long thin bar; none overlap, every face between 0.85 and 0.95 m from the camera."""
    objects = (
        SceneObject("flat_box", "blue", "rectangle", (-0.33, -0.17), (0.14, 0.08), 0.06, 35.0),
        SceneObject("leaning_box", "red", "rectangle", (-0.10, -0.18), (0.12, 0.07), 0.10, 120.0,
                    (20.0, 0.0)),
        SceneObject("tipped_box", "green", "rectangle", (0.13, -0.17), (0.10, 0.06), 0.09, 75.0,
                    (-15.0, 20.0)),
        SceneObject("turned_square", "yellow", "rectangle", (0.35, -0.17), (0.08, 0.08), 0.05,
                    30.0),
        SceneObject("flat_ellipse", "orange", "ellipse", (-0.33, 0.15), (0.12, 0.07), 0.07,
                    -50.0),
        SceneObject("leaning_ellipse", "purple", "ellipse", (-0.10, 0.16), (0.11, 0.06), 0.10,
                    10.0, (0.0, -25.0)),
        SceneObject("bar", "cyan", "rectangle", (0.13, 0.16), (0.16, 0.035), 0.08, 100.0,
                    (10.0, 10.0)),
        SceneObject("disc", "pink", "circle", (0.35, 0.16), (0.08, 0.08), 0.12, 0.0,
                    (0.0, 15.0)),
    )
    return Scene(objects=objects, intrinsics=intrinsics or CameraIntrinsics())


@lru_cache(maxsize=8)
def _pixel_grid(width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    u = np.arange(width, dtype=np.float32)[None, :]
    v = np.arange(height, dtype=np.float32)[:, None]
    return u, v


@lru_cache(maxsize=4)
def _noise_bank(width: int, height: int) -> np.ndarray:
    # Drawing 1 M normals costs ~14 ms; a fixed bank with a per-frame random window costs ~0.
    rng = np.random.default_rng(12345)
    return rng.standard_normal((height + _NOISE_PAD, width + _NOISE_PAD, 3), dtype=np.float32)


def _noise_window(width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """Unit Gaussian noise (H, W, 3) float32: a window of the bank chosen by ``rng``."""
    dy, dx = (int(d) for d in rng.integers(0, _NOISE_PAD, size=2))
    return _noise_bank(width, height)[dy:dy + height, dx:dx + width]


def _table_albedo(scene: Scene, pose: CameraPose) -> np.ndarray:
    """Float32 (H, W, 3): the table colour with a faint wood-grain texture fixed to the table."""
    k = scene.intrinsics
    u, v = _pixel_grid(k.width, k.height)
    z = scene.table_distance_m - pose.tz
    x = (u - k.cx) * (z / k.fx) + pose.tx
    y = (v - k.cy) * (z / k.fy) + pose.ty
    grain = 1.0 + 0.02 * np.sin(x * 90.0 + 0.8 * np.sin(y * 23.0)) + 0.012 * np.sin(y * 41.0)
    return grain[..., None] * np.asarray(scene.table_color, np.float32)


def _light_field(k: CameraIntrinsics, lighting: Lighting) -> np.ndarray:
    u, v = _pixel_grid(k.width, k.height)
    field_ = 1.0 + lighting.gradient_x * (2.0 * u / k.width - 1.0)
    field_ = field_ + lighting.gradient_y * (2.0 * v / k.height - 1.0)
    return (lighting.brightness * field_).astype(np.float32)


def render_scene(scene: Scene | None = None, pose: CameraPose | None = None,
                 lighting: Lighting | None = None, seed: int = 0,
                 depth_noise_m: float = 0.0) -> SceneFrame:
    """Render one frame (RGB uint8, depth float32 m, per-object masks, 3D top centres)."""
    scene = scene or default_scene()
    pose = pose or CameraPose()
    lighting = lighting or Lighting()
    k = scene.intrinsics
    rng = np.random.default_rng(seed)
    table_z = scene.table_distance_m - pose.tz
    if table_z <= 0:
        raise ValueError("the camera is below the table")

    albedo = _table_albedo(scene, pose)
    depth = np.full((k.height, k.width), table_z, np.float32)
    ids = np.zeros((k.height, k.width), np.uint8)
    positions: dict[str, tuple[float, float, float]] = {}
    # Painter's order: farthest top faces first, so nearer (taller) objects occlude them.
    order = sorted(range(len(scene.objects)), key=lambda i: scene.objects[i].height)
    for index in order:
        obj = scene.objects[index]
        z = table_z - obj.height
        if z <= 0:
            raise ValueError(f"object {obj.name!r} reaches the camera")
        if obj.tilted:
            outline = obj.top_outline_3d(z)
            if outline[:, 2].max() >= table_z or outline[:, 2].min() <= 0:
                raise ValueError(f"object {obj.name!r}: its tilted top face leaves the space "
                                 "between the camera and the table")
            u = k.fx * (outline[:, 0] - pose.tx) / outline[:, 2] + k.cx
            v = k.fy * (outline[:, 1] - pose.ty) / outline[:, 2] + k.cy
        else:
            outline = obj.top_outline()
            u = k.fx * (outline[:, 0] - pose.tx) / z + k.cx
            v = k.fy * (outline[:, 1] - pose.ty) / z + k.cy
        # Pixel centres sit at integer coordinates in OpenCV's fillPoly.
        points = np.rint(np.stack([u, v], axis=1) * (1 << _FILL_SHIFT)).astype(np.int32)
        cv2.fillPoly(ids, [points], index + 1, cv2.LINE_8, _FILL_SHIFT)
        if obj.tilted:
            _fill_plane(depth, points, obj, (obj.position[0] - pose.tx,
                                             obj.position[1] - pose.ty, z), k)
        else:
            cv2.fillPoly(depth, [points], float(z), cv2.LINE_8, _FILL_SHIFT)
        cv2.fillPoly(albedo, [points], tuple(float(c) for c in COLORS[obj.color_name]),
                     cv2.LINE_8, _FILL_SHIFT)
        cx_m, cy_m = obj.position
        positions[obj.name] = (cx_m - pose.tx, cy_m - pose.ty, z)

    rgb = albedo * _light_field(k, lighting)[..., None]
    if lighting.noise_sigma > 0:
        rgb += _noise_window(k.width, k.height, rng) * np.float32(lighting.noise_sigma)
    rgb = np.clip(rgb, 0.0, 255.0, out=rgb).round().astype(np.uint8)
    if depth_noise_m > 0:
        depth += rng.standard_normal(depth.shape, dtype=np.float32) * np.float32(depth_noise_m)
    masks = {obj.name: ids == index + 1 for index, obj in enumerate(scene.objects)}
    return SceneFrame(rgb=rgb, depth_m=depth, masks=masks, positions=positions, intrinsics=k,
                      scene=scene, pose=pose, lighting=lighting)


def _fill_plane(depth: np.ndarray, points: np.ndarray, obj: SceneObject,
                centre: tuple[float, float, float], k: CameraIntrinsics) -> None:
    """Ray-cast the tilted top face (its pixels: the polygon ``points``) onto its plane."""
    inside = np.zeros(depth.shape, np.uint8)
    cv2.fillPoly(inside, [points], 1, cv2.LINE_8, _FILL_SHIFT)
    vs, us = np.nonzero(inside)
    normal = obj.tilt() @ np.array([0.0, 0.0, 1.0])
    rays = np.stack([(us - k.cx) / k.fx, (vs - k.cy) / k.fy, np.ones(len(us))], axis=1)
    depth[vs, us] = (np.asarray(centre) @ normal) / (rays @ normal)


def sequence_conditions(t_s: float, period_s: float = 10.0) -> tuple[CameraPose, Lighting]:
    """Slight, smooth camera motion (about +-1.5 cm, i.e. +-9 px) and lighting change (+-10 %
    brightness, a swinging gradient) at time ``t_s`` of a sequence, for a sample bag."""
    phase = 2.0 * math.pi * t_s / period_s
    pose = CameraPose(tx=0.015 * math.sin(phase), ty=0.01 * math.sin(2.0 * phase + 0.7),
                      tz=0.005 * math.sin(phase + 1.3))
    lighting = Lighting(brightness=1.0 + 0.1 * math.sin(phase + 0.4),
                        gradient_x=0.06 * math.cos(phase),
                        gradient_y=-0.04 + 0.03 * math.sin(phase))
    return pose, lighting


def render_sequence_frame(t_s: float, scene: Scene | None = None, seed: int = 0,
                          period_s: float = 10.0) -> SceneFrame:
    """The frame at time ``t_s`` of a smooth sequence; the noise seed depends on ``seed`` and
    ``t_s`` so every frame is reproducible on its own."""
    pose, lighting = sequence_conditions(t_s, period_s)
    frame_seed = seed * 1_000_003 + int(round(t_s * 1000.0))
    return render_scene(scene, pose, lighting, seed=frame_seed)
