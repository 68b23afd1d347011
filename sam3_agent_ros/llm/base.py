"""The LLM client interface the agent loop talks to."""

from __future__ import annotations

from typing import Protocol

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.types import LlmReply, Message


class LlmClient(Protocol):
    """``complete`` sends one Chat Completions request and returns the reply text and usage.

    It raises ``LlmError`` for every failure (after its own retries) and returns early with
    ``LlmError`` when ``cancel`` is set or its deadline passes. Images in ``messages`` are numpy
    arrays (``ImagePart``); converting them to data URLs is the client's job."""

    def complete(self, messages: list[Message], cancel: CancelToken) -> LlmReply: ...
