"""DEMO/TEST backend ``llm.backend: offline``: a small deterministic planner, no model.

It reads exactly what a real model would get (the query in messages[1], the latest tool result
and its mask table) and answers in the same ``<tool>`` protocol, so queries run through the same
loop, pruning and tools as with a real LLM:

- first turn: ``segment_phrase`` with the query's colour + noun ("the leftmost blue object" ->
  "blue object");
- masks found: ``examine_each_mask`` once, then ``select_masks_and_return`` by the query's
  selector (leftmost/rightmost/top/bottom/largest/smallest/all; default: the best score);
- nothing found: one more general phrase (the colour alone + "object"), then ``report_no_mask``;
- a refinement (messages[1] lists the earlier answers, ``core/context.py``): a query without a
  colour or noun of its own ("no, the other one") segments with the first earlier query's phrase;
  "the other one" / "not that one" / "another" select, among the masks that are none of the
  earlier answers' (bbox IoU below 0.5), the one the query's or else the first earlier query's
  selector picks ("the largest ..." -> the next largest); "the one to its left/right" (or
  "left/right of it") the nearest mask on that side of the latest answer's first mask; none fits:
  ``report_no_mask``.

As a verifier it accepts every mask. With ``llm.protocol: tools`` it answers with native
``tool_calls`` like a function-calling server. It is a stand-in for trying the package without a
GPU or an endpoint, not a perception model.

``think_s`` (``llm.offline_think_s``, ``sam3-agent demo --think-s``): each call waits that long
before it answers, a rehearsal of a real model's seconds per call (the answers stay the
planner's). The wait ends at once on cancel (``LlmError`` "cancelled") and at the query's
deadline (``LlmError`` timeout), as a real request's would.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.mask_table import TableRow, parse_table
from sam3_agent_ros.core.protocol import normalize_prompt
from sam3_agent_ros.core.types import LlmReply, Message, NativeToolCall

COLORS = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "violet", "pink",
          "magenta", "white", "black", "gray", "grey", "brown")
# selector word -> (sort key over table rows, pick the max?)
SELECTORS = {
    "leftmost": (lambda r: r.centroid[0], False), "left": (lambda r: r.centroid[0], False),
    "rightmost": (lambda r: r.centroid[0], True), "right": (lambda r: r.centroid[0], True),
    "topmost": (lambda r: r.centroid[1], False), "top": (lambda r: r.centroid[1], False),
    "highest": (lambda r: r.centroid[1], False), "upper": (lambda r: r.centroid[1], False),
    "bottom": (lambda r: r.centroid[1], True), "lowest": (lambda r: r.centroid[1], True),
    "lower": (lambda r: r.centroid[1], True),
    "largest": (lambda r: r.area_percent, True), "biggest": (lambda r: r.area_percent, True),
    "smallest": (lambda r: r.area_percent, False), "tiniest": (lambda r: r.area_percent, False),
}
ALL_WORDS = {"all", "every", "each", "both"}
FILLER = {"pick", "grab", "take", "find", "segment", "select", "show", "get", "point", "to", "at",
          "me", "the", "a", "an", "one", "please", "of", "in", "on", "that", "is", "which", "and",
          "there", "up", "most", "object's", "can", "you", "i", "want", "where"}
# Words of a correction: they name no object ("no, the other one", "not that one", "to its left").
OTHER_WORDS = {"other", "another", "not", "no", "else", "different", "wrong", "instead", "nope"}
CORRECTION_WORDS = OTHER_WORDS | {"its", "it", "this", "them", "either", "rather", "but", "next",
                                  "previous", "actually", "sorry", "mean", "meant", "than"}
_SIDE = re.compile(r"\b(?:to|on) its (left|right)\b|\b(left|right) of (?:it|that|this)\b")
_EARLIER_QUERY = re.compile(r'^Earlier answer \d+: query ("(?:[^"\\]|\\.)*")', re.MULTILINE)
REPLACED_NOTE = "\n\nNote: these text_prompts were already tried"
_QUERY_LINE = re.compile(r"^User query: (.*)$", re.MULTILINE)
_TOOL_NAME = re.compile(r'"text_prompt"\s*:\s*"([^"]*)"')
_NOTED = re.compile(r'"([^"]+)"')


def _singular(word: str) -> str:
    if word.endswith(("xes", "shes", "ches")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def _object_words(query: str, ignore: AbstractSet[str] = frozenset()) -> list[str]:
    words = re.findall(r"[a-z']+", query.lower())
    return [_singular(w) for w in words
            if w not in FILLER and w not in SELECTORS and w not in ALL_WORDS and w not in ignore]


def plan_phrases(query: str, ignore: AbstractSet[str] = frozenset()) -> list[str]:
    """The phrases to try in order: the query's colour + noun, then a more general one
    (``ignore``: words that name no object, e.g. a correction's)."""
    kept = _object_words(query, ignore)
    phrase = " ".join(kept) or "object"
    colors = [w for w in kept if w in COLORS]
    general = f"{colors[0]} object" if colors else None
    return [phrase] + ([general] if general and general != phrase else [])


def select_ids(query: str, rows: list[TableRow]) -> list[int]:
    words = set(re.findall(r"[a-z]+", query.lower()))
    if words & ALL_WORDS:
        return [r.id for r in rows]
    for word, (key, largest) in SELECTORS.items():
        if word in words:
            chosen = max(rows, key=key) if largest else min(rows, key=key)
            return [chosen.id]
    return [rows[0].id]


@dataclass(frozen=True)
class Earlier:
    """What messages[1] of a refinement says of one earlier answer."""

    query: str
    rows: list[TableRow]  # its selected masks (ids as the user saw them)


def parse_earlier(first_text: str) -> list[Earlier]:
    """The earlier answers listed in messages[1] of a refinement, oldest first ([] otherwise)."""
    body = first_text.split(REPLACED_NOTE)[0]
    matches = list(_EARLIER_QUERY.finditer(body))
    earlier = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(body)
        try:
            query = json.loads(match.group(1))
        except ValueError:
            query = ""
        earlier.append(Earlier(str(query), parse_table(body[match.end():end])))
    return earlier


def refinement_phrases(query: str, earlier: list[Earlier]) -> list[str]:
    """A correction that names no object segments what the first earlier query named."""
    if _object_words(query, CORRECTION_WORDS) or not earlier:
        return plan_phrases(query, CORRECTION_WORDS)
    return plan_phrases(earlier[0].query)


def _box_iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _apart(rows: list[TableRow], answered: list[TableRow]) -> list[TableRow]:
    """The rows that are none of ``answered`` (bbox IoU below 0.5 with each)."""
    return [r for r in rows if all(_box_iou(r.bbox, a.bbox) < 0.5 for a in answered)]


def select_correction(query: str, rows: list[TableRow], earlier: list[Earlier]) -> list[int]:
    """The ids a correction of ``earlier`` selects among ``rows`` ([]: none fits)."""
    words = set(re.findall(r"[a-z]+", query.lower()))
    side = _SIDE.search(query.lower())
    if not (side or words & OTHER_WORDS):
        return select_ids(query, rows)
    reference = earlier[-1].rows[0] if earlier and earlier[-1].rows else None
    if side and reference is not None:  # beside the latest answer (an older one may be there)
        left = (side.group(1) or side.group(2)) == "left"
        x = reference.centroid[0]
        beside = [r for r in _apart(rows, earlier[-1].rows)
                  if (r.centroid[0] < x if left else r.centroid[0] > x)]
        if not beside:
            return []
        return [min(beside, key=lambda r: abs(r.centroid[0] - x)).id]
    fresh = _apart(rows, [r for e in earlier for r in e.rows])  # none of the earlier answers
    if not fresh:
        return []
    if words & (set(SELECTORS) | ALL_WORDS) or not earlier:
        return select_ids(query, fresh)
    return select_ids(earlier[0].query, fresh)


class OfflinePlanner:
    """Implements ``LlmClient`` without a model (see the module docstring)."""

    def __init__(self, think_s: float = 0.0) -> None:
        self._calls = itertools.count(1)
        self.think_s = max(0.0, float(think_s))

    def complete(self, messages: list[Message], cancel: CancelToken,
                 tools: list[dict] | None = None) -> LlmReply:
        if self.think_s > 0:
            self._think(cancel)
        if "<verdict>" in messages[0].text_content:
            return LlmReply("Offline verifier: accepting the candidate. <verdict>Accept</verdict>")
        reasoning, name, parameters = self._plan(messages)
        if tools:
            call = NativeToolCall(f"offline-{next(self._calls)}", name, json.dumps(parameters))
            return LlmReply(reasoning, tool_calls=(call,), finish_reason="tool_calls")
        payload = json.dumps({"name": name, "parameters": parameters})
        return LlmReply(f"{reasoning} <tool>{payload}</tool>")

    def _think(self, cancel: CancelToken) -> None:
        """Take ``think_s`` like a model call: cut short by a cancel or the query's deadline."""
        remaining = cancel.remaining()
        wait_s = self.think_s if remaining is None else max(0.0, min(self.think_s, remaining))
        if cancel.wait(wait_s):
            raise LlmError("cancelled", kind=LlmError.CANCELLED, endpoint="offline")
        if wait_s < self.think_s:
            raise LlmError(f"the query's time ran out during the offline planner's "
                           f"{self.think_s:g} s think", kind=LlmError.TIMEOUT,
                           endpoint="offline", waited_s=wait_s)

    def _plan(self, messages: list[Message]) -> tuple[str, str, dict]:
        first = messages[1].text_content
        match = _QUERY_LINE.search(first)
        query = match.group(1).strip() if match else ""
        earlier = parse_earlier(first)
        _, note, replaced = first.partition(REPLACED_NOTE)
        used = {normalize_prompt(p) for p in _NOTED.findall(replaced)} if note else set()
        last_assistant = 1
        for index, message in enumerate(messages[2:], start=2):
            if message.role == "assistant":
                last_assistant = index
                calls = " ".join(c.arguments for c in message.tool_calls)
                used.update(normalize_prompt(p)
                            for p in _TOOL_NAME.findall(f"{message.text_content} {calls}"))
        # The answer to the latest reply: a user message, or a tool message (+ its image).
        last = "\n".join(m.text_content for m in messages[last_assistant + 1:]) \
            if last_assistant > 1 else ""
        rows = parse_table(last)
        if rows and last.lstrip().startswith("segment_phrase("):
            return "Candidates found; verifying each mask.", "examine_each_mask", {}
        if rows:
            ids = select_correction(query, rows, earlier) if earlier else select_ids(query, rows)
            if not ids:
                return ("No mask fits the correction of the earlier answer.", "report_no_mask",
                        {})
            return (f"Selecting by the query's wording: {ids}.", "select_masks_and_return",
                    {"final_answer_masks": ids})
        phrases = refinement_phrases(query, earlier) if earlier else plan_phrases(query)
        for phrase in phrases:
            if normalize_prompt(phrase) not in used:
                return f'Segmenting "{phrase}".', "segment_phrase", {"text_prompt": phrase}
        return "Nothing matching the query was found.", "report_no_mask", {}
