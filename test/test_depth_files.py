"""depth_files: depth images and camera intrinsics from files (sam3-agent run --depth)."""

from __future__ import annotations

import zlib

import cv2
import numpy as np
import pytest

from sam3_agent_ros.depth_files import (
    parse_intrinsics,
    read_camera_info,
    read_camera_model,
    read_depth,
)
from sam3_agent_ros.geometry.camera_model import (
    CameraModel,
    CameraModelError,
    Intrinsics,
    image_intrinsics,
)

CAP = 1_000_000
K = [600.0, 0.0, 320.0, 0.0, 610.0, 240.0, 0.0, 0.0, 1.0]


def test_a_16_bit_png_is_millimetres_by_default(tmp_path):
    depth_mm = np.array([[0, 1000], [1234, 65535]], np.uint16)
    path = tmp_path / "depth.png"
    cv2.imwrite(str(path), depth_mm)
    metres = read_depth(path, None, CAP)
    assert metres.dtype == np.float32
    np.testing.assert_allclose(metres, depth_mm / 1000.0, rtol=1e-6)
    np.testing.assert_allclose(read_depth(path, 0.0001, CAP), depth_mm / 10000.0, rtol=1e-6)


def test_npy_float_is_metres_and_integers_millimetres(tmp_path):
    metres = np.array([[np.nan, 0.5], [1.25, 0.0]], np.float32)
    np.save(tmp_path / "float.npy", metres)
    out = read_depth(tmp_path / "float.npy", None, CAP)
    assert np.isnan(out[0, 0]) and out[1, 0] == 1.25
    np.save(tmp_path / "mm.npy", np.array([[500, 2000]], np.uint16))
    np.testing.assert_allclose(read_depth(tmp_path / "mm.npy", None, CAP), [[0.5, 2.0]])
    np.save(tmp_path / "double.npy", np.array([[1500.0]]))
    assert read_depth(tmp_path / "double.npy", 0.001, CAP)[0, 0] == pytest.approx(1.5)


@pytest.mark.parametrize(("make", "fragment"), [
    (lambda p: cv2.imwrite(str(p / "x.png"), np.zeros((4, 4), np.uint8)), "8-bit"),
    (lambda p: cv2.imwrite(str(p / "x.png"), np.zeros((4, 4, 3), np.uint16)), "one channel"),
    (lambda p: (p / "x.png").write_bytes(b"GIF89a...."), "not a 16-bit PNG or a .npy array"),
    (lambda p: np.save(p / "x.npy", np.zeros((2, 2, 2), np.float32)), "one channel"),
    (lambda p: np.save(p / "x.npy", np.array([["a"]])), "integer or float"),
    (lambda p: (p / "x.npy").write_bytes(b"not numpy"), "not a .npy array"),
])
def test_unusable_depth_files_say_why(tmp_path, make, fragment):
    make(tmp_path)
    path = next(tmp_path.iterdir())
    with pytest.raises(ValueError, match=fragment):
        read_depth(path, None, CAP)


def test_bad_scale_and_missing_file(tmp_path):
    np.save(tmp_path / "d.npy", np.ones((2, 2), np.float32))
    for scale in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive number of metres per unit"):
            read_depth(tmp_path / "d.npy", scale, CAP)
    with pytest.raises(ValueError, match="no such file"):
        read_depth(tmp_path / "missing.png", None, CAP)


def _png_declaring(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares a huge 16-bit greyscale image."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (len(data).to_bytes(4, "big") + kind + data
                + zlib.crc32(kind + data).to_bytes(4, "big"))

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([16, 0, 0, 0, 0])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))


def test_oversized_depth_is_refused_from_its_header(tmp_path):
    (tmp_path / "bomb.png").write_bytes(_png_declaring(20000, 20000))
    with pytest.raises(ValueError, match="too large.*not decoded"):
        read_depth(tmp_path / "bomb.png", None, CAP)
    big = np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.uint16,
                                    shape=(2000, 1000))
    del big
    with pytest.raises(ValueError, match="too large.*not read"):
        read_depth(tmp_path / "big.npy", None, CAP)


