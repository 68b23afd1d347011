"""The answers a later query may correct ("no, the other one"; interface §8c).

A refinement names an earlier answer by its query_id and is answered on that answer's frame,
seeing what it selected. ``AnswerStore`` keeps the last ``refine.keep_answers`` answers, each as
its frame and selected masks (``KeptAnswer``), and says why an id cannot be refined: unknown,
expired, or a query that ended without an answer. ``AnswerRecord`` is the pixel-free part (the
text the model is shown), also written into ``sam3-agent run --out`` (``answer_folder.py``).

Memory: one kept answer holds its frame (at 1080p 6.2 MB; at the 40 M ``max_image_pixels`` cap
120 MB) with its world (the depth frame bound to it, ``Frame.world``: the same 3D minutes later),
and its selected masks, bit-packed to their pixel boxes (``packed_mask.py``: at most an
eighth of the frame's pixel count in bytes each). The store holds at most ``keep`` answers and at
most ``max_bytes`` of frames and masks together (``refine.max_kept_mib``): the oldest expire
first, and an answer larger than the whole budget is not kept (its id says so). Answers on one
camera frame (a chain of refinements; queries that each decoded the same frame message) share one
kept copy of it, counted once. A chain of refinements keeps only the pixel-free records of the
answers it corrected (at most ``MAX_EARLIER``). Thread-safe.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sam3_agent_ros.core.packed_mask import PackedMask
from sam3_agent_ros.core.types import (
    Box,
    Frame,
    Mask,
    Point,
    QueryStatus,
    Result,
    float_box,
    float_point,
)
from sam3_agent_ros.core.untrusted_text import for_log

MAX_EARLIER = 3  # the earlier answers of a chain a refinement also shows (beyond the one refined)
MAX_REMEMBERED_IDS = 256  # expired or unanswered ids kept to say why they cannot be refined
ANSWERED = (QueryStatus.SUCCEEDED, QueryStatus.NO_MASK)


class RefineUnavailable(LookupError):
    """The named answer cannot be refined; the message is the query's ``failed`` reason."""


@dataclass(frozen=True)
class SelectedMask:
    """One mask of an earlier answer without its pixels: what the mask table shows."""

    score: float
    bbox: Box
    area: int
    centroid: Point

    @classmethod
    def of(cls, mask: Mask) -> SelectedMask:
        return cls(float(mask.score), float_box(mask.bbox), int(mask.area),
                   float_point(mask.centroid))

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> SelectedMask:
        """From a result JSON mask entry (``score``, ``bbox``, ``area``, ``centroid``)."""
        return cls(float(entry["score"]), float_box(entry["bbox"]), int(entry["area"]),
                   float_point(entry["centroid"]))


@dataclass(frozen=True)
class AnswerRecord:
    """What one query answered, without pixels."""

    query_id: str
    query: str
    status: str  # succeeded | no_mask (kept answers); failed | cancelled
    selected: tuple[SelectedMask, ...] = ()
    text_prompts: tuple[str, ...] = ()
    refines: str | None = None

    @classmethod
    def of(cls, result: Result) -> AnswerRecord:
        return cls(result.query_id, result.query, result.status.value,
                   tuple(SelectedMask.of(m) for m in result.masks), tuple(result.text_prompts),
                   result.refines)

    def to_json(self) -> dict[str, Any]:
        masks = [{"id": k + 1, "score": round(m.score, 4), "bbox": [round(v, 1) for v in m.bbox],
                  "area": m.area, "centroid": [round(v, 1) for v in m.centroid]}
                 for k, m in enumerate(self.selected)]
        return {"query_id": self.query_id, "query": self.query, "status": self.status,
                "masks": masks, "text_prompts": list(self.text_prompts), "refines": self.refines}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AnswerRecord:
        """From ``to_json`` or a result JSON (extra fields ignored); KeyError/TypeError/ValueError
        on a malformed one."""
        refines = data.get("refines")
        return cls(str(data["query_id"]), str(data["query"]), str(data["status"]),
                   tuple(SelectedMask.from_json(m) for m in data.get("masks") or ()),
                   tuple(str(p) for p in data.get("text_prompts") or ()),
                   None if refines is None else str(refines))


