"""OpenCV rendering: overlays, crops, label/union images."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from sam3_agent_demo.scene import render_scene
from sam3_agent_ros.masks import pixel_box, resize_mask
from sam3_agent_ros.render import (
    LABEL_LIMIT,
    PALETTE,
    downscale,
    label_image,
    overlay_image,
    overlay_masks,
    single_mask_overlay,
    union_from_labels,
    union_mask,
    zoom_crop,
)

LABEL_BOX = (20, 20, 20)  # the dark fill behind label text


@pytest.fixture(scope="module")
def frame():
    return render_scene(seed=7)


@pytest.fixture(scope="module")
def masks(frame):
    return [frame.masks[obj.name] for obj in frame.scene.objects]


def rect_mask(shape, x0, y0, x1, y1):
    mask = np.zeros(shape, bool)
    mask[y0:y1, x0:x1] = True
    return mask


def label_box_pixels(image: np.ndarray) -> np.ndarray:
    return np.all(image == LABEL_BOX, axis=2)


def white_pixels(image: np.ndarray) -> np.ndarray:
    return np.all(image >= 230, axis=2)


def label_boxes(image: np.ndarray) -> list[tuple[int, int, int, int]]:
    """x, y, w, h of each dark label box (ignoring the small dark holes inside digits)."""
    count, _, stats, _ = cv2.connectedComponentsWithStats(label_box_pixels(image).view(np.uint8))
    return [tuple(int(v) for v in stats[i][:4]) for i in range(1, count) if stats[i][4] >= 40]


def near_labels(image: np.ndarray) -> np.ndarray:
    boxes = np.zeros(image.shape[:2], bool)
    for x, y, w, h in label_boxes(image):
        boxes[max(0, y - 4):y + h + 4, max(0, x - 4):x + w + 4] = True
    return boxes


def test_overlay_shape_dtype_and_input_untouched(frame, masks):
    before = frame.rgb.copy()
    out = overlay_masks(frame.rgb, masks)
    assert out.shape == frame.rgb.shape and out.dtype == np.uint8
    assert np.array_equal(frame.rgb, before)
    assert out is not frame.rgb


def test_overlay_tints_masks_and_leaves_background(frame, masks):
    out = overlay_masks(frame.rgb, masks)
    union = np.any(np.stack(masks), axis=0)
    far = (cv2.dilate(union.view(np.uint8), np.ones((15, 15), np.uint8)) == 0) & ~near_labels(out)
    assert np.array_equal(out[far], frame.rgb[far])  # away from masks and labels: unchanged
    checked = 0
    for index, mask in enumerate(masks):
        inner = cv2.erode(mask.view(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
        inner &= ~near_labels(out)
        if inner.sum() < 50:  # a small mask mostly under its label
            continue
        before, after = frame.rgb[inner].astype(np.float64), out[inner].astype(np.float64)
        assert (after >= before).all() and (after - before).mean() > 10, index  # lightened
        checked += 1
    assert checked >= len(masks) - 1


def _hue_deg(rgb: np.ndarray) -> np.ndarray:
    hsv = cv2.cvtColor(rgb.reshape(-1, 1, 3).astype(np.uint8), cv2.COLOR_RGB2HSV_FULL)
    return hsv[:, 0, 0].astype(np.float64) * 360.0 / 256.0


@pytest.mark.parametrize("rgb", [(30, 60, 200), (200, 30, 30), (40, 170, 60), (150, 50, 180)])
@pytest.mark.parametrize("index", [0, 1, 4])
def test_the_tint_keeps_the_objects_hue_under_every_mask_colour(rgb, index):
    """issue 33: mask 1's red tint turned a blue object purple (the model and the operator read
    colours off these overlays): the object keeps its hue, lighter; the mask's colour is on its
    outline."""
    image = np.full((120, 160, 3), rgb, np.uint8)
    masks = [rect_mask((120, 160), 10, 10, 30, 30) for _ in range(index)]
    masks.append(rect_mask((120, 160), 40, 30, 140, 110))
    out = overlay_masks(image, masks, labels=[""] * len(masks))
    inside = out[60:75, 50:70].reshape(-1, 3)
    difference = np.abs(_hue_deg(inside) - _hue_deg(np.array([rgb])))
    assert np.minimum(difference, 360 - difference).max() <= 6.0
    assert inside.astype(int).sum(axis=1).min() > sum(rgb) + 30  # visibly lighter
    assert tuple(out[30, 90]) == PALETTE[index]  # the outline has the mask's colour


def test_a_label_wider_than_a_small_object_goes_beside_it():
    """issue 33: a concept's label ("blue object 2") centred on a small object hid it."""
    image = np.full((480, 640, 3), 200, np.uint8)
    small = rect_mask((480, 640), 300, 200, 324, 224)
    large = rect_mask((480, 640), 40, 40, 240, 200)
    neighbour = rect_mask((480, 640), 300, 260, 320, 280)  # right below the small one
    out = overlay_masks(image, [small, large, neighbour],
                        labels=["blue object 2", "red object 1", "blue object 3"])
    boxes = label_boxes(out)
    assert len(boxes) == 3
    for mask in (small, neighbour):
        x0, y0, x1, y1 = pixel_box(mask)
        covered = max(max(0, min(x1, x + w) - max(x0, x)) * max(0, min(y1, y + h) - max(y0, y))
                      for x, y, w, h in boxes)
        assert covered <= 0.5 * (x1 - x0) * (y1 - y0)  # neither small object is hidden
    # The large mask's label still sits on it; each label near its own object.
    assert any(x >= 40 and x + w <= 240 and y >= 40 and y + h <= 200 for x, y, w, h in boxes)
    centres = [(x + w / 2, y + h / 2) for x, y, w, h in boxes]
    assert any(abs(u - 312) < 120 and abs(v - 212) < 60 for u, v in centres)


