"""Pure: the parts of a Chat Completions reply the client reads (content as text, the separate
reasoning field, native tool calls, token counts, a ``Retry-After`` header), whatever shape an
OpenAI-compatible server gives them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.types import NativeToolCall


def content_text(content: object) -> str:
    """Message content as text: a string, null, or a list of parts (text parts joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            kind = _field(part, "type")
            text = _field(part, "text")
            if kind in (None, "text", "output_text") and isinstance(text, str):
                texts.append(text)
        return "".join(texts)
    raise LlmError(f"malformed LLM response: content is a {type(content).__name__}, not a "
                   "string or a list of parts", kind=LlmError.BAD_REPLY)


def reasoning_text(message: object) -> str:
    """The server's separate reasoning field: vLLM ``reasoning_content`` (newer: ``reasoning``)."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if value is None:
            value = (getattr(message, "model_extra", None) or {}).get(name)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def tool_calls(calls: object) -> tuple[NativeToolCall, ...]:
    if not calls:
        return ()
    if not isinstance(calls, Iterable):
        raise TypeError(f"tool_calls is a {type(calls).__name__}, not a list")
    found: list[NativeToolCall] = []
    for index, call in enumerate(calls):
        function = _field(call, "function")
        name = _field(function, "name") if function is not None else None
        arguments = _field(function, "arguments") if function is not None else None
        if not isinstance(arguments, str):  # some servers send an object instead of a string
            arguments = json.dumps(arguments) if arguments is not None else ""
        call_id = _field(call, "id")
        found.append(NativeToolCall(id=str(call_id) if call_id else f"call_{index}",
                                    name=str(name or ""), arguments=arguments))
    return tuple(found)


def _field(item: object, name: str) -> object:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def optional_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def count(usage: object, name: str) -> int:
    value = getattr(usage, name, None) if usage is not None else None
    try:
        return max(0, int(value)) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def retry_after(exc: Any) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None
