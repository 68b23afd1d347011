"""The whole error vocabulary of the agent loop.

- ``ModelMistake``: the model's reply was malformed or asked for something impossible. Its message
  goes back to the model as a corrective user turn; the loop continues (bounded by
  ``agent.max_consecutive_mistakes``).
- ``QueryEnded``: the query is over (system error, limit, cancel). Carries the terminal status and
  a human-readable reason; the loop turns it into the one ``Result``.
- ``LlmError`` / ``SegmenterError``: failures of the systems we call; they end the query as
  ``failed`` with their message.
"""

from __future__ import annotations

from sam3_agent_ros.core.types import QueryStatus


class ModelMistake(Exception):
    """A reply the model must correct. ``str(exc)`` is the corrective message sent back."""


class QueryEnded(Exception):
    def __init__(self, status: QueryStatus, reason: str | None):
        super().__init__(reason or status.value)
        self.status = status
        self.reason = reason


class LlmError(Exception):
    """The LLM endpoint failed (HTTP error after retries, timeout, malformed response)."""


class SegmenterError(Exception):
    """The segmenter failed or returned something unusable."""
