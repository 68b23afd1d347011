"""The DEMO/TEST colour segmenter on the synthetic tabletop scene."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo import sample
from sam3_agent_demo.scene import (
    CameraPose,
    Lighting,
    Scene,
    SceneObject,
    default_scene,
    render_scene,
    render_sequence_frame,
)
from sam3_agent_ros.core.errors import SegmenterError
from sam3_agent_ros.core.ports import Detections
from sam3_agent_ros.segmenters.color import ColorSegmenter, make_color_segmenter, parse_phrase


@pytest.fixture(scope="module")
def frame():
    return render_scene(seed=7)  # the bundled example image


@pytest.fixture()
def segmenter():
    return ColorSegmenter()


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum()) / max(1, int((a | b).sum()))


def matched_names(result, frame, min_iou=0.9) -> list[str]:
    """The ground-truth object each mask matches with IoU >= min_iou (fails when one doesn't)."""
    names = []
    for mask in result.masks:
        best = max(frame.masks, key=lambda n: iou(mask, frame.masks[n]))
        assert iou(mask, frame.masks[best]) >= min_iou, (best, iou(mask, frame.masks[best]))
        names.append(best)
    return names


def test_blue_object_finds_both_blue_objects(frame, segmenter):
    result = segmenter.segment(frame.rgb, "blue object")
    assert sorted(matched_names(result, frame)) == ["blue_box", "blue_cylinder"]


def test_leftmost_blue_object_is_selectable(frame, segmenter):
    result = segmenter.segment(frame.rgb, "blue object")
    leftmost = int(np.argmin(result.boxes[:, 0]))
    assert iou(result.masks[leftmost], frame.masks["blue_box"]) >= 0.9
    others = np.delete(result.boxes[:, 0], leftmost)
    assert np.all(others - result.boxes[leftmost, 0] > 100)


@pytest.mark.parametrize(("phrase", "expected"), [
    ("red", ["red_box", "red_cylinder"]),
    ("green", ["green_prism"]),
    ("the yellow thing", ["yellow_ellipse"]),
    ("Red or BLUE objects", ["blue_box", "blue_cylinder", "red_box", "red_cylinder"]),
    ("ball", ["blue_cylinder", "red_cylinder"]),
    ("red ball", ["red_cylinder"]),
    ("blue cube", ["blue_box"]),
    ("boxes", ["blue_box", "red_box"]),
    ("triangle", ["green_prism"]),
    ("oval", ["yellow_ellipse"]),
])
def test_colour_and_shape_words(frame, segmenter, phrase, expected):
    assert sorted(matched_names(segmenter.segment(frame.rgb, phrase), frame)) == expected


@pytest.mark.parametrize("phrase", ["object", "everything", "all items", "things on the table"])
def test_generic_nouns_find_every_object(frame, segmenter, phrase):
    result = segmenter.segment(frame.rgb, phrase)
    assert sorted(matched_names(result, frame)) == sorted(frame.masks)


def test_largest_red_object_is_the_red_box(frame, segmenter):
    result = segmenter.segment(frame.rgb, "red object")
    largest = int(np.argmax(result.masks.reshape(len(result.masks), -1).sum(axis=1)))
    assert iou(result.masks[largest], frame.masks["red_box"]) >= 0.9


@pytest.mark.parametrize("phrase", ["purple object", "unicorn", "", "   ", "white", "black thing",
                                    "grey object", "green ball", "orange"])
def test_absent_things_give_no_masks(frame, segmenter, phrase):
    result = segmenter.segment(frame.rgb, phrase)
    assert result.masks.shape == (0, 480, 640) and result.masks.dtype == bool
    assert result.scores.shape == (0,) and result.boxes.shape == (0, 4)
    assert isinstance(result, Detections) and not result.untrained_weights
    assert Detections.coerce(result, 480, 640).to_masks() == []


def test_output_contract(frame, segmenter):
    result = segmenter.segment(frame.rgb, "object")
    count = len(result.scores)
    assert result.masks.shape == (count, 480, 640) and result.masks.dtype == bool
    assert result.scores.dtype == np.float64 and result.boxes.shape == (count, 4)
    assert np.all((result.scores >= 0.5) & (result.scores < 1.0))
    assert np.all(np.diff(result.scores) <= 0)  # sorted by descending score
    for mask, box in zip(result.masks, result.boxes):
        ys, xs = np.nonzero(mask)
        assert list(box) == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
    assert isinstance(result, Detections) and not result.untrained_weights
    normalised = Detections.coerce(result, 480, 640).to_masks()
    assert [m.score for m in normalised] == list(result.scores)


def test_deterministic_and_cache_safe(frame, segmenter):
    first = segmenter.segment(frame.rgb, "object")
    again = segmenter.segment(frame.rgb, "object")
    fresh = ColorSegmenter().segment(frame.rgb.copy(), "object")
    for other in (again, fresh):
        assert np.array_equal(first.masks, other.masks)
        assert np.array_equal(first.scores, other.scores)
    other_frame = render_scene(pose=CameraPose(tx=0.05), seed=7)
    moved = segmenter.segment(other_frame.rgb, "blue")  # a new image is analysed anew
    assert sorted(matched_names(moved, other_frame)) == ["blue_box", "blue_cylinder"]


@pytest.mark.parametrize("lighting", [
    Lighting(brightness=0.75, gradient_x=0.2, gradient_y=-0.15, noise_sigma=6.0),
    Lighting(brightness=1.15, gradient_x=-0.15, gradient_y=0.2, noise_sigma=8.0),
])
def test_robust_to_lighting_gradient_and_noise(segmenter, lighting):
    frame = render_scene(lighting=lighting, seed=5)
    assert sorted(matched_names(segmenter.segment(frame.rgb, "blue object"), frame)) == [
        "blue_box", "blue_cylinder"]
    assert sorted(matched_names(segmenter.segment(frame.rgb, "red"), frame)) == [
        "red_box", "red_cylinder"]
    assert sorted(matched_names(segmenter.segment(frame.rgb, "object"), frame)) == sorted(
        frame.masks)


def test_achromatic_and_other_colours():
    objects = (
        SceneObject("white_box", "white", "rectangle", (-0.3, -0.15), (0.1, 0.1), 0.03),
        SceneObject("black_disc", "black", "circle", (0.0, -0.15), (0.1, 0.1), 0.03),
        SceneObject("gray_box", "gray", "rectangle", (0.3, -0.15), (0.1, 0.1), 0.03),
        SceneObject("purple_prism", "purple", "triangle", (-0.3, 0.15), (0.1, 0.1), 0.03),
        SceneObject("orange_disc", "orange", "circle", (0.0, 0.15), (0.1, 0.1), 0.03),
        SceneObject("brown_box", "brown", "rectangle", (0.3, 0.15), (0.1, 0.1), 0.03),
        SceneObject("pink_disc", "pink", "circle", (-0.1, 0.0), (0.08, 0.08), 0.03),
        SceneObject("cyan_disc", "cyan", "circle", (0.15, 0.0), (0.08, 0.08), 0.03),
    )
    frame = render_scene(Scene(objects=objects), seed=2)
    segmenter = ColorSegmenter()
    for phrase, name in [("white", "white_box"), ("black", "black_disc"), ("grey", "gray_box"),
                         ("violet", "purple_prism"), ("orange", "orange_disc"),
                         ("brown", "brown_box"), ("magenta", "pink_disc"), ("cyan", "cyan_disc")]:
        assert matched_names(segmenter.segment(frame.rgb, phrase), frame) == [name], phrase


def test_small_blobs_are_dropped():
    tiny = SceneObject("tiny", "red", "circle", (0.0, 0.0), (0.01, 0.01), 0.01)  # ~28 px
    frame = render_scene(Scene(objects=(tiny,)))
    assert len(ColorSegmenter().segment(frame.rgb, "red").scores) == 0
    assert len(ColorSegmenter(min_area_fraction=0.0).segment(frame.rgb, "red").scores) == 1


def test_other_image_layouts_and_bad_input(frame):
    segmenter = ColorSegmenter()
    rgba = np.concatenate([frame.rgb, np.full((480, 640, 1), 255, np.uint8)], axis=2)
    assert len(segmenter.segment(rgba, "blue").scores) == 2
    assert len(segmenter.segment(frame.rgb[:, ::-1], "blue").scores) == 2  # non-contiguous
    assert len(segmenter.segment(frame.rgb[..., 0], "blue").scores) == 0  # grey image
    with pytest.raises(SegmenterError, match="uint8"):
        segmenter.segment(frame.rgb.astype(np.float32), "blue")
    with pytest.raises(SegmenterError, match=r"\(H, W, 3\)"):
        segmenter.segment(np.zeros((4, 4, 5), np.uint8), "blue")
    with pytest.raises(SegmenterError, match="string"):
        segmenter.segment(frame.rgb, None)
    blank = np.full((120, 160, 3), 128, np.uint8)
    assert len(segmenter.segment(blank, "object").scores) == 0


def test_parse_phrase():
    query = parse_phrase("the two Grey BALLS")
    assert query.colors == {"gray"} and query.shapes == {"circle"} and not query.generic
    assert parse_phrase("round things").shapes == {"circle", "ellipse"}
    assert parse_phrase("an object").generic and parse_phrase("an object").shapes is None
    assert not parse_phrase("unicorn").selects_anything


def test_plugin_factory(frame):
    assert len(make_color_segmenter().segment(frame.rgb, "yellow").scores) == 1


def test_default_scene_is_the_example_layout():
    assert [o.name for o in default_scene().objects] == [
        "blue_box", "blue_cylinder", "red_box", "red_cylinder", "green_prism", "yellow_ellipse"]


def test_sample_sequence_frames_with_motion_and_lighting_change(segmenter):
    """The frames of the sample bag (scene.render_sequence_frame) segment like the still one."""
    for t_s in (0.0, 2.6, 5.1, 7.7):
        frame = render_sequence_frame(t_s)
        assert sorted(matched_names(segmenter.segment(frame.rgb, "blue object"), frame,
                                    min_iou=0.95)) == ["blue_box", "blue_cylinder"]
        assert len(segmenter.segment(frame.rgb, "object").scores) == 6
        assert len(segmenter.segment(frame.rgb, "purple object").scores) == 0


def test_segment_many_gives_what_segment_gives_for_each_phrase():
    segmenter = ColorSegmenter()
    image = sample.render_frame(0.0).rgb
    prompts = ["blue object", "red box", "unicorn"]
    many = segmenter.segment_many(image, prompts)
    for found, prompt in zip(many, prompts):
        single = segmenter.segment(image.copy(), prompt)  # a new frame object: no cache
        assert np.array_equal(found.masks, single.masks)
        assert np.array_equal(found.scores, single.scores)
    assert [len(d.scores) for d in many] == [2, 1, 0]
