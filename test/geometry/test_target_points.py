"""target_points.py: the masks' valid depth points with their colours (hand-computed
back-projection), even deterministic subsampling, an optional transform, and the PLY file."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from sam3_agent_ros.frames import Transform
from sam3_agent_ros.geometry.target_points import (
    evenly,
    grid_step,
    ply_bytes,
    target_points,
    write_ply,
)

K = (100.0, 200.0, 4.0, 3.0)  # fx, fy, cx, cy


def scene():
    """8 x 6 frame, depth 2 m except an invalid pixel and a too-far one; colour by pixel."""
    depth = np.full((6, 8), 2.0, np.float32)
    depth[1, 2] = np.nan
    depth[1, 3] = 50.0
    rgb = np.zeros((6, 8, 3), np.uint8)
    rgb[..., 0] = np.arange(8)[None, :] * 10  # red = 10 u
    rgb[..., 1] = np.arange(6)[:, None] * 20  # green = 20 v
    rgb[..., 2] = 7
    a = np.zeros((6, 8), bool)
    a[1, 1:4] = True  # (1,1) valid, (1,2) NaN, (1,3) too far
    b = np.zeros((6, 8), bool)
    b[4, 6] = True
    return a, b, depth, rgb


def test_union_of_masks_back_projected_with_colours():
    a, b, depth, rgb = scene()
    cloud = target_points([a, b], depth, K, rgb)
    # (u=1, v=1): x = (1 - 4) * 2 / 100, y = (1 - 3) * 2 / 200; (u=6, v=4): 0.04, 0.01.
    np.testing.assert_allclose(cloud.points, [[-0.06, -0.02, 2.0], [0.04, 0.01, 2.0]], atol=1e-6)
    np.testing.assert_array_equal(cloud.colours, [[10, 20, 7], [60, 80, 7]])
    assert cloud.step == 1 and len(cloud) == 2
    assert cloud.points.dtype == np.float32 and cloud.colours.dtype == np.uint8


def test_overlapping_masks_count_each_pixel_once():
    a, _, depth, rgb = scene()
    assert len(target_points([a, a.copy()], depth, K, rgb)) == 1


def test_without_colour_the_points_are_grey_and_empty_masks_give_nothing():
    a, _, depth, _ = scene()
    np.testing.assert_array_equal(target_points([a], depth, K).colours, [[128, 128, 128]])
    empty = target_points([np.zeros((6, 8), bool)], depth, K)
    assert empty.points.shape == (0, 3) and empty.colours.shape == (0, 3)
    assert len(target_points([], depth, K)) == 0


def test_at_most_max_points_on_a_regular_grid_deterministically():
    depth = np.full((100, 100), 1.0, np.float32)
    mask = np.ones((100, 100), bool)
    cloud = target_points([mask], depth, K, max_points=1000)
    assert cloud.step == 4
    # 10 points per kept point: step ceil(sqrt(10)) = 4, a 25 x 25 grid on multiples of 4.
    assert len(cloud) == 625 == len(np.unique(cloud.points, axis=0))
    u = np.round(cloud.points[:, 0] * K[0] + K[2]).astype(int)
    v = np.round(cloud.points[:, 1] * K[1] + K[3]).astype(int)
    assert set(u.tolist()) == set(v.tolist()) == set(range(0, 100, 4))
    again = target_points([mask], depth, K, max_points=1000)
    np.testing.assert_array_equal(cloud.points, again.points)


def test_the_grid_is_the_images_so_two_masks_share_it_and_the_limit_holds():
    depth = np.full((60, 90), 1.0, np.float32)
    left, right = np.zeros((60, 90), bool), np.zeros((60, 90), bool)
    left[3:50, 1:40] = True
    right[7:59, 45:88] = True
    cloud = target_points([left, right], depth, K, max_points=300)
    u = np.round(cloud.points[:, 0] * K[0] + K[2]).astype(int)
    v = np.round(cloud.points[:, 1] * K[1] + K[3]).astype(int)
    step = 4  # ceil(sqrt((47 * 39 + 52 * 43) / 300))
    assert np.all(u % step == 0) and np.all(v % step == 0)
    assert 0 < len(cloud) <= 300
    capped = target_points([left, right], depth, K, max_points=7)
    assert 0 < len(capped) <= 7


def pixels_of(cloud, k=K):
    """The (u, v) pixels the cloud's points came from (camera frame, no transform)."""
    u = np.round(cloud.points[:, 0] * k[0] / cloud.points[:, 2] + k[2]).astype(int)
    v = np.round(cloud.points[:, 1] * k[1] / cloud.points[:, 2] + k[3]).astype(int)
    return set(zip(u.tolist(), v.tolist()))


def test_the_grid_step_comes_from_the_pixels_with_depth_not_the_mask():
    depth = np.full((100, 100), np.nan, np.float32)
    depth[:, :25] = 1.0  # depth on a quarter of the mask only
    mask = np.ones((100, 100), bool)
    cloud = target_points([mask], depth, K, max_points=1000)
    # 2500 of the mask's 10000 pixels have depth: step 2 (13 columns x 50 rows), where the
    # mask's pixels would give step 4 and a cloud of 175.
    assert cloud.step == 2 and len(cloud) == 13 * 50
    assert {u for u, _ in pixels_of(cloud)} == set(range(0, 25, 2))


