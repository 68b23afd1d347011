"""FollowSession: one followed answer, frame after frame (tracking -> lost -> stopped).

States:
- ``tracking``: at least one followed object was seen within ``follow.lost_timeout_s``. The
  update's ``objects`` are the objects seen on this frame (``FollowedObject.index`` keeps each
  one's place among the masks the session started with).
- ``lost``: no followed object seen for ``follow.lost_timeout_s`` (``objects`` empty). Following
  goes on: an object re-detected where it was last seen brings the session back to ``tracking``.
  With ``follow.reground_on_lost`` the update asks the caller to re-run the query
  (``reground=True``) on the first lost frame and then at most once per ``lost_timeout_s``.
- ``stopped``: ``stop()`` was called, or the session met bad input it cannot follow through (the
  frame size changed, a frame that is not RGB uint8, a time that is not a finite number, the
  segmenter failed); ``error`` says which.
  Every later ``update`` answers ``stopped`` again without work.

Modes (``follow.mode``):
- ``flow``: ``FlowTracker`` on every frame; the segmenter re-detects with the query's text
  prompt (on the same frame, after flow) on the first followed frame, then every
  ``follow.redetect_every`` frames; on the frame where flow brought an object's confidence below
  ``follow.redetect_on_drop`` of its value at the last detection, or lost its mask; on the frame
  where a flow mask would otherwise go ``follow.lost_timeout_s`` without a confirmation; and on
  every frame while an object is unseen or unconfirmed. Matched detections replace the flow masks
  (drift correction).
  Without a segmenter or a text prompt, flow runs alone and its masks count as seen.
- ``redetect``: the segmenter on every frame, associated to where each object was last seen.

What counts as seen (the lost clock): a detection matched to the object; in ``flow`` mode with a
segmenter, also its flow mask, while the last detection that matched it (the answer counts) is
less than ``follow.lost_timeout_s`` old and no re-detection since has failed to find it. A
re-detection that does not find the object (taken by the gripper, covered) leaves its flow mask
unconfirmed: it still shows, at half its confidence per miss, until ``lost_timeout_s`` after the
last confirmation, but the lost clock runs from the last frame before that miss. So an object
that vanishes in place goes ``lost`` within ``lost_timeout_s`` plus one re-detection period.
The unconfirmed flow mask is kept (moved by flow, not shown) as the place to look for the object:
it is found again when it reappears there.

Look-alikes: the detections not matched to a followed object are remembered (at most
``MAX_LOOKALIKES``, nearest first, moved rigidly by the median flow under them in ``flow`` mode,
forgotten after ``lost_timeout_s`` without a detection: ``lookalikes.py``) and compete in the
association (``redetect.py``), so a same-coloured neighbour never takes over the identity of an
object that vanished beside it; flow masks also lose the look-alikes' pixels.

Catching up: when the first followed frame is more than ``MAX_FLOW_GAP_S`` newer than the answer's
frame (a real model answers in seconds), flow is not run across the gap: the segmenter
re-detects the objects on the new frame (associated to the answer's masks) and an object it does
not find is not shown; when none is found the update is ``lost`` at once (never the answer's old
mask re-published as current). Without a segmenter or a text prompt nothing can find them: lost.
``catch_up=True`` does so whatever the session clock says: the answer's frame is known to be older
than its query (a refinement is answered on the frame of the answer it corrects).

Not thread-safe: call from one worker thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from sam3_agent_ros.config import FollowConfig
from sam3_agent_ros.follow.flow import FlowTracker
from sam3_agent_ros.follow.lookalikes import LookAlike, remembered, without
from sam3_agent_ros.follow.redetect import Gates, Redetection, RedetectTracker
from sam3_agent_ros.follow.tracker import MISSING, Estimate, centroid, mask_area
from sam3_agent_ros.follow.types import (
    LOST,
    SOURCE_FLOW,
    SOURCE_REDETECT,
    STOPPED,
    TRACKING,
    FollowedObject,
    FollowError,
    FollowUpdate,
    starting_source,
)

# A mask with fewer pixels counts as out of view (a sliver flow left at the image border).
MIN_OBJECT_PIXELS = 16
# Flow moves masks from one frame to the next; across a longer gap (the first followed frame
# after a slow answer: the answer's frame is seconds old) it cannot bridge the motion, so the
# objects are found again by re-detection alone, and an object not found is lost at once.
MAX_FLOW_GAP_S = 0.5
# Confidence kept by a flow mask that a re-detection did not confirm.
UNCONFIRMED_FACTOR = 0.5


def check_frame(frame_rgb: object) -> tuple[int, int]:
    """(H, W) of an RGB uint8 frame, or ``FollowError`` saying what is wrong with it."""
    if not isinstance(frame_rgb, np.ndarray):
        raise FollowError(f"frame is a {type(frame_rgb).__name__}, not a numpy array")
    if frame_rgb.ndim != 3 or frame_rgb.shape[2] != 3 or frame_rgb.dtype != np.uint8:
        raise FollowError(f"frame must be RGB (H, W, 3) uint8, got {frame_rgb.shape} "
                          f"{frame_rgb.dtype}")
    if frame_rgb.shape[0] < 2 or frame_rgb.shape[1] < 2:
        raise FollowError(f"frame {frame_rgb.shape[1]}x{frame_rgb.shape[0]} is too small")
    return int(frame_rgb.shape[0]), int(frame_rgb.shape[1])


def _check_masks(masks: Sequence[np.ndarray], shape: tuple[int, int]) -> list[np.ndarray]:
    if masks is None or len(masks) == 0:
        raise FollowError("nothing to follow: the answer has no masks")
    checked = []
    for index, mask in enumerate(masks):
        array = np.asarray(mask)
        if array.shape != shape:
            raise FollowError(f"mask {index} has shape {array.shape}, the frame is {shape}")
        array = np.ascontiguousarray(array, dtype=bool)
        if mask_area(array) == 0:
            raise FollowError(f"mask {index} is empty: nothing to follow")
        checked.append(array.copy())
    return checked


def _is_time(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def followed_object(estimate: Estimate, index: int) -> FollowedObject:
    """A seen estimate (a non-empty mask) as the update's object ``index``."""
    mask, box = estimate.mask, estimate.pixel_box()
    middle = centroid(mask, box) if mask is not None and box is not None else None
    if mask is None or box is None or middle is None:
        raise FollowError(f"object {index} is not seen: it has no mask to show")
    x0, y0, x1, y1 = box
    return FollowedObject(mask=mask, bbox=(float(x0), float(y0), float(x1), float(y1)),
                          centroid=(float(middle[0]), float(middle[1])),
                          confidence=round(float(estimate.confidence), 4), index=index)


