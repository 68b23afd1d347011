"""A corpus of reply shapes that real models and servers produce (shared/ENVIRONMENT.md, "Real
model replies"), as scripted-server steps, for the first round of the query "the leftmost blue
object".

Each shape says what the agent must do with it:
- ``executes``: run ``segment_phrase("blue object")`` at once, without a corrective round;
- ``corrects``: answer with exactly one corrective turn containing ``hint``, after which a good
  reply lets the query succeed.

Text that is thinking carries ``THOUGHT`` so tests can check it never reaches a later request;
decoy calls inside thinking ask for ``report_no_mask`` or ``DECOY`` prompts that must never run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from test.fakes.scripted_server import Reply, native_call, native_calls, shaped

THOUGHT = "THOUGHT-7f3a"  # marks thinking: must never appear in any later request
PROMPT = "blue object"
QUERY = "the leftmost blue object"

_CALL = json.dumps({"name": "segment_phrase", "parameters": {"text_prompt": PROMPT}})
_HERMES = json.dumps({"name": "segment_phrase", "arguments": {"text_prompt": PROMPT}})
_DECOY_NO_MASK = '<tool>{"name": "report_no_mask", "parameters": {}}</tool>'
_DECOY_SEGMENT = '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "DECOY"}}</tool>'
_TEXT, _TOOLS = ("text",), ("tools",)
_BOTH = ("text", "tools")


@dataclass(frozen=True)
class Shape:
    name: str
    reply: Reply
    outcome: str  # "executes" | "corrects"
    protocols: tuple[str, ...] = _BOTH
    hint: str = ""  # corrects: a fragment of the corrective message
    told: str = ""  # executes: a fragment the tool result must carry (e.g. ignored calls)


def text_reply(content: str, finish_reason: str = "stop", **fields) -> Reply:
    return Reply(text=content, message=fields or None, finish_reason=finish_reason)


SHAPES: list[Shape] = [
    # --- executed without a corrective round --------------------------------------------------
    Shape("plain text call", text_reply(f"The blue ones first. <tool>{_CALL}</tool>"), "executes"),
    Shape("qwen thinking, no reasoning parser (only the closing tag)", text_reply(
        f"The user wants the leftmost blue object {THOUGHT}. I could call {_DECOY_NO_MASK} if "
        f"nothing is there, but first I look.\n</think>\n\n<tool>{_CALL}</tool>"), "executes"),
    Shape("think block with a decoy call", text_reply(
        f"<think>{THOUGHT} maybe {_DECOY_SEGMENT}</think>Segmenting. <tool>{_CALL}</tool>"),
        "executes"),
    Shape("vLLM reasoning_content with a decoy call", text_reply(
        f"<tool>{_CALL}</tool>", reasoning_content=f"{THOUGHT} {_DECOY_NO_MASK}"), "executes"),
    Shape("newer vLLM 'reasoning' field", text_reply(
        f"Looking for blue. <tool>{_CALL}</tool>", reasoning=f"{THOUGHT} {_DECOY_SEGMENT}"),
        "executes"),
    Shape("json fenced inside <tool> (Gemini)", text_reply(
        f"I will segment.\n<tool>\n```json\n{_CALL}\n```\n</tool>"), "executes"),
    Shape("hermes <tool_call> with arguments (Qwen native text)", text_reply(
        f"<tool_call>\n{_HERMES}\n</tool_call>"), "executes"),
    Shape("qwen XML <function=...> inside <tool_call>", text_reply(
        f"<tool_call>\n<function=segment_phrase>\n<parameter=text_prompt>\n{PROMPT}\n"
        "</parameter>\n</function>\n</tool_call>"), "executes"),
    Shape("'arguments' instead of 'parameters' in <tool>", text_reply(f"<tool>{_HERMES}</tool>"),
          "executes"),
    Shape("arguments as a JSON string", text_reply(
        "<tool_call>" + json.dumps({"name": "segment_phrase",
                                    "arguments": json.dumps({"text_prompt": PROMPT})})
        + "</tool_call>"), "executes"),
    Shape("content as a list of text parts", shaped(
        [{"type": "text", "text": "Blue first. "},
         {"type": "text", "text": f"<tool>{_CALL}</tool>"}]),
        "executes"),
    Shape("several calls in one reply", text_reply(
        f"<tool>{_CALL}</tool>\n<tool>{json.dumps({'name': 'report_no_mask', 'parameters': {}})}"
        "</tool>"), "executes", told="ignored"),
    Shape("trailing text after the call", text_reply(
        f"<tool>{_CALL}</tool>\nThen I will examine the masks and pick the leftmost one."),
        "executes"),
    Shape("unicode reasoning", text_reply(
        f"Blaue Objekte zuerst — 青い物体を探す 🔵. <tool>{_CALL}</tool>"), "executes"),
    Shape("huge thinking (200 kB)", text_reply(
        f"{THOUGHT} " + "I keep thinking about the scene. " * 6000
        + f"</think><tool>{_CALL}</tool>"),
        "executes"),
    # --- one corrective round ------------------------------------------------------------------
    Shape("empty content", text_reply(""), "corrects", hint="empty"),
    Shape("empty content cut off (GPT-5 budget spent on reasoning)", text_reply("", "length"),
          "corrects", hint="cut off"),
    Shape("refusal with content null", shaped(None, refusal="I can't help with that request."),
          "corrects", hint="refusal"),
    Shape("content null, everything in reasoning_content", shaped(
        None, reasoning_content=f"{THOUGHT} I will call <tool>{_CALL}</tool>"), "corrects",
        hint="only reasoning"),
    Shape("cut off inside the call", text_reply(
        '<tool>{"name": "segment_phrase", "parame', "length"), "corrects", hint="cut off"),
    Shape("thinking cut off before any answer", text_reply(
        f"<think>{THOUGHT} the blue one is probably", "length"), "corrects", hint="cut off"),
    Shape("unclosed <tool>", text_reply(f"<tool>{_CALL}"), "corrects", protocols=_TEXT,
          hint="not closed"),
    Shape("bare fenced JSON without tags", text_reply(f"```json\n{_CALL}\n```"), "corrects",
          protocols=_TEXT, hint="not wrapped"),
    Shape("invalid JSON in <tool>", text_reply("<tool>{'name': 'segment_phrase'}</tool>"),
          "corrects", hint="not valid JSON"),
    Shape("both parameters and arguments", text_reply(
        '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "a"}, '
        '"arguments": {"text_prompt": "b"}}</tool>'), "corrects", hint="both"),
    Shape("unknown tool name in text", text_reply(
        '<tool>{"name": "segment", "parameters": {"text_prompt": "blue"}}</tool>'), "corrects",
        hint="Unknown tool"),
    Shape("prose without any call", text_reply("The leftmost blue object is the cube."), "corrects",
          hint="no <tool> call"),
    # --- native function calling (llm.protocol: tools) -----------------------------------------
    Shape("native call, content null", native_call("segment_phrase", text_prompt=PROMPT),
          "executes", _TOOLS),
    Shape("native call with answer text", native_call(
        "segment_phrase", reasoning="Blue objects first.", text_prompt=PROMPT), "executes",
        _TOOLS),
    Shape("native call, thinking in content", native_call(
        "segment_phrase", reasoning=f"{THOUGHT} {_DECOY_NO_MASK}</think>Segmenting.",
        text_prompt=PROMPT), "executes", _TOOLS),
    Shape("several native calls", native_calls(
        [("segment_phrase", json.dumps({"text_prompt": PROMPT})), ("report_no_mask", "{}")]),
        "executes", _TOOLS, told="ignored"),
    Shape("tool calls left in content (hermes parser failed)", text_reply(
        f"<tool_call>\n{_HERMES}\n</tool_call>\n<tool_call>\n{{bad json\n</tool_call>"),
        "executes", _TOOLS, told="ignored"),
    Shape("native call with invalid JSON arguments", native_call(
        "segment_phrase", arguments='{"text_prompt": "blue'), "corrects", _TOOLS,
        hint="not valid JSON"),
    Shape("native call of an unknown function", native_call("segment_objects", text_prompt="x"),
          "corrects", _TOOLS, hint="Unknown function"),
    Shape("native call with wrong arguments", native_call("segment_phrase", phrase=PROMPT),
          "corrects", _TOOLS, hint="Wrong parameters"),
]


def shapes_for(protocol: str) -> list[Shape]:
    return [s for s in SHAPES if protocol in s.protocols]


def good_replies(protocol: str) -> dict[str, Reply]:
    """Well-formed replies for the rounds after the shape under test."""
    if protocol == "tools":
        return {"segment": native_call("segment_phrase", text_prompt=PROMPT),
                "select": native_call("select_masks_and_return", final_answer_masks=[1])}
    return {"segment": text_reply(f"<tool>{_CALL}</tool>"),
            "select": text_reply('<tool>{"name": "select_masks_and_return", "parameters": '
                            '{"final_answer_masks": [1]}}</tool>')}


def script_for(shape: Shape, protocol: str) -> list[Reply]:
    """The whole main-loop script of a query whose first reply has this shape."""
    good = good_replies(protocol)
    if shape.outcome == "executes":
        return [shape.reply, good["select"]]
    return [shape.reply, good["segment"], good["select"]]
