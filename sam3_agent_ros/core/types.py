"""Plain data that flows through the core: frames, queries, masks, messages, results, status."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, SupportsFloat

import cv2
import numpy as np

from sam3_agent_ros.masks import PixelBox, pixel_box
from sam3_agent_ros.redact import redact_text


@dataclass(frozen=True)
class Frame:
    """One colour frame: RGB (H, W, 3) uint8 plus the ROS header it came with. ``world``: what
    the pipeline bound to its stamp when a query took it (``pipeline.frame_world.FrameWorld``:
    its depth frame, camera model and transform; opaque to the core, kept with the frame: an
    answer kept for refinement counts its ``nbytes``)."""

    image: np.ndarray
    stamp_sec: int = 0
    stamp_nanosec: int = 0
    frame_id: str = ""
    world: object | None = field(default=None, compare=False, repr=False)

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def height(self) -> int:
        return int(self.image.shape[0])


class FrameUnusable(Exception):
    """A frame message that cannot become a ``Frame`` (bad encoding, short data, over the pixel
    cap...). ``frame`` carries its header (an empty image) so the failed result still names the
    frame it refers to."""

    def __init__(self, reason: str, frame: Frame | None = None):
        super().__init__(reason)
        self.reason = reason
        self.frame = frame


def stamp_ns(sec: int, nanosec: int) -> int:
    """A stamp (``sec``, ``nanosec``) in integer nanoseconds: exact, ordered, comparable. The one
    conversion of the package (frames, ROS headers, result and status JSON)."""
    return int(sec) * 1_000_000_000 + int(nanosec)


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels
Point = tuple[float, float]  # u, v in pixels


def float_box(values: Iterable[SupportsFloat]) -> Box:
    """Four numbers (x0, y0, x1, y1) as a ``Box`` of floats; another count raises ValueError."""
    x0, y0, x1, y1 = (float(v) for v in values)
    return x0, y0, x1, y1


def float_point(values: Iterable[SupportsFloat]) -> Point:
    """Two numbers (u, v) as a ``Point`` of floats; another count raises ValueError."""
    u, v = (float(value) for value in values)
    return u, v


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    # The query_id of an earlier answer this query corrects ("no, the other one"): it is answered
    # on that answer's frame (core/answers.py, interface §8c). None: a query of its own.
    refines: str | None = None


@dataclass(frozen=True)
class Mask:
    """One segmented instance at the frame's resolution."""

    mask: np.ndarray  # (H, W) bool
    score: float
    bbox: Box  # x0, y0, x1, y1 in pixels
    area: int
    centroid: Point  # u, v in pixels
    pixel_box: PixelBox | None = None  # x0, y0, x1, y1 (exclusive) of its pixels; None: empty
    # Its id among the candidate masks the model chose it from (select_masks_and_return: the
    # number the model's reasoning uses); 0: not chosen by the model by id.
    candidate: int = 0

    @classmethod
    def from_array(cls, mask: np.ndarray, score: float,
                   bbox: Iterable[SupportsFloat]) -> Mask:
        bbox = float_box(bbox)
        box = pixel_box(mask)
        if box is None:
            return cls(mask=mask, score=float(score), bbox=bbox, area=0,
                       centroid=(float("nan"),) * 2)
        # Moments of the pixel-box crop: ~0.5 ms at 1080p where np.nonzero takes ~7 ms.
        x0, y0, x1, y1 = box
        crop = np.asarray(mask[y0:y1, x0:x1], dtype=bool).view(np.uint8)
        moments = cv2.moments(crop, binaryImage=True)
        area = int(round(moments["m00"]))
        centroid = (x0 + moments["m10"] / area, y0 + moments["m01"] / area)
        return cls(mask=mask, score=float(score), bbox=bbox, area=area, centroid=centroid,
                   pixel_box=box)

    def summary(self, mask_id: int) -> dict[str, Any]:
        """The result-JSON form (interface §6)."""
        summary = {"id": mask_id, "score": round(self.score, 4),
                   "bbox": [round(v, 1) for v in self.bbox], "area": self.area,
                   "centroid": [round(v, 1) for v in self.centroid]}
        if self.candidate:
            summary["candidate"] = self.candidate
        return summary


@dataclass(frozen=True)
class ImagePart:
    """An image inside a message. Stays an array until the HTTP boundary; ``key`` names it
    within a query (``frame``, ``overlay-3``...) for encode caching and trace placeholders."""

    array: np.ndarray
    key: str


