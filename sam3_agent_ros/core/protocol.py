"""Pure interpretation of model replies (interface §1, §1b) and verifier verdicts.

A reply is first split into thinking and answer: thinking (everything up to the last ``</think>``,
an unclosed ``<think>`` to the end, the server's reasoning field) is never searched for tool calls
and never kept. The answer then yields one tool call:

- text protocol: the first ``<tool>{json}</tool>``, also accepted as the hermes form
  ``<tool_call>{json}</tool_call>`` (or its XML variant ``<function=...><parameter=...>``), with
  the JSON optionally fenced in a ```json block and ``"arguments"`` as a synonym of
  ``"parameters"``;
- native protocol (``tools``): the reply's first ``tool_calls`` entry; when the server left the
  call in the text instead, the text protocol is the fallback.

Whatever cannot be executed becomes a corrective message for the model (``Interpretation.mistake``,
a ``Mistake`` value), never an exception: empty, cut-off and refused replies included. Further
calls in the same reply are counted (``ignored_calls``) and the model is told they did not run.

``TOOLS`` is the one description of the four tools: the parameter checks, the OpenAI function
list (``TOOL_FUNCTIONS``) and the examples in corrective messages all derive from it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sam3_agent_ros.core import guarded_json
from sam3_agent_ros.core.errors import Mistake
from sam3_agent_ros.core.types import LlmReply, NativeToolCall

SEGMENT = "segment_phrase"
EXAMINE = "examine_each_mask"
SELECT = "select_masks_and_return"
REPORT_NO_MASK = "report_no_mask"

_JSON_TYPES: dict[type, str] = {str: "string", list: "array"}


@dataclass(frozen=True)
class Parameter:
    """One parameter of a tool: the Python type its JSON value must have (checked on every
    call), what it means, a valid example (shown to the model in hints and corrections), and
    the JSON-schema keywords beyond the type (the native function definition)."""

    name: str
    kind: type
    description: str
    example: Any
    schema: Mapping[str, Any] = field(default_factory=dict)

    def json_schema(self) -> dict[str, Any]:
        return {"type": _JSON_TYPES[self.kind], **self.schema,
                "description": f"{self.description}, e.g. {json.dumps(self.example)}"}


@dataclass(frozen=True)
class Tool:
    """One of the four tools (interface §1). Everything the protocol says about a tool (the
    checks, the OpenAI function, the examples in corrective messages) derives from this."""

    name: str
    description: str
    parameters: tuple[Parameter, ...] = ()

    def parameter_kind(self, key: str) -> type | None:
        return next((p.kind for p in self.parameters if p.name == key), None)

    def example_arguments(self) -> str:
        return json.dumps({p.name: p.example for p in self.parameters})

    def text_example(self) -> str:
        """The call as the text protocol writes it."""
        return f'<tool>{{"name": "{self.name}", "parameters": {self.example_arguments()}}}</tool>'

    def native_example(self) -> str:
        """The call as a function call (``llm.protocol: tools``)."""
        return f"{self.name}({self.example_arguments()})"

    def function(self) -> dict[str, Any]:
        """The OpenAI function definition (interface §1b)."""
        parameters: dict[str, Any] = {
            "type": "object", "properties": {p.name: p.json_schema() for p in self.parameters}}
        if self.parameters:
            parameters["required"] = [p.name for p in self.parameters]
        parameters["additionalProperties"] = False
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": parameters}}


# The one table of tools.
TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool(SEGMENT, "Segment the camera frame with a short noun phrase. The masks found replace "
                  "all current masks and are numbered 1..N by descending score.",
         (Parameter("text_prompt", str, "a short noun phrase", "red mug"),)),
    Tool(EXAMINE, "Verify every current mask separately; keeps the accepted ones, renumbered "
                  "1..K in their previous order."),
    Tool(SELECT, "Finish: answer the query with these current masks (1-based ids).",
         (Parameter("final_answer_masks", list, "the ids of the current masks that answer the "
                    "query", [1, 2], {"items": {"type": "integer"}, "minItems": 1}),)),
    Tool(REPORT_NO_MASK, "Finish: nothing in the image answers the query."),
)}
# The same tools as OpenAI function definitions, sent with every request (llm.protocol: tools).
TOOL_FUNCTIONS: list[dict[str, Any]] = [tool.function() for tool in TOOLS.values()]

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_CALL_OPEN = re.compile(r"<(tool|tool_call)>", re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)</function>", re.DOTALL)
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)
_VERDICT = re.compile(r"<verdict>\s*(accept|reject)\s*</verdict>", re.IGNORECASE)
_TEXT_HINT = ("Reply with your reasoning, then exactly one tool call such as "
              f"{TOOLS[SEGMENT].text_example()}")
_NATIVE_HINT = ("Reply with one or two sentences, then call exactly one of the functions "
                f"{', '.join(TOOLS)}.")
_BRIEF = "Be brief: one or two sentences, then the tool call."


@dataclass(frozen=True)
class ToolCall:
    name: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class Interpretation:
    """What a reply means for the loop: exactly one of a ``call`` to run and a ``mistake`` to
    send back."""

    call: ToolCall | None
    mistake: Mistake | None
    kept_text: str  # the assistant message kept in the conversation (no thinking)
    reasoning: str  # for the status stream: answer text before the call, else the thinking
    native_call: NativeToolCall | None = None  # the tool_calls entry answered (native protocol)
    ignored_calls: int = 0  # further calls in the same reply, not run

    @classmethod
    def of(cls, outcome: ToolCall | Mistake, kept_text: str, reasoning: str,
           native_call: NativeToolCall | None = None, ignored_calls: int = 0) -> Interpretation:
        call = outcome if isinstance(outcome, ToolCall) else None
        mistake = outcome if isinstance(outcome, Mistake) else None
        return cls(call, mistake, kept_text, reasoning, native_call, ignored_calls)

    @property
    def outcome(self) -> ToolCall | Mistake:
        """The call to run, or the mistake to send back (exactly one of them is set)."""
        if self.mistake is not None:
            return self.mistake
        if self.call is None:
            raise ValueError("an interpretation has neither a call nor a mistake")
        return self.call


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
    outcome = _native_call(first)
    return Interpretation.of(outcome, answer, answer or thinking, first, len(reply.tool_calls) - 1)


def _native_call(call: NativeToolCall) -> ToolCall | Mistake:
    tool = TOOLS.get(call.name)
    if tool is None:
        return Mistake(f"Unknown function {call.name!r}. Available functions: "
                       f"{', '.join(TOOLS)}.")
    raw = (call.arguments or "").strip() or "{}"
    try:
        arguments = guarded_json.loads(raw)
    except guarded_json.JsonRefused as exc:
        return Mistake(f"The arguments of {tool.name} are not valid JSON ({exc}). Call it again "
                       f"with a JSON object, e.g. {tool.native_example()}.")
    if not isinstance(arguments, dict):
        return Mistake(f"The arguments of {tool.name} must be a JSON object, e.g. "
                       f"{tool.native_example()}.")
    return _checked_call(tool, arguments, tool.native_example())


def _interpret_text(reply: LlmReply, answer: str, thinking: str,
                    opened: re.Match[str]) -> Interpretation:
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
        return Interpretation.of(Mistake(text), answer or "(reply cut off)", reasoning)
    kept = answer[: end + len(close)]
    ignored = len(_CALL_OPEN.findall(answer[end + len(close):]))
    outcome = _parse_call_body(answer[opened.end(): end], tag)
    return Interpretation.of(outcome, kept, reasoning, None, ignored)


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
    return Interpretation.of(Mistake(text), kept, reasoning)


def _looks_like_bare_call(answer: str) -> bool:
    return '"name"' in answer and any(f'"{name}"' in answer for name in TOOLS)


def _parse_call_body(body: str, tag: str) -> ToolCall | Mistake:
    body = body.strip()
    if tag == "tool_call" and body.startswith("<function="):
        return _parse_xml_call(body)
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        payload = guarded_json.loads(body)
    except guarded_json.JsonRefused as exc:
        return Mistake(f"The text inside <{tag}>...</{tag}> is not valid JSON ({exc}). "
                       f"{_TEXT_HINT}")
    if not isinstance(payload, dict):
        return Mistake('The tool call must be a JSON object {"name": ..., "parameters": {...}}.')
    name = payload.get("name")
    tool = TOOLS.get(name) if isinstance(name, str) else None
    if tool is None:
        return _unknown_tool(name)
    extra_keys = set(payload) - {"name", "parameters", "arguments"}
    if extra_keys:
        return Mistake(f"Unexpected keys {sorted(extra_keys)} in the tool call: use only "
                       '"name" and "parameters".')
    if "parameters" in payload and "arguments" in payload:
        return Mistake('The tool call has both "parameters" and "arguments": give the '
                       f'parameters once, as "parameters". Use {tool.text_example()}.')
    parameters = payload.get("parameters", payload.get("arguments", {}))
    if isinstance(parameters, str):  # OpenAI-style arguments: a JSON string
        try:
            parameters = guarded_json.loads(parameters) if parameters.strip() else {}
        except guarded_json.JsonRefused:
            return Mistake(f'"parameters" of {tool.name} must be a JSON object. '
                           f"Use {tool.text_example()}.")
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        return Mistake(f'"parameters" of {tool.name} must be a JSON object.')
    return _checked_call(tool, parameters, tool.text_example())


def _parse_xml_call(body: str) -> ToolCall | Mistake:
    """The XML form newer Qwen models write inside ``<tool_call>``:
    ``<function=NAME><parameter=KEY>VALUE</parameter>...</function>``. String parameters are
    taken verbatim; others (``final_answer_masks``) must be JSON."""
    function = _XML_FUNCTION.fullmatch(body)
    if function is None:
        return Mistake("The <function=...> call inside <tool_call> is not closed with "
                       f"</function>. {_TEXT_HINT}")
    tool = TOOLS.get(function.group(1))
    if tool is None:
        return _unknown_tool(function.group(1))
    parameters: dict[str, Any] = {}
    for key, raw in _XML_PARAMETER.findall(function.group(2)):
        value = raw.strip()
        if tool.parameter_kind(key) not in (str, None):  # unknown keys are reported below
            try:
                value = guarded_json.loads(value)
            except guarded_json.JsonRefused:
                return Mistake(f"Parameter {key!r} of {tool.name} must be JSON. Use "
                               f"{tool.text_example()}.")
        parameters[key] = value
    return _checked_call(tool, parameters, tool.text_example())


def _unknown_tool(name: object) -> Mistake:
    return Mistake(f"Unknown tool {name!r}. Available tools: {', '.join(TOOLS)}.")


def _checked_call(tool: Tool, parameters: dict[str, Any], example: str) -> ToolCall | Mistake:
    """The call when its parameters are the tool's (names, types, values); ``example`` shows
    the right form in the mistake otherwise."""
    expected = [p.name for p in tool.parameters]
    missing = [key for key in expected if key not in parameters]
    extra = [key for key in parameters if key not in expected]
    if missing or extra:
        parts = ([f"missing {missing}"] if missing else []) + \
            ([f"unexpected {extra}"] if extra else [])
        return Mistake(f"Wrong parameters for {tool.name} ({'; '.join(parts)}). Use {example}.")
    for parameter in tool.parameters:
        if not isinstance(parameters[parameter.name], parameter.kind):
            return Mistake(f"Parameter {parameter.name!r} of {tool.name} must be a JSON "
                           f"{_JSON_TYPES[parameter.kind]}. Use {example}.")
    if tool.name == SEGMENT and not parameters["text_prompt"].strip():
        return Mistake(f"text_prompt must be a non-empty noun phrase. Use {example}.")
    if tool.name == SELECT:
        ids = parameters["final_answer_masks"]
        if not ids:
            return Mistake("final_answer_masks is empty: to answer that nothing matches, call "
                           "report_no_mask instead.")
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return Mistake(f"final_answer_masks must be a list of integer mask ids, got {ids}.")
    return ToolCall(tool.name, parameters)


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
    found: list[str] = _VERDICT.findall(split_thinking(reply)[1])
    if not found:
        return None
    return found[-1].lower() == "accept"


def normalize_prompt(text: str) -> str:
    """Key for duplicate detection: case, surrounding space and inner runs of space ignored."""
    return " ".join(text.lower().split()).strip(" .")
