"""3D without ROS: a depth image and the colour camera's intrinsics read from files, for
``sam3-agent run --depth`` (interface §4).

- Depth: a 16-bit PNG (a RealSense / OpenNI depth frame saved as is) or a ``.npy`` array (any
  integer or float 2D array). ``depth_scale`` is metres per unit: by default 0.001 for integer
  data (millimetres), 1.0 for float data (metres). 0 and NaN stay invalid. The PNG's size is read
  from its header and refused past the pixel cap before decoding (``image_header``); the
  ``.npy`` header is read before its data.
- Intrinsics: ``fx,fy,cx,cy`` on the command line, or a camera-info YAML: the ROS calibration
  format of camera_calibration / camera_info_manager (``camera_matrix: {data: [9 values]}``,
  ``image_width``, ``image_height``) or a dumped ``sensor_msgs/CameraInfo`` (``k: [9 values]``,
  ``width``, ``height``, ``binning_x``, ``binning_y``, ``roi``, ``p``, ``d``,
  ``distortion_model``; what ``ros2 topic echo --once`` prints; the calibration format's
  ``projection_matrix`` and ``distortion_coefficients`` alike). Read as a
  ``camera_model.CameraModel``, not yet checked: whether it fits the colour image (its size,
  binning/ROI, plausible focal lengths, principal point inside, finite P and D) is
  ``camera_model.image_intrinsics``' to say, as on ROS.

Every problem reading a file raises ``ValueError`` saying what is wrong; nothing here imports ROS.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from sam3_agent_ros.geometry.camera_model import CameraModel, Intrinsics
from sam3_agent_ros.image_header import (
    ImageHeaderError,
    ImageTooLarge,
    decode_bounded,
    pixel_cap_problem,
)

INTEGER_DEPTH_SCALE = 0.001  # millimetres, as 16-bit depth cameras publish them
FLOAT_DEPTH_SCALE = 1.0  # metres
MAX_YAML_BYTES = 1 << 20  # a camera-info file is a few hundred bytes
MAX_COEFFICIENTS = 64  # D holds at most 14 in any model OpenCV knows


def default_depth_scale(dtype: np.dtype) -> float:
    """Metres per unit when ``--depth-scale`` is not given."""
    return FLOAT_DEPTH_SCALE if np.issubdtype(dtype, np.floating) else INTEGER_DEPTH_SCALE


def read_depth(path: str | Path, depth_scale: float | None, max_pixels: int) -> np.ndarray:
    """A depth file -> float32 metres (H, W); ``depth_scale`` None: ``default_depth_scale``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError("no such file")
    if depth_scale is not None and not (math.isfinite(depth_scale) and depth_scale > 0):
        raise ValueError(f"the depth scale must be a positive number of metres per unit, got "
                         f"{depth_scale}")
    raw = _read_npy(path, max_pixels) if path.suffix.lower() == ".npy" else _read_png(
        path, max_pixels)
    if raw.ndim != 2:
        raise ValueError(f"a depth image has one channel, this one has shape {raw.shape}")
    if raw.dtype == np.uint8:
        raise ValueError("an 8-bit image holds no usable depth: save depth as a 16-bit PNG "
                         "(millimetres) or a .npy array")
    if not (np.issubdtype(raw.dtype, np.integer) or np.issubdtype(raw.dtype, np.floating)):
        raise ValueError(f"depth must be integer or float data, not {raw.dtype}")
    scale = default_depth_scale(raw.dtype) if depth_scale is None else depth_scale
    return (raw.astype(np.float64) * scale).astype(np.float32)


def _read_png(path: Path, max_pixels: int) -> np.ndarray:
    import cv2

    try:
        return decode_bounded(np.fromfile(path, dtype=np.uint8), max_pixels,
                              cv2.IMREAD_UNCHANGED)
    except ImageTooLarge as exc:
        raise ValueError(f"too large: {exc} (not decoded)") from None
    except ImageHeaderError as exc:
        raise ValueError(f"not a 16-bit PNG or a .npy array: {exc}") from None


