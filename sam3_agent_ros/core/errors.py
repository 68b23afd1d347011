"""The whole error vocabulary of the agent loop.

- ``Mistake``: a value, not an exception: the model's reply was malformed or asked for something
  impossible. Parsing (``protocol.interpret``) and the tools (``ToolBox.check`` / ``execute``)
  return it; the loop sends its text back to the model as a corrective turn and continues
  (bounded by ``agent.max_consecutive_mistakes``).
- ``QueryEnded``: the query is over (system error, limit, cancel). Carries the terminal status and
  a human-readable reason; the loop turns it into the one ``Result``.
- ``LlmError`` / ``SegmenterError``: failures of the systems we call; they end the query as
  ``failed`` with their message. An ``LlmError`` also carries what failed as fields
  (``LlmFailure``: kind, endpoint, status code, attempts...), so that the agent and the node's
  health read them instead of parsing the text.
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


@dataclass(frozen=True)
class LlmFailure:
    """What an ``LlmError`` says, as fields; None where unknown (e.g. an LLM port that only
    gives a message). ``endpoint`` is the redacted ``llm.base_url``; ``cause`` the connection
    error's text (unreachable); ``waited_s`` how long the last attempt waited (timeout)."""

    kind: str | None = None  # one of LlmError's kinds
    endpoint: str | None = None
    status_code: int | None = None
    attempts: int | None = None
    cause: str | None = None
    waited_s: float | None = None


class LlmError(Exception):
    """The LLM endpoint failed (HTTP error after retries, timeout, malformed response).
    ``str`` is the message for a person; ``failure`` (and the same attributes on the error)
    says what failed."""

    TIMEOUT = "timeout"  # connected, but no answer within llm.timeout_s or the query's time
    UNREACHABLE = "unreachable"  # no connection could be made
    HTTP_STATUS = "http-status"  # an error status (after retries for the retriable ones)
    BAD_REPLY = "bad-reply"  # an answer that cannot be used (not JSON, no choices...)
    DEADLINE = "deadline"  # the query's time was up before a request was sent
    CANCELLED = "cancelled"  # the query was cancelled while waiting

    def __init__(self, message: str, *, kind: str | None = None, endpoint: str | None = None,
                 status_code: int | None = None, attempts: int | None = None,
                 cause: str | None = None, waited_s: float | None = None):
        super().__init__(message)
        self.failure = LlmFailure(kind, endpoint, status_code, attempts, cause, waited_s)

    @property
    def kind(self) -> str | None:
        return self.failure.kind

    @property
    def endpoint(self) -> str | None:
        return self.failure.endpoint


class SegmenterError(Exception):
    """The segmenter failed or returned something unusable; ``kind`` says which, as a field
    (None: a plugin's own error, not classified)."""

    BAD_INPUT = "bad_input"  # an image or prompt the segmenter cannot take
    CLOSED = "closed"  # used after close() (the node released it)
    INFERENCE = "inference"  # the model itself raised
    MALFORMED = "malformed"  # its output lacks masks / scores / boxes or is inconsistent
    LOAD = "load"  # the model or its files could not be loaded

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
