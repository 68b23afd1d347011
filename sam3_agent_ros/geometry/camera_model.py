"""The colour camera's pinhole model, checked against the frame it is used on (ROS-free).

3D is only as good as the intrinsics: a camera_info of another resolution, an absurd focal length
or a principal point outside the image gives positions that look fine and are metres off. So a
``CameraModel`` (what a sensor_msgs/CameraInfo or a calibration file says) is turned into the
colour image's ``Intrinsics`` only when it fits that image, else ``CameraModelError`` says what is
wrong and what to fix.

The mapping follows the sensor_msgs/CameraInfo documentation (REP 104): ``K`` (raw images) and
``P`` (rectified images) belong to the full-resolution sensor (``width`` x ``height``); ``roi``
(raw, full-resolution pixels; all zero = the whole sensor, else all of it) is the window that was
read out, then ``binning_x`` / ``binning_y`` (0 = 1) combine pixels into super-pixels. The
published image is ``roi.width / binning_x`` x ``roi.height / binning_y`` and its intrinsics are
``fx / bx``, ``fy / by``, ``(cx - roi.x_offset) / bx``, ``(cy - roi.y_offset) / by``
(image_geometry's convention). The images are rectified unless ``depth.rectified`` is false
(depth_image_proc's assumption): then P's fx, fy, cx, cy are used, K only where P is all zero
(P's Tx, a stereo baseline, plays no part in one camera's back-projection). A raw stream is
measured with K and its lens undone (``geometry.lens``). Non-finite K, P or D are refused.

``CalibrationHistory`` keeps the calibrations seen, by stamp, so that a frame is measured with the
camera_info that was in force when it was taken (a K that changes applies from its own stamp on).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sam3_agent_ros.geometry.lens import PixelMap, undistortion_map

# A plausible pinhole camera sees between these horizontal / vertical fields of view: outside,
# the focal length is a unit mistake (metres, millimetres), a placeholder (1.0) or garbage.
MIN_FIELD_OF_VIEW_DEG = 1.0
MAX_FIELD_OF_VIEW_DEG = 170.0
MAX_CALIBRATIONS = 8  # calibration changes kept for stamp matching (a static camera keeps one)


@dataclass(frozen=True)
class Intrinsics:
    """A pinhole camera's focal lengths and principal point (pixels). ``lens``: a raw stream's
    undistortion (``geometry.lens.PixelMap``: each pixel's ideal pinhole pixel), None for a
    rectified one; back-projection reads it through ``ideal_pixels``."""

    fx: float
    fy: float
    cx: float
    cy: float
    lens: PixelMap | None = field(default=None, compare=False, repr=False)


def ideal_pixels(intr: Intrinsics, rows: np.ndarray, cols: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(u, v) of the image pixels at ``rows``, ``cols`` as the pinhole model back-projects them:
    the pixels themselves for a rectified image, their undistorted places for a raw one."""
    if intr.lens is None:
        return cols.astype(np.float64), rows.astype(np.float64)
    return intr.lens.at(rows, cols)


class CameraModelError(ValueError):
    """The camera model does not fit the image (the message says why and what to fix)."""


def as_intrinsics(k: Intrinsics | Sequence[float] | np.ndarray) -> Intrinsics:
    """``(fx, fy, cx, cy)``, a 3x3 matrix or its 9 row-major values (CameraInfo.k) -> Intrinsics.

    Raises ValueError for anything else or for a non-positive / non-finite focal length.
    """
    result = _raw_intrinsics(k)
    for name in ("fx", "fy", "cx", "cy"):
        if not math.isfinite(getattr(result, name)):
            raise ValueError(f"intrinsics: {name} is not finite")
    if result.fx <= 0 or result.fy <= 0:
        raise ValueError(
            f"intrinsics: focal lengths must be positive (fx={result.fx}, fy={result.fy}); "
            "is the camera calibrated (CameraInfo.k all zeros)?")
    return result


def _raw_intrinsics(k: Intrinsics | Sequence[float] | np.ndarray) -> Intrinsics:
    if isinstance(k, Intrinsics):
        return k
    values = np.asarray(k, dtype=np.float64).reshape(-1)
    if values.size == 4:
        return Intrinsics(float(values[0]), float(values[1]), float(values[2]), float(values[3]))
    if values.size == 9:
        return Intrinsics(float(values[0]), float(values[4]), float(values[2]),
                          float(values[5]))
    if values.size == 12:  # a 3x4 projection matrix (CameraInfo.p)
        return Intrinsics(float(values[0]), float(values[5]), float(values[2]),
                          float(values[6]))
    raise ValueError(
        f"intrinsics must be (fx, fy, cx, cy) or a 3x3 matrix, got {values.size} values")


def scale_intrinsics(k: Intrinsics | Sequence[float] | np.ndarray, from_size: tuple[int, int],
                     to_size: tuple[int, int]) -> Intrinsics:
    """Intrinsics of an image of ``from_size`` (width, height) resized to ``to_size``."""
    intr = as_intrinsics(k)
    if intr.lens is not None:
        raise ValueError("a raw stream's intrinsics (depth.rectified: false) are not rescaled: "
                         "use the camera_info of the colour image's own size")
    (w0, h0), (w1, h1) = from_size, to_size
    if min(w0, h0, w1, h1) <= 0:
        raise ValueError(f"image sizes must be positive, got {from_size} -> {to_size}")
    sx, sy = w1 / w0, h1 / h0
    # Pixel centres at integer coordinates: the image edge is at -0.5 in both images.
    return Intrinsics(intr.fx * sx, intr.fy * sy, (intr.cx + 0.5) * sx - 0.5,
                      (intr.cy + 0.5) * sy - 0.5)


@dataclass(frozen=True)
class CameraModel:
    """What a camera_info says: ``k`` (fx, fy, cx, cy) of the full-resolution sensor, its
    ``size`` (width, height; None: not said, e.g. ``--intrinsics``), ``binning`` (x, y; 0 = 1)
    and ``roi`` (x_offset, y_offset, width, height; all 0 = the whole sensor)."""

    k: Intrinsics
    size: tuple[int, int] | None = None
    binning: tuple[int, int] = (0, 0)
    roi: tuple[int, int, int, int] = (0, 0, 0, 0)
    p: tuple[float, ...] = ()  # the 3x4 projection matrix, row-major (empty or zero: none)
    d: tuple[float, ...] = ()  # the distortion coefficients of ``distortion_model``
    distortion_model: str = ""

    @classmethod
    def from_values(cls, k: Sequence[float] | np.ndarray | Intrinsics, width: int = 0,
                    height: int = 0, binning_x: int = 0, binning_y: int = 0,
                    roi: tuple[int, int, int, int] = (0, 0, 0, 0),
                    p: Sequence[float] | np.ndarray = (), d: Sequence[float] | np.ndarray = (),
                    distortion_model: str = "") -> CameraModel:
        """From CameraInfo's fields (``width``/``height`` 0 stay (0, 0): a size not filled in)."""
        x_offset, y_offset, roi_width, roi_height = (int(v) for v in roi)
        return cls(_raw_intrinsics(k), (int(width), int(height)), (int(binning_x),
                   int(binning_y)), (x_offset, y_offset, roi_width, roi_height),
                   tuple(float(v) for v in np.asarray(p, dtype=np.float64).reshape(-1)),
                   tuple(float(v) for v in np.asarray(d, dtype=np.float64).reshape(-1)),
                   str(distortion_model))

    def key(self) -> str:
        """Equal for the same calibration (NaN included): what ``CalibrationHistory`` compares."""
        return repr((self.k, self.size, self.binning, self.roi, self.p, self.d,
                     self.distortion_model))

    def projection(self) -> Intrinsics | None:
        """P's fx, fy, cx, cy (P[0], P[5], P[2], P[6]); None when P is absent or all zero."""
        if len(self.p) != 12 or not any(self.p):
            return None
        return Intrinsics(self.p[0], self.p[5], self.p[2], self.p[6])

    def describe(self) -> str:
        """``1280x720`` (with ``binning 2x2`` / ``roi 640x480+0+0`` when set)."""
        text = "no size" if self.size is None else f"{self.size[0]}x{self.size[1]}"
        if any(b > 1 for b in self.binning):
            text += f", binning {max(1, self.binning[0])}x{max(1, self.binning[1])}"
        if any(self.roi):
            x, y, w, h = self.roi
            text += f", roi {w}x{h}+{x}+{y}"
        return text


def image_size(model: CameraModel) -> tuple[int, int] | None:
    """The size of the images this model describes (after ROI and binning); None: not said."""
    if model.size is None:
        return None
    bx, by = (max(1, b) for b in model.binning)
    x, y, w, h = model.roi
    width, height = (w, h) if (w and h) else model.size
    return width // bx, height // by


def image_intrinsics(model: CameraModel, image: tuple[int, int],
                     rectified: bool = True) -> Intrinsics:
    """The intrinsics of the ``image`` (width, height) this model is used on, as
    depth_image_proc and image_geometry take them: a ``rectified`` image (the default) by P's
    fx, fy, cx, cy (K only where P is all zero); a raw one (``depth.rectified: false``) by K,
    with the lens's undistortion (D, ``distortion_model``: ``Intrinsics.lens``). ROI and binning
    apply to whichever is used (REP 104). CameraModelError when the model does not fit the
    image: non-finite K, P or D, another size (unless binning / roi map it), an ROI that is not
    all-or-nothing or leaves the sensor, a focal length that is not positive or implausible, a
    principal point outside the image, a distortion that cannot be undone."""
    width, height = image
    for name in ("fx", "fy", "cx", "cy"):
        if not math.isfinite(getattr(model.k, name)):
            raise CameraModelError(f"{name} is {getattr(model.k, name)}, not a number: publish "
                                   "the colour camera's calibration")
    for name, values in (("P", model.p), ("D", model.d)):
        bad = [v for v in values if not math.isfinite(v)]
        if bad:
            raise CameraModelError(f"camera_info {name} holds {bad[0]}, not a number: publish "
                                   "the colour camera's calibration")
    if model.p and len(model.p) != 12:
        raise CameraModelError(f"camera_info P has {len(model.p)} values, not 12 (3x4 "
                               "row-major)")
    projection = model.projection()
    k = projection if rectified and projection is not None else model.k
    used = "P" if k is projection else "K"
    if k.fx <= 0 or k.fy <= 0:
        raise CameraModelError(
            f"focal lengths must be positive (fx={k.fx:g}, fy={k.fy:g} of {used}); K all zeros "
            "means an uncalibrated camera: calibrate it or use the driver's factory calibration")
    roi_problem = _roi_problem(model)
    if roi_problem is not None:
        raise CameraModelError(roi_problem)
    size = image_size(model)
    if size is not None and size != (width, height):
        mapped = "" if size == model.size else f" (after roi/binning: {size[0]}x{size[1]})"
        raise CameraModelError(
            f"camera_info is for {model.describe()} images{mapped} but the colour frame is "
            f"{width}x{height}: use the camera_info published with the colour images (same "
            "resolution), or set its binning_x/binning_y/roi to say how it maps")
    bx, by = (max(1, b) for b in model.binning)
    x_offset, y_offset = (model.roi[0], model.roi[1]) if size is not None else (0, 0)
    intr = Intrinsics(k.fx / bx, k.fy / by, (k.cx - x_offset) / bx, (k.cy - y_offset) / by)
    for name, focal, extent in (("fx", intr.fx, width), ("fy", intr.fy, height)):
        low, high = _focal_range(extent)
        if not low <= focal <= high:
            raise CameraModelError(
                f"{name}={focal:g} px is implausible for an image {extent} px "
                f"{'wide' if name == 'fx' else 'high'} (a field of "
                f"view outside {MIN_FIELD_OF_VIEW_DEG:g}..{MAX_FIELD_OF_VIEW_DEG:g} degrees, "
                f"i.e. {name} outside {low:.4g}..{high:.4g} px): K must be in pixels of this "
                "image")
    if not (-0.5 <= intr.cx <= width - 0.5 and -0.5 <= intr.cy <= height - 0.5):
        raise CameraModelError(
            f"principal point ({intr.cx:g}, {intr.cy:g}) lies outside the {width}x{height} "
            "image: K must be in pixels of this image (cx, cy near its centre)")
    if rectified:
        return intr
    try:  # a raw stream: each pixel's undistorted place, for back-projection
        lens = undistortion_map((intr.fx, intr.fy, intr.cx, intr.cy), model.distortion_model,
                                model.d, (width, height))
    except ValueError as exc:
        raise CameraModelError(f"depth.rectified is false but {exc}") from None
    return Intrinsics(intr.fx, intr.fy, intr.cx, intr.cy, lens)


def _roi_problem(model: CameraModel) -> str | None:
    """Why the ROI is not usable (None: it is): REP 104's all-or-nothing (all zero = the whole
    sensor; else a width and a height), inside the sensor when its size is known."""
    x, y, w, h = model.roi
    if not any(model.roi):
        return None
    if min(model.roi) < 0 or w == 0 or h == 0:
        return (f"camera_info roi (x_offset {x}, y_offset {y}, width {w}, height {h}) is not "
                "all-or-nothing: all zero for the whole sensor, else a width and a height "
                "(an offset without them would shift cx, cy)")
    if model.size is not None and all(model.size) and (
            x + w > model.size[0] or y + h > model.size[1]):
        return (f"camera_info roi {w}x{h}+{x}+{y} leaves the {model.size[0]}x{model.size[1]} "
                "sensor")
    return None


def _focal_range(extent: int) -> tuple[float, float]:
    """The focal lengths (px) giving the plausible fields of view over ``extent`` pixels."""
    def focal(fov_deg: float) -> float:
        return extent / (2.0 * math.tan(math.radians(fov_deg) / 2.0))

    return focal(MAX_FIELD_OF_VIEW_DEG), focal(MIN_FIELD_OF_VIEW_DEG)


class CalibrationHistory:
    """The calibrations seen, each applying from its stamp (ns) on until the next different one.

    A camera_info repeating the calibration in force adds nothing, so a static camera keeps one
    entry whatever its rate. ``at(stamp)`` gives the newest calibration stamped at or before the
    frame. Decided on purpose: the only calibration ever seen applies to every frame (a static
    calibration, whatever its stamp: a camera_info sent once, or with stamp 0); a camera_info
    stamped before the newest kept one (stamp 0, a bag looping, a simulation reset) starts the
    history again. Not thread-safe: the caller locks.
    """

    def __init__(self, max_kept: int = MAX_CALIBRATIONS):
        self._entries: collections.deque[tuple[int, CameraModel, str]] = collections.deque(
            maxlen=max(1, max_kept))
        self._dropped = False  # an older calibration fell out: frames before the oldest unknown

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, stamp_ns: int, model: CameraModel) -> None:
        key = model.key()
        if self._entries:
            newest_stamp, _, newest_key = self._entries[-1]
            if stamp_ns < newest_stamp:
                self.clear()
            elif key == newest_key:
                return
        if len(self._entries) == self._entries.maxlen:
            self._dropped = True
        self._entries.append((stamp_ns, model, key))

    def at(self, stamp_ns: int) -> tuple[CameraModel | None, str | None]:
        """(the calibration in force at ``stamp_ns``, None) or (None, why there is none)."""
        if not self._entries:
            return None, "no camera_info received"
        if len(self._entries) == 1 and not self._dropped:
            return self._entries[0][1], None
        for stamp, model, _ in reversed(self._entries):
            if stamp <= stamp_ns:
                return model, None
        if not self._dropped:  # before the first one seen: the earliest calibration known
            return self._entries[0][1], None
        oldest = self._entries[0][0]
        return None, (f"the calibration changed {len(self._entries)} times since the colour "
                      f"frame; the oldest camera_info kept is {(oldest - stamp_ns) / 1e9:.3f} s "
                      "newer than the frame")

    def clear(self) -> None:
        self._entries.clear()
        self._dropped = False
