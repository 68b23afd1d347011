"""The effects of the four tools (interface §1) on one query's state.

``ToolBox.execute`` returns a ``Continue`` (a user message with the tool result for the model),
a ``Finish`` (the terminal selection) or a ``Mistake`` (a call the model got wrong: the text goes
back to it). A failing segmenter raises ``SegmenterError``. ``ToolBox.check`` returns the
mistakes that need no work to see (an over-long text_prompt, an examine with nothing new to
examine) before anything runs or is reported.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from sam3_agent_ros import render
from sam3_agent_ros.core import protocol
from sam3_agent_ros.core.errors import Mistake, SegmenterError
from sam3_agent_ros.core.mask_table import format_table
from sam3_agent_ros.core.ports import Detections, Segmenter
from sam3_agent_ros.core.types import Frame, ImagePart, Mask, Message, QueryStatus
from sam3_agent_ros.core.view import LlmView


@dataclass(frozen=True)
class Continue:
    message: Message
    executed_segment: bool = False


@dataclass(frozen=True)
class Finish:
    status: QueryStatus
    masks: list[Mask]


@dataclass
class QueryState:
    frame: Frame
    view: LlmView  # the frame at the size the LLM gets; overlays are drawn on it
    query_text: str
    key_prefix: str  # unique per query: image cache keys and trace placeholders
    masks: list[Mask] = field(default_factory=list)  # current masks, ids 1..N in list order
    # every mask the last executed prompt found (examine_each_mask keeps them: the objects the
    # frame showed, the grasp scene's obstacles)
    prompt_masks: list[Mask] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)  # executed text_prompts, in order
    overlays: int = 0
    segment_s: float = 0.0
    examined: bool = False  # the current masks went through examine_each_mask already
    untrained_weights: bool = False  # a segmentation of this query came from untrained weights

    def image(self, name: str, array: np.ndarray) -> ImagePart:
        return ImagePart(array, f"{self.key_prefix}/{name}")


# examine(state) -> one accept/reject per current mask
Examiner = Callable[[QueryState], list[bool]]


class ToolBox:
    def __init__(self, segmenter: Segmenter, examiner: Examiner, table_limit: int,
                 max_prompt_chars: int):
        self._segmenter = segmenter
        self._examine = examiner
        self._table_limit = table_limit
        self._max_prompt_chars = max_prompt_chars

    def check(self, call: protocol.ToolCall, state: QueryState) -> Mistake | None:
        """The mistake of a call that must not run; nothing is run or reported."""
        if call.name == protocol.SEGMENT:
            length = len(call.parameters["text_prompt"].strip())
            if length > self._max_prompt_chars:  # never echoed: it may be a megabyte
                return Mistake(
                    f"segment_phrase was NOT run: its text_prompt is {length} characters long, "
                    f"more than {self._max_prompt_chars}. Use a short noun phrase: "
                    f"{protocol.TOOLS[protocol.SEGMENT].text_example()}")
        elif call.name == protocol.EXAMINE:
            if not state.masks:
                return Mistake("examine_each_mask needs current masks, and there are none. "
                               "Call segment_phrase first, or report_no_mask.")
            if state.examined:
                return Mistake(
                    "examine_each_mask was NOT run: the current masks were already examined and "
                    "nothing changed since. Select among them with select_masks_and_return, "
                    "segment_phrase with a new phrase, or report_no_mask.")
        return None

    def execute(self, call: protocol.ToolCall, state: QueryState) -> Continue | Finish | Mistake:
        refused = self.check(call, state)
        if refused is not None:
            return refused
        if call.name == protocol.SEGMENT:
            return self._segment(call.parameters["text_prompt"].strip(), state)
        if call.name == protocol.EXAMINE:
            return self._examine_masks(state)
        if call.name == protocol.SELECT:
            return self._select(call.parameters["final_answer_masks"], state)
        return Finish(QueryStatus.NO_MASK, [])

    def _segment(self, text_prompt: str, state: QueryState) -> Continue | Mistake:
        used = {protocol.normalize_prompt(p) for p in state.prompts}
        if protocol.normalize_prompt(text_prompt) in used:
            listed = ", ".join(f'"{p}"' for p in state.prompts)
            return Mistake(
                f'segment_phrase was NOT run: "{text_prompt}" was already used. Prompts you may '
                f"not use again: {listed}. Try a different phrase, or act on the current masks.")
        started = time.monotonic()
        try:
            raw = self._segmenter.segment(state.frame.image, text_prompt)
        except SegmenterError:
            raise
        except Exception as exc:  # a backend bug must end the query, not the process
            raise SegmenterError(f"segmenter failed on {text_prompt!r}: "
                                 f"{type(exc).__name__}: {exc}") from exc
        finally:
            state.segment_s += time.monotonic() - started
        detections = Detections.coerce(raw, state.frame.height, state.frame.width)
        state.untrained_weights |= detections.untrained_weights
        state.masks = detections.to_masks()
        state.prompt_masks = list(state.masks)
        state.examined = False
        state.view.keep_only(state.masks)
        state.prompts.append(text_prompt)
        if not state.masks:
            text = (f'segment_phrase("{text_prompt}") found no masks. Try a different phrase, or '
                    "call report_no_mask if the object is not in the image.")
            return Continue(Message.text("user", text), executed_segment=True)
        header = (f'segment_phrase("{text_prompt}") found {len(state.masks)} mask(s), numbered '
                  "on the image below by descending score:")
        return Continue(self._masks_message(header, state), executed_segment=True)

    def _examine_masks(self, state: QueryState) -> Continue:
        verdicts = self._examine(state)
        state.examined = True
        before = len(state.masks)
        rejected = [i + 1 for i, ok in enumerate(verdicts) if not ok]
        state.masks = [m for m, ok in zip(state.masks, verdicts, strict=True) if ok]
        if not state.masks:
            text = (f"examine_each_mask rejected all {before} mask(s); there are no current "
                    "masks. Try a different phrase, or call report_no_mask.")
            return Continue(Message.text("user", text))
        dropped = f" (rejected old ids {rejected})" if rejected else ""
        header = (f"examine_each_mask kept {len(state.masks)} of {before} mask(s){dropped}. "
                  "Current masks, renumbered:")
        return Continue(self._masks_message(header, state))

    def _select(self, ids: list[int], state: QueryState) -> Finish | Mistake:
        if not state.masks:
            return Mistake("There are no current masks to select. Call segment_phrase first, "
                           "or report_no_mask.")
        invalid = [i for i in ids if not 1 <= i <= len(state.masks)]
        if invalid:
            return Mistake(f"Mask ids {invalid} do not exist; the current masks are "
                           f"1..{len(state.masks)}.")
        unique = list(dict.fromkeys(ids))
        # each chosen mask remembers the id the model chose it by (result JSON "candidate")
        return Finish(QueryStatus.SUCCEEDED,
                      [dataclasses.replace(state.masks[i - 1], candidate=i) for i in unique])

    def _masks_message(self, header: str, state: QueryState) -> Message:
        state.overlays += 1
        overlay = render.overlay_masks(state.view.image, [state.view.mask(m) for m in state.masks])
        table = format_table(state.masks, state.frame.width, state.frame.height,
                             self._table_limit)
        return Message("user", (header, state.image(f"overlay-{state.overlays}", overlay),
                                table))
