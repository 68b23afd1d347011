"""The labelled scene cloud (geometry.scene_cloud) on the tabletop of known geometry
(sam3_agent_demo.block_scene): the crop's cube, every valid depth point inside it and no other,
the labels of the selected masks, the subsampling, the frame and the PLY file."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo.block_scene import HEIGHT, INTRINSICS, WIDTH, close_pair
from sam3_agent_ros.geometry.box import fit_box
from sam3_agent_ros.geometry.scene_cloud import (
    SCENE_FIELDS,
    SCENE_POINT_STEP,
    crop_of,
    pack_scene,
    scene_points,
    write_scene_ply,
)
from sam3_agent_ros.geometry.support import reach_support

TARGET_ID, NEIGHBOUR_ID = 3, 7


@pytest.fixture(scope="module")
def tabletop():
    scene = close_pair()
    depth, masks = scene.render()
    selected = [masks["target"], masks["neighbour"]]
    box = fit_box(masks["target"], depth, INTRINSICS).box
    reached = reach_support(selected, 0, depth, INTRINSICS, box).box
    rgb = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    rgb[..., 0] = np.arange(WIDTH)[None, :] % 256
    rgb[..., 1] = np.arange(HEIGHT)[:, None] % 256
    rgb[..., 2] = 9
    return scene, depth, masks, reached, rgb


def every_point(depth):
    """Every pixel's point (H, W, 3), the brute-force way."""
    vs, us = np.mgrid[0:HEIGHT, 0:WIDTH]
    return np.stack([(us - INTRINSICS.cx) / INTRINSICS.fx * depth,
                     (vs - INTRINSICS.cy) / INTRINSICS.fy * depth, depth], axis=-1)


def test_the_crop_is_a_cube_around_the_target_at_least_the_minimum(tabletop):
    _, _, _, box, _ = tabletop
    crop = crop_of(box, 2.0, 0.3)
    assert crop.half == pytest.approx(0.15)  # 2 x 0.10 m < 0.3 m
    crop = crop_of(box, 4.0, 0.3)
    assert crop.half == pytest.approx(2.0 * max(box.size))
    np.testing.assert_allclose(crop.centre, box.center)
    with pytest.raises(ValueError):
        crop_of(box, 0.0, 0.3)


def test_every_valid_point_in_the_cube_and_no_other_with_the_labels(tabletop):
    _, depth, masks, box, rgb = tabletop
    crop = crop_of(box, 2.0, 0.3)
    cloud = scene_points(depth, INTRINSICS, crop,
                         [(TARGET_ID, masks["target"]), (NEIGHBOUR_ID, masks["neighbour"])],
                         rgb, max_points=10**6)
    assert cloud.step == 1
    points = every_point(depth)
    inside = crop.contains(points.reshape(-1, 3)).reshape(HEIGHT, WIDTH) & (depth > 0.1)
    assert len(cloud) == int(inside.sum()) > 1000
    u = np.rint(cloud.points[:, 0] / cloud.points[:, 2] * INTRINSICS.fx + INTRINSICS.cx)
    v = np.rint(cloud.points[:, 1] / cloud.points[:, 2] * INTRINSICS.fy + INTRINSICS.cy)
    u, v = u.astype(int), v.astype(int)
    seen = np.zeros((HEIGHT, WIDTH), int)
    np.add.at(seen, (v, u), 1)
    np.testing.assert_array_equal(seen, inside.astype(int))  # each pixel once, none else
    np.testing.assert_allclose(cloud.points, points[v, u], atol=1e-6)
    labels = np.zeros((HEIGHT, WIDTH), np.uint32)
    labels[masks["target"]], labels[masks["neighbour"]] = TARGET_ID, NEIGHBOUR_ID
    np.testing.assert_array_equal(cloud.labels, labels[v, u])
    assert {0, TARGET_ID, NEIGHBOUR_ID} == set(np.unique(cloud.labels).tolist())
    # The unsegmented neighbour is in the crop as background.
    unsegmented = masks["unsegmented"] & inside
    assert unsegmented.sum() > 100
    # Colours: red = u % 256, green = v % 256 of each point's pixel.
    np.testing.assert_array_equal(cloud.colours[:, 0], (u % 256).astype(np.uint8))
    np.testing.assert_array_equal(cloud.colours[:, 1], (v % 256).astype(np.uint8))
    assert (cloud.colours[:, 2] == 9).all()


def test_the_first_selected_mask_wins_where_two_overlap(tabletop):
    _, depth, masks, box, _ = tabletop
    crop = crop_of(box, 2.0, 0.3)
    cloud = scene_points(depth, INTRINSICS, crop, [(1, masks["target"]), (2, masks["target"])])
    assert 2 not in set(cloud.labels.tolist()) and 1 in set(cloud.labels.tolist())
    assert (cloud.colours == 128).all()  # no rgb: grey


def test_at_most_max_points_evenly_and_deterministic(tabletop):
    _, depth, masks, box, rgb = tabletop
    crop = crop_of(box, 2.0, 0.3)
    whole = scene_points(depth, INTRINSICS, crop, [(TARGET_ID, masks["target"])], rgb,
                         max_points=10**6)
    few = scene_points(depth, INTRINSICS, crop, [(TARGET_ID, masks["target"])], rgb,
                       max_points=500)
    assert 250 <= len(few) <= 500  # a coarser grid, then evenly down to the limit
    assert bytes(few.data) == bytes(scene_points(
        depth, INTRINSICS, crop, [(TARGET_ID, masks["target"])], rgb, max_points=500).data)
    assert crop.contains(few.points).all()
    # Spread over the whole crop: the subsample's extent is the whole cloud's.
    np.testing.assert_allclose(few.points.min(axis=0), whole.points.min(axis=0), atol=0.03)
    np.testing.assert_allclose(few.points.max(axis=0), whole.points.max(axis=0), atol=0.03)
    share = np.mean(few.labels == TARGET_ID)
    assert share == pytest.approx(np.mean(whole.labels == TARGET_ID), abs=0.05)