@dataclass(frozen=True)
class KeptAnswer:
    """An answer that can be refined: its record, the frame it was given on, its masks, and the
    records of the answers it corrected (oldest first, at most ``MAX_EARLIER``)."""

    record: AnswerRecord
    frame: Frame
    masks: tuple[Mask, ...]
    earlier: tuple[AnswerRecord, ...] = field(default=())

    @property
    def chain(self) -> tuple[AnswerRecord, ...]:
        """The answers a refinement of this one corrects, oldest first, this one last."""
        return (*self.earlier, self.record)

    @classmethod
    def of(cls, result: Result, refined: KeptAnswer | None = None) -> KeptAnswer:
        """``result`` kept; it must have its frame (``AnswerStore.remember`` checks)."""
        if result.frame is None:
            raise ValueError(f"query {for_log(result.query_id)}: a result without its frame "
                             "cannot be kept")
        earlier = refined.chain[-MAX_EARLIER:] if refined is not None else ()
        return cls(AnswerRecord.of(result), result.frame, tuple(result.masks), earlier)


@dataclass(frozen=True, eq=False)
class _Stored:
    """A kept answer as the store holds it: its masks packed (``KeptAnswer`` again on ``find``)."""

    record: AnswerRecord
    frame: Frame
    masks: tuple[PackedMask, ...]
    earlier: tuple[AnswerRecord, ...]

    @classmethod
    def of(cls, answer: KeptAnswer, frame: Frame | None = None) -> _Stored:
        """``answer`` packed; on ``frame`` (an equal one already kept) in place of its own."""
        return cls(answer.record, frame or answer.frame,
                   tuple(PackedMask.of(m) for m in answer.masks), answer.earlier)

    @property
    def mask_bytes(self) -> int:
        return sum(m.nbytes for m in self.masks)

    def unpack(self) -> KeptAnswer:
        return KeptAnswer(self.record, self.frame, tuple(m.unpack() for m in self.masks),
                          self.earlier)


def _same_frame(frame: Frame, kept: list[Frame]) -> Frame | None:
    """A frame of ``kept`` equal to ``frame`` (header and pixels), else None: queries answered on
    one camera frame (each decodes its own copy) then share one kept copy. The pixels of at most
    the kept bytes are compared, only where the header matches."""
    for other in kept:
        if other.image is frame.image:
            return other
        if other.world is None and frame.world is not None:
            continue  # the new copy keeps its world (depth, camera model, transform)
        if ((other.stamp_sec, other.stamp_nanosec, other.frame_id) == (
                frame.stamp_sec, frame.stamp_nanosec, frame.frame_id)
                and other.image.shape == frame.image.shape
                and other.image.dtype == frame.image.dtype
                and np.array_equal(other.image, frame.image)):
            return other
    return None


def frame_bytes(frame: Frame) -> int:
    """A kept frame's bytes: its pixels and what its world holds (its depth frame)."""
    return int(frame.image.nbytes) + int(getattr(frame.world, "nbytes", 0) or 0)


def _mib(count: int) -> str:
    return f"{count / 2**20:.1f} MiB"