def _read_npy(path: Path, max_pixels: int) -> np.ndarray:
    try:  # memory-mapped: the header is read, the data only when copied below
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ValueError(f"not a .npy array: {exc}") from None
    if not isinstance(mapped, np.ndarray):
        raise ValueError("not a .npy array (an .npz archive?)")
    if mapped.ndim == 2:
        problem = pixel_cap_problem(mapped.shape[1], mapped.shape[0], max_pixels)
        if problem:
            raise ValueError(f"too large: {problem} (not read)")
    return np.array(mapped)


def parse_intrinsics(text: str) -> Intrinsics:
    """``"fx,fy,cx,cy"`` (pixels) -> Intrinsics (four numbers; their values are checked against
    the image by ``camera_model.image_intrinsics``)."""
    parts = [part.strip() for part in text.split(",")]
    try:
        values = [float(part) for part in parts]
    except ValueError:
        values = []
    if len(values) != 4:
        raise ValueError(f"expected four numbers fx,fy,cx,cy, got {text!r}")
    return Intrinsics(values[0], values[1], values[2], values[3])


def read_camera_info(path: str | Path) -> tuple[Intrinsics, tuple[int, int] | None]:
    """A camera-info YAML -> (its K, (width, height) of the image it belongs to, or None when
    the file does not say); ``read_camera_model`` has binning and ROI too."""
    model = read_camera_model(path)
    return model.k, model.size


def read_camera_model(path: str | Path) -> CameraModel:
    """A camera-info YAML -> its camera model (``size`` None when the file does not say)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ValueError("no such file")
    if path.stat().st_size > MAX_YAML_BYTES:
        raise ValueError(f"larger than {MAX_YAML_BYTES} bytes: not a camera-info file")
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("expected a mapping with camera_matrix (calibration file) or k "
                         "(a dumped CameraInfo)")
    if isinstance(data.get("camera_matrix"), dict):
        matrix, size = data["camera_matrix"].get("data"), ("image_width", "image_height")
        projection = _nested(data, "projection_matrix")
        distortion = _nested(data, "distortion_coefficients")
    elif "k" in data or "K" in data:
        matrix, size = data.get("k", data.get("K")), ("width", "height")
        projection, distortion = data.get("p", data.get("P")), data.get("d", data.get("D"))
    else:
        raise ValueError("no camera_matrix: {data: [...]} (calibration file) and no k: [...] "
                         "(a dumped CameraInfo)")
    if not isinstance(matrix, list) or len(matrix) != 9:
        raise ValueError("the camera matrix must be a list of 9 numbers (row-major 3x3)")
    try:
        values = [float(v) for v in matrix]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"camera matrix: {exc}") from None
    width, height = data.get(size[0]), data.get(size[1])
    if not (isinstance(width, int) and isinstance(height, int) and width > 0 and height > 0):
        width = height = 0
    known = width > 0
    roi = data.get("roi")
    if not isinstance(roi, dict):
        roi = {}
    x_offset, y_offset, roi_width, roi_height = (
        _count(roi, key) for key in ("x_offset", "y_offset", "width", "height"))
    model = CameraModel.from_values(
        values, width, height, _count(data, "binning_x"), _count(data, "binning_y"),
        (x_offset, y_offset, roi_width, roi_height), p=_numbers(projection, "P", (0, 12)),
        d=_numbers(distortion, "D", None), distortion_model=str(data.get("distortion_model")
                                                                or ""))
    return model if known else dataclasses.replace(model, size=None)


def _nested(data: dict[str, object], key: str) -> object:
    """``data[key]["data"]`` of a calibration file (None when absent)."""
    value = data.get(key)
    return value.get("data") if isinstance(value, dict) else None


def _numbers(value: object, name: str, counts: tuple[int, ...] | None) -> tuple[float, ...]:
    """A list of numbers (P, D) of a camera-info file; () when absent. Non-finite values are
    kept: ``camera_model.image_intrinsics`` refuses them with its reason."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_COEFFICIENTS:
        raise ValueError(f"{name} must be a list of numbers")
    try:
        numbers = tuple(float(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: {exc}") from None
    if counts is not None and len(numbers) not in counts:
        raise ValueError(f"{name} must hold {' or '.join(map(str, counts))} numbers, got "
                         f"{len(numbers)}")
    return numbers


def _count(data: dict[str, object], key: str) -> int:
    """A non-negative integer field (binning, ROI) of a dumped CameraInfo; 0 when absent."""
    value = data.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{key} must be a non-negative integer, got {value!r}")
    return value
