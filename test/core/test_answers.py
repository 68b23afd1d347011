"""The answer store: what a refinement can name, for how long, and why not."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_ros.core.answers import (
    MAX_EARLIER,
    MAX_REMEMBERED_IDS,
    AnswerRecord,
    AnswerStore,
    KeptAnswer,
    RefineUnavailable,
)
from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result


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
    assert kept.frame is result.frame and kept.masks == tuple(result.masks)
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