@pytest.mark.parametrize("seed", range(6))
def test_the_cloud_is_the_grid_points_of_the_union_of_the_eroded_masks(seed):
    """Against a whole-image reference: overlapping masks, holes in the depth, erosion."""
    rng = np.random.default_rng(seed)
    height, width = 90, 120
    depth = rng.uniform(0.5, 3.0, (height, width)).astype(np.float32)
    depth[rng.random((height, width)) < 0.2] = np.nan
    depth[rng.random((height, width)) < 0.05] = 20.0  # too far
    masks = []
    for _ in range(3):
        mask = np.zeros((height, width), bool)
        x0, y0 = rng.integers(0, width - 30), rng.integers(0, height - 30)
        mask[y0:y0 + rng.integers(10, 60), x0:x0 + rng.integers(10, 80)] = True
        masks.append(mask)
    erode_px = int(seed % 2)
    max_points = [10**6, 300, 800][seed % 3]
    cloud = target_points(masks, depth, K, max_points=max_points, erode_px=erode_px)
    # As the 3D step erodes (an elliptic kernel; beyond the image counts as the mask; the whole
    # mask when the erosion leaves no valid depth).
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * erode_px + 1,) * 2)
    in_range = (depth >= 0.1) & (depth <= 10.0)
    valid = np.zeros((height, width), bool)
    for mask in masks:
        eroded = cv2.erode(mask.astype(np.uint8), kernel) > 0
        valid |= (eroded if (eroded & in_range).any() else mask) & in_range
    on_grid = np.zeros_like(valid)
    on_grid[::cloud.step, ::cloud.step] = True
    expected = {(int(u), int(v)) for v, u in zip(*np.nonzero(valid & on_grid))}
    assert len(cloud) <= max_points
    if len(expected) <= max_points:
        assert pixels_of(cloud) == expected and len(cloud) == len(expected)
    else:
        assert pixels_of(cloud) <= expected and len(cloud) == max_points


def test_evenly_and_grid_step():
    np.testing.assert_array_equal(evenly(10, 4), [0, 2, 5, 7])
    assert evenly(3, 4) is None
    assert (grid_step(100, 100), grid_step(101, 100), grid_step(400, 100),
            grid_step(401, 100)) == (1, 2, 2, 3)


def test_overlapping_masks_in_different_boxes_count_each_pixel_once():
    depth = np.full((10, 10), 1.0, np.float32)
    a, b = np.zeros((10, 10), bool), np.zeros((10, 10), bool)
    a[0:5, 0:5] = True
    b[3:8, 3:8] = True  # 4 pixels shared
    cloud = target_points([a, b], depth, K)
    assert cloud.step == 1 and len(cloud) == 25 + 25 - 4


def test_a_transform_moves_the_points():
    a, _, depth, rgb = scene()
    shift = Transform((1.0, 2.0, 3.0), (0.0, 0.0, 1.0, 0.0))  # 180 deg about z, then shift
    cloud = target_points([a], depth, K, rgb, transform=shift)
    np.testing.assert_allclose(cloud.points, [[1.06, 2.02, 5.0]], atol=1e-6)


def test_erosion_drops_the_mask_edge():
    depth = np.full((9, 9), 1.0, np.float32)
    mask = np.zeros((9, 9), bool)
    mask[2:7, 2:7] = True
    assert len(target_points([mask], depth, K, erode_px=1)) == 9


def test_sizes_that_do_not_match_are_refused():
    a, _, depth, rgb = scene()
    with pytest.raises(ValueError, match="differ in size"):
        target_points([np.zeros((5, 5), bool)], depth, K)
    with pytest.raises(ValueError, match="differ in size"):
        target_points([a], depth, K, rgb[:3])
    with pytest.raises(ValueError, match="max_points"):
        target_points([a], depth, K, max_points=0)


def _read_binary_ply(data: bytes):
    header, body = data.split(b"end_header\n", 1)
    lines = header.decode("ascii").splitlines()
    assert lines[0] == "ply" and lines[1] == "format binary_little_endian 1.0"
    count = int(next(line for line in lines if line.startswith("element vertex")).split()[2])
    properties = [line.split()[1:] for line in lines if line.startswith("property")]
    assert properties == [["float", "x"], ["float", "y"], ["float", "z"], ["uchar", "red"],
                          ["uchar", "green"], ["uchar", "blue"]]
    vertex = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("r", "u1"), ("g", "u1"),
                       ("b", "u1")])
    assert len(body) == count * vertex.itemsize == count * 15
    return np.frombuffer(body, vertex)


def test_ply_binary_and_ascii_hold_the_points(tmp_path):
    points = np.array([[0.5, -1.25, 2.0], [1e-3, 0.0, 9.5]], np.float32)
    colours = np.array([[255, 0, 10], [1, 2, 3]], np.uint8)
    path = write_ply(tmp_path / "points.ply", points, colours)
    vertices = _read_binary_ply(path.read_bytes())
    np.testing.assert_array_equal(np.stack([vertices["x"], vertices["y"], vertices["z"]], 1),
                                  points)
    np.testing.assert_array_equal(np.stack([vertices["r"], vertices["g"], vertices["b"]], 1),
                                  colours)
    assert not (tmp_path / "points.ply.partial").exists()
    text = ply_bytes(points, colours, binary=False).decode("ascii")
    assert "format ascii 1.0" in text and "element vertex 2" in text
    assert text.rstrip().splitlines()[-2:] == ["0.5 -1.25 2 255 0 10", "0.001 0 9.5 1 2 3"]


def test_an_empty_ply_is_still_a_valid_file():
    assert len(_read_binary_ply(ply_bytes(np.zeros((0, 3)), np.zeros((0, 3))))) == 0
    with pytest.raises(ValueError, match="2 points but 1 colours"):
        ply_bytes(np.zeros((2, 3)), np.zeros((1, 3)))
