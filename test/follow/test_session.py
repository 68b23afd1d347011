"""FollowSession on the moving tabletop sequences (color segmenter) and on bad input."""

from __future__ import annotations

import numpy as np
import pytest

from sam3_agent_demo.moving_scene import (
    GRASPED_OBJECT,
    LEAVING_OBJECT,
    LOOK_ALIKE,
    GraspSequence,
    MovingSequence,
)
from sam3_agent_ros.config import Config
from sam3_agent_ros.follow import (
    LOST,
    STOPPED,
    TRACKING,
    FollowError,
    FollowSession,
)
from sam3_agent_ros.segmenters.color import ColorSegmenter
from test.fakes.segmenters import BoxSegmenter, RaisingSegmenter


class CountingSegmenter:
    """Delegates to a real segmenter and counts the calls."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def segment(self, image, text_prompt):
        self.calls += 1
        return self.inner.segment(image, text_prompt)


def follow_config(**overrides):
    return Config.from_params({f"follow.{k}": v for k, v in overrides.items()}).follow


@pytest.fixture(scope="module")
def frames():
    return list(MovingSequence())


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


def run(frames, config, prompt, names, segmenter=None):
    """Follow ``names`` from frame 0; per-frame updates and IoUs (frames where the truth is
    visible)."""
    session = FollowSession(config, segmenter or ColorSegmenter(), frames[0].rgb,
                            [frames[0].masks[n] for n in names], prompt, frames[0].t_s)
    updates, ious = [], {n: [] for n in names}
    for frame in frames[1:]:
        update = session.update(frame.rgb, frame.t_s)
        updates.append(update)
        by_index = {obj.index: obj.mask for obj in update.objects}
        for index, name in enumerate(names):
            truth = frame.masks[name]
            if truth.any():
                ious[name].append(iou(by_index.get(index, np.zeros_like(truth)), truth))
    return session, updates, ious


@pytest.mark.parametrize("mode", ["flow", "redetect"])
@pytest.mark.parametrize(("prompt", "names"), [
    ("blue", ["blue_box", "blue_cylinder"]),
    ("red", ["red_box"]),
    ("green", ["green_prism"]),
])
def test_mean_iou_on_the_moving_sequence(frames, mode, prompt, names):
    _, updates, ious = run(frames, follow_config(mode=mode), prompt, names)
    for name in names:
        assert np.mean(ious[name]) >= 0.85, (mode, name, np.mean(ious[name]))
    assert all(update.state in (TRACKING, LOST) for update in updates)


def test_followed_objects_describe_their_masks(frames):
    _, updates, _ = run(frames[:12], follow_config(), "blue", ["blue_box", "blue_cylinder"])
    for update in updates:
        assert [obj.index for obj in update.objects] == [0, 1]
        for obj in update.objects:
            ys, xs = np.nonzero(obj.mask)
            assert obj.bbox == (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
            assert obj.centroid == pytest.approx((xs.mean(), ys.mean()))
            assert 0.0 < obj.confidence <= 1.0
    assert {update.source for update in updates} == {"flow", "redetect"}


@pytest.mark.parametrize("mode", ["flow", "redetect"])
def test_lost_within_timeout_after_the_object_leaves(frames, mode):
    timeout = 0.5
    _, updates, _ = run(frames, follow_config(mode=mode, lost_timeout_s=timeout), "blue",
                        [LEAVING_OBJECT])
    gone = MovingSequence().first_index_without(LEAVING_OBJECT)
    last_visible_s = frames[gone - 1].t_s
    states = {frame.index: update.state for frame, update in zip(frames[1:], updates)}
    assert all(states[i] == TRACKING for i in range(1, gone))
    lost_at = min(i for i, state in states.items() if state == LOST)
    assert frames[lost_at].t_s <= last_visible_s + timeout + 1e-9
    assert all(states[i] == LOST for i in range(lost_at, len(frames)))
    assert all(not update.objects for update in updates[lost_at - 1:])


def test_following_other_objects_is_not_lost_when_one_leaves(frames):
    _, updates, _ = run(frames, follow_config(lost_timeout_s=0.3), "blue",
                        [LEAVING_OBJECT, "blue_cylinder"])
    assert all(update.state == TRACKING for update in updates)
    assert [obj.index for obj in updates[-1].objects] == [1]


@pytest.mark.parametrize("reground", [True, False])
def test_reground_flag_at_most_once_per_timeout(frames, reground):
    timeout = 0.5
    config = follow_config(lost_timeout_s=timeout, reground_on_lost=reground)
    _, updates, _ = run(frames, config, "blue", [LEAVING_OBJECT])
    times = [frame.t_s for frame, update in zip(frames[1:], updates) if update.reground]
    if not reground:
        assert times == []
        return
    lost_times = [frame.t_s for frame, update in zip(frames[1:], updates) if update.state == LOST]
    assert times[0] == lost_times[0]
    assert len(times) >= 2
    assert all(later - earlier >= timeout - 1e-9 for earlier, later in zip(times, times[1:]))
    assert all(update.state == LOST for update in updates if update.reground)


def test_stop_ends_following_for_good(frames):
    segmenter = CountingSegmenter(ColorSegmenter())
    session = FollowSession(follow_config(mode="redetect"), segmenter, frames[0].rgb,
                            [frames[0].masks["red_box"]], "red", 0.0)
    assert session.update(frames[1].rgb, 0.1).state == TRACKING
    stopped = session.stop()
    assert stopped.state == STOPPED and stopped.objects == [] and stopped.error is None
    calls = segmenter.calls
    again = session.update(frames[2].rgb, 0.2)
    assert again.state == STOPPED and session.state == STOPPED and segmenter.calls == calls
    assert session.stop().state == STOPPED


def test_redetect_every_n_frames_in_flow_mode(frames):
    # The first followed frame is re-detected (it learns the look-alikes), then every 4th.
    segmenter = CountingSegmenter(ColorSegmenter())
    session = FollowSession(follow_config(redetect_every=4), segmenter, frames[0].rgb,
                            [frames[0].masks["red_box"]], "red", 0.0)
    sources = [session.update(frames[0].rgb, 0.1 * i).source for i in range(1, 13)]
    assert sources == ["redetect", "flow", "flow", "flow"] * 3
    assert segmenter.calls == 3


@pytest.mark.parametrize("every", [0, 50])
def test_flow_masks_are_confirmed_before_lost_timeout_runs_out(frames, every):
    # A sparse schedule (or none): a re-detection still comes on the frame where the flow mask
    # would have gone lost_timeout_s unconfirmed, so a present object is shown on every frame.
    segmenter = CountingSegmenter(ColorSegmenter())
    session = FollowSession(follow_config(redetect_every=every, lost_timeout_s=0.5), segmenter,
                            frames[0].rgb, [frames[0].masks["red_box"]], "red", 0.0)
    updates = [session.update(frame.rgb, frame.t_s) for frame in frames[1:21]]
    assert all(u.state == TRACKING and len(u.objects) == 1 for u in updates)
    redetected = [frame.t_s for frame, u in zip(frames[1:], updates) if u.source == "redetect"]
    assert redetected[0] == pytest.approx(0.1)  # the first followed frame
    gaps = np.diff([0.0] + redetected)
    assert gaps.max() <= 0.5 + 1e-9 and len(redetected) == segmenter.calls


def test_a_low_scoring_detection_does_not_make_flow_redetect_every_frame(frames):
    # Re-detection on a drop is relative to the confidence at the last detection, so a detector
    # that scores its masks 0.45 still re-detects only every redetect_every frames.
    image = frames[0].rgb
    box = (300, 200, 360, 260, 0.45)
    segmenter = BoxSegmenter({"cup": [box]})
    mask = np.zeros(image.shape[:2], bool)
    mask[200:260, 300:360] = True
    session = FollowSession(follow_config(redetect_every=4), segmenter, image, [mask], "cup", 0.0)
    updates = [session.update(image, 0.1 * i) for i in range(1, 13)]
    assert len(segmenter.calls) == 3
    assert updates[-1].objects[0].confidence == pytest.approx(0.45)


def test_flow_without_a_segmenter_or_prompt_runs_flow_only(frames):
    for segmenter, prompt in ((None, "red"), (ColorSegmenter(), None), (ColorSegmenter(), "  ")):
        session = FollowSession(follow_config(redetect_every=2), segmenter, frames[0].rgb,
                                [frames[0].masks["red_box"]], prompt, 0.0)
        updates = [session.update(frame.rgb, frame.t_s) for frame in frames[1:6]]
        assert {u.source for u in updates} == {"flow"}
        assert iou(updates[-1].objects[0].mask, frames[5].masks["red_box"]) >= 0.85


def test_back_to_tracking_when_the_object_reappears():
    image = np.zeros((100, 120, 3), np.uint8)
    segmenter = BoxSegmenter({"cup": [(20, 20, 40, 40, 0.9)]})
    first = np.zeros((100, 120), bool)
    first[20:40, 20:40] = True
    session = FollowSession(follow_config(mode="redetect", lost_timeout_s=0.2), segmenter,
                            image, [first], "cup", 0.0)
    assert session.update(image, 0.1).state == TRACKING
    segmenter.boxes_by_phrase["cup"] = []
    assert session.update(image, 0.2).state == TRACKING  # unseen for 0.1 s only
    assert session.update(image, 0.35).state == LOST
    segmenter.boxes_by_phrase["cup"] = [(22, 21, 42, 41, 0.9)]
    update = session.update(image, 0.4)
    assert update.state == TRACKING and update.objects[0].bbox == (22.0, 21.0, 42.0, 41.0)


# --- following through the grasp (GraspSequence: the object vanishes beside a look-alike) -------

@pytest.fixture(scope="module")
def grasp_frames():
    return list(GraspSequence())


@pytest.mark.parametrize("mode", ["flow", "redetect"])
def test_an_object_taken_in_place_goes_lost_never_to_its_look_alike_and_comes_back(
        grasp_frames, mode):
    sequence = GraspSequence()
    config = follow_config(mode=mode, lost_timeout_s=1.0, redetect_every=10)
    first = grasp_frames[0]
    session = FollowSession(config, ColorSegmenter(), first.rgb, [first.masks[GRASPED_OBJECT]],
                            "blue", first.t_s)
    timeline = []
    for frame in grasp_frames[1:]:
        update = session.update(frame.rgb, frame.t_s)
        timeline.append((frame, update, update.objects[0].mask if update.objects else None))
    removed_s = grasp_frames[sequence.removed_at].t_s
    back_s = grasp_frames[sequence.put_back_at].t_s
    period_s = (config.redetect_every if mode == "flow" else 1) / sequence.fps
    bound_s = removed_s + config.lost_timeout_s + period_s

    # Never the look-alike's mask, on any frame.
    assert max(iou(mask, frame.masks[LOOK_ALIKE]) for frame, _, mask in timeline
               if mask is not None) <= 0.02
    # On the table: tracked, shown, on the object.
    before = [(frame, update, mask) for frame, update, mask in timeline if frame.t_s < removed_s]
    assert all(update.state == TRACKING and mask is not None for _, update, mask in before)
    assert np.mean([iou(mask, frame.masks[GRASPED_OBJECT]) for frame, _, mask in before]) >= 0.9
    # Taken: lost within lost_timeout_s plus one re-detection period, and until put back; an
    # unconfirmed flow mask is not shown lost_timeout_s after the removal.
    away = [(frame, update, mask) for frame, update, mask in timeline
            if removed_s <= frame.t_s < back_s]
    lost_s = min(frame.t_s for frame, update, _ in away if update.state == LOST)
    assert lost_s <= bound_s + 1e-9, (mode, lost_s - removed_s)
    assert all(update.state == LOST for frame, update, _ in away if frame.t_s >= lost_s)
    assert all(mask is None for frame, _, mask in away
               if frame.t_s >= removed_s + config.lost_timeout_s - 1e-9)
    # Put back where it was: tracking again on that frame, on the object.
    after = [(frame, update, mask) for frame, update, mask in timeline if frame.t_s >= back_s]
    assert all(update.state == TRACKING and mask is not None for _, update, mask in after)
    assert np.mean([iou(mask, frame.masks[GRASPED_OBJECT]) for frame, _, mask in after]) >= 0.9


def test_a_flow_mask_that_no_redetection_confirms_stops_counting_as_seen():
    # A blank image: flow keeps the mask where it is whatever the detector says. The detector
    # stops finding the object at 0.4 s (its look-alike stays); the next scheduled re-detection
    # (0.6 s) misses it: its flow mask shows until lost_timeout_s after the last confirmation
    # (0.1 s), and the session is lost lost_timeout_s after the last frame before that miss.
    image = np.zeros((100, 120, 3), np.uint8)
    segmenter = BoxSegmenter({"cup": [(20, 30, 40, 50, 0.9), (46, 30, 66, 50, 0.9)]})
    first = np.zeros((100, 120), bool)
    first[30:50, 20:40] = True
    config = follow_config(mode="flow", redetect_every=5, lost_timeout_s=0.5)
    session = FollowSession(config, segmenter, image, [first], "cup", 0.0)
    timeline = []
    for step in range(1, 16):
        now = round(0.1 * step, 3)
        if now >= 0.4:
            segmenter.boxes_by_phrase["cup"] = [(46, 30, 66, 50, 0.9)]
        update = session.update(image, now)
        timeline.append((now, update.state, update.source,
                         update.objects[0].bbox if update.objects else None))
    assert [(t, source) for t, _, source, _ in timeline if source == "redetect"][:2] == \
        [(0.1, "redetect"), (0.6, "redetect")]
    assert [t for t, _, _, bbox in timeline if bbox is not None] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert all(bbox in (None, (20.0, 30.0, 40.0, 50.0)) for _, _, _, bbox in timeline)
    assert [t for t, state, _, _ in timeline if state == LOST][0] == 1.0  # 0.5 + 0.5


def test_a_look_alike_sliding_over_the_vanished_objects_place_is_not_taken_for_it():
    # The object (x 20..40) is taken; its look-alike (x 46..66, within the shift gate) then
    # slides onto half of the object's place (IoU 0.33 with it, above match_min_iou): it keeps
    # its own identity, the object stays unseen and goes lost.
    image = np.zeros((100, 120, 3), np.uint8)
    segmenter = BoxSegmenter({"cup": [(20, 30, 40, 50, 0.9), (46, 30, 66, 50, 0.9)]})
    first = np.zeros((100, 120), bool)
    first[30:50, 20:40] = True
    config = follow_config(mode="redetect", lost_timeout_s=0.3, match_max_shift=0.3)
    session = FollowSession(config, segmenter, image, [first], "cup", 0.0)
    assert session.update(image, 0.1).objects[0].bbox == (20.0, 30.0, 40.0, 50.0)
    states = []
    for step, x0 in enumerate(range(46, 29, -4)):
        segmenter.boxes_by_phrase["cup"] = [(x0, 30, x0 + 20, 50, 0.9)]
        update = session.update(image, 0.2 + 0.1 * step)
        assert update.objects == []
        states.append(update.state)
    assert states == [TRACKING, TRACKING, LOST, LOST, LOST]


# --- bad input ---------------------------------------------------------------------------------

def test_bad_input_at_start_raises_a_clear_follow_error(frames):
    rgb, mask = frames[0].rgb, frames[0].masks["red_box"]
    config = follow_config()
    cases = [
        ([], rgb, "red", config, "no masks"),
        ([np.zeros_like(mask)], rgb, "red", config, "mask 0 is empty"),
        ([mask[:100]], rgb, "red", config, "mask 0 has shape"),
        ([mask], rgb[..., 0], "red", config, "RGB"),
        ([mask], rgb.astype(np.float32), "red", config, "RGB"),
        ([mask], "not an image", "red", config, "not a numpy array"),
        ([mask], rgb, None, follow_config(mode="redetect"), "text prompt"),
    ]
    with pytest.raises(FollowError, match="finite"):
        FollowSession(config, ColorSegmenter(), rgb, [mask], "red", float("inf"))
    for masks, frame, prompt, cfg, message in cases:
        with pytest.raises(FollowError, match=message):
            FollowSession(cfg, ColorSegmenter(), frame, masks, prompt, 0.0)
    with pytest.raises(FollowError, match="text"):
        FollowSession(follow_config(mode="redetect"), None, rgb, [mask], "red", 0.0)


@pytest.mark.parametrize("mode", ["flow", "redetect"])
def test_frame_size_change_mid_follow_stops_with_an_error(frames, mode):
    session = FollowSession(follow_config(mode=mode), ColorSegmenter(), frames[0].rgb,
                            [frames[0].masks["red_box"]], "red", 0.0)
    assert session.update(frames[1].rgb, 0.1).state == TRACKING
    smaller = np.ascontiguousarray(frames[2].rgb[:240, :320])
    update = session.update(smaller, 0.2)
    assert update.state == STOPPED and update.objects == []
    assert "frame size changed from 640x480 to 320x240" in update.error
    later = session.update(frames[3].rgb, 0.3)
    assert later.state == STOPPED and later.error == update.error


def test_a_bad_frame_or_a_failing_segmenter_stops_without_raising(frames):
    session = FollowSession(follow_config(), ColorSegmenter(), frames[0].rgb,
                            [frames[0].masks["red_box"]], "red", 0.0)
    update = session.update(frames[1].rgb[..., :2], 0.1)
    assert update.state == STOPPED and "RGB" in update.error

    session = FollowSession(follow_config(), ColorSegmenter(), frames[0].rgb,
                            [frames[0].masks["red_box"]], "red", 0.0)
    update = session.update(frames[1].rgb, float("nan"))
    assert update.state == STOPPED and "finite" in update.error

    session = FollowSession(follow_config(mode="redetect"), RaisingSegmenter(), frames[0].rgb,
                            [frames[0].masks["red_box"]], "red", 0.0)
    update = session.update(frames[1].rgb, 0.1)
    assert update.state == STOPPED and "out of memory" in update.error


def test_followed_masks_are_not_the_callers_arrays(frames):
    mask = frames[0].masks["red_box"].copy()
    session = FollowSession(follow_config(), None, frames[0].rgb, [mask], None, 0.0)
    mask[:] = False  # the caller reuses its buffer
    assert session.update(frames[1].rgb, 0.1).objects



# --- catching up after a slow answer (CONTRACTS §11) -------------------------------------------
def _scene_with_box(box: tuple[int, int, int, int]) -> np.ndarray:
    frame = np.full((120, 160, 3), 90, np.uint8)
    x0, y0, x1, y1 = box
    frame[y0:y1, x0:x1] = (30, 60, 220)
    return frame


ANSWER_BOX = (20, 30, 50, 60)
MOVED_BOX = (110, 60, 140, 90)  # far beyond follow.match_max_shift of where the answer saw it


def _answer_mask() -> np.ndarray:
    mask = np.zeros((120, 160), bool)
    x0, y0, x1, y1 = ANSWER_BOX
    mask[y0:y1, x0:x1] = True
    return mask


@pytest.mark.parametrize("mode", ["flow", "redetect"])
def test_a_slow_answer_is_not_re_published_as_current(mode):
    """The answer's frame is 3 s old when following starts and the object moved away meanwhile:
    the first update is lost at once, never the answer's mask (moved by flow across 3 s) shown
    as where the object is now. Before the catch-up, flow mode showed it, at half confidence."""
    segmenter = BoxSegmenter({"blue": [(*MOVED_BOX, 0.9)]})
    config = follow_config(mode=mode, lost_timeout_s=5.0)
    session = FollowSession(config, segmenter, _scene_with_box(ANSWER_BOX), [_answer_mask()],
                            "blue", now_s=100.0)
    update = session.update(_scene_with_box(MOVED_BOX), 103.0)
    assert update.state == LOST and update.objects == [], update


def test_a_slow_answer_is_found_again_where_it_is_now():
    """Moved a little in the 3 s: re-detected on the new frame (no flow across the gap), at its
    new place, tracking."""
    moved = (26, 34, 56, 64)
    segmenter = BoxSegmenter({"blue": [(*moved, 0.9)]})
    session = FollowSession(follow_config(mode="flow"), segmenter,
                            _scene_with_box(ANSWER_BOX), [_answer_mask()], "blue", now_s=100.0)
    update = session.update(_scene_with_box(moved), 103.0)
    assert update.state == TRACKING and update.source == "redetect"
    (obj,) = update.objects
    assert obj.bbox == (26.0, 34.0, 56.0, 64.0)
    assert segmenter.calls == ["blue"]
    later = session.update(_scene_with_box(moved), 103.033)  # then flow as usual
    assert later.state == TRACKING and later.source == "flow"


def test_a_slow_answer_without_a_segmenter_is_lost():
    """Flow alone cannot bridge seconds: lost, not the old mask."""
    session = FollowSession(follow_config(mode="flow", lost_timeout_s=5.0), None,
                            _scene_with_box(ANSWER_BOX), [_answer_mask()], None, now_s=100.0)
    update = session.update(_scene_with_box(MOVED_BOX), 102.0)
    assert update.state == LOST and update.objects == []
    fast = FollowSession(follow_config(mode="flow", lost_timeout_s=5.0), None,
                         _scene_with_box(ANSWER_BOX), [_answer_mask()], None, now_s=100.0)
    assert fast.update(_scene_with_box(ANSWER_BOX), 100.033).state == TRACKING


def test_a_followed_refinement_catches_up_whatever_its_duration():
    """A refinement is answered on the frame of the answer it corrects (minutes old, however
    fast the refinement): told so (``catch_up``), the first update re-detects, never flows."""
    segmenter = BoxSegmenter({"blue": [(*MOVED_BOX, 0.9)]})
    session = FollowSession(follow_config(mode="flow", lost_timeout_s=5.0), segmenter,
                            _scene_with_box(ANSWER_BOX), [_answer_mask()], "blue", now_s=100.0,
                            catch_up=True)
    update = session.update(_scene_with_box(MOVED_BOX), 100.04)
    assert update.state == LOST and update.objects == []
