"""Pure interpretation of model replies (CONTRACTS §1, §1b) and verifier verdicts.

A reply is first split into thinking and answer: thinking (everything up to the last ``</think>``,
an unclosed ``<think>`` to the end, the server's reasoning field) is never searched for tool calls
and never kept. The answer then yields one tool call:

- text protocol: the first ``<tool>{json}</tool>``, also accepted as the hermes form
  ``<tool_call>{json}</tool_call>`` (or its XML variant ``<function=...><parameter=...>``), with
  the JSON optionally fenced in a ```json block and ``"arguments"`` as a synonym of
  ``"parameters"``;
- native protocol (``tools``): the reply's first ``tool_calls`` entry; when the server left the
  call in the text instead, the text protocol is the fallback.

Whatever cannot be executed becomes a corrective message for the model (``Interpretation.mistake``),
never an exception: empty, cut-off and refused replies included. Further calls in the same reply
are counted (``ignored_calls``) and the model is told they did not run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sam3_agent_ros.core import guarded_json
from sam3_agent_ros.core.errors import ModelMistake
from sam3_agent_ros.core.types import LlmReply, NativeToolCall

SEGMENT = "segment_phrase"
EXAMINE = "examine_each_mask"
SELECT = "select_masks_and_return"
REPORT_NO_MASK = "report_no_mask"

# name -> {parameter: required python type}
TOOL_SCHEMAS: dict[str, dict[str, type]] = {
    SEGMENT: {"text_prompt": str},
    EXAMINE: {},
    SELECT: {"final_answer_masks": list},
    REPORT_NO_MASK: {},
}

# The same four tools as OpenAI function definitions (llm.protocol: tools).
TOOL_FUNCTIONS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": SEGMENT,
        "description": "Segment the camera frame with a short noun phrase. The masks found "
                       "replace all current masks and are numbered 1..N by descending score.",
        "parameters": {"type": "object", "properties": {"text_prompt": {
            "type": "string", "description": "a short noun phrase, e.g. 'blue cup'"}},
            "required": ["text_prompt"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": EXAMINE,
        "description": "Verify every current mask separately; keeps the accepted ones, "
                       "renumbered 1..K in their previous order.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": SELECT,
        "description": "Finish: answer the query with these current masks (1-based ids).",
        "parameters": {"type": "object", "properties": {"final_answer_masks": {
            "type": "array", "items": {"type": "integer"}, "minItems": 1}},
            "required": ["final_answer_masks"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": REPORT_NO_MASK,
        "description": "Finish: nothing in the image answers the query.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}},
]

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_CALL_OPEN = re.compile(r"<(tool|tool_call)>", re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)
_VERDICT = re.compile(r"<verdict>\s*(accept|reject)\s*</verdict>", re.IGNORECASE)
_TEXT_HINT = ('Reply with your reasoning, then exactly one tool call such as '
              '<tool>{"name": "segment_phrase", "parameters": {"text_prompt": "red mug"}}</tool>')
_NATIVE_HINT = ("Reply with one or two sentences, then call exactly one of the functions "
                f"{', '.join(TOOL_SCHEMAS)}.")
_BRIEF = "Be brief: one or two sentences, then the tool call."


@dataclass(frozen=True)
class ToolCall:
    name: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Interpretation:
    """What a reply means for the loop: a ``call`` to run, or a ``mistake`` to send back."""

    call: ToolCall | None
    mistake: str | None
    kept_text: str  # the assistant message kept in the conversation (no thinking)
    reasoning: str  # for the status stream: answer text before the call, else the thinking
    native_call: NativeToolCall | None = None  # the tool_calls entry answered (native protocol)
    ignored_calls: int = 0  # further calls in the same reply, not run


def split_thinking(text: str) -> tuple[str, str]:
    """(thinking, answer): everything up to the last ``</think>`` (opening tag or not) and an
    unclosed ``<think>`` to the end are thinking; the rest is the answer."""
    thinking: list[str] = []
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        thinking.append(text[: closes[-1].start()])
        text = text[closes[-1].end():]
    opened = _THINK_OPEN.search(text)
    if opened:
        thinking.append(text[opened.end():])
        text = text[: opened.start()]
    cleaned = _THINK_OPEN.sub("", "\n".join(thinking))
    return cleaned.strip(), text.strip()


def interpret(reply: LlmReply, native: bool = False) -> Interpretation:
    """Turn one reply into a call or a corrective message (see the module docstring)."""
    thinking, answer = split_thinking(reply.text or "")
    thinking = "\n".join(t for t in (reply.reasoning.strip(), thinking) if t)
    if native and reply.tool_calls:
        return _interpret_native(reply, answer, thinking)
    opened = _CALL_OPEN.search(answer)
    if opened is None:
        return _no_call(reply, answer, thinking, native)
    return _interpret_text(reply, answer, thinking, opened)


def _interpret_native(reply: LlmReply, answer: str, thinking: str) -> Interpretation:
    first = reply.tool_calls[0]
    ignored = len(reply.tool_calls) - 1
    reasoning = answer or thinking

    def mistake(text: str) -> Interpretation:
        return Interpretation(None, text, answer, reasoning, first, ignored)

    if first.name not in TOOL_SCHEMAS:
        return mistake(f"Unknown function {first.name!r}. Available functions: "
                       f"{', '.join(TOOL_SCHEMAS)}.")
    raw = (first.arguments or "").strip() or "{}"
    try:
        arguments = guarded_json.loads(raw)
    except guarded_json.JsonRefused as exc:
        return mistake(f"The arguments of {first.name} are not valid JSON ({exc}). Call it again "
                       f"with a JSON object, e.g. {_native_signature(first.name)}.")
    if not isinstance(arguments, dict):
        return mistake(f"The arguments of {first.name} must be a JSON object, e.g. "
                       f"{_native_signature(first.name)}.")
    try:
        _check_parameters(first.name, arguments, native=True)
    except ModelMistake as exc:
        return mistake(str(exc))
    return Interpretation(ToolCall(first.name, arguments), None, answer, reasoning, first,
                          ignored)


def _interpret_text(reply: LlmReply, answer: str, thinking: str,
                    opened: re.Match) -> Interpretation:
    tag = opened.group(1).lower()
    close = f"</{tag}>"
    end = answer.lower().find(close, opened.end())
    before = answer[: opened.start()].strip()
    reasoning = before or thinking
    if end < 0:
        if reply.finish_reason == "length":
            text = f"Your reply was cut off at the token limit before the tool call ended. {_BRIEF}"
        else:
            text = f"Your <{tag}> call is not closed with {close}. {_TEXT_HINT}"
        return Interpretation(None, text, answer or "(reply cut off)", reasoning)
    kept = answer[: end + len(close)]
    rest = answer[end + len(close):]
    ignored = len(_CALL_OPEN.findall(rest))
    try:
        call = _parse_call_body(answer[opened.end(): end], tag)
    except ModelMistake as exc:
        return Interpretation(None, str(exc), kept, reasoning, None, ignored)
    return Interpretation(call, None, kept, reasoning, None, ignored)


def _no_call(reply: LlmReply, answer: str, thinking: str, native: bool) -> Interpretation:
    hint = _NATIVE_HINT if native else _TEXT_HINT
    reasoning = answer or thinking
    refusal = (reply.refusal or "").strip()
    if refusal:
        text = (f'Your reply was a refusal ("{_clip(refusal, 200)}"). This task only asks to '
                f"outline objects in a camera image for a robot. {hint}")
        kept = answer or f"(refused: {_clip(refusal, 200)})"
    elif reply.finish_reason == "length":
        text = f"Your reply was cut off at the token limit before any tool call. {_BRIEF}"
        kept = answer or "(reply cut off)"
    elif not answer and thinking:
        text = ("Your reply held only reasoning and no answer: after reasoning, write the tool "
                f"call in the answer itself. {_BRIEF}")
        kept = "(reasoning only, no answer)"
    elif not answer:
        text = f"Your reply was empty. {hint}"
        kept = "(empty reply)"
    elif _looks_like_bare_call(answer):
        text = ("Your tool call is not wrapped in <tool>...</tool> tags, so it was not run. "
                f"{_TEXT_HINT}")
        kept = answer
    else:
        text = f"Your reply contains no <tool> call. {hint}"
        kept = answer
    return Interpretation(None, text, kept, reasoning)


def _looks_like_bare_call(answer: str) -> bool:
    return '"name"' in answer and any(f'"{name}"' in answer for name in TOOL_SCHEMAS)


def _parse_call_body(body: str, tag: str) -> ToolCall:
    body = body.strip()
    if tag == "tool_call" and body.startswith("<function="):
        return _parse_xml_call(body)
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        payload = guarded_json.loads(body)
    except guarded_json.JsonRefused as exc:
        raise ModelMistake(f"The text inside <{tag}>...</{tag}> is not valid JSON ({exc}). "
                           f"{_TEXT_HINT}") from None
    if not isinstance(payload, dict):
        raise ModelMistake('The tool call must be a JSON object '
                           '{"name": ..., "parameters": {...}}.')
    name = payload.get("name")
    if name not in TOOL_SCHEMAS:
        raise ModelMistake(f"Unknown tool {name!r}. Available tools: {', '.join(TOOL_SCHEMAS)}.")
    extra_keys = set(payload) - {"name", "parameters", "arguments"}
    if extra_keys:
        raise ModelMistake(f"Unexpected keys {sorted(extra_keys)} in the tool call: use only "
                           '"name" and "parameters".')
    if "parameters" in payload and "arguments" in payload:
        raise ModelMistake('The tool call has both "parameters" and "arguments": give the '
                           f'parameters once, as "parameters". Use {_signature(name)}.')
    parameters = payload.get("parameters", payload.get("arguments", {}))
    if isinstance(parameters, str):  # OpenAI-style arguments: a JSON string
        try:
            parameters = guarded_json.loads(parameters) if parameters.strip() else {}
        except guarded_json.JsonRefused:
            raise ModelMistake(f'"parameters" of {name} must be a JSON object. '
                               f"Use {_signature(name)}.") from None
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        raise ModelMistake(f'"parameters" of {name} must be a JSON object.')
    _check_parameters(name, parameters)
    return ToolCall(name, parameters)


def _parse_xml_call(body: str) -> ToolCall:
    """The XML form newer Qwen models write inside ``<tool_call>``:
    ``<function=NAME><parameter=KEY>VALUE</parameter>...</function>``. String parameters are
    taken verbatim; others (``final_answer_masks``) must be JSON."""
    function = _XML_FUNCTION.fullmatch(body)
    if function is None:
        raise ModelMistake("The <function=...> call inside <tool_call> is not closed with "
                           f"</function>. {_TEXT_HINT}")
    name = function.group(1)
    if name not in TOOL_SCHEMAS:
        raise ModelMistake(f"Unknown tool {name!r}. Available tools: {', '.join(TOOL_SCHEMAS)}.")
    parameters: dict[str, Any] = {}
    for key, raw in _XML_PARAMETER.findall(function.group(2)):
        value = raw.strip()
        if TOOL_SCHEMAS[name].get(key, str) is not str:
            try:
                value = guarded_json.loads(value)
            except guarded_json.JsonRefused:
                raise ModelMistake(f"Parameter {key!r} of {name} must be JSON. Use "
                                   f"{_signature(name)}.") from None
        parameters[key] = value
    _check_parameters(name, parameters)
    return ToolCall(name, parameters)


def parse_tool_call(reply: str) -> ToolCall:
    """The text protocol alone: the first tool call of a reply, or ``ModelMistake``."""
    interpretation = interpret(LlmReply(reply))
    if interpretation.call is None:
        raise ModelMistake(interpretation.mistake or "no tool call")
    return interpretation.call


def kept_text(reply: str) -> str:
    """The part of a text reply kept in the conversation: the answer up to the first call's end."""
    return interpret(LlmReply(reply)).kept_text


