"""The answers a later query may correct ("no, the other one"; interface §8c).

A refinement names an earlier answer by its query_id and is answered on that answer's frame,
seeing what it selected. ``AnswerStore`` keeps the last ``refine.keep_answers`` answers, each as
its frame and selected masks (``KeptAnswer``), and says why an id cannot be refined: unknown,
expired, or a query that ended without an answer. ``AnswerRecord`` is the pixel-free part (the
text the model is shown), also written into ``sam3-agent run --out`` (``answer_folder.py``).

Memory: one kept answer holds its frame and its selected masks (at 1080p: 6.2 MB + 2.1 MB a mask),
so the store holds at most ``keep`` of them; a chain of refinements keeps only the pixel-free
records of the answers it corrected (at most ``MAX_EARLIER``). Thread-safe.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from sam3_agent_ros.core.types import Frame, Mask, QueryStatus, Result
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
    bbox: tuple[float, float, float, float]
    area: int
    centroid: tuple[float, float]

    @classmethod
    def of(cls, mask: Mask) -> SelectedMask:
        return cls(float(mask.score), tuple(float(v) for v in mask.bbox), int(mask.area),
                   tuple(float(v) for v in mask.centroid))

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> SelectedMask:
        """From a result JSON mask entry (``score``, ``bbox``, ``area``, ``centroid``)."""
        return cls(float(entry["score"]), tuple(float(v) for v in entry["bbox"]),
                   int(entry["area"]), tuple(float(v) for v in entry["centroid"]))


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
        earlier = refined.chain[-MAX_EARLIER:] if refined is not None else ()
        return cls(AnswerRecord.of(result), result.frame, tuple(result.masks), earlier)


class AnswerStore:
    """The last ``keep`` answers (``keep`` 0: none, refinement off), by query_id."""

    def __init__(self, keep: int):
        self.keep = max(0, int(keep))
        self._lock = threading.Lock()
        self._kept: collections.OrderedDict[str, KeptAnswer] = collections.OrderedDict()
        self._gone: collections.OrderedDict[str, str] = collections.OrderedDict()  # id -> why

    def remember(self, result: Result, refined: KeptAnswer | None = None) -> None:
        """Keep ``result`` if it answered (succeeded, no_mask, on a frame); a query that ended
        otherwise makes its id unrefinable (a newer query with an old id replaces it)."""
        if result.status in ANSWERED and result.frame is not None:
            self.add(KeptAnswer.of(result, refined))
        else:
            with self._lock:
                self._kept.pop(result.query_id, None)
                self._note_gone(result.query_id, f"it ended {result.status.value} without an "
                                                 "answer")

    def add(self, answer: KeptAnswer) -> None:
        query_id = answer.record.query_id
        with self._lock:
            self._gone.pop(query_id, None)
            self._kept.pop(query_id, None)
            if self.keep == 0:
                return
            self._kept[query_id] = answer
            while len(self._kept) > self.keep:
                old_id, _ = self._kept.popitem(last=False)
                self._note_gone(old_id, f"its answer expired: only the last refine.keep_answers="
                                        f"{self.keep} answers are kept")

    def find(self, query_id: str) -> KeptAnswer:
        """The kept answer of ``query_id``; ``RefineUnavailable`` says why there is none."""
        with self._lock:
            answer = self._kept.get(query_id)
            gone = self._gone.get(query_id)
        if answer is not None:
            return answer
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

    def _note_gone(self, query_id: str, why: str) -> None:
        """(lock held) Remember why ``query_id`` cannot be refined, for a bounded number of ids."""
        self._gone.pop(query_id, None)
        self._gone[query_id] = why
        while len(self._gone) > MAX_REMEMBERED_IDS:
            self._gone.popitem(last=False)

