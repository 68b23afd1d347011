"""The answer folder of ``sam3-agent run --out``: written, read back exactly, refused clearly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sam3_agent_ros.core.answer_folder import (
    ANSWER_FILE,
    FRAME_FILE,
    MASKS_DIR,
    AnswerFolderError,
    read_answer_folder,
    write_answer_folder,
)
from sam3_agent_ros.core.answers import AnswerStore
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result


def answer(query_id="cli-1", status=QueryStatus.SUCCEEDED, refines=None) -> Result:
    rng = np.random.default_rng(1)
    image = rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)
    first = np.zeros((30, 40), bool)
    first[5:10, 3:9] = True
    second = np.zeros((30, 40), bool)
    second[4:12, 6:20] = True  # overlaps the first: kept exactly, one file each
    masks = [Mask.from_array(first, 0.9, (3, 5, 9, 10)),
             Mask.from_array(second, 0.6, (6, 4, 20, 12))]
    return Result(query_id, "the cups", status,
                  masks=masks if status is QueryStatus.SUCCEEDED else [],
                  frame=Frame(image, 17, 42, "camera"), text_prompts=["cup"], refines=refines)


def test_an_answer_round_trips_exactly(tmp_path):
    result = answer()
    write_answer_folder(tmp_path, result)
    kept = read_answer_folder(tmp_path, 10_000)
    assert np.array_equal(kept.frame.image, result.frame.image)
    assert (kept.frame.stamp_sec, kept.frame.stamp_nanosec, kept.frame.frame_id) == (
        17, 42, "camera")
    assert [np.array_equal(a.mask, b.mask) for a, b in zip(kept.masks, result.masks)] == [True] * 2
    assert [m.score for m in kept.masks] == [0.9, 0.6]
    assert kept.record.query_id == "cli-1" and kept.record.text_prompts == ("cup",)
    assert kept.earlier == ()
    document = json.loads((tmp_path / ANSWER_FILE).read_text())
    assert document["format"] == 1 and document["result"] == result.to_json()


def test_a_refinement_keeps_its_chain_and_removes_stale_mask_files(tmp_path):
    write_answer_folder(tmp_path, answer())
    store = AnswerStore(2)
    store.add(read_answer_folder(tmp_path, 10_000))
    refined = store.find("cli-1")
    refinement = answer("cli-2", QueryStatus.NO_MASK, refines="cli-1")
    write_answer_folder(tmp_path, refinement, refined)  # the same folder: the chain goes on
    assert sorted(p.name for p in (tmp_path / MASKS_DIR).iterdir()) == []
    kept = read_answer_folder(tmp_path, 10_000)
    assert [r.query_id for r in kept.chain] == ["cli-1", "cli-2"]
    assert kept.record.refines == "cli-1" and kept.masks == ()
    assert len(kept.earlier[0].selected) == 2


def test_a_failed_answer_is_not_refinable(tmp_path):
    write_answer_folder(tmp_path, answer(status=QueryStatus.FAILED))
    with pytest.raises(AnswerFolderError, match="'cli-1' ended failed without an answer"):
        read_answer_folder(tmp_path, 10_000)


@pytest.mark.parametrize("damage, reason", [
    (lambda d: (d / ANSWER_FILE).unlink(), "has no answer.json"),
    (lambda d: (d / FRAME_FILE).unlink(), "frame.png is missing"),
    (lambda d: (d / MASKS_DIR / "2.png").unlink(), "2.png is missing"),
    (lambda d: (d / FRAME_FILE).write_bytes(b"not a png"), "frame.png"),
    (lambda d: (d / ANSWER_FILE).write_text("{"), "cannot be read"),
    (lambda d: (d / ANSWER_FILE).write_text('{"format": 9, "result": {}}'), "format 9"),
    (lambda d: (d / ANSWER_FILE).write_text('{"format": 1, "result": {"query": "x"}}'),
     "not an answer written by sam3-agent run --out"),
])
def test_damaged_folders_say_what_is_wrong(tmp_path, damage, reason):
    write_answer_folder(tmp_path, answer())
    damage(tmp_path)
    with pytest.raises(AnswerFolderError, match=reason):
        read_answer_folder(tmp_path, 10_000)


def test_the_frame_is_read_under_the_pixel_cap_and_masks_must_match_it(tmp_path):
    write_answer_folder(tmp_path, answer())
    with pytest.raises(AnswerFolderError, match="more than max_image_pixels=100"):
        read_answer_folder(tmp_path, 100)
    import cv2

    cv2.imwrite(str(tmp_path / MASKS_DIR / "1.png"), np.zeros((3, 3), np.uint8))
    with pytest.raises(AnswerFolderError, match="1.png is 3x3, the frame 40x30"):
        read_answer_folder(tmp_path, 10_000)


def test_a_missing_folder_says_it_wants_an_earlier_out(tmp_path):
    with pytest.raises(AnswerFolderError, match="give the --out of an earlier run"):
        read_answer_folder(tmp_path / "nowhere", 10_000)