@dataclass(frozen=True)
class NativeToolCall:
    """One entry of a reply's ``tool_calls`` (native function calling, interface §1b).
    ``arguments`` is the raw JSON text the model wrote (it may be invalid)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant" | "tool"
    content: tuple[str | ImagePart, ...]
    tool_calls: tuple[NativeToolCall, ...] = ()  # assistant messages, native protocol
    tool_call_id: str | None = None  # tool messages: the call they answer

    @classmethod
    def text(cls, role: str, text: str) -> Message:
        return cls(role, (text,))

    @property
    def text_content(self) -> str:
        return "\n".join(p for p in self.content if isinstance(p, str))

    @property
    def images(self) -> list[ImagePart]:
        return [p for p in self.content if isinstance(p, ImagePart)]


@dataclass(frozen=True)
class LlmReply:
    """One completion as the server sent it, before any interpretation.

    ``text`` is the message content (list-of-parts content joined; ``""`` for null), which may
    still hold ``<think>`` thinking; ``reasoning`` is the server's separate reasoning field
    (vLLM ``reasoning_content`` / ``reasoning``)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning: str = ""
    tool_calls: tuple[NativeToolCall, ...] = ()
    finish_reason: str | None = None
    refusal: str | None = None


class _StrEnum(str, enum.Enum):
    """``enum.StrEnum`` (3.11+) for Python 3.10: members are their string values."""

    def __str__(self) -> str:
        return str(self.value)


class QueryStatus(_StrEnum):
    SUCCEEDED = "succeeded"
    NO_MASK = "no_mask"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass
class Timings:
    total_s: float = 0.0
    llm_s: float = 0.0
    segment_s: float = 0.0

    def to_json(self) -> dict[str, float]:
        return {"total_s": round(self.total_s, 4), "llm_s": round(self.llm_s, 4),
                "segment_s": round(self.segment_s, 4)}


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0  # main-loop and verifier requests that got a reply

    def add(self, reply: LlmReply) -> None:
        self.llm_calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens


@dataclass
class Result:
    """The one terminal outcome of a query (interface §6)."""

    query_id: str
    query: str
    status: QueryStatus
    error: str | None = None
    masks: list[Mask] = field(default_factory=list)  # selected, in answer order
    text_prompts: list[str] = field(default_factory=list)
    rounds: int = 0
    timings: Timings = field(default_factory=Timings)
    usage: Usage = field(default_factory=Usage)
    frame: Frame | None = None
    refines: str | None = None  # the query_id of the answer this query corrected (Query.refines)
    # What answered, {"llm": ..., "segmenter": ...} (interface §6; Config.backends): set by the
    # Agent, and by the node / CLI for results made without it.
    backends: dict[str, str] = field(default_factory=dict)
    # Free-form extras merged into the JSON (e.g. "untrained_weights": true, 3D positions).
    extra: dict[str, Any] = field(default_factory=dict)
    mask_extras: list[dict[str, Any]] = field(default_factory=list)
    # Every mask the last executed prompt found, the selected ones among them (not in the JSON:
    # the grasp scene's other objects, CONTRACTS §12); empty when unknown.
    candidates: list[Mask] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        # Errors quote URLs (the endpoint, a plugin's server): never their credentials.
        if self.error:
            self.error = redact_text(self.error)

    def to_json(self) -> dict[str, Any]:
        frame = self.frame
        masks = []
        for index, mask in enumerate(self.masks):
            entry = mask.summary(index + 1)
            if index < len(self.mask_extras):
                entry.update(self.mask_extras[index])
            masks.append(entry)
        out = {
            "query_id": self.query_id,
            "query": self.query,
            "status": self.status.value,
            "error": self.error,
            "stamp": {"sec": frame.stamp_sec if frame else 0,
                      "nanosec": frame.stamp_nanosec if frame else 0},
            "frame_id": frame.frame_id if frame else "",
            "width": frame.width if frame else 0,
            "height": frame.height if frame else 0,
            "masks": masks,
            "text_prompts": list(self.text_prompts),
            "rounds": self.rounds,
            "timings": self.timings.to_json(),
            "usage": {"prompt_tokens": self.usage.prompt_tokens,
                      "completion_tokens": self.usage.completion_tokens,
                      "llm_calls": self.usage.llm_calls},
            "backends": dict(self.backends),
            "refines": self.refines,
        }
        out.update(self.extra)
        return out


class Phase(_StrEnum):
    QUEUED = "queued"
    THINKING = "thinking"
    SEGMENTING = "segmenting"
    EXAMINING = "examining"
    DONE = "done"


@dataclass(frozen=True)
class StatusEvent:
    """A phase change of a query (interface §7)."""

    query_id: str
    phase: Phase
    round: int = 0
    tool: str | None = None
    text_prompt: str | None = None
    num_masks: int = 0
    context_messages: int = 0
    context_images: int = 0
    elapsed_s: float = 0.0
    status: str | None = None  # terminal status, on phase "done"
    reasoning: str | None = None  # the model's reasoning of this round, cut (interface §7)
    backends: dict[str, str] | None = None  # what answers (as in Result); None: not known here
    refines: str | None = None  # the query_id of the answer this query corrects (Query.refines)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query_id": self.query_id, "phase": self.phase.value, "round": self.round,
            "tool": self.tool, "text_prompt": self.text_prompt, "num_masks": self.num_masks,
            "context": {"messages": self.context_messages, "images": self.context_images},
            "elapsed_s": round(self.elapsed_s, 3), "reasoning": self.reasoning,
            "refines": self.refines}
        if self.status is not None:
            out["status"] = self.status
        if self.backends is not None:
            out["backends"] = dict(self.backends)
        return out
