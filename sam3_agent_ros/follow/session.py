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
- ``flow``: ``FlowTracker`` on every frame; every ``follow.redetect_every`` frames, and on the next
  frame after flow brought an object's confidence below ``follow.redetect_on_drop`` of its value
  at the last detection (or it went out of view), the segmenter re-detects with the query's text
  prompt and matched detections replace the flow masks (drift correction). A flow mask the
  detector cannot confirm keeps half its confidence (and trust).
  Without a segmenter or a text prompt, flow runs alone.
- ``redetect``: the segmenter on every frame, associated to where each object was last seen.

Not thread-safe: call from one worker thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sam3_agent_ros.config import FollowConfig
from sam3_agent_ros.follow.flow import FlowTracker
from sam3_agent_ros.follow.redetect import Gates, RedetectTracker
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
from sam3_agent_ros.masks import pixel_box

# A mask with fewer pixels counts as out of view (a sliver flow left at the image border).
MIN_OBJECT_PIXELS = 16
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
    x0, y0, x1, y1 = pixel_box(estimate.mask)
    return FollowedObject(mask=estimate.mask, bbox=(float(x0), float(y0), float(x1), float(y1)),
                          centroid=tuple(float(c) for c in centroid(estimate.mask)),
                          confidence=round(float(estimate.confidence), 4), index=index)


class FollowSession:
    """One followed answer. Raises ``FollowError`` at construction on unusable input (no masks,
    an empty mask, a mask or frame of the wrong shape, ``redetect`` mode without a segmenter or a
    text prompt); after that it never raises: problems end in ``stopped`` with ``error``."""

    def __init__(self, config: FollowConfig, segmenter, first_frame_rgb: np.ndarray,
                 masks: list[np.ndarray], text_prompt: str | None, now_s: float):
        self._config = config
        if not _is_time(now_s):
            raise FollowError(f"now_s must be a finite number of seconds, got {now_s!r}")
        self._shape = check_frame(first_frame_rgb)
        self._estimates = [Estimate(mask=m, confidence=1.0)
                           for m in _check_masks(masks, self._shape)]
        self._last_masks = [e.mask for e in self._estimates]
        self._last_seen_s = [float(now_s)] * len(self._estimates)
        can_redetect = segmenter is not None and bool(text_prompt and text_prompt.strip())
        if config.mode == "redetect" and not can_redetect:
            raise FollowError("follow.mode 'redetect' needs the segmenter and the query's text "
                              "prompt")
        gates = Gates(min_iou=config.match_min_iou, max_shift=config.match_max_shift)
        self._redetector = (RedetectTracker(segmenter, text_prompt.strip(), gates)
                            if can_redetect else None)
        self._flow: FlowTracker | None = None
        if config.mode == "flow":
            self._flow = FlowTracker(config.flow_max_side)
            self._flow.reset(first_frame_rgb)
        self._frames = 0
        self._redetect_next = False
        self._source = starting_source(config.mode)
        self._stopped = False
        self._error: str | None = None
        self._last_reground_s: float | None = None
        self._state = TRACKING

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
        try:
            estimates, source = self._track(frame_rgb)
        except Exception as exc:  # noqa: BLE001 (a tracker failure must not kill the caller)
            return self.stop(f"follow stopped: {self._source} failed: "
                             f"{type(exc).__name__}: {exc}")
        self._frames += 1
        self._source = source
        estimates = [e if e.seen and mask_area(e.mask) >= MIN_OBJECT_PIXELS else MISSING
                     for e in estimates]
        self._estimates = estimates
        for index, estimate in enumerate(estimates):
            if estimate.seen:
                self._last_seen_s[index] = float(now_s)
                self._last_masks[index] = estimate.mask
        self._redetect_next = any(not e.seen or e.trust < self._config.redetect_on_drop
                                  for e in estimates)
        state = self._state = self._state_at(float(now_s))
        reground = False
        if state == LOST and self._config.reground_on_lost and (
                self._last_reground_s is None
                or now_s - self._last_reground_s >= self._config.lost_timeout_s):
            reground = True
            self._last_reground_s = float(now_s)
        objects = [followed_object(e, i) for i, e in enumerate(estimates) if e.seen]
        return FollowUpdate(state=state, source=source, objects=objects, reground=reground)

    def _state_at(self, now_s: float) -> str:
        if any(e.seen for e in self._estimates):
            return TRACKING
        unseen_for = now_s - max(self._last_seen_s)
        return LOST if unseen_for >= self._config.lost_timeout_s else TRACKING

    def _predictions(self, estimates: Sequence[Estimate]) -> list[Estimate]:
        """Where to look for each object: its estimate, or where it was last seen."""
        return [e if e.seen else Estimate(mask=self._last_masks[i], confidence=0.0)
                for i, e in enumerate(estimates)]

    def _track(self, frame_rgb: np.ndarray) -> tuple[list[Estimate], str]:
        if self._flow is None:  # redetect mode
            return self._redetector.track(frame_rgb, self._predictions(self._estimates)), \
                SOURCE_REDETECT
        flowed = self._flow.track(frame_rgb, self._estimates)
        every = self._config.redetect_every
        due = self._redetect_next or (every > 0 and (self._frames + 1) % every == 0)
        if self._redetector is None or not due:
            return flowed, SOURCE_FLOW
        detected = self._redetector.track(frame_rgb, self._predictions(flowed))
        merged = [d if d.seen else
                  (Estimate(mask=f.mask, confidence=f.confidence * UNCONFIRMED_FACTOR,
                            trust=f.trust * UNCONFIRMED_FACTOR)
                   if f.seen else MISSING)
                  for d, f in zip(detected, flowed)]
        return merged, SOURCE_REDETECT