class AnswerStore:
    """The last ``keep`` answers (``keep`` 0: none, refinement off), by query_id, within
    ``max_bytes`` of frames and masks (None: no byte bound; ``max_bytes_name`` is the parameter
    named in the reasons)."""

    def __init__(self, keep: int, max_bytes: int | None = None,
                 max_bytes_name: str = "refine.max_kept_mib"):
        self.keep = max(0, int(keep))
        self.max_bytes = None if max_bytes is None else max(0, int(max_bytes))
        self._max_bytes_name = max_bytes_name
        self._lock = threading.Lock()
        self._kept: collections.OrderedDict[str, _Stored] = collections.OrderedDict()
        self._gone: collections.OrderedDict[str, str] = collections.OrderedDict()  # id -> why
        self._frames: dict[int, tuple[int, int]] = {}  # id(frame.image) -> (answers, bytes)
        self._bytes = 0  # frames (each once) + packed masks of the kept answers

    @property
    def kept_bytes(self) -> int:
        """Bytes of the frames (each counted once) and packed masks kept now."""
        with self._lock:
            return self._bytes

    def remember(self, result: Result, refined: KeptAnswer | None = None) -> None:
        """Keep ``result`` if it answered (succeeded, no_mask, on a frame); a query that ended
        otherwise makes its id unrefinable (a newer query with an old id replaces it)."""
        if result.status in ANSWERED and result.frame is not None:
            self.add(KeptAnswer.of(result, refined))
        else:
            with self._lock:
                self._drop(result.query_id)
                self._note_gone(result.query_id, f"it ended {result.status.value} without an "
                                                 "answer")

    def add(self, answer: KeptAnswer) -> None:
        query_id = answer.record.query_id
        with self._lock:
            self._gone.pop(query_id, None)
            self._drop(query_id)
            if self.keep == 0:
                return
        with self._lock:
            kept_frames = list({id(k.frame.image): k.frame for k in self._kept.values()}.values())
        # Packing and comparing take a while on a large frame: unlocked.
        stored = _Stored.of(answer, _same_frame(answer.frame, kept_frames))
        with self._lock:
            self._drop(query_id)  # (a concurrent add of the same id)
            size = self._added_bytes(stored)
            if self.max_bytes is not None and size > self.max_bytes:
                self._note_gone(query_id, f"its answer was not kept: its frame and masks "
                                          f"({_mib(size)}) are over {self._bound(self.max_bytes)}")
                return
            self._kept[query_id] = stored
            self._count(stored, +1)
            while len(self._kept) > self.keep:
                self._expire_oldest(f"only the last refine.keep_answers={self.keep} answers are "
                                    "kept")
            while self.max_bytes is not None and self._bytes > self.max_bytes:
                self._expire_oldest(f"the frames and masks of the kept answers are bounded "
                                    f"by {self._bound(self.max_bytes)}")

    def find(self, query_id: str) -> KeptAnswer:
        """The kept answer of ``query_id``; ``RefineUnavailable`` says why there is none."""
        with self._lock:
            stored = self._kept.get(query_id)
            gone = self._gone.get(query_id)
        if stored is not None:
            return stored.unpack()
        named = f"cannot refine query_id '{for_log(query_id)}'"
        if self.keep == 0:
            raise RefineUnavailable(f"{named}: no answers are kept (refine.keep_answers: 0)")
        if gone is not None:
            raise RefineUnavailable(f"{named}: {gone}")
        raise RefineUnavailable(f"{named}: no answer with that query_id is known (the last "
                                f"refine.keep_answers={self.keep} answers are kept)")

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)

    def _bound(self, max_bytes: int) -> str:
        return f"{self._max_bytes_name}={max_bytes / 2**20:g} MiB"

    def _added_bytes(self, stored: _Stored) -> int:
        """(lock held) What keeping ``stored`` adds: its masks, and its frame unless kept."""
        image = stored.frame.image
        shared = id(image) in self._frames
        return stored.mask_bytes + (0 if shared else frame_bytes(stored.frame))

    def _count(self, stored: _Stored, sign: int) -> None:
        """(lock held) Account ``stored`` being kept (+1) or let go (-1); its frame's bytes
        count while at least one kept answer holds that frame."""
        image = stored.frame.image
        holders, size = self._frames.get(id(image), (0, frame_bytes(stored.frame)))
        if holders + sign > 0:
            self._frames[id(image)] = (holders + sign, size)
        else:
            self._frames.pop(id(image), None)
        if holders + sign == (1 if sign > 0 else 0):  # the first holder came, or the last went
            self._bytes += sign * size
        self._bytes += sign * stored.mask_bytes

    def _drop(self, query_id: str) -> None:
        """(lock held) Let the kept answer of ``query_id`` go, if any."""
        stored = self._kept.pop(query_id, None)
        if stored is not None:
            self._count(stored, -1)

    def _expire_oldest(self, why: str) -> None:
        """(lock held)"""
        old_id, old = self._kept.popitem(last=False)
        self._count(old, -1)
        self._note_gone(old_id, f"its answer expired: {why}")

    def _note_gone(self, query_id: str, why: str) -> None:
        """(lock held) Remember why ``query_id`` cannot be refined, for a bounded number of ids."""
        self._gone.pop(query_id, None)
        self._gone[query_id] = why
        while len(self._gone) > MAX_REMEMBERED_IDS:
            self._gone.popitem(last=False)