def _check_parameters(name: str, parameters: dict[str, Any], native: bool = False) -> None:
    schema = TOOL_SCHEMAS[name]
    signature = _native_signature(name) if native else _signature(name)
    missing = [key for key in schema if key not in parameters]
    extra = [key for key in parameters if key not in schema]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        raise ModelMistake(f"Wrong parameters for {name} ({'; '.join(parts)}). Use {signature}.")
    for key, kind in schema.items():
        if not isinstance(parameters[key], kind):
            raise ModelMistake(f"Parameter {key!r} of {name} must be a JSON "
                               f"{_json_type(kind)}. Use {signature}.")
    if name == SEGMENT and not parameters["text_prompt"].strip():
        raise ModelMistake(f"text_prompt must be a non-empty noun phrase. Use {signature}.")
    if name == SELECT:
        ids = parameters["final_answer_masks"]
        if not ids:
            raise ModelMistake("final_answer_masks is empty: to answer that nothing matches, call "
                               "report_no_mask instead.")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ModelMistake(f"final_answer_masks must be a list of integer mask ids, got {ids}.")


_EXAMPLE_ARGUMENTS = {SEGMENT: '{"text_prompt": "<short noun phrase>"}', EXAMINE: "{}",
                      SELECT: '{"final_answer_masks": [1, 2]}', REPORT_NO_MASK: "{}"}