@dataclass
class _Track:
    """What a session knows of one followed object.

    ``estimate``: where the object is now (its mask may be kept without being shown: an
    unconfirmed flow mask past ``lost_timeout_s``); ``last_mask``: where it was last shown;
    ``last_seen_s``: the lost clock; ``confirmed_s``: the last detection that matched it;
    ``doubted``: a re-detection since ``confirmed_s`` did not find it; ``seen``: shown on the
    last frame.
    """

    estimate: Estimate
    last_mask: np.ndarray
    last_seen_s: float
    confirmed_s: float
    doubted: bool = False
    seen: bool = True

    def prediction(self) -> Estimate:
        """Where to look for the object: its estimate, or where it was last shown."""
        if self.estimate.seen:
            return self.estimate
        return Estimate(mask=self.last_mask, confidence=0.0)


class FollowSession:
    """One followed answer. Raises ``FollowError`` at construction on unusable input (no masks,
    an empty mask, a mask or frame of the wrong shape, ``redetect`` mode without a segmenter or a
    text prompt); after that it never raises: problems end in ``stopped`` with ``error``."""

    def __init__(self, config: FollowConfig, segmenter, first_frame_rgb: np.ndarray,
                 masks: list[np.ndarray], text_prompt: str | None, now_s: float,
                 catch_up: bool = False):
        self._config = config
        if not _is_time(now_s):
            raise FollowError(f"now_s must be a finite number of seconds, got {now_s!r}")
        self._shape = check_frame(first_frame_rgb)
        self._tracks = [_Track(estimate=Estimate(mask=m, confidence=1.0), last_mask=m,
                               last_seen_s=float(now_s), confirmed_s=float(now_s))
                        for m in _check_masks(masks, self._shape)]
        prompt = (text_prompt or "").strip()
        can_redetect = segmenter is not None and bool(prompt)
        if config.mode == "redetect" and not can_redetect:
            raise FollowError("follow.mode 'redetect' needs the segmenter and the query's text "
                              "prompt")
        gates = Gates(min_iou=config.match_min_iou, max_shift=config.match_max_shift)
        self._redetector = (RedetectTracker(segmenter, prompt, gates)
                            if can_redetect else None)
        self._flow: FlowTracker | None = None
        if config.mode == "flow":
            self._flow = FlowTracker(config.flow_max_side)
            self._flow.reset(first_frame_rgb)
        self._lookalikes: list[LookAlike] = []
        self._since_redetect: int | None = None  # updates since the last re-detection (None:
        # none yet; the first followed frame is re-detected, which also finds the look-alikes)
        self._source = starting_source(config.mode)
        self._stopped = False
        self._error: str | None = None
        self._last_reground_s: float | None = None
        self._state = TRACKING
        self._started_s = float(now_s)  # the answer's frame
        self._old_answer = bool(catch_up)  # the answer's frame is known to be old (a refinement)
        self._lost_now = False  # the catch-up frame found no object: lost at once

    @property
    def state(self) -> str:
        return STOPPED if self._stopped else self._state

    @property
    def mode(self) -> str:
        return self._config.mode

    @property
    def error(self) -> str | None:
        return self._error

    def stop(self, error: str | None = None) -> FollowUpdate:
        """End following (idempotent); ``error`` records why, when it was not asked for."""
        if not self._stopped:
            self._stopped = True
            self._error = error
        return FollowUpdate(state=STOPPED, source=self._source, objects=[], reground=False,
                            error=self._error)

    def update(self, frame_rgb: np.ndarray, now_s: float) -> FollowUpdate:
        """Follow the objects onto ``frame_rgb`` (taken at ``now_s`` seconds)."""
        if self._stopped:
            return self.stop()
        if not _is_time(now_s):
            return self.stop(f"follow stopped: now_s must be a finite number of seconds, got "
                             f"{now_s!r}")
        try:
            shape = check_frame(frame_rgb)
        except FollowError as exc:
            return self.stop(f"follow stopped: {exc}")
        if shape != self._shape:
            return self.stop(f"follow stopped: the frame size changed from "
                             f"{self._shape[1]}x{self._shape[0]} to {shape[1]}x{shape[0]}")
        now_s = float(now_s)
        try:
            source = self._track(frame_rgb, now_s)
        except Exception as exc:  # noqa: BLE001 (a tracker failure must not kill the caller)
            return self.stop(f"follow stopped: {self._source} failed: "
                             f"{type(exc).__name__}: {exc}")
        self._source = source
        state = self._state = LOST if self._lost_now else self._state_at(now_s)
        self._lost_now = False
        reground = False
        if state == LOST and self._config.reground_on_lost and (
                self._last_reground_s is None
                or now_s - self._last_reground_s >= self._config.lost_timeout_s):
            reground = True
            self._last_reground_s = now_s
        objects = [followed_object(t.estimate, i) for i, t in enumerate(self._tracks) if t.seen]
        return FollowUpdate(state=state, source=source, objects=objects, reground=reground)

    def _state_at(self, now_s: float) -> str:
        unseen_for = now_s - max(t.last_seen_s for t in self._tracks)
        return LOST if unseen_for >= self._config.lost_timeout_s else TRACKING

    def _track(self, frame_rgb: np.ndarray, now_s: float) -> str:
        """Move every track (and look-alike) onto the frame; the update's source."""
        if self._since_redetect is None and (
                self._old_answer or now_s - self._started_s > MAX_FLOW_GAP_S):
            return self._catch_up(frame_rgb, now_s)
        if self._since_redetect is not None:
            self._since_redetect += 1
        if self._flow is None:  # redetect mode
            self._apply_redetection(self._redetect(frame_rgb), now_s)
            return SOURCE_REDETECT
        moved = self._flow.track(frame_rgb, [t.estimate for t in self._tracks])
        self._lookalikes = [a.moved(*self._flow.displacement(a.box())) for a in self._lookalikes]
        self._lookalikes = [a for a in self._lookalikes if a.placed(self._shape) is not None]
        for track, estimate in zip(self._tracks, moved):
            track.estimate = _visible(self._without_lookalikes(estimate))
        if self._redetector is None:  # flow alone: nothing can confirm, flow masks count
            for track in self._tracks:
                self._show(track, track.estimate.seen, now_s)
            return SOURCE_FLOW
        if self._redetect_due(now_s):
            self._apply_redetection(self._redetect(frame_rgb), now_s)
            return SOURCE_REDETECT
        for track in self._tracks:
            self._show_flow(track, now_s)
        return SOURCE_FLOW

    def _catch_up(self, frame_rgb: np.ndarray, now_s: float) -> str:
        """The first followed frame, too long after the answer's for flow (see the module's
        docstring): re-detection alone; an object it misses is not shown, none found: lost."""
        if self._flow is not None:
            self._flow.reset(frame_rgb)  # flow starts again from this frame
        if self._redetector is None:
            for track in self._tracks:
                track.estimate = MISSING
                self._show(track, False, now_s)
            self._lost_now = True
            return SOURCE_FLOW
        found = self._redetect(frame_rgb)
        self._remember_lookalikes(found, now_s)
        for track, detected in zip(self._tracks, found.objects):
            detected = _visible(detected)
            if detected.seen:
                track.estimate, track.confirmed_s, track.doubted = detected, now_s, False
                self._show(track, True, now_s)
            else:
                track.estimate = MISSING
                self._show(track, False, now_s)
        self._lost_now = not any(t.seen for t in self._tracks)
        return SOURCE_REDETECT

    def _without_lookalikes(self, estimate: Estimate) -> Estimate:
        """A flow mask less the pixels of the look-alikes: where an object vanished, flow can
        pull its mask towards the nearest similar edges, a neighbour's."""
        if not estimate.seen or not self._lookalikes:
            return estimate
        placed = [a.placed(self._shape) for a in self._lookalikes]
        return without(estimate, [p for p in placed if p is not None])

    def _redetect_due(self, now_s: float) -> bool:
        """Whether the segmenter runs on this frame (after flow moved the masks onto it)."""
        every, config = self._config.redetect_every, self._config
        if self._since_redetect is None or (every > 0 and self._since_redetect >= every):
            return True
        return any(not t.estimate.seen or t.doubted  # to find it again
                   or t.estimate.trust < config.redetect_on_drop  # flow is losing it
                   or now_s - t.confirmed_s >= config.lost_timeout_s  # before it goes unseen
                   for t in self._tracks)

    def _redetect(self, frame_rgb: np.ndarray) -> Redetection:
        if self._redetector is None:  # never: only called with a segmenter and a prompt
            raise FollowError("re-detection needs the segmenter and the query's text prompt")
        self._since_redetect = 0
        return self._redetector.redetect(frame_rgb, [t.prediction() for t in self._tracks],
                                         [a.mask(self._shape) for a in self._lookalikes])

    def _apply_redetection(self, found: Redetection, now_s: float) -> None:
        self._remember_lookalikes(found, now_s)
        for track, detected in zip(self._tracks, found.objects):
            detected = _visible(detected)
            if detected.seen:
                track.estimate, track.confirmed_s, track.doubted = detected, now_s, False
                self._show(track, True, now_s)
                continue
            flowed = (_visible(self._without_lookalikes(track.estimate))
                      if self._flow is not None else MISSING)
            if flowed.seen:  # an unconfirmed flow mask: kept, at a lower confidence
                track.estimate = Estimate(mask=flowed.mask,
                                          confidence=flowed.confidence * UNCONFIRMED_FACTOR,
                                          trust=flowed.trust * UNCONFIRMED_FACTOR)
                track.doubted = True
                self._show_flow(track, now_s)
            else:
                track.estimate = MISSING
                self._show(track, False, now_s)

    def _show_flow(self, track: _Track, now_s: float) -> None:
        """A flow mask shows while its last confirmation is under ``lost_timeout_s`` old; it
        moves the lost clock only while no re-detection has missed the object since."""
        shown = track.estimate.seen and now_s - track.confirmed_s < self._config.lost_timeout_s
        self._show(track, shown, now_s, clock=not track.doubted)

    @staticmethod
    def _show(track: _Track, shown: bool, now_s: float, clock: bool = True) -> None:
        track.seen = shown
        if shown and track.estimate.mask is not None:  # shown: seen, so it has a mask
            track.last_mask = track.estimate.mask
            if clock:
                track.last_seen_s = now_s

    def _remember_lookalikes(self, found: Redetection, now_s: float) -> None:
        predicted = (t.prediction().mask for t in self._tracks)
        anchors = [centroid(mask) for mask in predicted if mask is not None]
        self._lookalikes = remembered(self._lookalikes, found, now_s,
                                      self._config.lost_timeout_s, anchors)

def _visible(estimate: Estimate) -> Estimate:
    """The estimate (with its box), or ``MISSING`` when its mask is too small to be an object in
    view."""
    box = estimate.pixel_box()
    if box is None or estimate.mask is None or mask_area(estimate.mask, box) < MIN_OBJECT_PIXELS:
        return MISSING
    return estimate if estimate.box is not None else replace(estimate, box=box)