def test_moved_into_another_frame(tabletop):
    scene, depth, masks, box, _ = tabletop
    crop = crop_of(box, 2.0, 0.3)

    class World:
        def matrix(self):
            return scene.camera.world_from_camera()

    camera = scene_points(depth, INTRINSICS, crop, [(TARGET_ID, masks["target"])])
    world = scene_points(depth, INTRINSICS, crop, [(TARGET_ID, masks["target"])],
                         transform=World())
    matrix = scene.camera.world_from_camera()
    np.testing.assert_allclose(world.points, camera.points @ matrix[:3, :3].T + matrix[:3, 3],
                               atol=1e-5)
    np.testing.assert_array_equal(world.labels, camera.labels)
    # On the table or above it (the world's z is up), the target's points up to its height.
    assert world.points[:, 2].min() > -0.005
    assert world.points[world.labels == TARGET_ID][:, 2].max() == pytest.approx(0.10, abs=0.005)


def test_a_crop_behind_the_camera_is_empty(tabletop):
    _, depth, _, box, _ = tabletop
    from sam3_agent_ros.geometry.box import Box3D
    behind = crop_of(Box3D((0.0, 0.0, -5.0), box.size, box.orientation), 2.0, 0.3)
    assert len(scene_points(depth, INTRINSICS, behind)) == 0


def test_the_layout_is_pointcloud2s():
    assert [name for name, _, _ in SCENE_FIELDS] == ["x", "y", "z", "rgb", "label"]
    data = pack_scene([[1.0, 2.0, 3.0]], [[0x11, 0x22, 0x33]], [42])
    assert len(data) == SCENE_POINT_STEP
    raw = bytes(data)
    assert np.frombuffer(raw[:12], "<f4").tolist() == [1.0, 2.0, 3.0]
    assert raw[12:16] == bytes([0x33, 0x22, 0x11, 0])  # PCL's rgb: 0x00RRGGBB little endian
    assert int.from_bytes(raw[16:20], "little") == 42


def test_scene_ply_holds_the_labels(tmp_path, tabletop):
    _, depth, masks, box, rgb = tabletop
    cloud = scene_points(depth, INTRINSICS, crop_of(box), [(TARGET_ID, masks["target"])], rgb,
                         max_points=300)
    body = write_scene_ply(tmp_path / "scene.ply", cloud).read_bytes()
    header, vertices = body.split(b"end_header\n", 1)
    properties = [line.split()[1:] for line in header.decode().splitlines()
                  if line.startswith("property")]
    assert properties == [["float", "x"], ["float", "y"], ["float", "z"], ["uchar", "red"],
                          ["uchar", "green"], ["uchar", "blue"], ["uint", "label"]]
    rows = np.frombuffer(vertices, np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"),
                                             ("r", "u1"), ("g", "u1"), ("b", "u1"),
                                             ("label", "<u4")]))
    assert len(rows) == len(cloud) > 100
    np.testing.assert_array_equal(rows["label"], cloud.labels)
    np.testing.assert_array_equal(rows["x"], cloud.points[:, 0])
    text = write_scene_ply(tmp_path / "scene_ascii.ply", cloud, binary=False).read_text()
    last = text.strip().splitlines()[-1].split()
    assert len(last) == 7 and int(last[6]) == int(cloud.labels[-1])


def test_a_raw_stream_reads_each_pixel_along_its_undistorted_ray(tabletop):
    from dataclasses import replace

    from sam3_agent_ros.geometry.lens import undistortion_map
    _, depth, masks, box, _ = tabletop
    k = (INTRINSICS.fx, INTRINSICS.fy, INTRINSICS.cx, INTRINSICS.cy)
    lens = undistortion_map(k, "plumb_bob", (-0.3, 0.1, 0.001, -0.002, 0.0), (WIDTH, HEIGHT))
    assert lens is not None
    raw = replace(INTRINSICS, lens=lens)
    crop = crop_of(box, 2.0, 0.3)
    cloud = scene_points(depth, raw, crop, [(TARGET_ID, masks["target"])], max_points=10**6)
    # Brute force: every pixel's point along its undistorted ray, kept when in the cube.
    ray_x = (lens.u.astype(np.float64) - INTRINSICS.cx) / INTRINSICS.fx
    ray_y = (lens.v.astype(np.float64) - INTRINSICS.cy) / INTRINSICS.fy
    points = np.stack([ray_x * depth, ray_y * depth, depth], axis=-1)
    inside = crop.contains(points.reshape(-1, 3)).reshape(HEIGHT, WIDTH) & (depth > 0.1)
    assert len(cloud) == int(inside.sum()) > 1000
    np.testing.assert_allclose(cloud.points, points[inside], atol=1e-6)  # row-major, as read
    np.testing.assert_array_equal(cloud.labels == TARGET_ID, masks["target"][inside])
    # Read as rectified, the same crop holds other points.
    assert len(scene_points(depth, INTRINSICS, crop, max_points=10**6)) != len(cloud)