def test_parse_intrinsics():
    assert parse_intrinsics("600, 610,320.5,240") == Intrinsics(600.0, 610.0, 320.5, 240.0)
    for bad in ("600,610,320", "a,b,c,d", ""):
        with pytest.raises(ValueError, match="fx,fy,cx,cy"):
            parse_intrinsics(bad)
    # Read, not judged: the values are checked against the image (camera_model).
    assert parse_intrinsics("0,0,320,240") == Intrinsics(0.0, 0.0, 320.0, 240.0)


def test_a_calibration_file_and_a_dumped_camera_info(tmp_path):
    calibration = tmp_path / "calibration.yaml"
    calibration.write_text(
        "image_width: 1280\nimage_height: 960\ncamera_name: colour\n"
        f"camera_matrix:\n  rows: 3\n  cols: 3\n  data: {K}\n"
        "distortion_model: plumb_bob\n")
    assert read_camera_info(calibration) == (Intrinsics(600.0, 610.0, 320.0, 240.0),
                                             (1280, 960))
    dumped = tmp_path / "info.yaml"
    dumped.write_text("header:\n  frame_id: camera_color_optical_frame\nheight: 480\n"
                      "width: 640\ndistortion_model: plumb_bob\nk:\n"
                      + "".join(f"- {v}\n" for v in K))
    assert read_camera_info(dumped) == (Intrinsics(600.0, 610.0, 320.0, 240.0), (640, 480))
    sizeless = tmp_path / "sizeless.yaml"
    sizeless.write_text(f"k: {K}\n")
    assert read_camera_info(sizeless)[1] is None
    binned = tmp_path / "binned.yaml"
    binned.write_text(f"width: 1280\nheight: 960\nbinning_x: 2\nbinning_y: 2\nk: {K}\n"
                      "roi: {x_offset: 8, y_offset: 4, width: 1264, height: 952}\n")
    assert read_camera_model(binned) == CameraModel(Intrinsics(600.0, 610.0, 320.0, 240.0),
                                                   (1280, 960), (2, 2), (8, 4, 1264, 952))


@pytest.mark.parametrize(("text", "fragment"), [
    ("- just a list\n", "expected a mapping"),
    ("camera_name: x\n", "no camera_matrix"),
    ("k: [1, 2, 3]\n", "9 numbers"),
    ("binning_x: -2\nk: [1, 0, 0, 0, 1, 0, 0, 0, 1]\n", "binning_x must be a non-negative"),
    ("k: [a, b, c, d, e, f, g, h, i]\n", "camera matrix"),
    ("k: [1, 2\n", "not YAML"),
])
def test_unusable_camera_info_files_say_why(tmp_path, text, fragment):
    path = tmp_path / "info.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=fragment):
        read_camera_info(path)


def test_camera_info_files_carry_p_and_d_of_both_formats(tmp_path):
    calibration = tmp_path / "calibration.yaml"
    calibration.write_text(
        "image_width: 640\nimage_height: 480\ndistortion_model: plumb_bob\n"
        "camera_matrix: {rows: 3, cols: 3, data: [600, 0, 319.5, 0, 600, 239.5, 0, 0, 1]}\n"
        "distortion_coefficients: {rows: 1, cols: 5, data: [-0.2, 0.05, 0, 0, 0]}\n"
        "projection_matrix: {rows: 3, cols: 4, data: [560, 0, 330, 0, 0, 560, 230, 0, 0, 0, 1, "
        "0]}\n")
    model = read_camera_model(calibration)
    assert model.distortion_model == "plumb_bob" and model.d == (-0.2, 0.05, 0.0, 0.0, 0.0)
    assert image_intrinsics(model, (640, 480)) == Intrinsics(560.0, 560.0, 330.0, 230.0)
    assert image_intrinsics(model, (640, 480), rectified=False).lens is not None
    dumped = tmp_path / "camera_info.yaml"
    dumped.write_text("width: 640\nheight: 480\nk: [600, 0, 319.5, 0, 600, 239.5, 0, 0, 1]\n"
                      "d: [.nan, 0, 0, 0, 0]\np: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]\n")
    with pytest.raises(CameraModelError, match="D holds nan"):
        image_intrinsics(read_camera_model(dumped), (640, 480))
    bad = tmp_path / "bad.yaml"
    bad.write_text("width: 640\nheight: 480\nk: [600, 0, 319.5, 0, 600, 239.5, 0, 0, 1]\n"
                   "p: [1, 2, 3]\n")
    with pytest.raises(ValueError, match="P must hold 0 or 12 numbers"):
        read_camera_model(bad)
