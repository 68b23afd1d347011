"""``--trace FILE``: every LLM request and its reply (or error) as JSON lines.

``TracingClient`` wraps any ``LlmClient``. Each call writes a ``request`` line and then a
``response`` or ``error`` line with the same ``call`` number (verifier calls run concurrently, so
lines of different calls interleave). Images are replaced by placeholders
``{"image": "<key> WxH"}``; the API key never reaches this layer, and every URL in a line is
written redacted (``redact.py``: no user info, no key-like query parameters). A request line
also says what was sent besides the messages when the client knows (``OpenAiClient.
request_extras``, interface §14): ``"sent": {"priority": 10, "extra_body": {"cache_salt":
"***"}, "extra_headers": {"X-Tenant": "lab-a"}}``, secret-like values as ``***``. Lines look
like::

    {"t": 1733000000.12, "call": 3, "kind": "request", "conversation": "main",
     "n_messages": 4, "n_images": 2, "messages": [{"role": "system", "content": ["..."]}, ...],
     "sent": {"priority": null, "extra_body": null, "extra_headers": null}}
    {"t": 1733000001.40, "call": 3, "kind": "response", "duration_s": 1.28, "text": "...",
     "reasoning": null, "tool_calls": null, "finish_reason": "stop", "refusal": null,
     "prompt_tokens": 812, "completion_tokens": 95}
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.ports import LlmClient
from sam3_agent_ros.core.types import ImagePart, LlmReply, Message, NativeToolCall
from sam3_agent_ros.redact import redact_text


def image_placeholder(part: ImagePart) -> dict[str, str]:
    shape: tuple[int, ...] = getattr(part.array, "shape", ())
    size = f"{shape[1]}x{shape[0]}" if len(shape) >= 2 else "?"
    return {"image": f"{part.key} {size}"}


def trace_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as JSON-able dicts with images replaced by placeholders."""
    traced = []
    for message in messages:
        entry: dict[str, Any] = {
            "role": message.role,
            "content": [image_placeholder(p) if isinstance(p, ImagePart) else p
                        for p in message.content]}
        if message.tool_calls:
            entry["tool_calls"] = [_call(c) for c in message.tool_calls]
        if message.tool_call_id is not None:
            entry["tool_call_id"] = message.tool_call_id
        traced.append(entry)
    return traced


def _call(call: NativeToolCall) -> dict[str, str]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def conversation_of(messages: list[Message]) -> str:
    """``verifier`` when the system prompt asks for a verdict, else ``main``."""
    if messages and messages[0].role == "system" and "verdict" in messages[0].text_content.lower():
        return "verifier"
    return "main"


class TracingClient:
    """An ``LlmClient`` that forwards to ``inner`` and appends each exchange to ``path``."""

    def __init__(self, inner: LlmClient, path: str | Path):
        self.inner = inner
        self.path = Path(path)
        self._lock = threading.Lock()
        self._calls = itertools.count(1)
        self._file = self.path.open("a", encoding="utf-8")

    def complete(self, messages: list[Message], cancel: CancelToken,
                 tools: list[dict] | None = None) -> LlmReply:
        call = next(self._calls)
        self._write({"call": call, "kind": "request", "conversation": conversation_of(messages),
                     "n_messages": len(messages),
                     "n_images": sum(len(m.images) for m in messages),
                     "tools": [t["function"]["name"] for t in tools] if tools else None,
                     "messages": trace_messages(messages), **self._sent()})
        started = time.monotonic()
        try:
            if tools:
                reply = self.inner.complete(messages, cancel, tools=tools)
            else:
                reply = self.inner.complete(messages, cancel)
        except BaseException as exc:
            self._write({"call": call, "kind": "error",
                         "duration_s": round(time.monotonic() - started, 4),
                         "error_type": type(exc).__name__, "error": str(exc)})
            raise
        self._write({"call": call, "kind": "response",
                     "duration_s": round(time.monotonic() - started, 4), "text": reply.text,
                     "reasoning": reply.reasoning or None,
                     "tool_calls": [_call(c) for c in reply.tool_calls] or None,
                     "finish_reason": reply.finish_reason, "refusal": reply.refusal,
                     "prompt_tokens": reply.prompt_tokens,
                     "completion_tokens": reply.completion_tokens})
        return reply

    def _sent(self) -> dict[str, Any]:
        extras = getattr(self.inner, "request_extras", None)
        return {"sent": extras()} if callable(extras) else {}

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()
        close_inner = getattr(self.inner, "close", None)
        if callable(close_inner):
            close_inner()

    def _write(self, record: dict[str, Any]) -> None:
        line = redact_text(json.dumps({"t": round(time.time(), 4), **record},
                                      ensure_ascii=False, default=str))
        with self._lock:
            if self._file.closed:
                return
            self._file.write(line + "\n")
            self._file.flush()