def test_each_mask_gets_a_visible_label_inside_it(frame, masks):
    out = overlay_masks(frame.rgb, masks)
    boxes = label_boxes(out)
    assert len(boxes) == len(masks)  # one dark label box per mask
    for mask in masks:
        ys, xs = np.nonzero(mask)
        u, v = xs.mean(), ys.mean()
        assert any(x <= u < x + w and y <= v < y + h for x, y, w, h in boxes) or any(
            mask[y:y + h, x:x + w].any() for x, y, w, h in boxes)  # a label box sits on it
    for x, y, w, h in boxes:
        # The digit is drawn in white (anti-aliased: OpenCV 4.5 leaves few pure-white pixels).
        assert (out[y:y + h, x:x + w].min(axis=2) >= 150).sum() > 10


def test_custom_labels_and_count_mismatch(frame, masks):
    out = overlay_masks(frame.rgb, masks[:2], labels=["A", "B"])
    default = overlay_masks(frame.rgb, masks[:2])
    assert not np.array_equal(out, default)
    with pytest.raises(ValueError, match="labels"):
        overlay_masks(frame.rgb, masks[:2], labels=["A"])


def test_overlay_is_deterministic(frame, masks):
    assert np.array_equal(overlay_masks(frame.rgb, masks), overlay_masks(frame.rgb, masks))


def test_labels_stay_inside_the_image_for_border_and_tiny_masks():
    image = np.full((200, 300, 3), 200, np.uint8)
    corner = rect_mask((200, 300), 0, 0, 3, 3)
    edge = rect_mask((200, 300), 297, 80, 300, 120)
    tiny = rect_mask((200, 300), 150, 199, 151, 200)
    out = overlay_masks(image, [corner, edge, tiny])
    boxes = label_boxes(out)
    assert len(boxes) == 3
    assert all(x >= 0 and y >= 0 and x + w <= 300 and y + h <= 200 for x, y, w, h in boxes)
    for mask in (corner, edge, tiny):  # each label beside its mask, none hiding it
        x0, y0, x1, y1 = pixel_box(mask)
        assert not label_box_pixels(out)[mask].any()
        assert any(x - 40 <= x1 and x0 <= x + w + 40 and y - 40 <= y1 and y0 <= y + h + 40
                   for x, y, w, h in boxes)


