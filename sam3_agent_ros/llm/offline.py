"""DEMO/TEST backend ``llm.backend: offline``: a small deterministic planner, no model.

It reads exactly what a real model would get (the query in messages[1], the latest tool result
and its mask table) and answers in the same ``<tool>`` protocol, so queries run through the same
loop, pruning and tools as with a real LLM:

- first turn: ``segment_phrase`` with the query's colour + noun ("the leftmost blue object" ->
  "blue object");
- masks found: ``examine_each_mask`` once, then ``select_masks_and_return`` by the query's
  selector (leftmost/rightmost/top/bottom/largest/smallest/all; default: the best score);
- nothing found: one more general phrase (the colour alone + "object"), then ``report_no_mask``.

As a verifier it accepts every mask. With ``llm.protocol: tools`` it answers with native
``tool_calls`` like a function-calling server. It is a stand-in for trying the package without a
GPU or an endpoint, not a perception model.
"""

from __future__ import annotations

import itertools
import json
import re

from sam3_agent_ros.core.cancel import CancelToken
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
_QUERY_LINE = re.compile(r"^User query: (.*)$", re.MULTILINE)
_TOOL_NAME = re.compile(r'"text_prompt"\s*:\s*"([^"]*)"')
_NOTED = re.compile(r'"([^"]+)"')


def _singular(word: str) -> str:
    if word.endswith(("xes", "shes", "ches")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def plan_phrases(query: str) -> list[str]:
    """The phrases to try in order: the query's colour + noun, then a more general one."""
    words = [w for w in re.findall(r"[a-z']+", query.lower())]
    kept = [_singular(w) for w in words
            if w not in FILLER and w not in SELECTORS and w not in ALL_WORDS]
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


class OfflinePlanner:
    """Implements ``LlmClient`` without a model (see the module docstring)."""

    def __init__(self) -> None:
        self._calls = itertools.count(1)

    def complete(self, messages: list[Message], cancel: CancelToken,
                 tools: list[dict] | None = None) -> LlmReply:
        if "<verdict>" in messages[0].text_content:
            return LlmReply("Offline verifier: accepting the candidate. <verdict>Accept</verdict>")
        reasoning, name, parameters = self._plan(messages)
        if tools:
            call = NativeToolCall(f"offline-{next(self._calls)}", name, json.dumps(parameters))
            return LlmReply(reasoning, tool_calls=(call,), finish_reason="tool_calls")
        payload = json.dumps({"name": name, "parameters": parameters})
        return LlmReply(f"{reasoning} <tool>{payload}</tool>")

    def _plan(self, messages: list[Message]) -> tuple[str, str, dict]:
        first = messages[1].text_content
        match = _QUERY_LINE.search(first)
        query = match.group(1).strip() if match else ""
        used = {normalize_prompt(p) for p in _NOTED.findall(first.partition("Note:")[2])}
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
            ids = select_ids(query, rows)
            return (f"Selecting by the query's wording: {ids}.", "select_masks_and_return",
                    {"final_answer_masks": ids})
        for phrase in plan_phrases(query):
            if normalize_prompt(phrase) not in used:
                return f'Segmenting "{phrase}".', "segment_phrase", {"text_prompt": phrase}
        return "Nothing matching the query was found.", "report_no_mask", {}
