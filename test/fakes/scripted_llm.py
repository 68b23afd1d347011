"""An in-process scripted LLM: replays fixed replies and fails loudly when the script runs out.

Main-loop and verifier requests are told apart by the system prompt (the verifier's asks for a
<verdict>), and recorded separately so tests can assert the context invariants on each.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sam3_agent_ros.core.cancel import CancelToken
from sam3_agent_ros.core.errors import LlmError
from sam3_agent_ros.core.types import LlmReply, Message


class ScriptExhausted(AssertionError):
    pass


def is_verifier_request(messages: list[Message]) -> bool:
    return "<verdict>" in messages[0].text_content


class ScriptedLlm:
    def __init__(self, main: list[str | Exception], verifier: Callable[[list[Message]], str]
                 | None = None, usage: tuple[int, int] = (100, 10)):
        self._main = list(main)
        self._verifier = verifier
        self._usage = usage
        self._lock = threading.Lock()
        self.main_requests: list[list[Message]] = []
        self.verifier_requests: list[list[Message]] = []

    def complete(self, messages: list[Message], cancel: CancelToken) -> LlmReply:
        with self._lock:
            if is_verifier_request(messages):
                self.verifier_requests.append(list(messages))
                if self._verifier is None:
                    raise ScriptExhausted("unexpected verifier call")
                text: str | Exception = self._verifier(messages)
            else:
                self.main_requests.append(list(messages))
                if not self._main:
                    raise ScriptExhausted(f"no scripted reply for main request "
                                          f"{len(self.main_requests)}")
                text = self._main.pop(0)
        if isinstance(text, Exception):
            raise text
        return LlmReply(text, *self._usage)

    @property
    def exhausted(self) -> bool:
        return not self._main


def tool(name: str, **parameters) -> str:
    import json

    return f"Reasoning. <tool>{json.dumps({'name': name, 'parameters': parameters})}</tool>"


def segment(prompt: str) -> str:
    return tool("segment_phrase", text_prompt=prompt)


def examine() -> str:
    return tool("examine_each_mask")


def select(*ids: int) -> str:
    return tool("select_masks_and_return", final_answer_masks=list(ids))


def no_mask() -> str:
    return tool("report_no_mask")


class SlowLlm:
    """Blocks until cancelled or the deadline (for cancel/timeout tests)."""

    def complete(self, messages: list[Message], cancel: CancelToken) -> LlmReply:
        remaining = cancel.remaining()
        cancel.wait(remaining if remaining is not None else 30.0)
        raise LlmError("cancelled" if cancel.cancelled else "timed out")


__all__ = ["ScriptedLlm", "SlowLlm", "LlmError", "tool", "segment", "examine", "select",
           "no_mask", "is_verifier_request"]