def test_empty_mask_and_no_masks():
    image = np.full((60, 80, 3), 90, np.uint8)
    assert np.array_equal(overlay_masks(image, []), image)
    assert np.array_equal(overlay_masks(image, [np.zeros((60, 80), bool)]), image)


def test_overlapping_labels_do_not_cover_each_other():
    image = np.full((480, 640, 3), 200, np.uint8)
    same = rect_mask((480, 640), 200, 200, 260, 260)
    out = overlay_masks(image, [same, same.copy(), same.copy()])
    assert len(label_boxes(out)) == 3


def test_font_scales_with_image_size():
    small = np.full((480, 640, 3), 200, np.uint8)
    large = np.full((1080, 1920, 3), 200, np.uint8)
    small_h = label_boxes(overlay_masks(small, [rect_mask((480, 640), 100, 100, 300, 300)]))[0][3]
    large_h = label_boxes(overlay_masks(large, [rect_mask((1080, 1920), 300, 300, 900, 900)]))[0][3]
    assert large_h > 1.8 * small_h
    assert large_h * 1008 / 1920 >= 16  # still legible once downscaled to 1008 px


def test_non_bool_masks_and_bad_input(frame):
    as_uint8 = frame.masks["blue_box"].astype(np.uint8) * 255
    assert np.array_equal(overlay_masks(frame.rgb, [as_uint8]),
                          overlay_masks(frame.rgb, [frame.masks["blue_box"]]))
    with pytest.raises(ValueError, match="does not match"):
        overlay_masks(frame.rgb, [np.zeros((10, 10), bool)])
    with pytest.raises(ValueError, match="RGB uint8"):
        overlay_masks(frame.rgb[..., 0], [])


def test_single_mask_overlay(frame):
    before = frame.rgb.copy()
    mask = frame.masks["red_box"]
    out = single_mask_overlay(frame.rgb, mask, color=(0, 255, 0))
    assert np.array_equal(frame.rgb, before)
    near = cv2.dilate(mask.view(np.uint8), np.ones((11, 11), np.uint8)).astype(bool)
    assert np.array_equal(out[~near], frame.rgb[~near])  # the rest of the frame unchanged
    assert out[mask][:, 1].mean() > frame.rgb[mask][:, 1].mean() + 60  # tinted green
    assert np.array_equal(single_mask_overlay(frame.rgb, np.zeros_like(mask)), frame.rgb)


def test_zoom_crop_around_mask(frame):
    mask = frame.masks["blue_box"]
    ys, xs = np.nonzero(mask)
    width, height = np.ptp(xs) + 1, np.ptp(ys) + 1
    crop = zoom_crop(frame.rgb, mask, margin=0.25, min_output_side=0)
    assert crop.dtype == np.uint8 and crop.ndim == 3
    assert crop.shape[1] == pytest.approx(width * 1.5, abs=3)
    assert crop.shape[0] == pytest.approx(height * 1.5, abs=3)
    assert np.any(np.all(crop == (0, 255, 0), axis=2))  # the outline is drawn


def test_zoom_crop_tiny_border_and_empty_masks(frame):
    tiny = rect_mask((480, 640), 639, 479, 640, 480)  # one pixel in the corner
    crop = zoom_crop(frame.rgb, tiny, min_side=64, min_output_side=0)
    assert crop.shape[:2] == (64, 64)
    big = zoom_crop(frame.rgb, tiny, min_side=64, min_output_side=224)
    assert max(big.shape[:2]) == 224
    whole = rect_mask((480, 640), 0, 0, 640, 480)
    assert zoom_crop(frame.rgb, whole).shape == (480, 640, 3)
    small_image = np.zeros((20, 30, 3), np.uint8)
    assert zoom_crop(small_image, rect_mask((20, 30), 5, 5, 6, 6), min_output_side=0).shape == (
        20, 30, 3)
    empty = zoom_crop(frame.rgb, np.zeros((480, 640), bool), empty_max_side=320)
    assert empty.shape == (240, 320, 3)