def _signature(name: str) -> str:
    return f'<tool>{{"name": "{name}", "parameters": {_EXAMPLE_ARGUMENTS[name]}}}</tool>'


def _native_signature(name: str) -> str:
    return f"{name}({_EXAMPLE_ARGUMENTS[name]})"


def _json_type(kind: type) -> str:
    return {str: "string", list: "array", dict: "object"}.get(kind, kind.__name__)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip_reasoning(text: str, limit: int) -> str | None:
    """The end of ``text`` in at most ``limit`` characters (the part nearest the decision);
    None when ``limit`` is 0 or there is nothing to say."""
    text = " ".join(text.split())
    if limit <= 0 or not text:
        return None
    return text if len(text) <= limit else "..." + text[len(text) - limit + 3:]


def ignored_calls_note(count: int) -> str:
    plural = "s" if count > 1 else ""
    return (f"Note: your reply held {count} more tool call{plural} after the first; only the "
            "first call of a reply runs, the others were ignored.")


def parse_verdict(reply: str) -> bool | None:
    """True for Accept, False for Reject, None when the answer has no verdict tag.

    Thinking is ignored; the last verdict of the answer wins (a model may quote the format
    before answering)."""
    found = _VERDICT.findall(split_thinking(reply)[1])
    if not found:
        return None
    return found[-1].lower() == "accept"


def normalize_prompt(text: str) -> str:
    """Key for duplicate detection: case, surrounding space and inner runs of space ignored."""
    return " ".join(text.lower().split()).strip(" .")
