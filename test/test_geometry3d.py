"""geometry3d on synthetic scenes of known geometry: a table plane at 1 m seen from above, boxes
standing on it (their top faces nearer the camera), depth ray-cast exactly (side walls included)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from sam3_agent_ros.geometry3d import (
    Intrinsics,
    as_intrinsics,
    depth_from_buffer,
    depth_to_metres,
    locate_mask,
    resize_depth_to,
    scale_intrinsics,
)

TABLE_Z = 1.0
CENTRED = Intrinsics(fx=600.0, fy=600.0, cx=319.5, cy=239.5)
OFF_CENTRE = Intrinsics(fx=580.0, fy=610.0, cx=290.0, cy=265.0)


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


@pytest.fixture(scope="module")
def scene():
    return render(CENTRED)


@pytest.mark.parametrize("name", list(BOXES))
def test_32fc1_positions_within_1cm(scene, name):
    depth, masks = scene
    located = locate_mask(masks[name], depth_to_metres(depth, "32FC1"), CENTRED)
    assert located.error is None
    assert error_cm(located.position, BOXES[name]) < 1.0
    assert located.valid_pixels > 100


@pytest.mark.parametrize("name", list(BOXES))
def test_16uc1_millimetres_within_1cm(scene, name):
    depth, masks = scene
    depth_mm = np.round(depth * 1000).astype(np.uint16)
    located = locate_mask(masks[name], depth_to_metres(depth_mm, "16UC1"), CENTRED)
    assert error_cm(located.position, BOXES[name]) < 1.0


def test_nan_and_zero_holes_are_ignored(scene):
    depth, masks = scene
    rng = np.random.default_rng(0)
    holed = depth.copy()
    holed[rng.random(depth.shape) < 0.3] = np.nan
    holed[rng.random(depth.shape) < 0.2] = 0.0
    holed[200:230, 300:330] = np.nan  # a big hole in the centre box
    for name, box in BOXES.items():
        located = locate_mask(masks[name], holed, CENTRED)
        assert error_cm(located.position, box) < 1.0, name
        assert located.valid_pixels < masks[name].sum()


def test_sensor_noise_and_flying_pixels(scene):
    depth, masks = scene
    rng = np.random.default_rng(1)
    noisy = depth + rng.normal(0.0, 0.003, depth.shape).astype(np.float32)
    flying = rng.random(depth.shape) < 0.02
    noisy[flying] = rng.uniform(0.2, 0.8, int(flying.sum()))
    for statistic in ("median", "trimmed_mean", "min_cluster"):
        for name, box in BOXES.items():
            located = locate_mask(masks[name], noisy, CENTRED, statistic=statistic)
            assert error_cm(located.position, box) < 1.0, (statistic, name)
            assert 0.001 < located.spread_m < 0.02


def test_depth_at_half_resolution_is_scaled(scene):
    _, masks = scene
    half = scale_intrinsics(CENTRED, (640, 480), (320, 240))
    depth_half, _ = render(half, 320, 240)
    for name, box in BOXES.items():
        located = locate_mask(masks[name], depth_half, CENTRED)
        assert error_cm(located.position, box) < 1.0, name


def test_off_centre_principal_point():
    depth, masks = render(OFF_CENTRE)
    for name, box in BOXES.items():
        located = locate_mask(masks[name], depth, OFF_CENTRE)
        assert error_cm(located.position, box) < 1.0, name
        # The wrong principal point moves the point by centimetres: the test can fail.
        wrong = locate_mask(masks[name], depth, CENTRED)
        assert error_cm(wrong.position, box) > 1.0, name


def test_mask_bleeding_onto_the_table_needs_min_cluster(scene):
    depth, masks = scene
    box = BOXES["centre"]
    bled = masks["centre"].copy()
    ys, xs = np.nonzero(bled)
    bled[ys.min() - 60:ys.max() + 60, xs.min() - 60:xs.max() + 60] = True  # mostly table
    assert error_cm(locate_mask(bled, depth, CENTRED, statistic="min_cluster").position, box) < 1.0
    assert error_cm(locate_mask(bled, depth, CENTRED, statistic="median").position, box) > 5.0


def test_large_mask_on_the_table_plane(scene):
    depth, _ = scene
    rng = np.random.default_rng(2)
    noisy = depth + rng.normal(0.0, 0.004, depth.shape).astype(np.float32)
    table = np.ones(depth.shape, bool)
    for statistic in ("median", "trimmed_mean", "min_cluster"):
        located = locate_mask(table, noisy, CENTRED, statistic=statistic)
        assert located.position[2] == pytest.approx(TABLE_Z, abs=0.002), statistic
        assert located.spread_m == pytest.approx(0.004, abs=0.001)
        assert located.valid_pixels > 300_000


def test_too_few_pixels_gives_reason(scene):
    depth, _ = scene
    mask = np.zeros(depth.shape, bool)
    mask[240, 320:325] = True
    located = locate_mask(mask, depth, CENTRED)
    assert located.position is None
    assert located.error == "too few valid depth pixels (5 < 20)"
    assert located.valid_pixels == 5


def test_mask_entirely_on_holes_gives_reason(scene):
    depth, masks = scene
    holed = depth.copy()
    holed[masks["left"]] = np.nan
    located = locate_mask(masks["left"], holed, CENTRED)
    assert located.position is None
    assert "no valid depth" in located.error
    zeroed = depth.copy()
    zeroed[masks["left"]] = 0.0
    assert locate_mask(masks["left"], zeroed, CENTRED).position is None


def test_depth_outside_range_is_invalid(scene):
    depth, masks = scene
    located = locate_mask(masks["centre"], depth, CENTRED, min_m=0.1, max_m=0.5)
    assert located.position is None and "[0.1, 0.5] m" in located.error


def test_empty_mask(scene):
    depth, _ = scene
    located = locate_mask(np.zeros(depth.shape, bool), depth, CENTRED)
    assert located.position is None and located.error == "empty mask"


def test_thin_mask_falls_back_to_the_uneroded_mask(scene):
    depth, _ = scene
    mask = np.zeros(depth.shape, bool)
    mask[100:103, 100:200] = True  # 3 px high: erosion by 3 px empties it
    located = locate_mask(mask, depth, CENTRED, erode_px=3)
    assert located.position is not None
    assert located.position[2] == pytest.approx(TABLE_Z, abs=1e-6)
    assert located.position[1] == pytest.approx((101 - CENTRED.cy) / CENTRED.fy, abs=1e-6)


def test_intrinsics_forms_agree(scene):
    depth, masks = scene
    matrix = [[600.0, 0, 319.5], [0, 600.0, 239.5], [0, 0, 1]]
    a = locate_mask(masks["left"], depth, matrix).position
    b = locate_mask(masks["left"], depth, (600.0, 600.0, 319.5, 239.5)).position
    c = locate_mask(masks["left"], depth, np.asarray(matrix).ravel()).position
    assert a == b == c


@pytest.mark.parametrize("bad", [(0, 600, 320, 240), (600, 600, 320), [[0.0] * 3] * 3,
                                 (600, np.nan, 320, 240)])
def test_bad_intrinsics_raise(bad):
    with pytest.raises(ValueError, match="intrinsics"):
        as_intrinsics(bad)


def test_unknown_statistic_raises(scene):
    depth, masks = scene
    with pytest.raises(ValueError, match="statistic"):
        locate_mask(masks["left"], depth, CENTRED, statistic="mean")


def test_scale_intrinsics_keeps_pixel_centres():
    half = scale_intrinsics((600, 600, 319.5, 239.5), (640, 480), (320, 240))
    assert half == Intrinsics(300.0, 300.0, 159.5, 119.5)
    with pytest.raises(ValueError):
        scale_intrinsics(CENTRED, (0, 480), (320, 240))


def test_depth_to_metres_units():
    mm = np.array([[0, 1000, 65535]], np.uint16)
    np.testing.assert_allclose(depth_to_metres(mm, "16UC1"), [[0.0, 1.0, 65.535]], rtol=1e-6)
    np.testing.assert_allclose(depth_to_metres(mm, "mono16"), [[0.0, 1.0, 65.535]], rtol=1e-6)
    metres = np.array([[np.nan, 1.25]], np.float32)
    out = depth_to_metres(metres, "32FC1")
    assert out.dtype == np.float32 and np.isnan(out[0, 0]) and out[0, 1] == 1.25
    with pytest.raises(ValueError, match="unsupported depth encoding 'rgb8'.*16UC1.*32FC1"):
        depth_to_metres(mm, "rgb8")


def test_resize_depth_is_nearest_neighbour():
    depth = np.array([[1.0, 2.0], [np.nan, 4.0]], np.float32)
    big = resize_depth_to(depth, 4, 6)
    assert big.shape == (4, 6)
    values = set(big[np.isfinite(big)].tolist())
    assert values == {1.0, 2.0, 4.0}  # no value between an edge's two sides
    assert np.isnan(big[3, 0])
    assert resize_depth_to(depth, 2, 2) is depth


@pytest.mark.parametrize("bigendian", [False, True])
def test_depth_from_buffer_with_row_padding(bigendian):
    depth_mm = np.arange(12, dtype=np.uint16).reshape(3, 4) * 100
    order = ">" if bigendian else "<"
    padded = np.zeros((3, 12), np.uint8)  # step 12 = 8 data bytes + 4 padding
    padded[:, :8] = depth_mm.astype(order + "u2").view(np.uint8).reshape(3, 8)
    out = depth_from_buffer(padded.tobytes(), 4, 3, 12, "16UC1", bigendian)
    np.testing.assert_allclose(out, depth_mm / 1000.0, rtol=1e-6)
    metres = np.full((2, 3), 1.5, np.float32)
    out = depth_from_buffer(metres.tobytes(), 3, 2, 12, "32FC1")
    np.testing.assert_array_equal(out, metres)


def test_depth_from_buffer_rejects_bad_messages():
    with pytest.raises(ValueError, match="too short"):
        depth_from_buffer(b"\x00" * 10, 4, 3, 8, "16UC1")
    with pytest.raises(ValueError, match="step 4 is smaller"):
        depth_from_buffer(b"\x00" * 24, 4, 3, 4, "16UC1")
    with pytest.raises(ValueError, match="unsupported depth encoding"):
        depth_from_buffer(b"\x00" * 24, 4, 3, 8, "bgr8")
    with pytest.raises(ValueError, match="no pixels"):
        depth_from_buffer(b"", 0, 3, 8, "16UC1")


def test_scene_module_ground_truth():
    """Cross-check with the shared synthetic scenes (demo/sam3_agent_demo/scene.py)."""
    from sam3_agent_demo.scene import render_scene

    frame = render_scene(depth_noise_m=0.002)
    k = frame.intrinsics
    depth_mm = np.clip(np.rint(frame.depth_m * 1000), 0, 65535).astype(np.uint16)
    for name, truth in frame.positions.items():
        for depth in (frame.depth_m, depth_to_metres(depth_mm, "16UC1")):
            located = locate_mask(frame.masks[name], depth, k.K)
            error = np.linalg.norm(np.asarray(located.position) - np.asarray(truth))
            assert error < 0.01, (name, error)