def test_union_and_label_images_exact():
    shape = (10, 12)
    first = rect_mask(shape, 0, 0, 6, 6)
    second = rect_mask(shape, 4, 4, 10, 10)
    union = union_mask([first, second], shape)
    assert union.dtype == np.uint8 and set(np.unique(union)) == {0, 255}
    assert np.array_equal(union > 0, first | second)
    labels = label_image([first, second], shape)
    assert labels.dtype == np.uint8
    assert np.all(labels[first] == 1)  # the first mask wins on overlap
    assert np.all(labels[second & ~first] == 2)
    assert np.all(labels[~(first | second)] == 0)
    assert np.array_equal(union_mask([], shape), np.zeros(shape, np.uint8))
    assert np.array_equal(label_image([], shape), np.zeros(shape, np.uint8))
    with pytest.raises(ValueError):
        label_image([np.ones((3, 3), bool)], shape)


def test_label_image_clips_beyond_255_masks():
    shape = (1, 300)
    masks = [rect_mask(shape, i, 0, i + 1, 1) for i in range(300)]
    labels = label_image(masks, shape)
    assert labels[0, 0] == 1 and labels[0, 254] == 255 and labels[0, 299] == LABEL_LIMIT


def test_the_union_derived_from_the_labels_is_the_union_of_the_masks():
    shape = (6, 300)
    masks = [rect_mask(shape, i, i % 6, i + 2, 6) for i in range(298)]  # overlapping, > 255
    masks.append(np.zeros(shape, bool))
    labels = label_image(masks, shape)
    assert np.array_equal(union_from_labels(labels), union_mask(masks, shape))
    assert union_from_labels(np.zeros((3, 4), np.uint8)).sum() == 0


def test_known_boxes_give_the_same_labels_and_skip_invisible_masks():
    shape = (10, 12)
    first = rect_mask(shape, 0, 0, 6, 6)
    second = rect_mask(shape, 4, 4, 10, 10)
    boxes = [pixel_box(first), pixel_box(second)]
    assert np.array_equal(label_image([first, second], shape, boxes),
                          label_image([first, second], shape))
    # An object not visible on this frame: None mask, None box; the second keeps label 2.
    only_second = label_image([None, second], shape, [None, boxes[1]])
    assert np.all(only_second[second] == 2) and not only_second[~second].any()
    with pytest.raises(ValueError, match="1 boxes for 2 masks"):
        label_image([first, second], shape, boxes[:1])


def test_overlay_image_at_full_size_is_the_overlay(frame, masks):
    assert np.array_equal(overlay_image(frame.rgb, masks, 0), overlay_masks(frame.rgb, masks))
    assert np.array_equal(overlay_image(frame.rgb, masks, 640), overlay_masks(frame.rgb, masks))
    boxes = [pixel_box(m) for m in masks]
    assert np.array_equal(overlay_image(frame.rgb, masks, 0, boxes),
                          overlay_masks(frame.rgb, masks))


def test_overlay_image_draws_the_resized_masks_on_the_downscaled_frame():
    image = np.full((1080, 1920, 3), 90, np.uint8)
    first = rect_mask((1080, 1920), 100, 200, 700, 800)
    second = rect_mask((1080, 1920), 1200, 100, 1800, 600)
    out = overlay_image(image, [first, None], 960, boxes=[pixel_box(first), None])
    assert out.shape == (540, 960, 3)
    small = downscale(image, 960)
    expected = overlay_masks(small, [resize_mask(first, (540, 960))])
    assert np.array_equal(out, expected)
    tinted = np.any(out != 90, axis=2)
    assert tinted[100:400, 50:350].mean() > 0.95  # the first mask, at half size
    assert not tinted[50:300, 600:900].any()  # the second object is not visible: not drawn
    both = overlay_image(image, [first, second], 960)
    assert len(label_boxes(both)) == 2 and both.shape == (540, 960, 3)


def test_downscale():
    image = np.zeros((1080, 1920, 3), np.uint8)
    assert downscale(image, 1008).shape == (567, 1008, 3)
    small = np.zeros((480, 640, 3), np.uint8)
    assert downscale(small, 1008) is small
    assert downscale(np.zeros((100, 50), np.uint8), 10).shape == (10, 5)
    with pytest.raises(ValueError):
        downscale(small, 0)
