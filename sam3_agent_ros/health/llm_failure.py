"""What the ``LLM endpoint`` status says about a failed call, from the error's fields.

ROS-free, used by ``health/recorder.py``. The fields (``core/errors.py``: ``LlmFailure``) say what
failed, so nothing here parses the client's text: an unreachable endpoint is an ERROR naming the
connection error; one that accepted the connection and did not answer in time (hung, or far too
slow) is a WARN naming how long it was waited for. Other failures keep the generic message.
"""

from __future__ import annotations

import dataclasses

from sam3_agent_ros.core.errors import LlmError, LlmFailure
from sam3_agent_ros.core.untrusted_text import for_log
from sam3_agent_ros.redact import redact_text, redact_url


def failure_message(where: str, failure: LlmFailure | None, when: str, since: str,
                    max_chars: int) -> tuple[bool, str] | None:
    """``(is_error, message)`` for the kinds with their own message, else None. ``where`` names
    the endpoint; ``when`` is how long ago the call ended; ``since`` the last success."""
    if failure is None:
        return None
    tries = (f"{failure.attempts} attempt{'s' if failure.attempts != 1 else ''}, "
             if failure.attempts else "")
    if failure.kind == LlmError.UNREACHABLE and failure.cause:
        return True, (f"{where} unreachable: {for_log(failure.cause, max_chars)} "
                      f"({tries}{when} ago; {since})")
    if failure.kind == LlmError.TIMEOUT:
        within = f" within {failure.waited_s:.1f} s" if failure.waited_s is not None else ""
        return False, (f"{where} did not answer{within} ({tries}{when} ago; {since}): is the "
                       f"server stuck or overloaded? (its log; llm.timeout_s)")
    return None


def redacted(failure: LlmFailure) -> LlmFailure:
    """The fields with no URL credentials (an LLM client other than ours may not redact them)."""
    return dataclasses.replace(
        failure, endpoint=redact_url(failure.endpoint) if failure.endpoint else None,
        cause=redact_text(failure.cause) if failure.cause else None)
