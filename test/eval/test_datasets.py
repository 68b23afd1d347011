"""Both layouts: detection by content, the shipped sets, truth painting, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sam3_agent_ros.eval.datasets import (
    DatasetError,
    Sample,
    SampleError,
    first_queries,
    load_dataset,
    load_image,
    load_truth,
    paint_shapes,
)

REPO = Path(__file__).resolve().parents[2]
SQUARE = [[2, 2], [7, 2], [7, 7], [2, 7]]  # 6x6 px with the outline


def _image(path: Path, width: int = 10, height: int = 8) -> None:
    cv2.imwrite(str(path), np.full((height, width, 3), 90, np.uint8))


def test_shipped_jsonl_set():
    dataset = load_dataset(REPO / "data" / "eval_tabletop")
    assert dataset.layout == "jsonl" and dataset.name == "eval_tabletop"
    assert 90 <= len(dataset.samples) <= 120
    absent = [s for s in dataset.samples if s.absent]
    assert 0.1 * len(dataset.samples) <= len(absent) <= 0.3 * len(dataset.samples)
    assert any(s.shapes for s in dataset.samples) and any(s.mask for s in dataset.samples)
    assert any(s.is_sentence for s in dataset.samples)
    for sample in dataset.samples:
        image = load_image(sample)
        truth, _ = load_truth(sample, image.shape[:2])
        assert truth.any() != sample.absent, sample.id


def test_shipped_reasonseg_set():
    dataset = load_dataset(REPO / "data" / "eval_reasonseg_mini")
    assert dataset.layout == "reasonseg"
    assert {s.image.suffix for s in dataset.samples} == {".jpg", ".png"}
    assert all("#" in s.id for s in dataset.samples)
    with_ignore = [s for s in dataset.samples if any(k == "ignore" for k, _ in s.shapes)]
    assert with_ignore
    image = load_image(with_ignore[0])
    truth, ignore = load_truth(with_ignore[0], image.shape[:2])
    assert truth.any() and ignore is not None and ignore.any() and not (truth & ignore).any()


def test_reasonseg_queries_become_stem_index_samples(tmp_path):
    _image(tmp_path / "cat.jpg")
    (tmp_path / "cat.json").write_text(json.dumps({
        "text": ["the cat", "what sleeps on the sofa?"], "is_sentence": True,
        "shapes": [{"label": "target", "points": SQUARE},
                   {"label": "flag", "points": [[0, 0], [1, 0], [1, 1]]}]}))
    samples = load_dataset(tmp_path).samples
    assert [(s.id, s.query) for s in samples] == [("cat#0", "the cat"),
                                                  ("cat#1", "what sleeps on the sofa?")]
    assert samples[0].is_sentence is True and len(samples[0].shapes) == 1  # flag skipped
    truth, ignore = load_truth(samples[0], (8, 10))
    assert truth.sum() == 36 and ignore is None


def test_smaller_polygon_inside_a_larger_one_decides_its_pixels():
    big = [[0, 0], [9, 0], [9, 7], [0, 7]]
    painted = paint_shapes([("ignore", SQUARE), ("target", big)], (8, 10))
    assert (painted == 255).sum() == 36 and (painted == 1).sum() == 80 - 36
    painted = paint_shapes([("target", SQUARE), ("ignore", big)], (8, 10))
    assert (painted == 1).sum() == 36


def test_jsonl_mask_polygons_and_absent(tmp_path):
    _image(tmp_path / "a.png")
    mask = np.zeros((8, 10), np.uint8)
    mask[1:3, 1:4] = 7  # nonzero = object
    cv2.imwrite(str(tmp_path / "m.png"), mask)
    lines = [{"id": "1", "image": "a.png", "query": "q", "mask": "m.png"},
             {"id": "2", "image": "a.png", "query": "q", "polygons": [SQUARE],
              "ignore_polygons": [[[0, 0], [3, 0], [3, 3], [0, 3]]]},
             {"id": "3", "image": "a.png", "query": "nothing here", "is_sentence": False}]
    (tmp_path / "annotations.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    one, two, three = load_dataset(tmp_path).samples
    assert load_truth(one, (8, 10))[0].sum() == 6
    truth, ignore = load_truth(two, (8, 10))
    assert ignore.sum() == 16 and truth.sum() == 36 - 4 and not (truth & ignore).any()
    assert three.absent and not load_truth(three, (8, 10))[0].any()


@pytest.mark.parametrize("line, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"id": "1", "image": "a.png"}', "'query' must be a non-empty string"),
    ('{"id": "1", "image": "a.png", "query": "q", "mask": "m.png", "polygons": []}',
     "not both"),
    ('{"id": "1", "image": "a.png", "query": "q", "polygons": [[[0, 0], [1, 1]]]}',
     "at least 3"),
    ('{"id": "1", "image": "a.png", "query": "q", "is_sentence": "yes"}', "is_sentence"),
])
def test_malformed_jsonl_names_file_and_line(tmp_path, line, message):
    (tmp_path / "annotations.jsonl").write_text('{"id": "0", "image": "a", "query": "q"}\n'
                                                + line + "\n")
    with pytest.raises(DatasetError, match=message) as error:
        load_dataset(tmp_path)
    assert "annotations.jsonl:2" in str(error.value)


def test_duplicate_ids_are_refused(tmp_path):
    line = '{"id": "x", "image": "a.png", "query": "q"}\n'
    (tmp_path / "annotations.jsonl").write_text(line * 2)
    with pytest.raises(DatasetError, match="duplicate sample ids"):
        load_dataset(tmp_path)


@pytest.mark.parametrize("record, message", [
    ({"text": [], "shapes": []}, "'text' must be a non-empty list"),
    ({"text": ["q"], "shapes": {}}, "'shapes' must be a list"),
    ({"text": ["q"], "shapes": [{"points": SQUARE}]}, "expected an object with a 'label'"),
    ({"text": ["q"], "shapes": [{"label": "target", "points": [[1, 2]]}]}, "at least 3"),
])
def test_malformed_reasonseg_json(tmp_path, record, message):
    _image(tmp_path / "x.jpg")
    (tmp_path / "x.json").write_text(json.dumps(record))
    with pytest.raises(DatasetError, match=message):
        load_dataset(tmp_path)


def test_unreadable_reasonseg_json(tmp_path):
    _image(tmp_path / "x.jpg")
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(DatasetError, match="x.json: not readable JSON"):
        load_dataset(tmp_path)


def test_missing_folder_and_unknown_layout(tmp_path):
    with pytest.raises(DatasetError, match="no such directory"):
        load_dataset(tmp_path / "nope")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "lonely.json").write_text("{}")  # a json without its image is not ReasonSeg
    with pytest.raises(DatasetError, match="unknown layout"):
        load_dataset(tmp_path)


def test_unreadable_sample_files_are_sample_errors(tmp_path):
    (tmp_path / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(SampleError, match="no such file"):
        load_image(Sample("1", "q", tmp_path / "missing.jpg"))
    with pytest.raises(SampleError, match="not a readable image"):
        load_image(Sample("1", "q", tmp_path / "broken.jpg"))
    with pytest.raises(SampleError, match="missing or not a readable PNG"):
        load_truth(Sample("1", "q", tmp_path / "a.jpg", mask=tmp_path / "m.png"), (8, 10))
    cv2.imwrite(str(tmp_path / "small.png"), np.zeros((4, 4), np.uint8))
    with pytest.raises(SampleError, match="4x4, the image is 10x8"):
        load_truth(Sample("1", "q", tmp_path / "a.jpg", mask=tmp_path / "small.png"), (8, 10))


def test_bombs_in_a_dataset_are_refused_undecoded(tmp_path, png_bomb_file):
    """An image over the pixel cap, and a mask whose header disagrees with its image (a 389 kB
    PNG declaring 20000x20000), are refused from their headers: no 1.2 GB decode."""
    with pytest.raises(SampleError, match="too large: 20000x20000 = 400000000 pixels, more than "
                                          "max_image_pixels=40000000 \\(not decoded\\)"):
        load_image(Sample("1", "q", png_bomb_file))
    cv2.imwrite(str(tmp_path / "a.png"), np.zeros((8, 10, 3), np.uint8))
    with pytest.raises(SampleError, match="too large: 10x8 = 80 pixels, more than "
                                          "max_image_pixels=79"):
        load_image(Sample("1", "q", tmp_path / "a.png"), max_pixels=79)
    assert load_image(Sample("1", "q", tmp_path / "a.png"), max_pixels=80).shape == (8, 10, 3)
    with pytest.raises(SampleError, match="20000x20000, the image is 10x8"):
        load_truth(Sample("1", "q", tmp_path / "a.png", mask=png_bomb_file), (8, 10))


def test_first_queries_keeps_query_zero_of_each_image(tmp_path):
    for stem in ("a", "b"):
        _image(tmp_path / f"{stem}.jpg")
        (tmp_path / f"{stem}.json").write_text(json.dumps(
            {"text": ["one", "two"], "shapes": [{"label": "target", "points": SQUARE}]}))
    assert [s.id for s in first_queries(load_dataset(tmp_path))] == ["a#0", "b#0"]
    with pytest.raises(DatasetError, match="applies to the ReasonSeg layout"):
        first_queries(load_dataset(REPO / "data" / "eval_tabletop"))


def test_cp1252_annotation_is_read(tmp_path):
    _image(tmp_path / "cafe.jpg")
    text = '{"text": ["the caf\u00e9 sign \u2013 left"], "shapes": []}'
    (tmp_path / "cafe.json").write_bytes(text.encode("cp1252"))
    (sample,) = load_dataset(tmp_path).samples
    assert sample.query == "the caf\u00e9 sign \u2013 left" and sample.absent


# --- issue 17 item 9: paths outside the dataset folder --------------------------------------

def _outside_set(tmp_path: Path) -> Path:
    """A jsonl set whose samples point inside, up and out, at an absolute path, and through
    symlinks (one leading out, one staying in)."""
    data = tmp_path / "set"
    (data / "sub").mkdir(parents=True)
    _image(data / "in.png")
    _image(tmp_path / "private.png")  # beside the set: not part of it
    cv2.imwrite(str(tmp_path / "private_mask.png"), np.zeros((8, 10), np.uint8))
    (data / "sub" / "link_out.png").symlink_to(tmp_path / "private.png")
    (data / "sub" / "link_in.png").symlink_to(data / "in.png")
    (data / "mask_out.png").symlink_to(tmp_path / "private_mask.png")
    lines = [{"id": "inside", "image": "in.png", "query": "q"},
             {"id": "dotdot", "image": "../private.png", "query": "q"},
             {"id": "absolute", "image": str(tmp_path / "private.png"), "query": "q"},
             {"id": "symlink-out", "image": "sub/link_out.png", "query": "q"},
             {"id": "symlink-in", "image": "sub/../sub/link_in.png", "query": "q"},
             {"id": "mask-out", "image": "in.png", "query": "q", "mask": "mask_out.png"}]
    (data / "annotations.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    return data


def test_paths_outside_the_dataset_are_refused_and_never_read(tmp_path):
    samples = {s.id: s for s in load_dataset(_outside_set(tmp_path)).samples}
    assert samples["inside"].refused is None and samples["symlink-in"].refused is None
    assert load_image(samples["symlink-in"]).shape == (8, 10, 3)
    for sample_id, what in (("dotdot", "image"), ("absolute", "image"),
                            ("symlink-out", "image"), ("mask-out", "mask")):
        sample = samples[sample_id]
        assert sample.refused.startswith(what) and "outside the dataset folder" in sample.refused
        assert "--allow-outside-paths" in sample.refused
        with pytest.raises(SampleError, match="outside the dataset folder"):
            load_image(sample)
        with pytest.raises(SampleError, match="outside the dataset folder"):
            load_truth(sample, (8, 10))


def test_allow_outside_paths_reads_them(tmp_path):
    samples = load_dataset(_outside_set(tmp_path), allow_outside_paths=True).samples
    assert all(s.refused is None for s in samples)
    assert all(load_image(s).shape == (8, 10, 3) for s in samples)


def test_reasonseg_image_or_annotation_symlinked_out_is_refused(tmp_path):
    data = tmp_path / "set"
    data.mkdir()
    annotation = json.dumps({"text": ["one", "two"], "shapes": []})
    _image(data / "fine.jpg")
    (data / "fine.json").write_text(annotation)
    _image(tmp_path / "private.jpg")
    (data / "img_out.jpg").symlink_to(tmp_path / "private.jpg")
    (data / "img_out.json").write_text(annotation)
    _image(data / "ann_out.jpg")
    (tmp_path / "private.json").write_text(annotation)
    (data / "ann_out.json").symlink_to(tmp_path / "private.json")
    samples = {s.id: s for s in load_dataset(data).samples}
    assert sorted(samples) == ["ann_out#0", "fine#0", "fine#1", "img_out#0", "img_out#1"]
    assert samples["fine#0"].refused is None
    assert samples["img_out#1"].refused.startswith("image")
    assert samples["ann_out#0"].refused.startswith("annotation")  # not parsed at all
    assert len(load_dataset(data, allow_outside_paths=True).samples) == 6


def test_an_annotations_file_symlinked_out_refuses_the_set(tmp_path):
    data = tmp_path / "set"
    data.mkdir()
    (tmp_path / "elsewhere.jsonl").write_text('{"id": "1", "image": "a.png", "query": "q"}\n')
    (data / "annotations.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(DatasetError, match="annotations file .* outside the dataset folder"):
        load_dataset(data)
    assert len(load_dataset(data, allow_outside_paths=True).samples) == 1
