"""``ObservedLlm``: an LLM client wrapper that records every call's outcome and latency for the
node's health (``health/recorder.py``'s ``HealthRecorder``, or anything with its ``clock`` and
``llm_call``). ROS-free."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError, LlmFailure
from sam3_agent_ros.health import llm_failure
from sam3_agent_ros.redact import redact_text


class LlmCallRecorder(Protocol):
    """What ``ObservedLlm`` records into (``HealthRecorder`` is one)."""

    @property
    def clock(self) -> Callable[[], float]: ...

    def llm_call(self, ok: bool, latency_s: float, error: str | None = None,
                 failure: LlmFailure | None = None) -> None: ...


class ObservedLlm:
    """An ``LlmClient`` that forwards to ``inner`` and records each call's outcome and latency
    in ``recorder``. A call that ends because its query was cancelled (preemption, deadline,
    deactivation) is not the endpoint's failure and is not recorded, unless it waited out the
    query's time for an answer (a hung endpoint: kind TIMEOUT)."""

    def __init__(self, inner: Any, recorder: LlmCallRecorder):
        self.inner = inner
        self._recorder = recorder

    def complete(self, messages: list, cancel: CancelToken, tools: list[dict] | None = None):
        started = self._recorder.clock()
        try:
            reply = (self.inner.complete(messages, cancel, tools=tools) if tools is not None
                     else self.inner.complete(messages, cancel))
        except LlmError as exc:
            remaining = cancel.remaining()
            if not cancel.cancelled and (remaining is None or remaining > 0
                                         or exc.kind == LlmError.TIMEOUT):
                self._recorder.llm_call(False, self._recorder.clock() - started,
                                        redact_text(str(exc)), llm_failure.redacted(exc.failure))
            raise
        self._recorder.llm_call(True, self._recorder.clock() - started)
        return reply

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def __getattr__(self, name: str) -> Any:  # the inner client's other attributes
        return getattr(self.inner, name)
