"""The whole error vocabulary of the agent loop.

- ``Mistake``: a value, not an exception: the model's reply was malformed or asked for something
  impossible. Parsing (``protocol.interpret``) and the tools (``ToolBox.check`` / ``execute``)
  return it; the loop sends its text back to the model as a corrective turn and continues
  (bounded by ``agent.max_consecutive_mistakes``).
- ``QueryEnded``: the query is over (system error, limit, cancel). Carries the terminal status and
  a human-readable reason; the loop turns it into the one ``Result``.
- ``LlmError`` / ``SegmenterError``: failures of the systems we call; they end the query as
  ``failed`` with their message.
"""

from __future__ import annotations

from dataclasses import dataclass

from sam3_agent_ros.core.types import QueryStatus


@dataclass(frozen=True)
class Mistake:
    """A reply the model must correct; ``text`` is the corrective message sent back."""

    text: str


class QueryEnded(Exception):
    def __init__(self, status: QueryStatus, reason: str | None):
        super().__init__(reason or status.value)
        self.status = status
        self.reason = reason


class LlmError(Exception):
    """The LLM endpoint failed (HTTP error after retries, timeout, malformed response)."""


class SegmenterError(Exception):
    """The segmenter failed or returned something unusable."""
