"""The answer store: what a refinement can name, for how long, and why not."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.config import Config
from sam3_agent_ros.core.answers import (
    MAX_EARLIER,
    MAX_REMEMBERED_IDS,
    AnswerRecord,
    AnswerStore,
    KeptAnswer,
    RefineUnavailable,
)
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result

MIB = 2**20


def frame(stamp: int = 1) -> Frame:
    return Frame(np.zeros((8, 10, 3), np.uint8), stamp, 0, "cam")


def mask(x0: int) -> Mask:
    pixels = np.zeros((8, 10), bool)
    pixels[2:5, x0:x0 + 2] = True
    return Mask.from_array(pixels, 0.9, (x0, 2, x0 + 2, 5))


def answer(query_id: str, status=QueryStatus.SUCCEEDED, stamp: int = 1, refines=None) -> Result:
    masks = [mask(1)] if status is QueryStatus.SUCCEEDED else []
    return Result(query_id, f"query {query_id}", status, masks=masks, frame=frame(stamp),
                  text_prompts=["cup"], refines=refines)


def test_an_answer_is_found_with_its_frame_masks_and_record():
    store = AnswerStore(2)
    result = answer("a", stamp=7)
    store.remember(result)
    kept = store.find("a")
    assert kept.frame is result.frame and len(kept.masks) == 1
    assert np.array_equal(kept.masks[0].mask, result.masks[0].mask)
    assert kept.record == AnswerRecord("a", "query a", "succeeded", kept.record.selected,
                                       ("cup",))
    assert kept.record.selected[0].bbox == (1.0, 2.0, 3.0, 5.0)
    assert kept.chain == (kept.record,)


def test_no_mask_answers_are_kept_and_failed_or_cancelled_queries_say_so():
    store = AnswerStore(4)
    store.remember(answer("none", QueryStatus.NO_MASK))
    assert store.find("none").masks == ()
    for status in (QueryStatus.FAILED, QueryStatus.CANCELLED):
        store.remember(answer(status.value, status))
        with pytest.raises(RefineUnavailable,
                           match=f"'{status.value}': it ended {status.value} without an answer"):
            store.find(status.value)


def test_only_the_last_keep_answers_are_kept_the_older_ones_expire_with_that_reason():
    store = AnswerStore(2)
    for name in "abc":
        store.remember(answer(name))
    assert len(store) == 2 and store.find("b") and store.find("c")
    with pytest.raises(RefineUnavailable, match="'a': its answer expired: only the last "
                                                "refine.keep_answers=2 answers are kept"):
        store.find("a")


def test_unknown_ids_and_keep_zero_fail_with_their_reasons():
    with pytest.raises(RefineUnavailable, match="no answer with that query_id is known"):
        AnswerStore(3).find("nope")
    off = AnswerStore(0)
    off.remember(answer("a"))
    with pytest.raises(RefineUnavailable, match=r"no answers are kept \(refine.keep_answers: 0\)"):
        off.find("a")


def test_a_reused_id_names_its_newest_query():
    store = AnswerStore(3)
    store.remember(answer("a", stamp=1))
    store.remember(answer("a", stamp=2))
    assert store.find("a").frame.stamp_sec == 2 and len(store) == 1
    store.remember(answer("a", QueryStatus.FAILED))
    with pytest.raises(RefineUnavailable, match="ended failed"):
        store.find("a")


def test_the_ids_in_reasons_are_escaped_for_logs():
    with pytest.raises(RefineUnavailable) as caught:
        AnswerStore(1).find("x\n[ERROR] forged")
    assert "\n" not in str(caught.value) and "x\\n[ERROR] forged" in str(caught.value)


def test_the_remembered_reasons_are_bounded():
    store = AnswerStore(1)
    for index in range(MAX_REMEMBERED_IDS + 10):
        store.remember(answer(f"f{index}", QueryStatus.FAILED))
    assert len(store._gone) == MAX_REMEMBERED_IDS
    with pytest.raises(RefineUnavailable, match="is known"):
        store.find("f0")


def test_a_chain_of_refinements_keeps_bounded_pixel_free_records_on_one_frame():
    store = AnswerStore(10)
    store.remember(answer("r0"))
    for index in range(1, MAX_EARLIER + 4):
        refined = store.find(f"r{index - 1}")
        result = answer(f"r{index}", refines=f"r{index - 1}")
        result.frame = refined.frame  # the agent answers on the refined answer's frame
        store.remember(result, refined)
    last = store.find(f"r{MAX_EARLIER + 3}")
    assert len(last.earlier) == MAX_EARLIER and len(last.chain) == MAX_EARLIER + 1
    assert [r.query_id for r in last.chain] == [f"r{i}" for i in range(3, MAX_EARLIER + 4)]
    assert last.record.refines == f"r{MAX_EARLIER + 2}"
    assert last.frame is store.find("r0").frame
    assert all(isinstance(r, AnswerRecord) for r in last.earlier)


def test_records_round_trip_through_json_and_read_result_json():
    result = answer("a", refines="z")
    record = AnswerRecord.of(result)
    assert AnswerRecord.from_json(record.to_json()) == record
    from_result = AnswerRecord.from_json(result.to_json())
    assert from_result.query_id == "a" and from_result.refines == "z"
    assert from_result.selected[0].area == record.selected[0].area
    assert KeptAnswer.of(result).record.status == "succeeded"


def sized(query_id: str, height: int, width: int, stamp: int = 1, status=QueryStatus.NO_MASK,
          image: np.ndarray | None = None) -> Result:
    """A result on a (height, width) frame (zeros: untouched pages cost no memory)."""
    image = np.zeros((height, width, 3), np.uint8) if image is None else image
    return Result(query_id, f"query {query_id}", status, frame=Frame(image, stamp, 0, "cam"))


def test_the_kept_frames_and_masks_are_bounded_in_bytes_the_oldest_expire_first():
    frame_bytes = 100 * 100 * 3
    store = AnswerStore(8, max_bytes=2 * frame_bytes + 100)
    for index, name in enumerate("abc"):
        store.remember(sized(name, 100, 100, stamp=index + 1))
    assert len(store) == 2 and store.find("b") and store.find("c")
    assert store.kept_bytes == 2 * frame_bytes
    with pytest.raises(RefineUnavailable, match=r"'a': its answer expired: the frames and masks "
                                                r"of the kept answers are bounded by "
                                                r"refine.max_kept_mib="):
        store.find("a")


def test_an_answer_larger_than_the_whole_budget_is_not_kept_and_a_refinement_says_why():
    store = AnswerStore(8, max_bytes=MIB)
    store.remember(sized("small", 100, 100))
    store.remember(sized("huge", 1000, 1000))  # 2.9 MiB
    assert store.find("small") and len(store) == 1  # the smaller ones are not pushed out for it
    with pytest.raises(RefineUnavailable, match=r"'huge': its answer was not kept: its frame and "
                                                r"masks \(2.9 MiB\) are over "
                                                r"refine.max_kept_mib=1 MiB"):
        store.find("huge")


def test_ten_answers_on_near_cap_frames_keep_at_most_the_default_budget():
    config = Config()
    side = int((config.node.max_image_pixels * 0.99) ** 0.5)  # just under the pixel cap
    store = AnswerStore(config.refine.keep_answers, config.refine.max_kept_mib * MIB)
    for index in range(10):
        store.remember(sized(f"n{index}", side, side, stamp=index + 1))
    assert store.kept_bytes <= config.refine.max_kept_mib * MIB
    assert 1 <= len(store) < config.refine.keep_answers and store.find("n9")
    with pytest.raises(RefineUnavailable, match="'n0': its answer expired"):
        store.find("n0")


def test_masks_are_kept_bit_packed_to_their_box_and_come_back_pixel_for_pixel():
    pixels = np.zeros((400, 500), bool)
    pixels[100:300, 50:450] = np.random.default_rng(0).random((200, 400)) > 0.5
    original = Mask.from_array(pixels, 0.8, (50, 100, 450, 300))
    empty = Mask.from_array(np.zeros((400, 500), bool), 0.1, (0, 0, 0, 0))
    result = Result("m", "query m", QueryStatus.SUCCEEDED, masks=[original, empty],
                    frame=Frame(np.zeros((400, 500, 3), np.uint8), 1, 0, "cam"))
    store = AnswerStore(2, max_bytes=MIB)
    store.remember(result)
    assert store.kept_bytes == 400 * 500 * 3 + 200 * 400 // 8  # a bool mask would be 200000
    back, back_empty = store.find("m").masks
    assert back.mask.shape == (400, 500) and back.mask.dtype == bool
    assert np.array_equal(back.mask, pixels) and not back_empty.mask.any()
    assert (back.score, back.bbox, back.area, back.centroid, back.pixel_box) == (
        original.score, original.bbox, original.area, original.centroid, original.pixel_box)
    assert (back_empty.area, back_empty.pixel_box) == (0, None)


def test_answers_on_one_camera_frame_share_one_kept_copy_counted_once():
    image = np.random.default_rng(1).integers(0, 255, (60, 80, 3), np.uint8)
    store = AnswerStore(8, max_bytes=MIB)
    store.remember(sized("a", 60, 80, stamp=5, image=image))
    store.remember(sized("b", 60, 80, stamp=5, image=image.copy()))  # decoded again
    assert store.find("a").frame.image is store.find("b").frame.image
    assert store.kept_bytes == image.nbytes
    other = image.copy()
    other[0, 0] ^= 1  # the same header, other pixels: its own copy
    store.remember(sized("c", 60, 80, stamp=5, image=other))
    assert store.find("c").frame.image is other and store.kept_bytes == 2 * image.nbytes


def test_the_byte_count_follows_replacements_failures_and_expiry():
    store = AnswerStore(2, max_bytes=MIB)
    shared = np.zeros((10, 10, 3), np.uint8)
    store.remember(sized("a", 10, 10, image=shared))
    store.remember(sized("b", 10, 10, image=shared))
    assert store.kept_bytes == 300
    store.remember(sized("a", 20, 10))  # "a" again, on another frame
    assert store.kept_bytes == 300 + 600
    store.remember(sized("b", 1, 1, status=QueryStatus.FAILED))
    assert store.kept_bytes == 600 and len(store) == 1
    store.remember(sized("c", 30, 10))
    store.remember(sized("d", 40, 10))  # "a" expires (keep 2)
    assert store.kept_bytes == 900 + 1200 and len(store) == 2
